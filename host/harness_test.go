package host

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"github.com/informer-host/informer-host/event"
	"github.com/informer-host/informer-host/host/internal/engine"
	"github.com/informer-host/informer-host/informer"
	"github.com/informer-host/informer-host/internal/config"
	"github.com/informer-host/informer-host/internal/seenkeys"
	"github.com/informer-host/informer-host/internal/shard"
	"github.com/informer-host/informer-host/internal/testenv"
	"github.com/informer-host/informer-host/internal/tracing"
)

// env is the package's control plane (testenv.Run); nil under -short,
// where the tests that need it skip (controlPlane).
var env *testenv.Env

func TestMain(m *testing.M) {
	// The test binary stands in for informer-host as the compile child
	// (childCompiler, compileChild below).
	if os.Getenv(compileChildEnv) == "1" && len(os.Args) > 1 && os.Args[1] == "compile" {
		os.Exit(CompileChild(context.Background(), os.Args[2:], os.Stdin, os.Stdout, os.Stderr))
	}
	if os.Getenv(lowerPriorityEnv) == "1" {
		os.Exit(reportLoweredPriority())
	}
	os.Exit(testenv.Run(m, &env))
}

// controlPlane returns the package's control plane, skipping t under
// -short, where there is none.
func controlPlane(t testing.TB) *testenv.Env {
	t.Helper()
	env.Require(t)
	return env
}

// wat assembles a WAT file (testenv.WAT).
func wat(t testing.TB, src string) []byte {
	t.Helper()
	return testenv.WAT(t, src)
}

// fixture is a conformance fixture from testdata/fixtures.
func fixture(t testing.TB, name string) []byte {
	return wat(t, filepath.Join("testdata", "fixtures", name+".wat"))
}

// testPlugin is one of the host tests' own WAT plugins in testdata/plugins.
func testPlugin(t testing.TB, name string) []byte {
	return wat(t, filepath.Join("testdata", "plugins", name+".wat"))
}

// example is an example plugin built by `make plugins`.
func example(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "build", "plugins", name+".wasm"))
	if err != nil {
		t.Fatalf("example plugin %s not built: run `make plugins` (make test does): %v", name, err)
	}
	return b
}

// delivery is one observed ih_handle call.
type observed struct {
	Type     event.EventType
	Key      string
	RV       string
	OldRV    string
	Initial  bool
	Unknown  bool
	Code     engine.Code
	Failure  engine.Kind // 0 when the call completed
	Resource string
}

func (d observed) String() string {
	if d.Type == 0 {
		return "synced " + d.Resource // an ih_synced call
	}
	s := fmt.Sprintf("%s %s", d.Type, d.Key)
	if d.Initial {
		s += " initial"
	}
	if d.Failure != 0 {
		return s + " " + d.Failure.String()
	}
	return s + " " + d.Code.String()
}

// recorder keeps every observed call, by plugin. A plugin with a gate
// has its worker held after each call until the gate is opened: the test
// decides when a "slow" plugin makes progress.
type recorder struct {
	mu      sync.Mutex
	by      map[string][]observed
	gates   map[string]chan struct{}
	blocked map[string]chan struct{} // receives each time a gated worker is held
	// uids holds, by plugin, the uid of each observed call's object, in
	// the order of by ("" for an ih_synced call).
	uids map[string][]string
	// probe, when set (before the host starts), runs on the worker after
	// each observed call, before the call's outcome is acted on; the
	// worker holds no lock then.
	probe func(plugin string, d observed)
}

// gate holds plugin's worker after every call until open is called.
func (r *recorder) gate(plugin string) (held <-chan struct{}, open func()) {
	r.mu.Lock()
	defer r.mu.Unlock()
	g, b := make(chan struct{}), make(chan struct{}, 1000)
	r.gates[plugin], r.blocked[plugin] = g, b
	return b, func() { close(g) }
}

