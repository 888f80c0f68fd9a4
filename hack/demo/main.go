// Command demo is `make demo`: it starts a local control plane with
// kube-controller-manager's workload controllers, runs informer-host
// against it with hack/demo/config.yaml (every example plugin, each
// granted what it uses) and keeps creating, updating and deleting
// ConfigMaps and Pods in namespace "demo", and scaling a Deployment there,
// so the plugins have something to do. It serves the config's loopback
// webhook upstream itself, and prints what the plugins' capabilities did:
// the labels they wrote, the Events they recorded, the webhook messages
// they sent and the metrics they export. It installs the plugin CRDs and
// runs two plugins from objects: an operator's ClusterPlugin (file://
// source) and team-a's Plugin from a ConfigMap, within the config's
// tenancy ceiling, and prints their `kubectl get` tables once they are
// Ready. Ctrl-C stops the churn, the host, the controllers and the
// control plane, in that order.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiext "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/informer-host/informer-host/internal/config"
	"github.com/informer-host/informer-host/internal/testenv"
)

const (
	namespace = "demo"
	// webhookUpstream is the upstream of the config the demo serves when
	// its URL is on loopback (crashloop-notifier's default upstream).
	webhookUpstream = "webhook"
	// The labels the writing plugins keep on the demo's Pods (their
	// config in hack/demo/config.yaml, team-labeler's default key).
	enforcedLabel = "environment"
	teamLabel     = "team"
	// The Deployment the controllers turn into a ReplicaSet and Pods,
	// and the team team-labeler copies onto them.
	deploymentName = "web"
	team           = "storefront"
	// podsMetric is ns-counter's gauge on the host's /metrics.
	podsMetric = "informer_host_plugin_metric_pods"
	// tablesEvery: the plugin objects' tables are printed again after
	// this many steps even when no row changed (a minute at 2s).
	tablesEvery = 30
)

func main() {
	host := flag.String("host", "bin/informer-host", "the informer-host binary")
	cfg := flag.String("config", "hack/demo/config.yaml", "config file for the host")
	period := flag.Duration("period", 2*time.Second, "time between two steps of the churn")
	crds := flag.String("crds", "deploy/crds", "directory of the plugin resources' CRDs")
	team := flag.String("team-plugin", "plugins/examples/minimal-wat/plugin.yaml", "team-a's manifest: its ServiceAccount, Role and Plugin")
	flag.Parse()
	if err := run(*host, *cfg, *crds, *team, *period); err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		os.Exit(1)
	}
}

func run(hostBin, cfgPath, crdDir, teamManifest string, period time.Duration) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	// The host validates it again; the demo reads where the host serves
	// /metrics and where the webhook upstream is.
	cfg, err := config.Load(cfgPath)
	if err != nil {
		return err
	}
	if u, ok := cfg.Upstream(webhookUpstream); ok {
		closeWebhook, err := serveWebhook(u.URL)
		if err != nil {
			return err
		}
		defer closeWebhook()
	}

	say("starting kube-apiserver and etcd on loopback")
	env, err := testenv.Start()
	if err != nil {
		return err
	}
	defer func() {
		say("stopping the control plane")
		_ = env.Stop()
	}()
	say("starting kube-controller-manager: %s (no scheduler or kubelet: the Deployment's Pods stay Pending)",
		strings.Join(testenv.ControllerNames(), ", "))
	controllers, err := env.StartControllers(ctx)
	if err != nil {
		return err
	}
	defer func() {
		say("stopping kube-controller-manager")
		_ = controllers.Stop()
	}()
	kubeconfig, err := filepath.Abs("build/demo/kubeconfig")
	if err != nil {
		return err
	}
	if err := env.WriteKubeconfig(kubeconfig); err != nil {
		return err
	}
	if _, err := env.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}, metav1.CreateOptions{}); err != nil {
		return err
	}
	// The cronjob example's primary resource is a CRD: served before the
	// host starts, so its controller starts synced rather than pending.
	if err := installCRD(ctx, env, cronJobCRD()); err != nil {
		return err
	}
	// The plugin objects exist before the daemon starts, which finds the
	// CRDs served and admits them with the config.yaml modules.
	if err := installPluginCRDs(ctx, env, crdDir); err != nil {
		return err
	}
	if err := applyPluginObjects(ctx, env, cfg.PluginDir(), teamManifest); err != nil {
		return err
	}
	tables, err := newPluginTables(env.Config, tablesEvery)
	if err != nil {
		return err
	}

	say("starting %s run --config %s (KUBECONFIG=%s)", hostBin, cfgPath, kubeconfig)
	cmd := exec.Command(hostBin, "run", "--config", cfgPath)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig)
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	// The host must not outlive the demo, even if the demo is killed.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
	if err := cmd.Start(); err != nil {
		return err
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	defer func() {
		if cmd.ProcessState == nil {
			say("stopping informer-host")
			_ = cmd.Process.Signal(syscall.SIGTERM)
			select {
			case <-exited:
			case <-time.After(30 * time.Second):
				_ = cmd.Process.Kill()
				<-exited
			}
		}
	}()

	churnDone := make(chan error, 1)
	go func() {
		churnDone <- churn(ctx, env.Client, period, newReporter(env.Client, metricsURL(cfg.Server.Address), tables))
	}()
	select {
	case <-ctx.Done():
		<-churnDone
		return nil
	case err := <-exited:
		stop()
		<-churnDone
		return fmt.Errorf("informer-host exited: %v", err)
	case err := <-churnDone:
		return err
	}
}

