package pluginsource

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/informer-host/informer-host/internal/config"
	"github.com/informer-host/informer-host/internal/testenv"
)

// fakeHost records what is loaded, by plugin, and refuses the modules
// whose bytes it is told to.
type fakeHost struct {
	mu      sync.Mutex
	running map[string]string // plugin -> bytes of the running version
	loads   map[string]int
	refuse  map[string]bool // bytes that fail to load
}

func newFakeHost() *fakeHost {
	return &fakeHost{running: map[string]string{}, loads: map[string]int{}, refuse: map[string]bool{}}
}

func (h *fakeHost) LoadModule(_ context.Context, name, path string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.refuse[string(b)] {
		return errors.New("compile: not a module")
	}
	h.running[name] = string(b)
	h.loads[name]++
	return nil
}

func (h *fakeHost) Unload(name string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.running, name)
}

func (h *fakeHost) get(name string) string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.running[name]
}

// fakeRegistry serves tags that move and can go down.
type fakeRegistry struct {
	mu      sync.Mutex
	tags    map[string]string // repo:tag -> digest
	blobs   map[string]string // digest -> bytes
	down    bool
	fetches int
}

func newFakeRegistry() *fakeRegistry {
	return &fakeRegistry{tags: map[string]string{}, blobs: map[string]string{}}
}

func (r *fakeRegistry) push(repoTag, module string) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	d := digestOf([]byte("manifest of " + module))
	r.tags[repoTag], r.blobs[d] = d, module
	return d
}

func (r *fakeRegistry) setDown(down bool) {
	r.mu.Lock()
	r.down = down
	r.mu.Unlock()
}

func (r *fakeRegistry) Resolve(_ context.Context, src Source) (string, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.down {
		return "", errors.New("dial tcp: connection refused")
	}
	if src.Ref.Digest != "" {
		return src.Ref.Digest, nil
	}
	d, ok := r.tags[src.Ref.Repo()+":"+src.Ref.Tag]
	if !ok {
		return "", errors.New("MANIFEST_UNKNOWN")
	}
	return d, nil
}

func (r *fakeRegistry) Fetch(_ context.Context, _ Source, digest string) (Artifact, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.down {
		return Artifact{}, errors.New("dial tcp: connection refused")
	}
	r.fetches++
	b, ok := r.blobs[digest]
	if !ok {
		return Artifact{}, errors.New("BLOB_UNKNOWN")
	}
	return Artifact{Digest: digest, Module: []byte(b)}, nil
}

type fakeVerifier struct {
	mu     sync.Mutex
	signed map[string]string // digest -> signer
	calls  int
	of     map[string]int // calls by digest
}

func (v *fakeVerifier) Verify(_ context.Context, _ config.Verify, _ string, digest string) (VerifyResult, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.calls++
	if v.of == nil {
		v.of = map[string]int{}
	}
	v.of[digest]++
	if s, ok := v.signed[digest]; ok {
		return VerifyResult{Verified: true, Signer: s}, nil
	}
	return VerifyResult{Reason: "no matching signatures"}, nil
}

// parse reads a config of modules and sets every refresh to every (the
// config's minimum is a second; tests poll faster).
func parse(t *testing.T, every time.Duration, modules ...string) *config.Config {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "key.pem"), []byte("k"), 0o600); err != nil {
		t.Fatal(err)
	}
	in := "apiVersion: informer-host/v1\nresources: [{name: pods, version: v1, resource: pods}]\nplugins:\n  modules:\n" +
		strings.Join(modules, "\n") + "\n"
	c, err := config.Parse(filepath.Join(dir, "config.yaml"), []byte(in))
	if err != nil {
		t.Fatal(err)
	}
	for i := range c.Plugins.Modules {
		if m := &c.Plugins.Modules[i]; m.RefreshInterval.Duration > 0 {
			m.RefreshInterval = config.NewDuration(every)
		}
	}
	return c
}

