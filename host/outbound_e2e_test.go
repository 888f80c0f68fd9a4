package host

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/informer-host/informer-host/host/internal/engine"
)

// webhook is a loopback HTTP server that keeps every request body it is
// sent, by path.
type webhook struct {
	srv  *httptest.Server
	mu   sync.Mutex
	got  map[string][]string
	auth []string // the Authorization header of each request
}

func newWebhook(t *testing.T, handle func(w http.ResponseWriter, r *http.Request)) *webhook {
	wh := &webhook{got: map[string][]string{}}
	wh.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		wh.mu.Lock()
		wh.got[r.URL.Path] = append(wh.got[r.URL.Path], string(b))
		wh.auth = append(wh.auth, r.Header.Get("Authorization"))
		wh.mu.Unlock()
		if handle != nil {
			handle(w, r)
		}
	}))
	t.Cleanup(wh.srv.Close)
	return wh
}

func (wh *webhook) bodies(path string) []string {
	wh.mu.Lock()
	defer wh.mu.Unlock()
	return append([]string(nil), wh.got[path]...)
}

// crashPod creates a pod with the given containers, none with a status.
func crashPod(t *testing.T, hs *harness, name string, containers ...string) *corev1.Pod {
	t.Helper()
	spec := corev1.PodSpec{}
	for _, c := range containers {
		spec.Containers = append(spec.Containers, corev1.Container{Name: c, Image: "x"})
	}
	pod, err := env.Client.CoreV1().Pods(hs.ns).Create(context.Background(), &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: spec}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return pod
}

