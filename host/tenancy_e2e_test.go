package host

import (
	"context"
	"strconv"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// TestConfinedPlugin runs the prober, a plugin trying to reach beyond
// its namespace, twice against the real apiserver: confined to its
// namespace (PluginSettings.Namespace, a team's Plugin object), and not
// (the control, which shows each attempt would otherwise succeed). Both
// have the daemon's own credentials and grants on every namespace: the
// confinement alone stops the confined one. Its attempts, each refused
// and reported:
//
//   - an event of another namespace's object: never delivered (initial
//     list and live)
//   - cache_get of another namespace's object: ERR_ABSENT, as if absent
//   - cache_list of another namespace: nothing; of every namespace: its
//     own objects only
//   - cache_index by namespace of another: nothing
//   - k8s_write merge patch, apply, delete, create in another namespace:
//     ERR_DENIED without a request, counted in
//     informer_host_plugin_denied_total
func TestConfinedPlugin(t *testing.T) {
	prober := testPlugin(t, "prober")
	var other string
	hs, err := newHarness(t, `
apiVersion: informer-host/v1
resources:
- {name: cms, version: v1, resource: configmaps}
plugins:
  directory: DIR
  default:
    bindings: [{resource: cms, filter: 'object.metadata.name.startsWith("t-")'}]
    grants:
      cache: [{resource: cms}]
      writes: {resources: [{resource: cms, verbs: [create, patch, apply, delete]}]}
  modules:
  - file: confined.wasm
    config: OTHER
  - file: control.wasm
    config: OTHER
`, map[string][]byte{"confined.wasm": prober, "control.wasm": prober}, func(hs *harness) {
		other = controlPlane(t).Namespace(t)
		for i := range hs.cfg.Plugins.Modules {
			m := &hs.cfg.Plugins.Modules[i]
			m.Config = other
			if m.File == "confined.wasm" {
				m.Namespace = hs.ns
			}
		}
		for _, name := range []string{"target", "t-theirs"} {
			createCMIn(t, other, name)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	hs.createCM("t-mine", nil)
	eventually(t, "both plugins to handle t-mine", func() bool {
		return len(hs.logs.lines("plugin=confined.wasm", "create=")) > 0 && len(hs.logs.lines("plugin=control.wasm", "create=")) > 0
	})
	// A live event of the other namespace, after the initial list.
	createCMIn(t, other, "t-theirs-later")
	eventually(t, "the control to be handed the other namespace's live event", func() bool {
		for _, d := range hs.rec.of("control.wasm") {
			if d.Key == other+"/t-theirs-later" {
				return true
			}
		}
		return false
	})
	// The confined plugin's events arrive in order with the control's
	// (one informer); one more of its own after the other's shows it was
	// past that event.
	hs.createCM("t-mine-2", nil)
	eventually(t, "the confined plugin to handle t-mine-2", func() bool {
		for _, d := range hs.rec.of("confined.wasm") {
			if d.Key == hs.ns+"/t-mine-2" {
				return true
			}
		}
		return false
	})
	for _, d := range hs.rec.of("confined.wasm") {
		if !strings.HasPrefix(d.Key, hs.ns+"/") {
			t.Errorf("confined plugin was handed %s of another namespace", d)
		}
	}

	// The control reaches everything; the confined plugin nothing.
	firstValue := func(plugin, label string) string {
		for _, l := range hs.logs.lines("plugin="+plugin, label) {
			if i := strings.Index(l, label); i >= 0 {
				v := l[i+len(label):]
				if j := strings.IndexAny(v, " \""); j >= 0 {
					v = v[:j]
				}
				return v
			}
		}
		return "(none)"
	}
	atoi := func(v string) int {
		n, err := strconv.Atoi(v)
		if err != nil {
			t.Fatalf("log value %q: %v", v, err)
		}
		return n
	}
	for _, c := range []struct {
		label    string
		confined int
		control  func(int) bool // the attempt works unconfined, or the test proves nothing
	}{
		{"get=", -1, func(n int) bool { return n >= 2 }}, // ERR_ABSENT, as if absent; the control gets a handle
		{"listother=", 0, func(n int) bool { return n >= 2 }},
		{"index=", 0, func(n int) bool { return n >= 2 }},
		{"patch=", -8, func(n int) bool { return n >= 0 }}, // ERR_DENIED; the control's result handle
		{"apply=", -8, func(n int) bool { return n >= 0 }},
		{"delete=", -8, func(n int) bool { return n >= 0 }},
		{"create=", -8, func(n int) bool { return n >= 0 }},
	} {
		if got := atoi(firstValue("confined.wasm", c.label)); got != c.confined {
			t.Errorf("confined %s%d, want %d", c.label, got, c.confined)
		}
		if got := atoi(firstValue("control.wasm", c.label)); !c.control(got) {
			t.Errorf("control %s%d: the attempt fails unconfined too", c.label, got)
		}
	}
	// Listing every namespace, the confined plugin sees its own only.
	if all, own := firstValue("confined.wasm", "listall="), firstValue("confined.wasm", "indexown="); all != own || atoi(own) < 1 {
		t.Errorf("confined listall=%s, want its own namespace's objects only (indexown=%s)", all, own)
	}
	if n := hs.metric("informer_host_plugin_denied_total", "confined.wasm"); n < 4 {
		t.Errorf("denied_total{confined.wasm} = %v, want every refused write counted (>= 4)", n)
	}
	if l := hs.logs.lines("plugin=confined.wasm", "host function call denied", "function=k8s_write"); len(l) == 0 {
		t.Error("the refused writes are not logged")
	}
}

// Two tenants' write budgets, through the host against the real
// apiserver: tenant A's two plugins share their namespace's budget from
// its ceiling (burst 2, next token in 1000s), tenant B's plugin has its
// own namespace's. A's plugins try six writes and land two, the rest
// refused ERR_RATE_LIMITED without a request; B's two writes, made after
// A spent everything, land both: A cannot starve B. Counted, not timed.
func TestTenantWriteBudgets(t *testing.T) {
	writer := fixture(t, "writer")
	var other string
	hs, err := newHarness(t, `
apiVersion: informer-host/v1
resources:
- {name: cms, version: v1, resource: configmaps}
tenancy:
  ceilings:
  - namespaces: [NS]
    resources: [cms]
    writes: [{resource: cms, verbs: [patch]}]
    writesQPS: 0.001
    writesBurst: 2
plugins:
  directory: DIR
  default:
    bindings: [{resource: cms, events: [add], filter: 'object.metadata.name.startsWith("w-")'}]
    config: {metadata: {labels: {written: "yes"}}}
    delivery: {maxRetries: 0}
    grants:
      writes: {resources: [{resource: cms, verbs: [patch]}], timeout: 1m}
  modules:
  - file: a1.wasm
  - file: a2.wasm
  - file: b.wasm
`, map[string][]byte{"a1.wasm": writer, "a2.wasm": writer, "b.wasm": writer}, func(hs *harness) {
		other = controlPlane(t).Namespace(t)
		hs.cfg.Tenancy.Ceilings[0].Namespaces = []string{hs.ns, other}
		for i := range hs.cfg.Plugins.Modules {
			m := &hs.cfg.Plugins.Modules[i]
			m.Namespace = hs.ns
			if m.File == "b.wasm" {
				m.Namespace = other
			}
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"w-1", "w-2", "w-3"} {
		hs.createCM(n, nil)
	}
	calls := func(plugin string) int { return len(hs.rec.of(plugin)) }
	eventually(t, "tenant A's plugins to try all their writes", func() bool { return calls("a1.wasm") >= 3 && calls("a2.wasm") >= 3 })
	wrote := func(plugins ...string) (n int) {
		for _, p := range plugins {
			n += len(hs.logs.lines("plugin="+p, "wrote"))
		}
		return n
	}
	eventually(t, "tenant A to land its namespace's burst, 2 writes", func() bool { return wrote("a1.wasm", "a2.wasm") == 2 })
	if l := hs.logs.lines("write budget of namespace " + hs.ns); len(l) == 0 {
		t.Error("tenant A's refused writes do not name its namespace's budget")
	}
	for _, n := range []string{"w-1", "w-2"} {
		createCMIn(t, other, n)
	}
	eventually(t, "tenant B's plugin to land both its writes", func() bool { return wrote("b.wasm") == 2 })
	if n := wrote("a1.wasm", "a2.wasm"); n != 2 {
		t.Errorf("tenant A landed %d writes by the end, want 2", n)
	}
}

// A confined plugin whose buffer overflowed is repaired from the cache,
// which holds every namespace's objects: the repair hands it its own
// namespace's state, exactly, and nothing of the other's, which changed
// meanwhile too.
func TestConfinedRepair(t *testing.T) {
	healthy := fixture(t, "healthy")
	var open func()
	var held <-chan struct{}
	var other string
	hs, err := newHarness(t, `
apiVersion: informer-host/v1
resources:
  - {name: cms, version: v1, resource: configmaps}
plugins:
  directory: DIR
  modules:
    - {file: confined.wasm, bindings: [{resource: cms}], delivery: {bufferSize: 5}}
`, map[string][]byte{"confined.wasm": healthy}, func(hs *harness) {
		other = controlPlane(t).Namespace(t)
		hs.cfg.Plugins.Modules[0].Namespace = hs.ns
		held, open = hs.rec.gate("confined.wasm")
	})
	if err != nil {
		t.Fatal(err)
	}
	hs.createCM("hot", nil)
	<-held
	hs.createMany("o", 20)
	for i := range 10 {
		createCMIn(t, other, "theirs-"+strconv.Itoa(i))
	}
	eventually(t, "the confined plugin to overflow", func() bool { st := hs.status("confined.wasm"); return st.Queue.Dropped > 0 && st.Degraded })
	want := hs.clusterCMs()
	eventually(t, "the informer cache to hold the namespace's ConfigMaps", func() bool {
		cached := map[string]string{}
		hs.p.CacheList("cms", hs.ns, nil, func(u *unstructured.Unstructured) {
			cached[u.GetNamespace()+"/"+u.GetName()] = u.GetResourceVersion()
		})
		return equalViews(cached, want)
	})
	open()
	eventually(t, "the confined plugin to be repaired", func() bool { return !hs.status("confined.wasm").Degraded })
	if got := view(hs.rec.of("confined.wasm"), "cms"); !equalViews(got, want) {
		t.Errorf("after the repair the plugin holds %d objects, its namespace %d:\n got %v\nwant %v", len(got), len(want), got, want)
	}
	for _, d := range hs.rec.of("confined.wasm") {
		if !strings.HasPrefix(d.Key, hs.ns+"/") {
			t.Errorf("confined plugin was handed %s of another namespace", d)
		}
	}
	if st := hs.status("confined.wasm"); st.Repairs == 0 {
		t.Errorf("no repair: %+v", st)
	}
}

// createCMIn creates ConfigMap ns/name, as the administrator.
func createCMIn(t *testing.T, ns, name string) {
	t.Helper()
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if _, err := env.Client.CoreV1().ConfigMaps(ns).Create(context.Background(), cm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// A confined controller reconciles its own namespace's primaries only:
// a primary of another namespace is never a key, and a watched object of
// its namespace whose mapping names a primary of another namespace
// enqueues nothing (logged), while one naming its own does.
func TestConfinedController(t *testing.T) {
	var other string
	hs, err := newHarness(t, `
apiVersion: informer-host/v1
resources:
  - {name: cms, version: v1, resource: configmaps, labelSelector: role=primary}
  - {name: secrets, version: v1, resource: secrets}
plugins:
  directory: DIR
  modules:
  - file: reconciler.wasm
    controller: {for: cms, watches: [{resource: secrets, annotation: example.com/primary}]}
    grants: {writes: {resources: [{resource: cms, verbs: [patch, apply]}]}}
`, map[string][]byte{reconcilerPlugin: testPlugin(t, "reconciler")}, func(hs *harness) {
		other = controlPlane(t).Namespace(t)
		hs.cfg.Plugins.Modules[0].Namespace = hs.ns
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	primary := func(ns string) {
		if _, err := env.Client.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "p",
			Labels: map[string]string{"role": "primary"}}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	primary(other)
	primary(hs.ns)
	eventually(t, "the own primary to be reconciled", func() bool { return len(hs.reconciles("p")) >= 1 })
	before := len(hs.reconciles("p"))
	for i, target := range []string{other + "/p", hs.ns + "/p"} {
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "s" + strconv.Itoa(i), Annotations: map[string]string{"example.com/primary": target}}}
		if _, err := env.Client.CoreV1().Secrets(hs.ns).Create(ctx, s, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, "the secret naming the own primary to enqueue it", func() bool { return len(hs.reconciles("p")) > before })
	for _, d := range hs.rec.of(reconcilerPlugin) {
		if !strings.HasPrefix(d.Key, hs.ns+"/") {
			t.Errorf("confined controller was handed %s of another namespace", d)
		}
	}
	if l := hs.logs.lines("controller mapping named a primary outside the plugin's namespace", "key="+other+"/p"); len(l) == 0 {
		t.Error("the mapping to another namespace's primary was not logged")
	}
}