func (r *recorder) observe(plugin string, ev *event.Event, res engine.Result, err error) {
	d := observed{Type: ev.Type, Initial: ev.IsInInitialList, Unknown: ev.FinalStateUnknown, Code: res.Code, Resource: ev.Resource.Name}
	if ev.Object != nil { // nil for an ih_synced call
		d.Key, d.RV = ev.Key(), ev.Object.GetResourceVersion()
	}
	if ev.OldObject != nil {
		d.OldRV = ev.OldObject.GetResourceVersion()
	}
	if f, ok := err.(*engine.Failure); ok {
		d.Failure = f.Kind
	} else if err != nil {
		d.Failure = -1
	}
	if r.probe != nil {
		r.probe(plugin, d)
	}
	var uid string
	if ev.Object != nil {
		uid = string(ev.Object.GetUID())
	}
	r.mu.Lock()
	r.by[plugin] = append(r.by[plugin], d)
	if r.uids == nil {
		r.uids = map[string][]string{}
	}
	r.uids[plugin] = append(r.uids[plugin], uid)
	g, b := r.gates[plugin], r.blocked[plugin]
	r.mu.Unlock()
	if g != nil {
		b <- struct{}{}
		<-g
	}
}

func (r *recorder) of(plugin string) []observed {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.by[plugin])
}

// uidsOf returns the uid of the object of each of plugin's observed
// calls, in the order of of.
func (r *recorder) uidsOf(plugin string) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.uids[plugin])
}

// strings renders a plugin's deliveries.
func (r *recorder) strings(plugin string) []string {
	var out []string
	for _, d := range r.of(plugin) {
		out = append(out, d.String())
	}
	return out
}

// logs captures log records as text for assertions.
type logs struct{ testenv.LogBuffer }

func (l *logs) lines(substr ...string) []string { return l.Lines(substr...) }

// harness is a pipeline and a host on a namespace of the test's own.
type harness struct {
	t    *testing.T
	ns   string
	dir  string
	cfg  *config.Config
	p    *informer.Pipeline
	h    *Host
	rec  *recorder
	logs *logs
	// standby starts the host as a standby (Options.Standby); set by a
	// setup function.
	standby bool
	// rest, when a setup function sets it, is the pipeline's client
	// config instead of the control plane's (a test counting requests).
	rest *rest.Config
	// writesRest, when a setup function sets it, is the plugins' writes
	// client config (k8s_write) instead of the pipeline's.
	writesRest *rest.Config
	// logRate, when a setup function sets it, is the plugins' log rate
	// (a test counting log lines).
	logRate engine.LogRate
	// pending, when a setup function sets it, lets resources the
	// apiserver does not serve yet stay pending: newHarness waits only
	// for the others to sync.
	pending bool
	// assignment, when a setup function sets it, shards the host from
	// the start: the test plays the member (Host.SetAssignment).
	assignment *shard.Assignment
	// seenKeys, when a setup function sets it, is the host's store of
	// the keys it handed (Options.SeenKeys).
	seenKeys *seenkeys.Store
	// onDeliver, when a setup function sets it, is the host's sharding
	// test hook (shardState.onDeliver), set before any plugin loads.
	onDeliver func(plugin string, ev *event.Event, a *shard.Assignment, at time.Time)
	// tracer, when a setup function sets it, traces the deliveries
	// (Options.Tracer).
	tracer *tracing.Tracer
	// cacheDir and compileChild, when a setup function sets them, are
	// Options.CacheDir and Options.CompileChild.
	cacheDir, compileChild string
}

// newHarness parses cfgYAML (with NS and DIR replaced by the test's
// namespace and plugin directory), writes plugins into the directory and
// starts the pipeline and the host; LoadDir's error is returned. setup, if
// given, runs before anything starts.
func newHarness(t *testing.T, cfgYAML string, plugins map[string][]byte, setup ...func(*harness)) (*harness, error) {
	t.Helper()
	hs := &harness{t: t, ns: controlPlane(t).Namespace(t), dir: t.TempDir(), rec: &recorder{by: map[string][]observed{}, gates: map[string]chan struct{}{}, blocked: map[string]chan struct{}{}}, logs: &logs{}}
	for name, b := range plugins {
		hs.write(name, b)
	}
	text := strings.NewReplacer("NS", hs.ns, "DIR", hs.dir).Replace(cfgYAML)
	cfg, err := config.Parse(filepath.Join(hs.dir, "config.yaml"), []byte(text))
	if err != nil {
		t.Fatalf("test config: %v", err)
	}
	hs.cfg = cfg
	for _, f := range setup {
		f(hs)
	}
	return hs, hs.start()
}