// serveWebhook serves rawURL, when it is on loopback, printing every
// request's body, and returns what closes it.
func serveWebhook(rawURL string) (func(), error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, fmt.Errorf("upstream %s: %w", webhookUpstream, err)
	}
	if ip := net.ParseIP(u.Hostname()); u.Hostname() != "localhost" && (ip == nil || !ip.IsLoopback()) {
		say("upstream %s is %s, not on loopback: its messages go there, not to the demo", webhookUpstream, rawURL)
		return func() {}, nil
	}
	l, err := net.Listen("tcp", u.Host)
	if err != nil {
		return nil, fmt.Errorf("serve upstream %s at %s (another demo running?): %w", webhookUpstream, rawURL, err)
	}
	srv := &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(io.LimitReader(r.Body, 64<<10))
		say("upstream %s received %s %s: %s", webhookUpstream, r.Method, r.URL.Path, strings.TrimSpace(string(body)))
		w.WriteHeader(http.StatusNoContent)
	})}
	go func() { _ = srv.Serve(l) }()
	say("serving upstream %s at %s", webhookUpstream, rawURL)
	return func() { _ = srv.Close() }, nil
}

// metricsURL is where the host serves /metrics for the demo to read: its
// server address, on loopback when it names no host; "" when it is off.
func metricsURL(address string) string {
	if address == "" || address == "off" {
		return ""
	}
	host, port, err := net.SplitHostPort(address)
	if err != nil {
		return ""
	}
	if host == "" || host == "0.0.0.0" || host == "::" {
		host = "127.0.0.1"
	}
	return "http://" + net.JoinHostPort(host, port) + "/metrics"
}

