package pluginsource

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
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
	writeFile(t, filepath.Join(dir, "key.pem"), "k")
	return parseIn(t, dir, every, modules...)
}

// parseIn is parse with the config file in dir, beside the key files the
// test put there.
func parseIn(t *testing.T, dir string, every time.Duration, modules ...string) *config.Config {
	t.Helper()
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
	return newManagerWith(t, Options{Host: h, Fetcher: f, Store: store, Verifier: v, RetryBase: time.Millisecond, RetryMax: 20 * time.Millisecond})
}

func newManagerWith(t *testing.T, o Options) *Manager {
	t.Helper()
	m, err := New(o)
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
	if r := running(m, "b.wasm"); !r.Verified || r.Signer != "ci@example.com" {
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
		return h.get("a.wasm") == "unsigned" && h.get("c.wasm") == "unsigned" && running(m, "a.wasm").Signer == "late@example.com"
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
	// The host runs a version a moment before the manager's status says
	// so: wait for the status, not for the host.
	testenv.Eventually(t, "only missing.wasm not ready", func() bool { return len(m.NotReady()) == 1 })
	if why := m.NotReady(); !strings.Contains(why[0], "missing.wasm") {
		t.Errorf("NotReady = %q", why)
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

// runningJSON is Status.Running as /debug/plugins serves it; read through
// JSON so that a test says what the document shows.
type runningJSON struct {
	Digest   string `json:"digest"`
	Source   string `json:"source"`
	Verified bool   `json:"verified"`
	Signer   string `json:"signer"`
}

// running returns what the status says of the version running (zero when
// it says none runs).
func running(m *Manager, plugin string) runningJSON {
	b, err := json.Marshal(m.Status()[plugin])
	if err != nil {
		panic(err)
	}
	var doc struct {
		Running runningJSON `json:"running"`
	}
	_ = json.Unmarshal(b, &doc)
	return doc.Running
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

// keyVerifier verifies a digest when one of the policy's key files holds
// a key that signed it, comparing the files' bytes as sigverify compares
// the keys they hold: a key file replaced under the same name is another
// key.
type keyVerifier struct {
	mu     sync.Mutex
	signed map[string][]string // digest -> contents of the keys that signed it
	of     map[string]int      // calls by digest
}

func newKeyVerifier() *keyVerifier {
	return &keyVerifier{signed: map[string][]string{}, of: map[string]int{}}
}

func (v *keyVerifier) sign(digest, key string) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.signed[digest] = append(v.signed[digest], key)
}

func (v *keyVerifier) calls(digest string) int {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.of[digest]
}

func (v *keyVerifier) Verify(_ context.Context, p config.Verify, _ string, digest string) (VerifyResult, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.of[digest]++
	for _, k := range p.Keys {
		b, err := os.ReadFile(k)
		if err != nil {
			return VerifyResult{}, err
		}
		for _, s := range v.signed[digest] {
			if s == string(b) {
				return VerifyResult{Verified: true, Signer: "key " + filepath.Base(k)}, nil
			}
		}
	}
	return VerifyResult{Reason: "no signature verifies with the policy's keys"}, nil
}

const (
	requiredOld = "    verify: {required: true, keys: [old.pem]}"
	requiredNew = "    verify: {required: true, keys: [new.pem]}"
)

// A policy change and the cache: the cache's last good record says under which
// policy (by the keys' content) it was verified, and a restart starts
// from it only under that policy. A second plugin of the same source
// under another policy, and the same plugin after its key file was
// replaced, verify afresh and are refused.
func TestCachedVersionIsTrustedOnlyUnderItsPolicy(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "old.pem"), "old key")
	writeFile(t, filepath.Join(dir, "new.pem"), "new key")
	reg, v, st := newFakeRegistry(), newKeyVerifier(), store(t)
	d1 := reg.push("localhost:5000/org/a:v1", "module one")
	v.sign(d1, "old key")
	a := tagModule + "\n" + requiredOld
	b := "  - file: b.wasm\n    source: oci://localhost:5000/org/a:v1\n" + requiredNew
	{
		h := newFakeHost()
		m := newManager(t, h, reg, st, v)
		m.Apply(t.Context(), parseIn(t, dir, 5*time.Millisecond, a))
		testenv.Eventually(t, "a to run", func() bool { return h.get("a.wasm") == "module one" && m.Status()["a.wasm"].RunningDigest == d1 })
		m.Stop()
	}

	// Restarted with b beside a: a's policy is the record's, b's is not.
	h := newFakeHost()
	m := newManager(t, h, reg, st, v)
	m.Apply(t.Context(), parseIn(t, dir, 5*time.Millisecond, a, b))
	if h.get("a.wasm") != "module one" {
		t.Fatalf("a was not started from the cache under the policy it was verified under")
	}
	if h.get("b.wasm") != "" {
		t.Fatalf("b started from a cache record verified under another policy (old.pem, not new.pem)")
	}
	testenv.Eventually(t, "b to be refused", func() bool {
		return strings.Contains(m.Status()["b.wasm"].LastError, "not verified") && pulls(t, m, "b.wasm", "failed") >= 2
	})
	if h.get("b.wasm") != "" || m.Status()["b.wasm"].RunningDigest != "" || running(m, "b.wasm").Digest != "" {
		t.Errorf("b runs a version its policy refuses: %+v", m.Status()["b.wasm"])
	}
	m.Stop()

	// old.pem replaced in place (the old key leaked): the record was
	// verified under the key the file held then.
	writeFile(t, filepath.Join(dir, "old.pem"), "replacement key")
	h = newFakeHost()
	m = newManager(t, h, reg, st, v)
	m.Apply(t.Context(), parseIn(t, dir, 5*time.Millisecond, a))
	if h.get("a.wasm") != "" {
		t.Fatalf("a started from the cache after its key file was replaced")
	}
	testenv.Eventually(t, "a to be refused under the replaced key", func() bool {
		return strings.Contains(m.Status()["a.wasm"].LastError, "not verified") && pulls(t, m, "a.wasm", "failed") >= 2
	})
	if h.get("a.wasm") != "" {
		t.Error("a runs under a key that never signed it")
	}
	m.Stop()

	// Not required: it may start from the cache, but the status does not
	// call it verified until the current policy says so, and the
	// "unchanged" refreshes do not skip that.
	h = newFakeHost()
	m = newManager(t, h, reg, st, v)
	before := v.calls(d1)
	m.Apply(t.Context(), parseIn(t, dir, 5*time.Millisecond, tagModule+"\n    verify: {required: false, keys: [new.pem]}"))
	if h.get("a.wasm") != "module one" {
		t.Fatal("not required: the cached version did not start")
	}
	testenv.Eventually(t, "the running version verified under new.pem", func() bool {
		return v.calls(d1) > before && pulls(t, m, "a.wasm", "unchanged") >= 2
	})
	if r := running(m, "a.wasm"); r.Digest != d1 || r.Verified || r.Signer != "" {
		t.Errorf("running = %+v; want d1, not verified (new.pem never signed it)", r)
	}
}

// A reloaded policy: a reload that changes the policy (another key
// file, or the same file with another key) re-verifies the running
// version; under verify.required one the new policy refuses is unloaded,
// not kept running as verified, and readiness says so.
func TestReloadedPolicyRechecksTheRunningVersion(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "old.pem"), "old key")
	writeFile(t, filepath.Join(dir, "new.pem"), "new key")
	reg, v := newFakeRegistry(), newKeyVerifier()
	d1 := reg.push("localhost:5000/org/a:v1", "module one")
	v.sign(d1, "old key")
	h := newFakeHost()
	m := newManager(t, h, reg, store(t), v)
	m.Apply(t.Context(), parseIn(t, dir, 5*time.Millisecond, tagModule+"\n"+requiredOld))
	testenv.Eventually(t, "a to run", func() bool { return h.get("a.wasm") == "module one" && m.Status()["a.wasm"].RunningDigest == d1 })

	m.Apply(t.Context(), parseIn(t, dir, 5*time.Millisecond, tagModule+"\n"+requiredNew))
	testenv.Eventually(t, "the revoked version to be unloaded", func() bool { return h.get("a.wasm") == "" && m.Status()["a.wasm"].Degraded })
	st := m.Status()["a.wasm"]
	if r := running(m, "a.wasm"); r.Verified || r.Digest != "" || st.RunningDigest != "" || !st.Degraded || !strings.Contains(st.LastError, "not verified") {
		t.Errorf("after the reload: status %+v, running %+v", st, r)
	}
	if why := m.NotReady(); len(why) != 1 || !strings.Contains(why[0], "a.wasm") {
		t.Errorf("NotReady = %q", why)
	}

	// Signed with the new key: it runs again.
	v.sign(d1, "new key")
	testenv.Eventually(t, "a to run under new.pem", func() bool {
		return h.get("a.wasm") == "module one" && running(m, "a.wasm").Signer == "key new.pem"
	})

	// new.pem replaced in place and the same config reloaded: the file's
	// key is another one.
	writeFile(t, filepath.Join(dir, "new.pem"), "another key")
	m.Apply(t.Context(), parseIn(t, dir, 5*time.Millisecond, tagModule+"\n"+requiredNew))
	testenv.Eventually(t, "unloaded after the key file changed", func() bool { return h.get("a.wasm") == "" })
	if r := running(m, "a.wasm"); r.Verified {
		t.Errorf("running = %+v", r)
	}

	// Not required: the version keeps running, reported unverified.
	writeFile(t, filepath.Join(dir, "new.pem"), "new key")
	m.Apply(t.Context(), parseIn(t, dir, 5*time.Millisecond, tagModule+"\n"+requiredNew))
	testenv.Eventually(t, "a back", func() bool { return running(m, "a.wasm").Verified })
	m.Apply(t.Context(), parseIn(t, dir, 5*time.Millisecond, tagModule+"\n    verify: {required: false, keys: [old.pem, new.pem]}"))
	writeFile(t, filepath.Join(dir, "unused.pem"), "unused")
	m.Apply(t.Context(), parseIn(t, dir, 5*time.Millisecond, tagModule+"\n    verify: {required: false, keys: [unused.pem]}"))
	testenv.Eventually(t, "reported unverified", func() bool { r := running(m, "a.wasm"); return r.Digest == d1 && !r.Verified })
	if h.get("a.wasm") != "module one" {
		t.Error("not required: the running version was unloaded")
	}
}