// start starts the harness's pipeline and host, and loads the plugin
// directory: newHarness calls it, and a test stopping both calls it again
// for a daemon restart.
func (hs *harness) start() error {
	t, cfg := hs.t, hs.cfg
	var err error
	log := slog.New(slog.NewTextHandler(hs.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	restConfig := env.Config
	if hs.rest != nil {
		restConfig = hs.rest
	}
	hs.p, err = informer.New(informer.Options{RESTConfig: restConfig, Logger: log, PendingRetryPeriod: 200 * time.Millisecond, Indexers: Indexers()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(hs.p.Stop)
	if err := hs.p.Apply(context.Background(), cfg.Resources); err != nil {
		t.Fatal(err)
	}
	if hs.writesRest == nil {
		hs.writesRest = restConfig
	}
	writes, err := NewWritesClient(hs.writesRest, hs.p, log)
	if err != nil {
		t.Fatal(err)
	}
	hs.h, err = New(context.Background(), Options{Pipeline: hs.p, Config: cfg, Logger: log, observe: hs.rec.observe, RESTConfig: restConfig,
		StartTimeout: time.Second, Standby: hs.standby, CacheDir: hs.cacheDir, CompileChild: hs.compileChild, Writes: writes, logRate: hs.logRate, SeenKeys: hs.seenKeys, Tracer: hs.tracer})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		hs.h.Stop(ctx)
		if t.Failed() {
			t.Logf("host log:\n%s", hs.logs.String())
		}
	})
	hs.h.shard.onDeliver = hs.onDeliver
	if hs.assignment != nil {
		hs.h.SetAssignment(hs.assignment) // before any plugin loads, as a member does
	}
	loadErr := hs.h.LoadDir(context.Background())
	// Objects the test creates from now on arrive as watch events, not as
	// part of an initial list.
	eventually(t, "the informers to sync", func() bool {
		for _, r := range hs.p.Status() {
			if !r.Synced && !(hs.pending && r.Phase == informer.PhasePending) {
				return false
			}
		}
		return true
	})
	return loadErr
}

func (hs *harness) write(name string, b []byte) {
	hs.t.Helper()
	if err := os.WriteFile(filepath.Join(hs.dir, name), b, 0o644); err != nil {
		hs.t.Fatal(err)
	}
}

func (hs *harness) status(name string) PluginStatus {
	for _, s := range hs.h.Status() {
		if s.File == name {
			return s
		}
	}
	hs.t.Fatalf("no plugin %s", name)
	return PluginStatus{}
}

func (hs *harness) createCM(name string, data map[string]string) *corev1.ConfigMap {
	hs.t.Helper()
	cm, err := env.Client.CoreV1().ConfigMaps(hs.ns).Create(context.Background(),
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}, Data: data}, metav1.CreateOptions{})
	if err != nil {
		hs.t.Fatal(err)
	}
	return cm
}

func (hs *harness) updateCM(cm *corev1.ConfigMap, k, v string) *corev1.ConfigMap {
	hs.t.Helper()
	cm = cm.DeepCopy()
	if cm.Data == nil {
		cm.Data = map[string]string{}
	}
	cm.Data[k] = v
	out, err := env.Client.CoreV1().ConfigMaps(hs.ns).Update(context.Background(), cm, metav1.UpdateOptions{})
	if err != nil {
		hs.t.Fatal(err)
	}
	return out
}

func (hs *harness) deleteCM(name string) {
	hs.t.Helper()
	if err := env.Client.CoreV1().ConfigMaps(hs.ns).Delete(context.Background(), name, metav1.DeleteOptions{}); err != nil {
		hs.t.Fatal(err)
	}
}

// eventually polls cond (testenv.Eventually).
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	testenv.Eventually(t, what, cond)
}