// churn walks a few objects through their lives, one step per period,
// and after each step reports what the plugins did.
func churn(ctx context.Context, cs kubernetes.Interface, period time.Duration, rep *reporter) error {
	cms := cs.CoreV1().ConfigMaps(namespace)
	pods := cs.CoreV1().Pods(namespace)
	step := func(what string, err error) {
		if err != nil && ctx.Err() == nil {
			say("%s: %v", what, err)
			return
		}
		say("%s", what)
	}

	// Once: a ConfigMap over event-recorder's maxBytes, and a Deployment
	// for the controllers, owner-lookup and team-labeler.
	_, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "large", Labels: map[string]string{"app": "demo"}},
		Data: map[string]string{"blob": strings.Repeat("x", 2048)}}, metav1.CreateOptions{})
	step("created configmap demo/large (2 KiB of data)", err)
	dep := testenv.Deployment(deploymentName, 2)
	dep.Labels[teamLabel] = team
	_, err = cs.AppsV1().Deployments(namespace).Create(ctx, dep, metav1.CreateOptions{})
	step(fmt.Sprintf("created deployment demo/%s (%s=%s, 2 replicas)", deploymentName, teamLabel, team), err)

	tick := time.NewTicker(period)
	defer tick.Stop()
	for i := 1; ; i++ {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
		name := fmt.Sprintf("demo-%d", i)
		_, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"app": "demo"}},
			Data: map[string]string{"step": "1"}}, metav1.CreateOptions{})
		step("created configmap demo/"+name, err)
		pod, err := pods.Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"app": "demo"}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "main", Image: "registry.k8s.io/pause:3.10"}}}}, metav1.CreateOptions{})
		step("created pod demo/"+name, err)
		if err == nil {
			// No kubelet runs here: the demo plays its part and moves the
			// pod through its phases.
			for _, phase := range []corev1.PodPhase{corev1.PodPending, corev1.PodRunning} {
				pod.Status.Phase = phase
				pod, err = pods.UpdateStatus(ctx, pod, metav1.UpdateOptions{})
				step(fmt.Sprintf("pod demo/%s is %s", name, phase), err)
				if err != nil {
					break
				}
			}
		}
		if i > 1 {
			prev := fmt.Sprintf("demo-%d", i-1)
			if cm, err := cms.Get(ctx, prev, metav1.GetOptions{}); err == nil {
				cm.Data["step"] = "2"
				_, err = cms.Update(ctx, cm, metav1.UpdateOptions{})
				step("updated configmap demo/"+prev, err)
			}
			if p, err := pods.Get(ctx, prev, metav1.GetOptions{}); err == nil {
				if (i-1)%3 == 1 {
					// Every third pod's container keeps crashing, for
					// crashloop-notifier.
					p.Status.ContainerStatuses = []corev1.ContainerStatus{{
						Name: "main", Image: "registry.k8s.io/pause:3.10", RestartCount: 3,
						State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff", Message: "back-off restarting failed container"}},
					}}
					_, err = pods.UpdateStatus(ctx, p, metav1.UpdateOptions{})
					step(fmt.Sprintf("pod demo/%s's container is in CrashLoopBackOff", prev), err)
				} else {
					p.Status.Phase = corev1.PodSucceeded
					_, err = pods.UpdateStatus(ctx, p, metav1.UpdateOptions{})
					step(fmt.Sprintf("pod demo/%s is Succeeded", prev), err)
				}
			}
		}
		if i > 3 {
			old := fmt.Sprintf("demo-%d", i-3)
			step("deleted configmap demo/"+old, cms.Delete(ctx, old, metav1.DeleteOptions{}))
			step("deleted pod demo/"+old, pods.Delete(ctx, old, metav1.DeleteOptions{GracePeriodSeconds: new(int64)}))
		}
		if i%5 == 0 {
			// Team a's own objects, for its Plugin (minimal-wat logs each
			// add and delete it is handed, of its namespace only).
			note := fmt.Sprintf("note-%d", i)
			_, err := cs.CoreV1().ConfigMaps(teamNamespace).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: note}}, metav1.CreateOptions{})
			step(fmt.Sprintf("created configmap %s/%s", teamNamespace, note), err)
			if i > 5 {
				old := fmt.Sprintf("note-%d", i-5)
				step(fmt.Sprintf("deleted configmap %s/%s", teamNamespace, old), cs.CoreV1().ConfigMaps(teamNamespace).Delete(ctx, old, metav1.DeleteOptions{}))
			}
			replicas := int32(2 + i/5%2)
			s, err := cs.AppsV1().Deployments(namespace).GetScale(ctx, deploymentName, metav1.GetOptions{})
			if err == nil {
				s.Spec.Replicas = replicas
				_, err = cs.AppsV1().Deployments(namespace).UpdateScale(ctx, deploymentName, s, metav1.UpdateOptions{})
			}
			step(fmt.Sprintf("scaled deployment demo/%s to %d", deploymentName, replicas), err)
		}
		rep.report(ctx)
	}
}

// reporter prints, once each, the effects of the plugins' capabilities
// the demo can see from outside: labels written (writes), Events recorded
// (events), ns-counter's gauge (metrics) and the plugin objects' tables.
// The webhook messages
// (http) are printed as they arrive, by serveWebhook.
type reporter struct {
	cs       kubernetes.Interface
	tables   *pluginTables
	metrics  string // "" when the host serves none
	labelled map[string]bool
	events   map[string]int32
	values   map[string]string
}

func newReporter(cs kubernetes.Interface, metricsURL string, tables *pluginTables) *reporter {
	return &reporter{cs: cs, tables: tables, metrics: metricsURL, labelled: map[string]bool{}, events: map[string]int32{}, values: map[string]string{}}
}

func (r *reporter) report(ctx context.Context) {
	if pods, err := r.cs.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{}); err == nil {
		for i := range pods.Items {
			r.labels(&pods.Items[i])
		}
	}
	if evs, err := r.cs.CoreV1().Events(namespace).List(ctx, metav1.ListOptions{}); err == nil {
		for _, ev := range evs.Items {
			// Only the plugins' Events: the controllers record theirs too.
			if !strings.HasPrefix(ev.ReportingController, "informer-host/") || r.events[ev.Name] == ev.Count {
				continue
			}
			r.events[ev.Name] = ev.Count
			say("event %s %s on %s %s/%s by %s (count %d): %s", ev.Type, ev.Reason, ev.InvolvedObject.Kind,
				ev.InvolvedObject.Namespace, ev.InvolvedObject.Name, ev.ReportingController, ev.Count, ev.Message)
		}
	}
	r.readMetrics(ctx)
	r.tables.report(ctx)
}