// A refusal's retry, and the unsigned tag signed later: a refusal is
// retried within the refresh interval, however far the backoff has
// grown.
func TestRefusalIsRetriedWithinTheRefreshInterval(t *testing.T) {
	reg := newFakeRegistry()
	d1 := reg.push("localhost:5000/org/a:v1", "unsigned")
	v := &fakeVerifier{signed: map[string]string{}}
	h := newFakeHost()
	m := newManagerWith(t, Options{Host: h, Fetcher: reg, Store: store(t), Verifier: v, RetryBase: time.Hour, RetryMax: time.Hour})
	m.Apply(t.Context(), parse(t, 5*time.Millisecond, tagModule, "    verify: {required: true, keys: [key.pem]}"))
	testenv.Eventually(t, "three refusals", func() bool { return pulls(t, m, "a.wasm", "failed") >= 3 })
	if st := m.Status()["a.wasm"]; st.NextRetry.After(time.Now().Add(time.Minute)) {
		t.Errorf("next retry at %s, past the refresh interval", st.NextRetry)
	}
	v.mu.Lock()
	v.signed[d1] = "late@example.com"
	v.mu.Unlock()
	testenv.Eventually(t, "the module signed late to run", func() bool { return h.get("a.wasm") == "unsigned" })
}

// With pullPolicy: Never the log says that the registry is not asked,
// not that the source is refreshed.
func TestNeverSaysItDoesNotRefresh(t *testing.T) {
	reg, st := newFakeRegistry(), store(t)
	reg.push("localhost:5000/org/a:v1", "module one")
	{
		h := newFakeHost()
		m := newManager(t, h, reg, st, nil)
		m.Apply(t.Context(), parse(t, 5*time.Millisecond, tagModule))
		testenv.Eventually(t, "cached", func() bool { return h.get("a.wasm") == "module one" })
		m.Stop()
	}
	var logs testenv.LogBuffer
	h := newFakeHost()
	m := newManagerWith(t, Options{Host: h, Fetcher: reg, Store: st, Logger: slog.New(slog.NewTextHandler(&logs, nil)),
		RetryBase: time.Millisecond, RetryMax: 20 * time.Millisecond})
	m.Apply(t.Context(), parse(t, time.Hour, tagModule+"\n    pullPolicy: Never"))
	lines := logs.Lines("source cache")
	if len(lines) != 1 || strings.Contains(lines[0], "refreshing") || !strings.Contains(lines[0], "pullPolicy Never") {
		t.Errorf("log: %q", logs.String())
	}
}