// setWaiting sets the pod's container statuses, as the kubelet would:
// reasons[c] is container c's waiting reason ("" = running), with
// restarts restarts.
func setWaiting(t *testing.T, hs *harness, pod *corev1.Pod, restarts int32, reasons map[string]string) *corev1.Pod {
	t.Helper()
	pod = pod.DeepCopy()
	pod.Status.ContainerStatuses = nil
	for _, c := range pod.Spec.Containers {
		cs := corev1.ContainerStatus{Name: c.Name, Image: c.Image, ImageID: "", RestartCount: restarts}
		if r := reasons[c.Name]; r != "" {
			cs.State.Waiting = &corev1.ContainerStateWaiting{Reason: r}
		} else {
			cs.State.Running = &corev1.ContainerStateRunning{}
		}
		pod.Status.ContainerStatuses = append(pod.Status.ContainerStatuses, cs)
	}
	out, err := env.Client.CoreV1().Pods(hs.ns).UpdateStatus(context.Background(), pod, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// handled waits until plugin has handled the update that took the pod to
// rv.
func handled(t *testing.T, hs *harness, plugin string, pod *corev1.Pod) {
	t.Helper()
	key := hs.ns + "/" + pod.Name
	eventually(t, plugin+" to handle "+key+" at "+pod.ResourceVersion, func() bool {
		for _, d := range hs.rec.of(plugin) {
			if d.Key == key && d.RV == pod.ResourceVersion {
				return true
			}
		}
		return false
	})
}

// The crashloop-notifier example posts exactly one message per container
// transition into CrashLoopBackOff, to the upstream it is granted, with
// the upstream's secret header taken from the environment.
func TestCrashloopNotifier(t *testing.T) {
	wh := newWebhook(t, nil)
	t.Setenv("IH_TEST_WEBHOOK_TOKEN", "Bearer t0ken")
	cfg := strings.ReplaceAll(`
apiVersion: informer-host/v1
resources:
  - {name: pods, version: v1, resource: pods, namespaces: [NS]}
upstreams:
  - name: webhook
    url: URL/hooks/
    headers:
      - {name: Authorization, valueFromEnv: IH_TEST_WEBHOOK_TOKEN}
plugins:
  directory: DIR
  modules:
    - file: crashloop-notifier.wasm
      bindings: [{resource: pods}]
      config: {upstream: webhook, path: /crashloop}
      grants:
        http: {upstreams: [webhook]}
`, "URL", wh.srv.URL)
	hs, err := newHarness(t, cfg, map[string][]byte{"crashloop-notifier.wasm": example(t, "crashloop-notifier")})
	if err != nil {
		t.Fatal(err)
	}
	const p = "crashloop-notifier.wasm"
	pod := crashPod(t, hs, "web-0", "app", "side")
	for _, step := range []struct {
		restarts int32
		reasons  map[string]string
	}{
		{0, map[string]string{"app": "ContainerCreating", "side": "ContainerCreating"}},
		{1, map[string]string{"app": "CrashLoopBackOff"}}, // app enters: one message
		{2, map[string]string{"app": "CrashLoopBackOff"}}, // still in it: none
		{2, nil}, // both running
		{3, map[string]string{"app": "CrashLoopBackOff"}},                             // app again: one message
		{4, map[string]string{"app": "CrashLoopBackOff", "side": "CrashLoopBackOff"}}, // side enters
	} {
		pod = setWaiting(t, hs, pod, step.restarts, step.reasons)
		handled(t, hs, p, pod)
	}
	msg := func(c string, restarts int) string {
		b, _ := json.Marshal(map[string]any{"namespace": hs.ns, "pod": "web-0", "container": c, "reason": "CrashLoopBackOff", "restartCount": restarts})
		return string(b)
	}
	want := []string{msg("app", 1), msg("app", 3), msg("side", 4)}
	got := wh.bodies("/hooks/crashloop")
	if len(got) != len(want) {
		t.Fatalf("webhook got %d messages, want %d:\n%s", len(got), len(want), strings.Join(got, "\n"))
	}
	for i := range want {
		var g, w map[string]any
		if err := json.Unmarshal([]byte(got[i]), &g); err != nil {
			t.Fatalf("message %d is not JSON: %q", i, got[i])
		}
		_ = json.Unmarshal([]byte(want[i]), &w)
		gb, _ := json.Marshal(g)
		wb, _ := json.Marshal(w)
		if string(gb) != string(wb) {
			t.Errorf("message %d:\n got %s\nwant %s", i, got[i], want[i])
		}
	}
	for _, a := range wh.auth {
		if a != "Bearer t0ken" {
			t.Errorf("Authorization %q, want the value of the environment variable", a)
		}
	}
	for _, d := range hs.rec.of(p) {
		if d.Failure != 0 || (d.Type != 0 && d.Code != engine.CodeOK) {
			t.Errorf("delivery %s", d)
		}
	}
	if strings.Contains(hs.logs.String(), "t0ken") {
		t.Error("the header value from the environment appears in the host's log")
	}
	if n := hs.pluginMetric("informer_host_plugin_http_requests_total", map[string]string{"plugin": p, "upstream": "webhook", "result": "2xx"}); n != 3 {
		t.Errorf("informer_host_plugin_http_requests_total{result=2xx} = %v, want 3", n)
	}
}

// A webhook that does not answer makes the notifier's request end with
// ERR_TIMEOUT after the upstream's timeout, which is longer than the
// plugin's call timeout: the wait does not count against the CPU deadline,
// so the plugin is not killed. Meanwhile another plugin keeps receiving
// its events.
func TestCrashloopNotifierSlowWebhook(t *testing.T) {
	entered := make(chan struct{}, 10)
	release := make(chan struct{})
	var returned atomic.Bool
	wh := newWebhook(t, func(w http.ResponseWriter, r *http.Request) {
		entered <- struct{}{}
		select {
		case <-release:
		case <-r.Context().Done(): // the host gave up: its timeout
		}
		returned.Store(true)
	})
	defer close(release)
	cfg := strings.ReplaceAll(`
apiVersion: informer-host/v1
resources:
  - {name: pods, version: v1, resource: pods, namespaces: [NS]}
  - {name: configmaps, version: v1, resource: configmaps, namespaces: [NS]}
upstreams:
  - {name: slow, url: URL, timeout: 3s}
plugins:
  directory: DIR
  modules:
    - file: crashloop-notifier.wasm
      bindings: [{resource: pods}]
      config: {upstream: slow}
      delivery: {maxRetries: 0}
      limits: {callTimeout: 200ms}
      grants:
        http: {upstreams: [slow]}
    - {file: counter-c.wasm, bindings: [{resource: configmaps}]}
`, "URL", wh.srv.URL)
	hs, err := newHarness(t, cfg, map[string][]byte{
		"crashloop-notifier.wasm": example(t, "crashloop-notifier"),
		"counter-c.wasm":          example(t, "counter-c"),
	})
	if err != nil {
		t.Fatal(err)
	}
	pod := crashPod(t, hs, "web-1", "app")
	pod = setWaiting(t, hs, pod, 1, map[string]string{"app": "CrashLoopBackOff"})
	<-entered // the notifier is now waiting on the webhook

	hs.createCM("meanwhile", nil)
	eventually(t, "counter-c to get its event while the notifier waits", func() bool {
		for _, d := range hs.rec.of("counter-c.wasm") {
			if d.Key == hs.ns+"/meanwhile" {
				return true
			}
		}
		return false
	})
	if returned.Load() {
		t.Fatal("the webhook's request ended before the other plugin got its event; the test proves nothing")
	}

	handled(t, hs, "crashloop-notifier.wasm", pod)
	var last observed
	for _, d := range hs.rec.of("crashloop-notifier.wasm") {
		if d.RV == pod.ResourceVersion {
			last = d
		}
	}
	if last.Failure != 0 || last.Code != engine.CodeRetry {
		t.Errorf("notifier: %s; want retry (ERR_TIMEOUT), not killed", last)
	}
	if lines := hs.logs.lines("plugin=crashloop-notifier.wasm", "ERR_TIMEOUT", `upstream \"slow\" did not answer within its timeout`); len(lines) == 0 {
		t.Errorf("no ERR_TIMEOUT line in the log:\n%s", hs.logs.String())
	}
	if n := hs.pluginMetric("informer_host_plugin_http_requests_total", map[string]string{"plugin": "crashloop-notifier.wasm", "upstream": "slow", "result": "timeout"}); n != 1 {
		t.Errorf("informer_host_plugin_http_requests_total{result=timeout} = %v, want 1", n)
	}
	if st := hs.status("crashloop-notifier.wasm"); st.Counters.Timeouts != 0 || st.Counters.Restarts != 0 {
		t.Errorf("notifier counters %+v: the network wait was counted as its CPU", st.Counters)
	}
}

// recorderConfig is the config of the event-recorder tests, up to the
// modules' entries.
func recorderConfig(maxBytes int) string {
	return fmt.Sprintf(`
apiVersion: informer-host/v1
resources:
  - {name: configmaps, version: v1, resource: configmaps, namespaces: [NS]}
plugins:
  directory: DIR
  default:
    bindings: [{resource: configmaps}]
    config: {maxBytes: %d}
  modules:`, maxBytes)
}

// The event-recorder example records a Warning Event on a ConfigMap over
// its configured size, attributed to the plugin; in dry run the Event is
// logged and not recorded; without the grant the call is ERR_DENIED.
func TestEventRecorder(t *testing.T) {
	b := example(t, "event-recorder")
	hs, err := newHarness(t, recorderConfig(100)+`
    - {file: event-recorder.wasm, grants: {events: {}}}
    - {file: event-recorder-dry.wasm, grants: {events: {}, dryRun: true}}
    # onError: skip: the denied call is made once, not retried with backoff.
    - {file: event-recorder-denied.wasm, delivery: {onError: skip}}
`, map[string][]byte{"event-recorder.wasm": b, "event-recorder-dry.wasm": b, "event-recorder-denied.wasm": b})
	if err != nil {
		t.Fatal(err)
	}
	hs.createCM("small", map[string]string{"k": "v"})
	big := hs.createCM("big", map[string]string{"k": strings.Repeat("x", 200)})

	events := env.Client.CoreV1().Events(hs.ns)
	var got []corev1.Event
	eventually(t, "the Event about the big ConfigMap", func() bool {
		l, err := events.List(context.Background(), metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		got = l.Items
		return len(got) > 0
	})
	if len(got) != 1 {
		t.Fatalf("%d Events, want 1 (the dry-run and denied plugins record none, the small ConfigMap has none): %+v", len(got), got)
	}
	e := got[0]
	ref := e.InvolvedObject
	if ref.Kind != "ConfigMap" || ref.Name != "big" || ref.UID != big.UID || ref.Namespace != hs.ns {
		t.Errorf("Event about %+v, want the big ConfigMap", ref)
	}
	if e.Type != corev1.EventTypeWarning || e.Reason != "ConfigMapTooLarge" || e.Message != "data is 200 bytes, over the limit of 100" {
		t.Errorf("Event %s %s %q", e.Type, e.Reason, e.Message)
	}
	if e.Source.Component != "informer-host/event-recorder" || e.ReportingController != "informer-host/event-recorder" {
		t.Errorf("Event attributed to %q / %q, want informer-host/event-recorder", e.Source.Component, e.ReportingController)
	}
	if lines := hs.logs.lines("plugin=event-recorder-dry.wasm", "dry run", "reason=ConfigMapTooLarge", "object=\"ConfigMap "+hs.ns+"/big\""); len(lines) != 1 {
		t.Errorf("dry run: %d log lines of the Event, want 1:\n%s", len(lines), hs.logs.String())
	}
	eventually(t, "the Event to be counted as sent", func() bool {
		return hs.pluginMetric("informer_host_plugin_kube_events_total", map[string]string{"plugin": "event-recorder.wasm", "result": "sent"}) == 1
	})
	if n := hs.pluginMetric("informer_host_plugin_kube_events_total", map[string]string{"plugin": "event-recorder-dry.wasm", "result": "dry_run"}); n != 1 {
		t.Errorf("kube_events_total{dry_run} = %v, want 1", n)
	}
	handledBig := func(d observed) bool { return d.Key == hs.ns+"/big" && d.Type != 0 }
	eventually(t, "the denied plugin to handle big", func() bool { return slices.ContainsFunc(hs.rec.of("event-recorder-denied.wasm"), handledBig) })
	for _, d := range hs.rec.of("event-recorder-denied.wasm") {
		if handledBig(d) && d.Code != engine.CodeError {
			t.Errorf("denied plugin: %s, want error (ERR_DENIED)", d)
		}
	}
	if n := hs.metric("informer_host_plugin_denied_total", "event-recorder-denied.wasm"); n != 1 {
		t.Errorf("denied_total = %v, want 1", n)
	}
}

// A plugin granted an identity records its Events as that ServiceAccount:
// with RBAC for Events the Event appears; without, the apiserver refuses
// it (forbidden, logged), though the daemon itself could record it.
func TestEventRecorderImpersonates(t *testing.T) {
	b := example(t, "event-recorder")
	ctx := context.Background()
	hs, err := newHarness(t, recorderConfig(10)+`
    - {file: as-may-record.wasm, grants: {events: {}, impersonate: {serviceAccount: NS/may-record}}}
    - {file: as-may-not.wasm, grants: {events: {}, impersonate: {serviceAccount: NS/may-not}}}
`, map[string][]byte{"as-may-record.wasm": b, "as-may-not.wasm": b})
	if err != nil {
		t.Fatal(err)
	}
	ns := hs.ns
	for _, sa := range []string{"may-record", "may-not"} {
		if _, err := env.Client.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: sa}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := env.Client.RbacV1().Roles(ns).Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "events"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"events"}, Verbs: []string{"create", "patch"}}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := env.Client.RbacV1().RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "events"},
		RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: "events"},
		Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Namespace: ns, Name: "may-record"}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// The authorizer sees the binding through its informers: wait until it
	// allows, or may-record's Event could be refused for the delay.
	eventually(t, "the RBAC binding to take effect", func() bool {
		r, err := env.Client.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
			User:               "system:serviceaccount:" + ns + ":may-record",
			ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: ns, Verb: "create", Resource: "events"},
		}}, metav1.CreateOptions{})
		return err == nil && r.Status.Allowed
	})
	hs.createCM("big", map[string]string{"k": strings.Repeat("x", 20)})
	eventually(t, "the refusal of may-not's Event", func() bool {
		return len(hs.logs.lines("plugin=as-may-not.wasm", "Event not recorded", "forbidden", "as=system:serviceaccount:"+ns+":may-not")) > 0
	})
	var got []corev1.Event
	eventually(t, "may-record's Event", func() bool {
		l, err := env.Client.CoreV1().Events(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		got = l.Items
		return len(got) > 0
	})
	for _, e := range got {
		if e.Source.Component != "informer-host/as-may-record" {
			t.Errorf("Event from %s, want only informer-host/as-may-record's", e.Source.Component)
		}
	}
	if lines := hs.logs.lines("plugin=as-may-record.wasm", "Event not recorded"); len(lines) != 0 {
		t.Errorf("may-record's Event refused: %q", lines)
	}
}
