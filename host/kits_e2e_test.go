package host

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// podLife creates pod name in the test's namespace, sets its phase to each
// of phases in turn, and deletes it.
func (hs *harness) podLife(name string, phases ...corev1.PodPhase) {
	hs.t.Helper()
	ctx := context.Background()
	pods := env.Client.CoreV1().Pods(hs.ns)
	pod, err := pods.Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "x"}}}}, metav1.CreateOptions{})
	if err != nil {
		hs.t.Fatal(err)
	}
	for _, phase := range phases {
		pod.Status.Phase = phase
		if pod, err = pods.UpdateStatus(ctx, pod, metav1.UpdateOptions{}); err != nil {
			hs.t.Fatal(err)
		}
	}
	if err := pods.Delete(ctx, name, metav1.DeleteOptions{GracePeriodSeconds: new(int64)}); err != nil {
		hs.t.Fatal(err)
	}
}

// loggedInOrder checks that plugin logged lines (through log), in order,
// among its other lines.
func (hs *harness) loggedInOrder(plugin string, lines []string) {
	hs.t.Helper()
	got := hs.logs.lines("plugin="+plugin, "stream=log")
	i := 0
	for _, l := range got {
		if i < len(lines) && strings.Contains(l, `msg="`+lines[i]+`"`) {
			i++
		}
	}
	if i != len(lines) {
		hs.t.Errorf("%s logged:\n%s\nwant, in order, %q", plugin, strings.Join(got, "\n"), lines)
	}
}

const kitsConfig = `
apiVersion: informer-host/v1
resources:
  - {name: pods, version: v1, kind: Pod, namespaces: [NS]}
plugins:
  directory: DIR
  default:
    bindings: [{resource: pods}]
    grants:
      cache: [{resource: pods}]
      state: {}
      metrics: {}
  modules:
    - {file: pod-phase-rs.wasm}
    - {file: pod-phase-rs-unknown.wasm}
    - {file: pod-logger-as.wasm}
`

// The Rust and AssemblyScript kits' examples, as `make plugins` builds
// them (the Rust one for both of its targets), in the daemon against the
// apiserver: each handles a pod's life with its capabilities granted.
func TestKitExamplePlugins(t *testing.T) {
	unknown, err := os.ReadFile(filepath.Join("..", "build", "kits", "pod-phase-rs.wasm32-unknown-unknown.wasm"))
	if err != nil {
		t.Fatalf("run `make plugins` (make test does): %v", err)
	}
	hs, err := newHarness(t, kitsConfig, map[string][]byte{
		"pod-phase-rs.wasm":         example(t, "pod-phase-rs"),
		"pod-phase-rs-unknown.wasm": unknown,
		"pod-logger-as.wasm":        example(t, "pod-logger-as"),
	})
	if err != nil {
		t.Fatal(err)
	}
	hs.podLife("web-0", corev1.PodRunning)
	ns := hs.ns
	// The phase change, then the deletion timestamp: two updates.
	want := []string{"add " + ns + "/web-0 ok", "update " + ns + "/web-0 ok", "update " + ns + "/web-0 ok", "delete " + ns + "/web-0 ok"}
	said := map[string][]string{
		"pod-phase-rs.wasm": {
			"initial list of pods handled: 0 pods tracked",
			"pod " + ns + "/web-0: none -> Pending",
			"pod " + ns + "/web-0: Pending -> Running",
			"pod " + ns + "/web-0 deleted (was Running)",
		},
		"pod-logger-as.wasm": {
			"pod added: " + ns + "/web-0 phase=Pending",
			"pod updated: " + ns + "/web-0 phase=Running (was Pending)",
			"pod deleted: " + ns + "/web-0 phase=Running",
		},
	}
	said["pod-phase-rs-unknown.wasm"] = said["pod-phase-rs.wasm"]
	for p := range said {
		eventually(t, p+" to get its events", func() bool {
			n := 0
			for _, s := range hs.rec.strings(p) {
				if !strings.HasPrefix(s, "synced ") {
					n++
				}
			}
			return n >= len(want)
		})
	}
	for p, lines := range said {
		var got []string
		for _, s := range hs.rec.strings(p) {
			if !strings.HasPrefix(s, "synced ") {
				got = append(got, s)
			}
		}
		if strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Errorf("%s:\n got %q\nwant %q", p, got, want)
		}
		hs.loggedInOrder(p, lines)
	}
	for _, p := range []string{"pod-phase-rs.wasm", "pod-phase-rs-unknown.wasm"} {
		for phase, n := range map[string]float64{"Pending": 1, "Running": 1} {
			if got := hs.pluginMetric("informer_host_plugin_metric_pod_phase_changes_total",
				map[string]string{"namespace": ns, "phase": phase, "plugin": p}); got != n {
				t.Errorf("%s: pod_phase_changes_total{phase=%s} = %v, want %v", p, phase, got, n)
			}
		}
		// Set by the delete, when the cache no longer has the pod.
		if got := hs.pluginMetric("informer_host_plugin_metric_namespace_pods", map[string]string{"namespace": ns, "plugin": p}); got != 0 {
			t.Errorf("%s: namespace_pods = %v, want 0", p, got)
		}
		b, ok := hs.h.state.Lookup(p)
		if !ok {
			t.Fatalf("%s: no state", p)
		}
		if _, _, ok := b.Get([]byte("phase/" + ns + "/web-0")); ok {
			t.Errorf("%s: state of the deleted pod kept", p)
		}
	}
	for typ, n := range map[string]float64{"add": 1, "update": 2, "delete": 1} {
		if got := hs.pluginMetric("informer_host_plugin_metric_pod_events_total",
			map[string]string{"namespace": ns, "type": typ, "plugin": "pod-logger-as.wasm"}); got != n {
			t.Errorf("pod-logger-as: pod_events_total{type=%s} = %v, want %v", typ, got, n)
		}
	}
}
