package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/informer-host/informer-host/internal/testenv"
)

// The controller mode end to end, as an operator runs it: the real
// binary (SIGKILLed, restarted, two sharded members) with the example
// plugins as make builds them (build/plugins; make test builds them
// first), against the real apiserver and, where the examples need
// them, kube-controller-manager's StatefulSet and Job controllers.

// ctlDaemon is one informer-host process of a controller test.
type ctlDaemon struct {
	t    *testing.T
	cmd  *exec.Cmd
	logs *testenv.LogBuffer
	cfg  string
}

// ctlBinary builds the informer-host binary once per test (the build
// cache makes the later ones a link).
func ctlBinary(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "informer-host")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	return bin
}

// examplePlugin reads the example plugin name as make builds it.
func examplePlugin(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("../../build/plugins", name+".wasm"))
	if err != nil {
		t.Fatalf("the example plugin %s: %v (make build/plugins/%s.wasm builds it; make test builds every plugin first)", name, err, name)
	}
	return b
}

// ctlConfig writes config (kubeconfig and plugins relative to its
// directory) next to plugins and returns its path.
func ctlConfig(t *testing.T, plugins map[string][]byte, config string) string {
	t.Helper()
	dir := env.DaemonDir(t, plugins)
	path := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(path, []byte("apiVersion: informer-host/v1\nkubeconfig: kubeconfig\n"+config+
		"server:\n  address: 127.0.0.1:0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// startCtl runs bin on the config file cfg and returns once its plugins
// (plugins of them) have loaded.
func startCtl(t *testing.T, bin, cfg string, plugins int) *ctlDaemon {
	t.Helper()
	d := &ctlDaemon{t: t, logs: &testenv.LogBuffer{}, cfg: cfg}
	d.cmd = exec.Command(bin, "run", "--config", cfg, "--drain-timeout", "10s", "--log-level", "debug")
	d.cmd.Stderr = d.logs
	if err := d.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if d.cmd.ProcessState == nil {
			_ = d.cmd.Process.Kill()
			_ = d.cmd.Wait()
		}
		if t.Failed() {
			t.Logf("informer-host (pid %d) log:\n%s", d.cmd.Process.Pid, strings.Join(d.logs.Lines(), "\n"))
		}
	})
	testenv.Eventually(t, "the plugins to load", func() bool { return len(d.logs.Lines(`msg="plugin loaded"`)) >= plugins })
	return d
}

// kill ends the process with SIGKILL: nothing is drained or written.
func (d *ctlDaemon) kill() {
	d.t.Helper()
	if err := d.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		d.t.Fatal(err)
	}
	_ = d.cmd.Wait()
}

// debugPlugins is the part of /debug/plugins these tests read.
type debugPlugins struct {
	Plugins []struct {
		File       string `json:"file"`
		Controller *struct {
			For         string `json:"for"`
			NextRequeue []struct {
				Namespace string `json:"namespace"`
				Name      string `json:"name"`
			} `json:"nextRequeue"`
		} `json:"controller"`
	} `json:"plugins"`
	Shard *struct {
		Active  bool     `json:"active"`
		Members []string `json:"members"`
	} `json:"shard"`
}

// waitReady waits for /readyz 200: every resource synced and every
// plugin's initial list handed. Objects a test makes after it reach the
// plugins as live adds; made before, they are part of that list and
// flagged initial-list, which a plugin may answer differently.
func (d *ctlDaemon) waitReady() {
	d.t.Helper()
	readyz := serverURL(d.t, d.logs) + "/readyz"
	waitFor(d.t, "/readyz 200", func() (bool, string) {
		code, body := testenv.Get(d.t, readyz)
		return code == http.StatusOK, body
	})
}

func (d *ctlDaemon) debug() debugPlugins {
	d.t.Helper()
	_, body := testenv.Get(d.t, serverURL(d.t, d.logs)+"/debug/plugins")
	var doc debugPlugins
	if err := json.Unmarshal([]byte(body), &doc); err != nil {
		d.t.Fatalf("/debug/plugins: %v\n%s", err, body)
	}
	return doc
}

// --- configmap-copy

