package engine

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/informer-host/informer-host/event"
)

// The example plugins and the Go fixture are built by the tests
// themselves (they are slow to build, so not in -short mode).
type builtPlugins struct {
	once sync.Once
	dir  string
	errs map[string]error
}

var examples builtPlugins

func (b *builtPlugins) get(t testing.TB, name string) []byte {
	t.Helper()
	if testing.Short() {
		t.Skip("builds the example plugins and compiles them, minutes of it, which -short leaves out")
	}
	b.once.Do(func() { b.build() })
	if err := b.errs[name]; err != nil {
		t.Fatalf("building %s: %v", name, err)
	}
	wasm, err := os.ReadFile(filepath.Join(b.dir, name+".wasm"))
	if err != nil {
		t.Fatalf("%s not built (clang for wasm32-wasi and wat2wasm are needed: apt-get install clang lld wasi-libc libclang-rt-14-dev-wasm32 wabt): %v", name, err)
	}
	return wasm
}

func (b *builtPlugins) build() {
	b.errs = map[string]error{}
	dir, err := os.MkdirTemp("", "engine-examples-")
	if err != nil {
		b.errs["*"] = err
		return
	}
	b.dir = dir
	run := func(name string, cmd *exec.Cmd) {
		if out, err := cmd.CombinedOutput(); err != nil {
			b.errs[name] = errors.New(err.Error() + "\n" + string(out))
		}
	}
	goBuild := func(name, pkg string) {
		cmd := exec.Command("go", "build", "-buildmode=c-shared", "-o", filepath.Join(dir, name+".wasm"), pkg)
		cmd.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm")
		run(name, cmd)
	}
	goBuild("pod-logger", "../../../plugins/examples/pod-logger")
	goBuild("pod-phases", "../../../plugins/examples/pod-phases")
	goBuild("gofail", "../../testdata/fixtures/gofail")
	goBuild("gostate", "../../testdata/fixtures/gostate")
	if clang, err := exec.LookPath(envOr("CLANG", "clang")); err != nil {
		b.errs["counter-c"], b.errs["creactor"] = err, err
	} else {
		run("counter-c", exec.Command(clang, "--target=wasm32-wasi", "--sysroot="+envOr("WASI_SYSROOT", "/usr"),
			"-mexec-model=reactor", "-Oz", "-I../../../abi/include", "-Wl,--strip-debug",
			"-o", filepath.Join(dir, "counter-c.wasm"), "../../../plugins/examples/counter-c/counter.c"))
		run("creactor", exec.Command(clang, "--target=wasm32-wasi", "--sysroot="+envOr("WASI_SYSROOT", "/usr"),
			"-mexec-model=reactor", "-Oz", "-I../../../abi/include", "-Wl,--strip-debug",
			"-o", filepath.Join(dir, "creactor.wasm"), "../../testdata/fixtures/creactor.c"))
	}
	if wat, err := exec.LookPath(envOr("WAT2WASM", "wat2wasm")); err != nil {
		b.errs["minimal-wat"] = err
	} else {
		run("minimal-wat", exec.Command(wat, "-o", filepath.Join(dir, "minimal-wat.wasm"), "../../../plugins/examples/minimal-wat/minimal.wat"))
	}
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

func deleteEvent(o *unstructured.Unstructured, unknown bool) *Envelope {
	return NewEnvelope(&event.Event{Type: event.EventDelete, Resource: podsRef, Object: o, FinalStateUnknown: unknown})
}

func listEvent(o *unstructured.Unstructured) *Envelope {
	return NewEnvelope(&event.Event{Type: event.EventAdd, Resource: podsRef, Object: o, IsInInitialList: true})
}

// TestExamples runs every example plugin on the same event sequence.
func TestExamples(t *testing.T) {
	events := []*Envelope{
		listEvent(pod("shop", "web-0", "Running")),
		listEvent(pod("shop", "web-1", "Pending")),
		addEvent(pod("", "node-agent", "Running")),
		updateEvent(pod("shop", "web-1", "Pending"), pod("shop", "web-1", "Running")),
		updateEvent(pod("shop", "web-0", "Running"), pod("shop", "web-0", "Running")),
		deleteEvent(pod("shop", "web-0", "Running"), false),
		deleteEvent(pod("shop", "web-1", "Pending"), true), // stale: it was Running
	}
	tests := []struct {
		name   string
		config string
		want   []string
	}{
		{name: "pod-logger", want: []string{
			`msg="pod listed: shop/web-0 phase=Running"`,
			`msg="pod added: node-agent phase=Running"`,
			`msg="pod updated: shop/web-1 phase=Running (was Pending)"`,
			`msg="pod updated: shop/web-0 phase=Running rv=42"`,
			`msg="pod deleted: shop/web-1 phase=Pending (missed by the watch; last known state)"`,
		}},
		{name: "pod-phases", config: `{"logEvery":1}`, want: []string{
			`msg="initial list of pods handled: 2 pods in 1 namespaces"`,
			`msg="namespace shop: Running=1"`,
			`msg="namespace shop: Pending=1 Running=1"`,
			`msg="namespace (cluster): Running=1"`,
			`msg="namespace shop: Running=2"`,
			`msg="namespace shop: no pods"`,
			`msg="final: namespace (cluster): Running=1"`,
		}},
		{name: "counter-c", want: []string{
			`msg="add shop/web-0: add=1 update=0 delete=0"`,
			`msg="delete shop/web-1: add=3 update=2 delete=2"`,
		}},
		{name: "minimal-wat", want: []string{
			`msg="add web-0"`, `msg="update web-1"`, `msg="delete web-1"`,
		}},
	}
	e := newEngine(t, Options{CacheDir: t.TempDir()})
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			wasm := examples.get(t, tc.name)
			m, err := e.Load(context.Background(), tc.name+".wasm", wasm, Limits{CallTimeout: time.Minute, MemoryPages: 1024})
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close(context.Background())
			logs := &logBuffer{}
			i, err := m.Instantiate(context.Background(), InstanceOptions{Config: []byte(tc.config), Logger: newLogger(logs)})
			if err != nil {
				t.Fatal(err)
			}
			defer i.Close(context.Background())
			for n, ev := range events {
				r, err := i.Handle(context.Background(), ev)
				if err != nil || r.Code != CodeOK {
					t.Fatalf("handle: %v %+v\n%s", err, r, logs)
				}
				if n == 1 { // the initial list is in: ih_synced, for plugins that export it
					if _, err := i.Synced(context.Background(), podsRef); err != nil {
						t.Fatal(err)
					}
				}
			}
			if err := i.Shutdown(context.Background()); err != nil {
				t.Fatal(err)
			}
			out := logs.String()
			for _, w := range tc.want {
				if !strings.Contains(out, w) {
					t.Errorf("log lacks %s:\n%s", w, out)
				}
			}
		})
	}
}

