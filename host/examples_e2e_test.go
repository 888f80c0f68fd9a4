package host

import (
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// The example plugins, as `make plugins` builds them, receive exactly the
// events of the resources they are bound to and say what they should.
func TestExamplePlugins(t *testing.T) {
	hs, err := newHarness(t, `
apiVersion: informer-host/v1
resources:
  - {name: pods, version: v1, kind: Pod, namespaces: [NS]}
  - {name: configmaps, version: v1, resource: configmaps, namespaces: [NS]}
plugins:
  directory: DIR
  modules:
    - {file: pod-logger.wasm, bindings: [{resource: pods}]}
    - {file: pod-phases.wasm, bindings: [{resource: pods}], config: {logEvery: 1}}
    - {file: counter-c.wasm, bindings: [{resource: configmaps}]}
    - {file: minimal-wat.wasm, bindings: [{resource: configmaps, events: [add, delete]}]}
`, map[string][]byte{
		"pod-logger.wasm":  example(t, "pod-logger"),
		"pod-phases.wasm":  example(t, "pod-phases"),
		"counter-c.wasm":   example(t, "counter-c"),
		"minimal-wat.wasm": example(t, "minimal-wat"),
	})
	if err != nil {
		t.Fatal(err)
	}
	hs.podLife("web-0", corev1.PodPending, corev1.PodRunning)
	cm := hs.createCM("settings", map[string]string{"k": "1"})
	hs.updateCM(cm, "k", "2")
	hs.deleteCM("settings")

	ns := hs.ns
	// Two updates: the phase change to Running (setting Pending changes
	// nothing: the apiserver defaulted it at create), then the deletion
	// timestamp the delete sets first.
	podEvents := []string{"add " + ns + "/web-0 ok", "update " + ns + "/web-0 ok", "update " + ns + "/web-0 ok", "delete " + ns + "/web-0 ok"}
	want := map[string][]string{
		"pod-logger.wasm":  podEvents,
		"pod-phases.wasm":  podEvents,
		"counter-c.wasm":   {"add " + ns + "/settings ok", "update " + ns + "/settings ok", "delete " + ns + "/settings ok"},
		"minimal-wat.wasm": {"add " + ns + "/settings ok", "delete " + ns + "/settings ok"},
	}
	for p, w := range want {
		eventually(t, p+" to get its events", func() bool { return len(hs.rec.of(p)) >= len(w) })
	}
	for p, w := range want {
		// Kit plugins export ih_synced: one call, for the binding, after
		// its (empty) initial list; its place among the events depends on
		// when the informer reports the listener synced.
		var got []string
		markers := 0
		for _, s := range hs.rec.strings(p) {
			if strings.HasPrefix(s, "synced ") {
				markers++
				continue
			}
			got = append(got, s)
		}
		if !slices.Equal(got, w) {
			t.Errorf("%s:\n got %q\nwant %q", p, got, w)
		}
		if kit := strings.HasPrefix(p, "pod-"); kit && markers != 1 || !kit && markers != 0 {
			t.Errorf("%s: %d ih_synced calls", p, markers)
		}
	}
	// What each plugin logged, in order.
	said := map[string][]string{
		"pod-logger.wasm": {
			// The apiserver defaults a new pod's phase to Pending.
			"pod added: " + ns + "/web-0 phase=Pending",
			"pod updated: " + ns + "/web-0 phase=Running (was Pending)",
			"pod deleted: " + ns + "/web-0 phase=Running",
		},
		"pod-phases.wasm": {
			"initial list of pods handled: 0 pods in 0 namespaces",
			"namespace " + ns + ": Pending=1",
			"namespace " + ns + ": Running=1",
			"namespace " + ns + ": no pods",
		},
		"counter-c.wasm": {
			"add " + ns + "/settings: add=1 update=0 delete=0",
			"update " + ns + "/settings: add=1 update=1 delete=0",
			"delete " + ns + "/settings: add=1 update=1 delete=1",
		},
		"minimal-wat.wasm": {"add settings", "delete settings"},
	}
	for p, lines := range said {
		hs.loggedInOrder(p, lines)
	}
}