// Under verify.required with the registry down, a cached version whose
// signature no current verification vouches for is verified where it is
// (signatures a bundle brought); when that cannot be done, the error says
// so and what to do, not only "connection refused".
func TestRequiredCachedVersionWithTheRegistryDown(t *testing.T) {
	reg, st := newFakeRegistry(), store(t)
	d1 := reg.push("localhost:5000/org/a:v1", "module one")
	{
		h := newFakeHost()
		m := newManager(t, h, reg, st, nil)
		m.Apply(t.Context(), parse(t, 5*time.Millisecond, tagModule))
		testenv.Eventually(t, "cached", func() bool { return h.get("a.wasm") == "module one" })
		m.Stop()
	}
	reg.setDown(true)
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "new.pem"), "new key")
	v := newKeyVerifier()
	h := newFakeHost()
	m := newManager(t, h, reg, st, v)
	m.Apply(t.Context(), parseIn(t, dir, 5*time.Millisecond, tagModule+"\n"+requiredNew))
	testenv.Eventually(t, "refused", func() bool { return m.Status()["a.wasm"].Degraded })
	e := m.Status()["a.wasm"].LastError
	for _, want := range []string{d1, "no signature", "bundle save", "connection refused"} {
		if !strings.Contains(e, want) {
			t.Errorf("lastError %q does not say %q", e, want)
		}
	}
	if h.get("a.wasm") != "" {
		t.Fatal("an unverified cached version runs under verify.required")
	}
	// The signature is at hand (a bundle carried it): the cached version
	// starts though the registry is still down.
	v.sign(d1, "new key")
	testenv.Eventually(t, "the cached version verified offline to run", func() bool {
		return h.get("a.wasm") == "module one" && running(m, "a.wasm").Verified
	})
}