// TestPodPhasesRestart checks what a plugin sees across a restart: a fresh
// instance, init again, then the cache replayed as initial-list adds.
func TestPodPhasesRestart(t *testing.T) {
	wasm := examples.get(t, "pod-phases")
	e := newEngine(t, Options{})
	m, err := e.Load(context.Background(), "pod-phases.wasm", wasm, Limits{CallTimeout: time.Minute, MemoryPages: 1024})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close(context.Background())
	logs := &logBuffer{}
	for round := 0; round < 2; round++ {
		i, err := m.Instantiate(context.Background(), InstanceOptions{Config: []byte(`{"logEvery":2}`), Logger: newLogger(logs)})
		if err != nil {
			t.Fatal(err)
		}
		for _, ev := range []*Envelope{listEvent(pod("a", "p1", "Running")), listEvent(pod("a", "p2", "Failed"))} {
			if _, err := i.Handle(context.Background(), ev); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := i.Synced(context.Background(), podsRef); err != nil { // pod-phases logs once its initial list is in
			t.Fatal(err)
		}
		i.Close(context.Background())
	}
	if n := logs.count(`msg="namespace a: Failed=1 Running=1"`); n != 2 {
		t.Errorf("counts logged %d times, want once per round (logEvery 2):\n%s", n, logs)
	}
	// Bad configurations are refused with the plugin's reason.
	for cfg, want := range map[string]string{
		`{"logEvery":0}`: "logEvery must be at least 1",
		`{"every":1}`:    `unknown field "every"`,
	} {
		_, err := m.Instantiate(context.Background(), InstanceOptions{Config: []byte(cfg)})
		if !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), want) {
			t.Errorf("config %s: %v", cfg, err)
		}
	}
}

