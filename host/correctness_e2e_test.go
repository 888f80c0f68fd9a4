package host

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// createMany creates n ConfigMaps named prefix0..prefix(n-1), a few at a
// time.
func (hs *harness) createMany(prefix string, n int) {
	hs.t.Helper()
	cms := env.Client.CoreV1().ConfigMaps(hs.ns)
	var wg sync.WaitGroup
	errs := make(chan error, n)
	sem := make(chan struct{}, 16)
	for i := range n {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			_, err := cms.Create(context.Background(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s%d", prefix, i)}}, metav1.CreateOptions{})
			if err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		hs.t.Fatal(err)
	}
}

// view is what a plugin was told, applied in order: the resourceVersion of
// every object it holds, by key. Calls that did not end in OK are left out.
func view(ds []observed, resource string) map[string]string {
	v := map[string]string{}
	for _, d := range ds {
		if d.Type == 0 || d.Failure != 0 || d.Code != 0 || d.Resource != resource {
			continue
		}
		if d.Type.String() == "delete" {
			delete(v, d.Key)
		} else {
			v[d.Key] = d.RV
		}
	}
	return v
}

// clusterCMs is the namespace's ConfigMaps, as a view.
func (hs *harness) clusterCMs() map[string]string {
	hs.t.Helper()
	list, err := env.Client.CoreV1().ConfigMaps(hs.ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		hs.t.Fatal(err)
	}
	v := map[string]string{}
	for _, cm := range list.Items {
		v[cm.Namespace+"/"+cm.Name] = cm.ResourceVersion
	}
	return v
}

// initials returns the keys of the initial-list adds in ds.
func initials(ds []observed) []string {
	var out []string
	for _, d := range ds {
		if d.Initial {
			out = append(out, d.Key)
		}
	}
	return out
}

// distinct counts the distinct strings in keys.
func distinct(keys []string) int {
	m := map[string]bool{}
	for _, k := range keys {
		m[k] = true
	}
	return len(m)
}

// A cache far larger than the plugin's buffer reaches the
// plugin whole, at load and again after a restart, and the plugin is
// reported synced only once it has handled all of it.
func TestInitialListArrivesWholeWhateverTheBufferSize(t *testing.T) {
	const n = 2000
	var mu sync.Mutex
	var syncedEarly []string
	hs, err := newHarness(t, `
apiVersion: informer-host/v1
resources:
  - {name: cms, version: v1, resource: configmaps, namespaces: [NS]}
plugins:
  directory: DIR
  default:
    bindings: [{resource: cms}]
    delivery: {bufferSize: 10}
    limits: {restartBackoff: 10ms, maxConsecutiveFailures: 3}
`, map[string][]byte{"poison.wasm": testPlugin(t, "poison")}, func(h *harness) {
		h.createMany("cm", n)
		h.rec.probe = func(plugin string, d observed) {
			// Still inside the call: the plugin has not handled d yet.
			if d.Initial && h.status(plugin).Synced {
				mu.Lock()
				syncedEarly = append(syncedEarly, d.Key)
				mu.Unlock()
			}
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "the initial list handled", func() bool { return len(initials(hs.rec.of("poison.wasm"))) >= n })
	eventually(t, "the plugin synced", func() bool { return hs.status("poison.wasm").Synced })
	got := initials(hs.rec.of("poison.wasm"))
	if len(got) != n || distinct(got) != n {
		t.Errorf("initial list: %d adds of %d objects, want each of the %d once", len(got), distinct(got), n)
	}

	// A restart replays the whole cache again.
	before := len(hs.rec.of("poison.wasm"))
	hs.createCM("poison", nil)
	eventually(t, "the replay after the restart", func() bool {
		return len(initials(hs.rec.of("poison.wasm")[before:])) >= n+1 && hs.status("poison.wasm").Synced
	})
	if got := initials(hs.rec.of("poison.wasm")[before:]); len(got) != n+1 || distinct(got) != n+1 {
		t.Errorf("replay after the restart: %d adds of %d objects, want each of the %d once", len(got), distinct(got), n+1)
	}
	st := hs.status("poison.wasm")
	if st.Counters.Restarts != 1 || st.Queue.Dropped != 0 || st.Degraded {
		t.Errorf("status: %+v; want one restart, nothing dropped", st)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(syncedEarly) > 0 {
		t.Errorf("reported synced before handling %d initial-list adds, first %s", len(syncedEarly), syncedEarly[0])
	}
}

// A buffer overflow loses events, but once the plugin
// catches up it is brought back to the cache's state; the overflow is
// warned about and the plugin shown degraded until then, in both modes.
func TestOverflowIsRepairedFromTheCache(t *testing.T) {
	healthy := fixture(t, "healthy")
	var openEvery, openLatest func()
	var heldEvery, heldLatest <-chan struct{}
	hs, err := newHarness(t, `
apiVersion: informer-host/v1
resources:
  - {name: cms, version: v1, resource: configmaps, namespaces: [NS]}
plugins:
  directory: DIR
  default:
    bindings: [{resource: cms}]
  modules:
    - {file: every.wasm, delivery: {mode: every, bufferSize: 5}}
    - {file: latest.wasm, delivery: {mode: latest, bufferSize: 5}}
`, map[string][]byte{"every.wasm": healthy, "latest.wasm": healthy}, func(hs *harness) {
		heldEvery, openEvery = hs.rec.gate("every.wasm")
		heldLatest, openLatest = hs.rec.gate("latest.wasm")
	})
	if err != nil {
		t.Fatal(err)
	}
	hot := hs.createCM("hot", map[string]string{"n": "0"})
	<-heldEvery
	<-heldLatest
	hs.createMany("o", 20)
	for i := 1; i <= 10; i++ {
		hot = hs.updateCM(hot, "n", fmt.Sprint(i))
	}
	for i := range 5 {
		hs.deleteCM(fmt.Sprintf("o%d", i))
	}
	for _, p := range []string{"every.wasm", "latest.wasm"} {
		eventually(t, p+" to overflow", func() bool { st := hs.status(p); return st.Queue.Dropped > 0 && st.Degraded })
		if v := hs.metric("informer_host_plugin_degraded", p); v != 1 {
			t.Errorf("%s: informer_host_plugin_degraded %v while degraded, want 1", p, v)
		}
	}
	// The repair replays the informer's cache, which learns of the last
	// deletes a moment after the apiserver acknowledged them: wait until
	// it holds the cluster, so that "after the repair" means exactly it.
	want := hs.clusterCMs()
	eventually(t, "the informer cache to hold the cluster's ConfigMaps", func() bool {
		cached := map[string]string{}
		hs.p.CacheList("cms", hs.ns, nil, func(u *unstructured.Unstructured) {
			cached[u.GetNamespace()+"/"+u.GetName()] = u.GetResourceVersion()
		})
		return equalViews(cached, want)
	})
	openEvery()
	openLatest()
	for _, p := range []string{"every.wasm", "latest.wasm"} {
		eventually(t, p+" to be repaired", func() bool { return !hs.status(p).Degraded })
		if got := view(hs.rec.of(p), "cms"); !equalViews(got, want) {
			t.Errorf("%s after the repair holds %d objects, the cluster %d:\n got %v\nwant %v", p, len(got), len(want), got, want)
		}
		if v := hs.metric("informer_host_plugin_degraded", p); v != 0 {
			t.Errorf("%s: informer_host_plugin_degraded %v after the repair, want 0", p, v)
		}
		if st := hs.status(p); st.Repairs == 0 || !st.Synced {
			t.Errorf("%s: %+v; want a repair and synced", p, st)
		}
		if lines := hs.logs.lines("level=WARN", "plugin="+p, "buffer overflowed"); len(lines) != 1 {
			t.Errorf("%s: %d overflow warnings, want 1: %q", p, len(lines), lines)
		}
	}
}

// metric returns the value of the host's metric name for plugin (""
// for a metric without labels), or -1.
func (hs *harness) metric(name, plugin string) float64 {
	hs.t.Helper()
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(hs.h)
	mfs, err := reg.Gather()
	if err != nil {
		hs.t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.Metric {
			if plugin == "" && len(m.Label) == 0 {
				return m.Counter.GetValue()
			}
			for _, l := range m.Label {
				if l.GetName() == "plugin" && l.GetValue() == plugin {
					if m.Gauge != nil {
						return m.Gauge.GetValue()
					}
					return m.Counter.GetValue()
				}
			}
		}
	}
	return -1
}

func equalViews(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// A reload that lands while the old version's call is
// failing leaves the new version in charge: running, synced, and no error
// of the old one.
func TestReloadDuringAFailingCallLeavesTheNewVersionInCharge(t *testing.T) {
	var held <-chan struct{}
	var open func()
	hs, err := newHarness(t, `
apiVersion: informer-host/v1
resources:
  - {name: cms, version: v1, resource: configmaps, namespaces: [NS]}
plugins:
  directory: DIR
  default:
    bindings: [{resource: cms}]
    limits: {restartBackoff: 1m, maxConsecutiveFailures: 3}
`, map[string][]byte{"poison.wasm": testPlugin(t, "poison")}, func(hs *harness) {
		held, open = hs.rec.gate("poison.wasm")
	})
	if err != nil {
		t.Fatal(err)
	}
	hs.createCM("poison", nil)
	<-held // the old version's call has trapped; its worker is held before it reacts
	if d := hs.rec.of("poison.wasm"); len(d) != 1 || d[0].Failure == 0 {
		t.Fatalf("calls so far: %v, want the trap", d)
	}
	next := testPlugin(t, "synced") // other bytes
	hs.write("poison.wasm", next)
	loaded := make(chan error, 1)
	go func() { loaded <- hs.h.Load(context.Background(), filepath.Join(hs.dir, "poison.wasm")) }()
	eventually(t, "the new version to be current", func() bool { return hs.status("poison.wasm").SHA256 == sha(next) })
	open() // the old version now handles its failure, while being retired
	if err := <-loaded; err != nil {
		t.Fatal(err)
	}
	eventually(t, "the new version running and synced", func() bool {
		st := hs.status("poison.wasm")
		return st.State == StateRunning && st.Synced
	})
	if st := hs.status("poison.wasm"); st.LastError != "" || st.Counters.Restarts != 0 {
		t.Errorf("status after the reload: %+v; want no error and no restart", st)
	}
}

// An object the plugin answers RETRY for waits out its
// backoff on its own: other objects' events are handled meanwhile (the
// plugin only lets the retried object through once it has seen another),
// and the object's own later events keep their order behind it (mode
// every) or merge into it (mode latest).
func TestRetryWaitsPerObject(t *testing.T) {
	plugin := testPlugin(t, "waitretry")
	var heldEvery, heldLatest <-chan struct{}
	var first sync.WaitGroup
	first.Add(2)
	hs, err := newHarness(t, `
apiVersion: informer-host/v1
resources:
  - {name: cms, version: v1, resource: configmaps, namespaces: [NS]}
plugins:
  directory: DIR
  default:
    bindings: [{resource: cms}]
    delivery: {maxRetries: 6, retryBackoff: 100ms}
  modules:
    - {file: every.wasm, delivery: {mode: every}}
    - {file: latest.wasm, delivery: {mode: latest}}
`, map[string][]byte{"every.wasm": plugin, "latest.wasm": plugin}, func(hs *harness) {
		var openEvery, openLatest func()
		heldEvery, openEvery = hs.rec.gate("every.wasm")
		heldLatest, openLatest = hs.rec.gate("latest.wasm")
		go func() { <-heldEvery; openEvery(); first.Done() }()
		go func() { <-heldLatest; openLatest(); first.Done() }()
	})
	if err != nil {
		t.Fatal(err)
	}
	rtry := hs.createCM("rtry", nil)
	first.Wait() // both plugins answered RETRY to the add once
	rtry = hs.updateCM(rtry, "k", "v")
	hs.createCM("other", nil)
	ns := hs.ns
	for _, tc := range []struct{ plugin, want string }{
		{"every.wasm", "add rtry ok; update rtry ok"},
		{"latest.wasm", "add rtry ok"},
	} {
		eventually(t, tc.plugin+" to handle rtry", func() bool {
			return slices.Contains(hs.rec.strings(tc.plugin), "add "+ns+"/rtry ok")
		})
		eventually(t, tc.plugin+" to finish", func() bool { return hs.status(tc.plugin).Queue.Depth == 0 })
		calls := hs.rec.of(tc.plugin)
		got := hs.rec.strings(tc.plugin)
		if got[0] != "add "+ns+"/rtry retry" {
			t.Errorf("%s: first call %q, want the retried add", tc.plugin, got[0])
		}
		other := slices.Index(got, "add "+ns+"/other ok")
		okAt := slices.Index(got, "add "+ns+"/rtry ok")
		if other < 0 || other > okAt {
			t.Errorf("%s: %q\nwant other's add handled while rtry waited out its retry", tc.plugin, got)
		}
		var rtryOK []string
		for _, d := range calls {
			if d.Key == ns+"/rtry" && d.Code == 0 {
				rtryOK = append(rtryOK, fmt.Sprintf("%s rtry ok", d.Type))
			}
		}
		if s := strings.Join(rtryOK, "; "); s != tc.want {
			t.Errorf("%s: rtry's handled events %q, want %q", tc.plugin, rtryOK, tc.want)
		}
		if tc.plugin == "latest.wasm" && calls[okAt].RV != rtry.ResourceVersion {
			t.Errorf("%s: the merged retry carries resourceVersion %s, want the update's %s", tc.plugin, calls[okAt].RV, rtry.ResourceVersion)
		}
		if st := hs.status(tc.plugin); st.Counters.RetryExhausted != 0 || st.Counters.Retries == 0 {
			t.Errorf("%s: counters %+v; want retries and none exhausted", tc.plugin, st.Counters)
		}
	}
}

// ih_synced is called once per binding, after the
// plugin has handled that binding's whole initial list: at load, after a
// restart's replay, and for a new version after a reload.
func TestSyncedExportOncePerBindingAfterItsInitialList(t *testing.T) {
	const n = 200
	hs, err := newHarness(t, `
apiVersion: informer-host/v1
resources:
  - {name: cms, version: v1, resource: configmaps, namespaces: [NS]}
  - {name: secrets, version: v1, resource: secrets, namespaces: [NS]}
plugins:
  directory: DIR
  default:
    bindings: [{resource: cms}, {resource: secrets}]
    delivery: {bufferSize: 10}
    limits: {restartBackoff: 10ms, maxConsecutiveFailures: 3}
`, map[string][]byte{"synced.wasm": testPlugin(t, "synced")}, func(hs *harness) {
		hs.createMany("cm", n)
		for i := range 3 {
			if _, err := env.Client.CoreV1().Secrets(hs.ns).Create(context.Background(),
				&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("s%d", i)}}, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	check := func(round string, calls []observed) {
		t.Helper()
		want := map[string]int{"cms": n, "secrets": 3}
		if round != "at load" {
			want["cms"]++ // the poison ConfigMap
		}
		for res, count := range want {
			var adds, markers int
			for _, d := range calls {
				switch {
				case d.Type == 0 && d.Resource == res:
					markers++
					if adds != count {
						t.Errorf("%s: ih_synced(%s) after %d of its %d initial adds", round, res, adds, count)
					}
				case d.Initial && d.Resource == res:
					adds++
					if markers > 0 {
						t.Errorf("%s: initial add of %s after ih_synced(%s)", round, d.Key, res)
					}
				}
			}
			if markers != 1 || adds != count {
				t.Errorf("%s: %d ih_synced calls for %s, %d initial adds; want 1 after %d", round, markers, res, adds, count)
			}
		}
	}
	done := func(from int) func() bool {
		return func() bool {
			calls := hs.rec.of("synced.wasm")[from:]
			return slices.ContainsFunc(calls, func(d observed) bool { return d.Type == 0 && d.Resource == "cms" }) &&
				slices.ContainsFunc(calls, func(d observed) bool { return d.Type == 0 && d.Resource == "secrets" }) &&
				hs.status("synced.wasm").Synced
		}
	}
	eventually(t, "both bindings synced", done(0))
	check("at load", hs.rec.of("synced.wasm"))
	if lines := hs.logs.lines("plugin=synced.wasm", "synced secrets"); len(lines) != 1 {
		t.Errorf("the plugin's own log of ih_synced(secrets): %q", lines)
	}

	before := len(hs.rec.of("synced.wasm"))
	hs.createCM("poison", nil)
	eventually(t, "the restart", func() bool { return hs.status("synced.wasm").Counters.Restarts == 1 })
	eventually(t, "both bindings synced again", done(before))
	check("after the restart", hs.rec.of("synced.wasm")[before:])

	// A new version gets its own initial list and its own ih_synced calls
	// (the observer records both versions under the file's name; the old
	// one has nothing left to handle).
	next := variant(testPlugin(t, "synced"), 1)
	hs.write("synced.wasm", next)
	before = len(hs.rec.of("synced.wasm"))
	if err := hs.h.Load(context.Background(), filepath.Join(hs.dir, "synced.wasm")); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the new version synced", done(before))
	check("after the reload", hs.rec.of("synced.wasm")[before:])
}