// After a config edit points a running plugin at another source that is
// refused, the status tells the version running (and where it came from,
// and that it verified) apart from the source as configured, and
// readiness says that the configured source is not what runs.
func TestStatusTellsTheRunningVersionFromTheConfiguredSource(t *testing.T) {
	reg := newFakeRegistry()
	d1 := reg.push("localhost:5000/org/a:v1", "signed")
	reg.push("localhost:5000/org/a:v2", "unsigned")
	v := &fakeVerifier{signed: map[string]string{d1: "ci@example.com"}}
	h := newFakeHost()
	m := newManager(t, h, reg, store(t), v)
	policy := "    verify: {required: true, keys: [key.pem]}"
	m.Apply(t.Context(), parse(t, 5*time.Millisecond, tagModule, policy))
	testenv.Eventually(t, "v1 to run", func() bool { return running(m, "a.wasm").Verified })
	m.Apply(t.Context(), parse(t, 5*time.Millisecond, "  - file: a.wasm\n    source: oci://localhost:5000/org/a:v2", policy))
	testenv.Eventually(t, "v2 refused", func() bool { return m.Status()["a.wasm"].Degraded })
	b, err := json.Marshal(m.Status()["a.wasm"])
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	if doc["source"] != "oci://localhost:5000/org/a:v2" {
		t.Errorf("source = %v, want the configured one", doc["source"])
	}
	if _, ok := doc["verified"]; ok {
		t.Errorf("the configured source is said verified or not beside the version running: %s", b)
	}
	if r := running(m, "a.wasm"); r.Digest != d1 || r.Source != "oci://localhost:5000/org/a:v1" || !r.Verified || r.Signer != "ci@example.com" {
		t.Errorf("running = %+v in %s", r, b)
	}
	if why := m.NotReady(); len(why) != 1 || !strings.Contains(why[0], "org/a:v2") || !strings.Contains(why[0], "org/a:v1") {
		t.Errorf("NotReady = %q", why)
	}
}

// Secrets in a source, the manager's side: an https:// source's user
// info and query (credentials, a pre-signed URL) appear nowhere the
// manager shows the source.
func TestSourceSecretsAreNotShown(t *testing.T) {
	var logs testenv.LogBuffer
	h := newFakeHost()
	// A fetcher whose error quotes the URL as given, as net/http's
	// does with the query: the manager does not repeat it.
	m := newManagerWith(t, Options{Host: h, Fetcher: echoingFetcher{}, Store: store(t), Logger: slog.New(slog.NewTextHandler(&logs, nil)),
		RetryBase: time.Millisecond, RetryMax: 20 * time.Millisecond})
	m.Apply(t.Context(), parse(t, 5*time.Millisecond,
		"  - file: a.wasm\n    source: https://user:hunter2@example.com/m.wasm?X-Amz-Signature=s3cret\n    sha256: sha256:"+strings.Repeat("ab", 32)))
	testenv.Eventually(t, "failures", func() bool { return pulls(t, m, "a.wasm", "failed") >= 2 })
	b, _ := json.Marshal(m.Status())
	shown := map[string]string{"status": string(b), "NotReady": strings.Join(m.NotReady(), "\n"), "log": logs.String()}
	for where, s := range shown {
		for _, secret := range []string{"hunter2", "s3cret", "user:"} {
			if strings.Contains(s, secret) {
				t.Errorf("%s shows %q: %s", where, secret, s)
			}
		}
	}
	if st := m.Status()["a.wasm"]; !strings.Contains(st.Source, "https://example.com/m.wasm") {
		t.Errorf("source = %q", st.Source)
	}
}