// copyConfig is plugins/examples/configmap-copy/config.yaml on the
// test's namespaces, with finalizer (empty: none) as its controller's.
func copyConfig(src, dst, finalizer string) string {
	fin := ""
	if finalizer != "" {
		fin = ", finalizer: " + finalizer
	}
	return fmt.Sprintf(`resources:
  - {name: configmaps-src, version: v1, resource: configmaps, namespaces: [%[1]s], labelSelector: sync=true}
  - {name: configmaps-dst, version: v1, resource: configmaps, namespaces: [%[2]s]}
plugins:
  directory: plugins
  modules:
    - file: configmap-copy.wasm
      config: {to: %[2]s}
      controller: {for: configmaps-src, owns: [configmaps-dst]%[3]s}
      grants:
        writes:
          qps: 50   # the default 5/s would make the churn's few hundred writes the test's pace
          burst: 100
          resources:
            - {resource: configmaps-dst, verbs: [apply, delete]}
            - {resource: configmaps-src, verbs: [patch]}
      delivery: {retryBackoff: 20ms, maxRetryBackoff: 500ms}
      limits: {restartBackoff: 10ms}
`, src, dst, fin)
}

// copyDiff compares dst with what configmap-copy must make of src: a
// copy of each ConfigMap labelled sync=true that is not being deleted,
// with its data and the source label, and nothing else; and src with no
// source left Terminating (its finalizer not removed). It returns what
// is missing, extra and wrong, empty when converged.
func copyDiff(t *testing.T, src, dst string) (missing, extra, wrong []string) {
	t.Helper()
	ctx := context.Background()
	srcs, err := env.Client.CoreV1().ConfigMaps(src).List(ctx, metav1.ListOptions{LabelSelector: "sync=true"})
	if err != nil {
		t.Fatal(err)
	}
	dsts, err := env.Client.CoreV1().ConfigMaps(dst).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]corev1.ConfigMap{}
	for _, cm := range srcs.Items {
		if cm.DeletionTimestamp == nil {
			want[cm.Name] = cm
		} else {
			// Stuck, if it stays: the finalizer not removed.
			wrong = append(wrong, "source Terminating: "+cm.Name)
		}
	}
	have := map[string]bool{}
	for _, cm := range dsts.Items {
		if cm.Name == "kube-root-ca.crt" {
			continue
		}
		have[cm.Name] = true
		s, ok := want[cm.Name]
		switch {
		case !ok:
			extra = append(extra, cm.Name)
		case fmt.Sprint(cm.Data) != fmt.Sprint(s.Data) || cm.Labels["copy.example.com/source"] != src:
			wrong = append(wrong, fmt.Sprintf("%s (data %v, source label %q; want %v, %q)", cm.Name, cm.Data, cm.Labels["copy.example.com/source"], s.Data, src))
		}
	}
	for name := range want {
		if !have[name] {
			missing = append(missing, name)
		}
	}
	sort.Strings(missing)
	sort.Strings(extra)
	sort.Strings(wrong)
	return missing, extra, wrong
}

// converged waits until dst holds exactly the copies src asks for; the
// failure names what is missing, extra and wrong.
func converged(t *testing.T, what, src, dst string) {
	t.Helper()
	waitFor(t, what+": dst converged", func() (bool, string) {
		m, e, w := copyDiff(t, src, dst)
		return len(m)+len(e)+len(w) == 0, fmt.Sprintf("missing %v, extra %v, wrong %v", m, e, w)
	})
}

// waitFor is testenv.Eventually for a condition that can say what it
// still lacks: the failure shows its last word.
func waitFor(t *testing.T, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(testenv.EventuallyTimeout)
	for {
		ok, detail := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s: %s", what, detail)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

type cmAPI struct {
	t  *testing.T
	ns string
}

func (c cmAPI) create(name string, labels, data map[string]string) {
	c.t.Helper()
	if _, err := env.Client.CoreV1().ConfigMaps(c.ns).Create(context.Background(),
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}, Data: data}, metav1.CreateOptions{}); err != nil {
		c.t.Fatal(err)
	}
}

// update changes name with edit, retrying on a conflict (the host writes
// the same objects: its finalizer, its annotations).
func (c cmAPI) update(name string, edit func(*corev1.ConfigMap)) {
	c.t.Helper()
	for {
		cm, err := env.Client.CoreV1().ConfigMaps(c.ns).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			c.t.Fatal(err)
		}
		edit(cm)
		_, err = env.Client.CoreV1().ConfigMaps(c.ns).Update(context.Background(), cm, metav1.UpdateOptions{})
		if apierrors.IsConflict(err) {
			continue
		}
		if err != nil {
			c.t.Fatal(err)
		}
		return
	}
}

func (c cmAPI) delete(name string) {
	c.t.Helper()
	if err := env.Client.CoreV1().ConfigMaps(c.ns).Delete(context.Background(), name, metav1.DeleteOptions{}); err != nil {
		c.t.Fatal(err)
	}
}

func (c cmAPI) get(name string) (*corev1.ConfigMap, bool) {
	c.t.Helper()
	cm, err := env.Client.CoreV1().ConfigMaps(c.ns).Get(context.Background(), name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, false
	}
	if err != nil {
		c.t.Fatal(err)
	}
	return cm, true
}