// TestGoFailures classifies a Go plugin's own ways to fail.
func TestGoFailures(t *testing.T) {
	wasm := examples.get(t, "gofail")
	tests := []struct {
		mode   string
		limits Limits
		kind   Kind   // 0: no failure
		want   string // in the error, or in the logs when kind is 0
	}{
		{mode: "args", limits: Limits{CallTimeout: time.Minute}, want: `msg="args=gofail.wasm prog=gofail.wasm"`},
		{mode: "panic", limits: Limits{CallTimeout: time.Minute}, want: "panic: handler panic for web-0"},
		// The kit recovers a runtime error too; its message and the
		// trace it writes to stderr name the line (goPanicSites).
		{mode: "nilmap", limits: Limits{CallTimeout: time.Minute}, want: "panic: assignment to entry in nil map ("},
		// Go's runtime aborts a wasmexport call with unreachable after printing the panic.
		{mode: "goexit", limits: Limits{CallTimeout: time.Minute}, kind: KindTrap, want: "trap: unreachable"},
		{mode: "exit", limits: Limits{CallTimeout: time.Minute}, kind: KindTrap, want: "exited with code 7"},
		{mode: "oom", limits: Limits{CallTimeout: time.Minute, MemoryPages: 1024}, kind: KindMemory, want: "of 1024 pages"},
		{mode: "sleep", limits: Limits{CallTimeout: 100 * time.Millisecond}, kind: KindTimeout, want: "exceeded its 100ms limit"},
	}
	e := newEngine(t, Options{})
	for _, tc := range tests {
		t.Run(tc.mode, func(t *testing.T) {
			m, err := e.Load(context.Background(), "gofail.wasm", wasm, tc.limits)
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close(context.Background())
			logs := &logBuffer{}
			i, err := m.Instantiate(context.Background(), InstanceOptions{Config: []byte(tc.mode), Logger: newLogger(logs)})
			if err != nil {
				t.Fatal(err)
			}
			defer i.Close(context.Background())
			r, err := i.Handle(context.Background(), addEvent(pod("shop", "web-0", "Running")))
			if tc.kind == 0 {
				if err != nil {
					t.Fatal(err)
				}
				if !strings.Contains(logs.String()+r.Message, tc.want) {
					t.Fatalf("want %q; result %+v, logs:\n%s", tc.want, r, logs)
				}
				return
			}
			var f *Failure
			if !errors.As(err, &f) || f.Kind != tc.kind || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v (%+v), want %v containing %q", err, f, tc.kind, tc.want)
			}
			if tc.mode == "oom" && !strings.HasPrefix(f.Output, "fatal error: out of memory\n") {
				t.Errorf("the fatal error is not the failure's headline: %q", f.Output)
			}
			if tc.mode == "goexit" && !strings.Contains(f.Output, "goroutine panic") {
				t.Errorf("the panic message is not in the failure's output: %q", f.Output)
			}
		})
	}
}