// labels prints the plugin-written labels of pod it has not printed yet,
// with the field manager that owns each.
func (r *reporter) labels(pod *corev1.Pod) {
	for _, key := range []string{enforcedLabel, teamLabel} {
		value, ok := pod.Labels[key]
		if !ok {
			continue
		}
		manager := labelManager(pod.ManagedFields, key)
		if !strings.HasPrefix(manager, "informer-host/") {
			continue
		}
		id := pod.Name + "\x00" + key + "=" + value
		if r.labelled[id] {
			continue
		}
		r.labelled[id] = true
		say("pod demo/%s labelled %s=%s by %s", pod.Name, key, value, manager)
	}
}

// labelManager is the field manager that owns metadata.labels[key], from
// the object's managed fields ("" when none does).
func labelManager(entries []metav1.ManagedFieldsEntry, key string) string {
	for _, e := range entries {
		if e.FieldsV1 == nil {
			continue
		}
		var fields struct {
			Metadata struct {
				Labels map[string]json.RawMessage `json:"f:labels"`
			} `json:"f:metadata"`
		}
		if json.Unmarshal(e.FieldsV1.Raw, &fields) != nil {
			continue
		}
		if _, ok := fields.Metadata.Labels["f:"+key]; ok {
			return e.Manager
		}
	}
	return ""
}

// readMetrics prints the series of podsMetric whose value changed since
// it last read them. The other plugins' metrics change on every event;
// curl /metrics shows them.
func (r *reporter) readMetrics(ctx context.Context) {
	if r.metrics == "" {
		return
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, r.metrics, nil)
	if err != nil {
		return
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return // not serving yet
	}
	defer resp.Body.Close()
	var changed []string
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, podsMetric+"{") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			continue
		}
		series, value := line[:i], line[i+1:]
		if r.values[series] != value {
			r.values[series] = value
			changed = append(changed, line)
		}
	}
	sort.Strings(changed)
	for _, line := range changed {
		say("metric %s", line)
	}
}

// cronJobCRD serves the cronjob example's primary resource, so its
// controller starts synced rather than pending. The demo makes no
// CronJobs, so it needs the resource served, not the book's schema
// (plugins/examples/cronjob/crd.yaml, which the example's tests install;
// the demo runs from any directory and has no path to it).
func cronJobCRD() *apiextv1.CustomResourceDefinition {
	preserve := true
	return &apiextv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "cronjobs.batch.tutorial.kubebuilder.io"},
		Spec: apiextv1.CustomResourceDefinitionSpec{
			Group: "batch.tutorial.kubebuilder.io",
			Names: apiextv1.CustomResourceDefinitionNames{Kind: "CronJob", ListKind: "CronJobList", Plural: "cronjobs", Singular: "cronjob"},
			Scope: apiextv1.NamespaceScoped,
			Versions: []apiextv1.CustomResourceDefinitionVersion{{
				Name: "v1", Served: true, Storage: true,
				Subresources: &apiextv1.CustomResourceSubresources{Status: &apiextv1.CustomResourceSubresourceStatus{}},
				Schema: &apiextv1.CustomResourceValidation{OpenAPIV3Schema: &apiextv1.JSONSchemaProps{
					Type: "object", XPreserveUnknownFields: &preserve}},
			}},
		},
	}
}

// installCRD creates crd and waits until it is established.
func installCRD(ctx context.Context, env *testenv.Env, crd *apiextv1.CustomResourceDefinition) error {
	crds := apiext.NewForConfigOrDie(env.Config).ApiextensionsV1().CustomResourceDefinitions()
	if _, err := crds.Create(ctx, crd, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("CRD %s: %w", crd.Name, err)
	}
	return wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		got, err := crds.Get(ctx, crd.Name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		for _, c := range got.Status.Conditions {
			if c.Type == apiextv1.Established && c.Status == apiextv1.ConditionTrue {
				return true, nil
			}
		}
		return false, nil
	})
}

func say(format string, args ...any) {
	fmt.Printf("demo | "+format+"\n", args...)
}