// echoingFetcher fails every fetch with an error that quotes the source.
type echoingFetcher struct{}

func (echoingFetcher) Resolve(_ context.Context, src Source) (string, error) {
	return "", fmt.Errorf("Get %q: dial tcp: connection refused", src.Ref.Raw)
}

func (echoingFetcher) Fetch(_ context.Context, src Source, _ string) (Artifact, error) {
	return Artifact{}, fmt.Errorf("Get %q: dial tcp: connection refused", src.Ref.Raw)
}

// The forms a source's secrets take in others' messages are scrubbed.
func TestScrubSource(t *testing.T) {
	raw := "https://bob:pa55word@example.com/m.wasm?sig=a%2Fb&exp=1"
	for _, msg := range []string{
		`Get "` + raw + `": EOF`,
		`Get "https://bob:***@example.com/m.wasm?sig=a%2Fb&exp=1": EOF`,
		`token sig=a/b&exp=1 refused for pa55word`,
	} {
		got := scrubSource(raw, msg)
		for _, secret := range []string{"pa55word", "bob:", "sig=a", "exp=1"} {
			if strings.Contains(got, secret) {
				t.Errorf("scrubSource(%q) = %q: still has %q", msg, got, secret)
			}
		}
	}
	if got := scrubSource("oci://r/x:v1", "resolve oci://r/x:v1: EOF"); got != "resolve oci://r/x:v1: EOF" {
		t.Errorf("an oci:// source's message changed: %q", got)
	}
}

// blockingVerifier verifies everything until told to block, then waits
// for its caller to give up.
type blockingVerifier struct {
	mu      sync.Mutex
	block   bool
	waiting chan struct{} // closed when a call first blocks
	once    sync.Once
}

func (v *blockingVerifier) Verify(ctx context.Context, _ config.Verify, _ string, _ string) (VerifyResult, error) {
	v.mu.Lock()
	block := v.block
	v.mu.Unlock()
	if !block {
		return VerifyResult{Verified: true, Signer: "k"}, nil
	}
	v.once.Do(func() { close(v.waiting) })
	<-ctx.Done()
	return VerifyResult{}, ctx.Err()
}

// recheckUnderNewKey runs a.wasm verified under old.pem, then reloads
// to new.pem with a verifier that blocks, and returns once the re-check
// of the running version has begun.
func recheckUnderNewKey(t *testing.T) (*Manager, *fakeHost) {
	t.Helper()
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "old.pem"), "old key")
	writeFile(t, filepath.Join(dir, "new.pem"), "new key")
	reg := newFakeRegistry()
	reg.push("localhost:5000/org/a:v1", "module one")
	v := &blockingVerifier{waiting: make(chan struct{})}
	h := newFakeHost()
	m := newManager(t, h, reg, store(t), v)
	m.Apply(t.Context(), parseIn(t, dir, 5*time.Millisecond, tagModule+"\n"+requiredOld))
	testenv.Eventually(t, "a to run verified", func() bool { return h.get("a.wasm") == "module one" && running(m, "a.wasm").Verified })
	v.mu.Lock()
	v.block = true
	v.mu.Unlock()
	m.Apply(t.Context(), parseIn(t, dir, 5*time.Millisecond, tagModule+"\n"+requiredNew))
	<-v.waiting
	return m, h
}

// A stop while the running version is verified again under a changed
// policy is no answer: the version is not unloaded for it.
func TestStopDuringRecheckKeepsTheRunningVersion(t *testing.T) {
	m, h := recheckUnderNewKey(t)
	m.Stop()
	if h.get("a.wasm") != "module one" {
		t.Error("stopping the manager while it verified the running version unloaded it")
	}
}

// While the running version is verified again under a changed policy,
// its status does not claim the old policy's verification.
func TestStatusDuringRecheckIsNotVerified(t *testing.T) {
	m, _ := recheckUnderNewKey(t)
	if r := running(m, "a.wasm"); r.Verified || r.Signer != "" || r.Digest == "" {
		t.Errorf("under new.pem, not yet verified under it, the status says running=%+v", r)
	}
	m.Stop()
}