// TestGoPanicSites: a Go plugin's panic is reported with the file and
// line that raised it, whether the kit recovers it (the handler's
// goroutine: an ERROR answer whose message names the line, and the
// goroutine trace in the plugin's log) or Go's runtime ends the call (a
// goroutine's: the failure carries the runtime's whole report and the
// wasm stack with Go's function names).
func TestGoPanicSites(t *testing.T) {
	wasm := examples.get(t, "gofail")
	src, err := os.ReadFile("../../testdata/fixtures/gofail/main.go")
	if err != nil {
		t.Fatal(err)
	}
	// lineOf is the line of gofail's source that holds marker.
	lineOf := func(marker string) string {
		for i, l := range strings.Split(string(src), "\n") {
			if strings.Contains(l, marker) && !strings.HasPrefix(strings.TrimSpace(l), "//") {
				return "main.go:" + strconv.Itoa(i+1)
			}
		}
		t.Fatalf("no line %q in gofail's source", marker)
		return ""
	}
	e := newEngine(t, Options{})
	m, err := e.Load(context.Background(), "gofail.wasm", wasm, Limits{CallTimeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close(context.Background())
	for _, tc := range []struct {
		mode, site string
		recovered  bool
		stackFunc  string // in the wasm stack (a failure)
	}{
		{mode: "nilmap", site: lineOf("// nilMapSite"), recovered: true},
		{mode: "goexit", site: lineOf(`panic("goroutine panic")`), stackFunc: "main.init.0.func2.1"},
	} {
		t.Run(tc.mode, func(t *testing.T) {
			logs := &logBuffer{}
			i, err := m.Instantiate(context.Background(), InstanceOptions{Config: []byte(tc.mode), Logger: newLogger(logs)})
			if err != nil {
				t.Fatal(err)
			}
			defer i.Close(context.Background())
			r, err := i.Handle(context.Background(), addEvent(pod("shop", "web-0", "Running")))
			if tc.recovered {
				if err != nil || r.Code != CodeError || !strings.Contains(r.Message, tc.site+" in main.assignNil)") {
					t.Errorf("result %+v, %v: want an error naming %s", r, err, tc.site)
				}
				if !strings.Contains(logs.String(), "goroutine ") || !strings.Contains(logs.String(), tc.site) {
					t.Errorf("the goroutine trace naming %s is not in the log:\n%s", tc.site, logs)
				}
				return
			}
			var f *Failure
			if !errors.As(err, &f) {
				t.Fatalf("got %v, want a failure", err)
			}
			if !strings.Contains(f.Output, tc.site) || !strings.Contains(f.Stack, tc.stackFunc) {
				t.Errorf("failure without %s in its output or %s in its stack:\noutput:\n%s\nstack:\n%s", tc.site, tc.stackFunc, f.Output, f.Stack)
			}
		})
	}
}

// TestCReactor checks a C reactor: _initialize (C constructors) runs before
// ih_init, which reads its configuration.
func TestCReactor(t *testing.T) {
	wasm := examples.get(t, "creactor")
	e := newEngine(t, Options{})
	for _, limits := range []Limits{{CallTimeout: time.Minute}, {}} {
		m, err := e.Load(context.Background(), "creactor.wasm", wasm, limits)
		if err != nil {
			t.Fatal(err)
		}
		logs := &logBuffer{}
		i, err := m.Instantiate(context.Background(), InstanceOptions{Config: []byte("hello"), Logger: newLogger(logs)})
		if err != nil {
			t.Fatal(err)
		}
		if r, err := i.Handle(context.Background(), addEvent(pod("a", "b", ""))); err != nil || r.Code != CodeOK {
			t.Fatal(err, r)
		}
		if !strings.Contains(logs.String(), `msg="ctor=1 config=hello"`) {
			t.Errorf("logs:\n%s", logs)
		}
		_, err = m.Instantiate(context.Background(), InstanceOptions{Config: []byte(strings.Repeat("x", 100))})
		if !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), "config too long") {
			t.Errorf("long config: %v", err)
		}
		i.Close(context.Background())
		m.Close(context.Background())
	}
}