func newManager(t *testing.T, h Loader, f Fetcher, store Store, v Verifier) *Manager {
	t.Helper()
	m, err := New(Options{Host: h, Fetcher: f, Store: store, Verifier: v, RetryBase: time.Millisecond, RetryMax: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Stop)
	return m
}

func store(t *testing.T) *DirStore {
	t.Helper()
	s, err := NewDirStore(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return s
}

const tagModule = "  - file: a.wasm\n    source: oci://localhost:5000/org/a:v1"

func TestTagMovesHotSwaps(t *testing.T) {
	h, reg := newFakeHost(), newFakeRegistry()
	d1 := reg.push("localhost:5000/org/a:v1", "module one")
	m := newManager(t, h, reg, store(t), nil)
	m.Apply(t.Context(), parse(t, 5*time.Millisecond, tagModule))
	testenv.Eventually(t, "v1 to run", func() bool { return h.get("a.wasm") == "module one" && m.Status()["a.wasm"].RunningDigest == d1 })
	if st := m.Status()["a.wasm"]; st.RunningDigest != d1 || st.Degraded || st.Source != "oci://localhost:5000/org/a:v1" || st.PullPolicy != config.PullAlways {
		t.Errorf("status = %+v", st)
	}
	// The tag moves: the next refresh swaps.
	d2 := reg.push("localhost:5000/org/a:v1", "module two")
	testenv.Eventually(t, "the moved tag to run", func() bool { return h.get("a.wasm") == "module two" })
	testenv.Eventually(t, "the status to follow", func() bool {
		st := m.Status()["a.wasm"]
		return st.RunningDigest == d2 && st.ResolvedDigest == d2
	})
	if n := pulls(t, m, "a.wasm", "pulled"); n != 2 {
		t.Errorf("pulled = %v, want 2", n)
	}
	// Refreshes that find the same digest load nothing.
	testenv.Eventually(t, "an unchanged refresh", func() bool { return pulls(t, m, "a.wasm", "unchanged") >= 2 })
	h.mu.Lock()
	loads := h.loads["a.wasm"]
	h.mu.Unlock()
	if loads != 2 {
		t.Errorf("%d loads, want 2", loads)
	}
}

func TestFetchFailureKeepsLastGoodAndBacksOff(t *testing.T) {
	h, reg := newFakeHost(), newFakeRegistry()
	d1 := reg.push("localhost:5000/org/a:v1", "module one")
	m := newManager(t, h, reg, store(t), nil)
	m.Apply(t.Context(), parse(t, 5*time.Millisecond, tagModule))
	testenv.Eventually(t, "v1 to run", func() bool { return h.get("a.wasm") == "module one" && m.Status()["a.wasm"].RunningDigest == d1 })

	reg.setDown(true)
	testenv.Eventually(t, "the source to be degraded and retried", func() bool {
		st := m.Status()["a.wasm"]
		return st.Degraded && pulls(t, m, "a.wasm", "failed") >= 3
	})
	st := m.Status()["a.wasm"]
	if st.RunningDigest != d1 || !strings.Contains(st.LastError, "connection refused") || st.NextRetry.IsZero() {
		t.Errorf("status = %+v", st)
	}
	if h.get("a.wasm") != "module one" {
		t.Error("the running version was unloaded")
	}
	if why := m.NotReady(); len(why) != 0 {
		t.Errorf("NotReady with a good version running: %v", why)
	}
	if g := degraded(t, m, "a.wasm"); g != 1 {
		t.Errorf("degraded gauge = %v", g)
	}

	// A new version that does not load is refused the same way.
	reg.push("localhost:5000/org/a:v1", "broken")
	h.mu.Lock()
	h.refuse["broken"] = true
	h.mu.Unlock()
	reg.setDown(false)
	testenv.Eventually(t, "the refusal", func() bool { return strings.Contains(m.Status()["a.wasm"].LastError, "not a module") })
	if h.get("a.wasm") != "module one" {
		t.Error("a refused version replaced the running one")
	}
	// Fixed: the source recovers, degraded ends.
	reg.push("localhost:5000/org/a:v1", "module three")
	testenv.Eventually(t, "recovery", func() bool { st := m.Status()["a.wasm"]; return !st.Degraded && h.get("a.wasm") == "module three" })
	if g := degraded(t, m, "a.wasm"); g != 0 {
		t.Errorf("degraded gauge = %v after recovery", g)
	}
}

func TestRestartStartsFromCacheWithRegistryDown(t *testing.T) {
	st := store(t)
	reg := newFakeRegistry()
	d1 := reg.push("localhost:5000/org/a:v1", "module one")
	cfg := parse(t, 5*time.Millisecond, tagModule)
	{
		h := newFakeHost()
		m := newManager(t, h, reg, st, nil)
		m.Apply(t.Context(), cfg)
		testenv.Eventually(t, "v1 to run", func() bool { return h.get("a.wasm") == "module one" && m.Status()["a.wasm"].RunningDigest == d1 })
		m.Stop()
	}
	// The daemon restarts with the registry down.
	reg.setDown(true)
	h := newFakeHost()
	m := newManager(t, h, reg, st, nil)
	m.Apply(t.Context(), cfg)
	// Loaded before Apply returned, from the cache.
	if h.get("a.wasm") != "module one" {
		t.Fatalf("not started from the cache: running %q", h.get("a.wasm"))
	}
	if s := m.Status()["a.wasm"]; s.RunningDigest != d1 {
		t.Errorf("status = %+v", s)
	}
	if n := pulls(t, m, "a.wasm", "cached"); n != 1 {
		t.Errorf("cached = %v", n)
	}
	testenv.Eventually(t, "the refresh to fail", func() bool { return m.Status()["a.wasm"].Degraded })
	if len(m.NotReady()) != 0 {
		t.Errorf("NotReady: %v", m.NotReady())
	}
	// The registry returns with a new version: it is swapped in.
	reg.setDown(false)
	reg.push("localhost:5000/org/a:v1", "module two")
	testenv.Eventually(t, "v2 after the outage", func() bool { return h.get("a.wasm") == "module two" })
}

func TestVerifyRefusesUnsigned(t *testing.T) {
	reg := newFakeRegistry()
	d1 := reg.push("localhost:5000/org/a:v1", "unsigned")
	d2 := reg.push("localhost:5000/org/b:v1", "signed")
	v := &fakeVerifier{signed: map[string]string{d2: "ci@example.com"}}
	h := newFakeHost()
	m := newManager(t, h, reg, store(t), v)
	m.Apply(t.Context(), parse(t, 5*time.Millisecond,
		tagModule, "    verify: {required: true, keys: [key.pem]}",
		"  - file: b.wasm\n    source: oci://localhost:5000/org/b:v1\n    verify: {required: true, keys: [key.pem]}",
		"  - file: c.wasm\n    source: oci://localhost:5000/org/a:v1\n    failurePolicy: fail-open\n    verify: {required: true, keys: [key.pem]}"))
	testenv.Eventually(t, "b to run", func() bool { return h.get("b.wasm") == "signed" && m.Status()["b.wasm"].RunningDigest == d2 })
	testenv.Eventually(t, "a to be refused", func() bool { return m.Status()["a.wasm"].Degraded })
	if h.get("a.wasm") != "" || h.get("c.wasm") != "" {
		t.Error("an unsigned module was loaded")
	}
	a, b := m.Status()["a.wasm"], m.Status()["b.wasm"]
	if !strings.Contains(a.LastError, "not verified: no matching signatures") || a.RunningDigest != "" || a.ResolvedDigest != d1 {
		t.Errorf("a = %+v", a)
	}
	if !b.Verified || b.Signer != "ci@example.com" {
		t.Errorf("b = %+v", b)
	}
	// a is fail-closed: not ready, with the reason; c (fail-open) is not
	// a reason.
	why := m.NotReady()
	if len(why) != 1 || !strings.Contains(why[0], "plugin a.wasm") || !strings.Contains(why[0], "no matching signatures") {
		t.Errorf("NotReady = %q", why)
	}
	// A refusal is asked again at each retry (a signature may be
	// attached after the tag moved); a verified digest is not.
	testenv.Eventually(t, "retries", func() bool { return pulls(t, m, "a.wasm", "failed") >= 3 })
	v.mu.Lock()
	asked, once := v.of[d1], v.of[d2]
	v.signed[d1] = "late@example.com"
	v.mu.Unlock()
	if asked < 3 || once != 1 {
		t.Errorf("verifications: %d of the refused digest (want one a retry), %d of the verified one (want 1)", asked, once)
	}
	testenv.Eventually(t, "a and c to run once d1 is signed", func() bool {
		return h.get("a.wasm") == "unsigned" && h.get("c.wasm") == "unsigned" && m.Status()["a.wasm"].Signer == "late@example.com"
	})
}

func TestEachSourceFailsAlone(t *testing.T) {
	reg := newFakeRegistry()
	reg.push("localhost:5000/org/good:v1", "good")
	h := newFakeHost()
	m := newManager(t, h, reg, store(t), nil)
	m.Apply(t.Context(), parse(t, 5*time.Millisecond,
		"  - file: missing.wasm\n    source: oci://localhost:5000/org/missing:v1",
		"  - file: good.wasm\n    source: oci://localhost:5000/org/good:v1",
		"  - file: never.wasm\n    source: oci://localhost:5000/org/good:v1\n    pullPolicy: Never"))
	testenv.Eventually(t, "good to run", func() bool { return h.get("good.wasm") == "good" })
	testenv.Eventually(t, "missing to be degraded", func() bool { return m.Status()["missing.wasm"].Degraded })
	if !strings.Contains(m.Status()["missing.wasm"].LastError, "MANIFEST_UNKNOWN") {
		t.Errorf("missing = %+v", m.Status()["missing.wasm"])
	}
	// never.wasm shares good's source: once good put it in the cache, a
	// retry of never finds it there without asking the registry.
	testenv.Eventually(t, "never from the cache", func() bool { return h.get("never.wasm") == "good" && m.Status()["never.wasm"].RunningDigest != "" })
	if len(m.NotReady()) != 1 {
		t.Errorf("NotReady = %q", m.NotReady())
	}
}

func TestApplyChangesAndRemovesSources(t *testing.T) {
	reg := newFakeRegistry()
	reg.push("localhost:5000/org/a:v1", "one")
	reg.push("localhost:5000/org/a:v2", "two")
	h := newFakeHost()
	m := newManager(t, h, reg, store(t), nil)
	m.Apply(t.Context(), parse(t, time.Hour, tagModule))
	testenv.Eventually(t, "v1", func() bool { return h.get("a.wasm") == "one" })
	m.Apply(t.Context(), parse(t, time.Hour, "  - file: a.wasm\n    source: oci://localhost:5000/org/a:v2"))
	testenv.Eventually(t, "v2 after the reload", func() bool { return h.get("a.wasm") == "two" })
	m.Apply(t.Context(), parse(t, time.Hour, "  - file: other.wasm"))
	if h.get("a.wasm") != "" {
		t.Error("a removed source's plugin still runs")
	}
	if _, ok := m.Status()["a.wasm"]; ok {
		t.Error("a removed source is still reported")
	}
}

// file:// follows a file (unpinned: resolved by its bytes); https:// has
// its own test, TestHTTPSFetcher (fetch_test.go).
func TestFileAndHTTPSFetchers(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "m.wasm")
	if err := os.WriteFile(p, []byte("one"), 0o600); err != nil {
		t.Fatal(err)
	}
	f := &Fetchers{MaxBytes: 16}
	src := Source{Ref: config.SourceRef{Scheme: config.SchemeFile, Path: p}}
	d, err := f.Resolve(t.Context(), src)
	if err != nil || d != digestOf([]byte("one")) {
		t.Fatalf("Resolve = %q, %v", d, err)
	}
	if err := os.WriteFile(p, []byte("two"), 0o600); err != nil {
		t.Fatal(err)
	}
	a, err := f.Fetch(t.Context(), src, d)
	if err != nil || a.Digest != digestOf([]byte("two")) || string(a.Module) != "two" {
		t.Errorf("Fetch = %+v, %v", a, err)
	}
	pinned := Source{Ref: src.Ref, SHA256: digestOf([]byte("one"))}
	if _, err := f.Resolve(t.Context(), pinned); err == nil || !strings.Contains(err.Error(), "the config pins") {
		t.Errorf("pinned file with other bytes: %v", err)
	}
	if err := os.WriteFile(p, []byte(strings.Repeat("x", 17)), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Resolve(t.Context(), src); err == nil || !strings.Contains(err.Error(), "maxModuleSize") {
		t.Errorf("oversized file: %v", err)
	}
	if _, err := f.Resolve(t.Context(), Source{Ref: config.SourceRef{Scheme: config.SchemeOCI}}); !errors.Is(err, ErrNoOCIClient) {
		t.Errorf("oci without a client: %v", err)
	}
}

// pulls and degraded read the manager's metrics as a scrape does.
func pulls(t *testing.T, m *Manager, plugin, result string) float64 {
	return metricValue(t, m, "informer_host_plugin_source_pulls_total", map[string]string{"plugin": plugin, "result": result})
}

func degraded(t *testing.T, m *Manager, plugin string) float64 {
	return metricValue(t, m, "informer_host_plugin_source_degraded", map[string]string{"plugin": plugin})
}

func metricValue(t *testing.T, m *Manager, name string, labels map[string]string) float64 {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(m)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	next:
		for _, mt := range mf.GetMetric() {
			for _, lp := range mt.GetLabel() {
				if labels[lp.GetName()] != lp.GetValue() {
					continue next
				}
			}
			if c := mt.GetCounter(); c != nil {
				return c.GetValue()
			}
			return mt.GetGauge().GetValue()
		}
	}
	return -1
}