var syncLabel = map[string]string{"sync": "true"}

// The ConfigMap-copy scenario in controller mode: sources
// created, updated and deleted under churn, copies edited and deleted by
// hand, the daemon SIGKILLed in the middle of a mass delete of sources
// and kept down while more sources are deleted, updated and created,
// then restarted, SIGKILLed again while it catches up and restarted:
// dst converges to exactly the copies the sources ask for (nothing
// missing, extra or wrong, no source stuck Terminating). A source losing its sync label
// loses its copy (the children pruned when no longer wanted), and a mass
// delete of every source empties dst.
func TestControllerCopyConvergesThroughSIGKILL(t *testing.T) {
	env.Require(t)
	bin := ctlBinary(t)
	for _, tc := range []struct{ name, finalizer string }{
		{"without finalizer", ""},
		// Sources deleted while the daemon is down then wait in
		// Terminating for the restarted daemon's cleanup reconcile.
		{"with finalizer", "copy.example.com/cleanup"},
	} {
		t.Run(tc.name, func(t *testing.T) { copyChurn(t, bin, tc.finalizer) })
	}
}

func copyChurn(t *testing.T, bin, finalizer string) {
	src, dst := env.Namespace(t), env.Namespace(t)
	cfg := ctlConfig(t, map[string][]byte{"configmap-copy.wasm": examplePlugin(t, "configmap-copy")}, copyConfig(src, dst, finalizer))
	s, d := cmAPI{t, src}, cmAPI{t, dst}
	daemon := startCtl(t, bin, cfg, 1)

	// Churn while it runs: creates, some never labelled, updates and
	// deletes interleaved.
	const n = 120
	for i := range n {
		labels := syncLabel
		if i%10 == 9 {
			labels = map[string]string{"sync": "no"}
		}
		s.create(fmt.Sprintf("cm-%03d", i), labels, map[string]string{"v": fmt.Sprint(i)})
		if i%7 == 3 {
			s.update(fmt.Sprintf("cm-%03d", i-2), func(cm *corev1.ConfigMap) { cm.Data["v"] = "updated" })
		}
		if i%11 == 5 {
			s.delete(fmt.Sprintf("cm-%03d", i-4))
		}
	}
	converged(t, "after the first churn", src, dst)

	// Copies edited and deleted by hand come back as the source says.
	d.update("cm-000", func(cm *corev1.ConfigMap) { cm.Data["v"] = "edited by hand" })
	d.delete("cm-002")
	converged(t, "after copies were edited and deleted by hand", src, dst)

	// A mass delete, the daemon SIGKILLed half way; more deletes,
	// updates and creates while it is down.
	live := func() []string {
		list, err := env.Client.CoreV1().ConfigMaps(src).List(context.Background(), metav1.ListOptions{LabelSelector: "sync=true"})
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, cm := range list.Items {
			names = append(names, cm.Name)
		}
		return names
	}
	victims := live()[:60]
	for i, name := range victims {
		if i == 30 {
			daemon.kill()
		}
		s.delete(name)
	}
	for _, name := range live()[:10] {
		s.update(name, func(cm *corev1.ConfigMap) { cm.Data["v"] = "updated while down" })
	}
	for i := range 10 {
		s.create(fmt.Sprintf("new-%02d", i), syncLabel, map[string]string{"v": "created while down"})
	}
	if m, e, _ := copyDiff(t, src, dst); len(e) < 30 || len(m) < 10 {
		t.Fatalf("while the daemon is down dst should lag (copies of deleted sources, none of the new): missing %v, extra %v", m, e)
	}
	// A second SIGKILL while the restarted daemon catches up, more
	// deletes while it is down again.
	daemon = startCtl(t, bin, cfg, 1)
	waitFor(t, "the restarted daemon to begin catching up", func() (bool, string) {
		_, ok := d.get("new-00")
		return ok, "no copy of new-00 yet"
	})
	daemon.kill()
	for _, name := range live()[:10] {
		s.delete(name)
	}
	daemon = startCtl(t, bin, cfg, 1)
	converged(t, "after two SIGKILLs and restarts", src, dst)

	// Children pruned when no longer wanted: a source losing its label
	// leaves the controller's view, its copy goes.
	unlabel := live()[:5]
	for _, name := range unlabel {
		s.update(name, func(cm *corev1.ConfigMap) { delete(cm.Labels, "sync") })
	}
	converged(t, "after sources lost their sync label", src, dst)
	for _, name := range unlabel {
		if _, ok := d.get(name); ok {
			t.Errorf("the copy of %s is still there after its source lost the sync label", name)
		}
	}

	// A mass delete of every source empties dst.
	if err := env.Client.CoreV1().ConfigMaps(src).DeleteCollection(context.Background(), metav1.DeleteOptions{},
		metav1.ListOptions{LabelSelector: "sync=true"}); err != nil {
		t.Fatal(err)
	}
	converged(t, "after every source was deleted", src, dst)
	if m, e, w := copyDiff(t, src, dst); len(m)+len(e)+len(w) != 0 {
		t.Fatalf("missing %v, extra %v, wrong %v", m, e, w)
	}
	_ = daemon
}

// A controller with a finalizer: the host adds it before the plugin first
// acts, so sources deleted while the daemon is SIGKILLed stay
// Terminating (their copies too) until it is back; after the restart
// each gets its cleanup reconcile (deleting), the host removes the
// finalizer, the sources go and with them (absent) their copies.
func TestControllerFinalizerRunsAfterRestart(t *testing.T) {
	env.Require(t)
	bin := ctlBinary(t)
	src, dst := env.Namespace(t), env.Namespace(t)
	const finalizer = "copy.example.com/cleanup"
	cfg := ctlConfig(t, map[string][]byte{"configmap-copy.wasm": examplePlugin(t, "configmap-copy")}, copyConfig(src, dst, finalizer))
	s, d := cmAPI{t, src}, cmAPI{t, dst}
	daemon := startCtl(t, bin, cfg, 1)
	const n = 12
	for i := range n {
		s.create(fmt.Sprintf("fin-%02d", i), syncLabel, map[string]string{"v": fmt.Sprint(i)})
	}
	converged(t, "the copies", src, dst)
	testenv.Eventually(t, "the finalizer on every source", func() bool {
		for i := range n {
			cm, ok := s.get(fmt.Sprintf("fin-%02d", i))
			if !ok || !slices.Contains(cm.Finalizers, finalizer) {
				return false
			}
		}
		return true
	})

	daemon.kill()
	for i := range n {
		s.delete(fmt.Sprintf("fin-%02d", i))
	}
	// Down, nothing cleans up: the sources wait in Terminating, the
	// copies stay.
	for i := range n {
		name := fmt.Sprintf("fin-%02d", i)
		cm, ok := s.get(name)
		if !ok || cm.DeletionTimestamp == nil {
			t.Fatalf("source %s after its delete while the daemon is down: present %v; want it Terminating (the finalizer holds it)", name, ok)
		}
		if _, ok := d.get(name); !ok {
			t.Fatalf("the copy of %s went while the daemon was down", name)
		}
	}

	startCtl(t, bin, cfg, 1)
	testenv.Eventually(t, "every source gone (finalizer removed after its cleanup reconcile)", func() bool {
		list, err := env.Client.CoreV1().ConfigMaps(src).List(context.Background(), metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, cm := range list.Items {
			if strings.HasPrefix(cm.Name, "fin-") {
				return false
			}
		}
		return true
	})
	converged(t, "the copies of the deleted sources pruned", src, dst)
}

// A source that leaves the controller's view (its sync label removed:
// the resource's label selector no longer admits it) after the host put
// its finalizer on it loses its copy and must not keep the finalizer: the
// controller will never see it again, so a later delete would leave it
// Terminating for ever.
func TestControllerFinalizerLeavesWithTheObject(t *testing.T) {
	env.Require(t)
	bin := ctlBinary(t)
	src, dst := env.Namespace(t), env.Namespace(t)
	const finalizer = "copy.example.com/cleanup"
	cfg := ctlConfig(t, map[string][]byte{"configmap-copy.wasm": examplePlugin(t, "configmap-copy")}, copyConfig(src, dst, finalizer))
	s := cmAPI{t, src}
	startCtl(t, bin, cfg, 1)
	s.create("away", syncLabel, map[string]string{"v": "1"})
	converged(t, "the copy", src, dst)
	testenv.Eventually(t, "the finalizer on the source", func() bool {
		cm, ok := s.get("away")
		return ok && slices.Contains(cm.Finalizers, finalizer)
	})
	s.update("away", func(cm *corev1.ConfigMap) { delete(cm.Labels, "sync") })
	converged(t, "the copy pruned once the source left the view", src, dst)
	waitFor(t, "the finalizer taken off the source that left the view", func() (bool, string) {
		cm, ok := s.get("away")
		if !ok {
			t.Fatal("the source went before its delete")
		}
		return !slices.Contains(cm.Finalizers, finalizer), fmt.Sprintf("finalizers %v", cm.Finalizers)
	})
	s.delete("away")
	waitFor(t, "the source gone after its delete", func() (bool, string) {
		cm, ok := s.get("away")
		if !ok {
			return true, ""
		}
		return false, fmt.Sprintf("Terminating with finalizers %v", cm.Finalizers)
	})
}
