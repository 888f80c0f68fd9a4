package engine

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/informer-host/informer-host/abi"
	"github.com/informer-host/informer-host/internal/testenv"
)

func TestLoadRefusals(t *testing.T) {
	healthy := fixture(t, "healthy")
	tests := []struct {
		name string
		wasm []byte
		want []string // every one must appear
		n    int      // number of problems
	}{
		{name: "garbage.wasm", wasm: []byte("#!/bin/sh\necho hello\n"), want: []string{"not a WebAssembly module"}, n: 1},
		{name: "empty.wasm", wasm: nil, want: []string{"not a WebAssembly module (0 bytes"}, n: 1},
		{name: "truncated.wasm", wasm: healthy[:len(healthy)-7], want: []string{"truncated WebAssembly module: section"}, n: 1},
		{name: "header-only.wasm", wasm: healthy[:6], want: []string{"truncated WebAssembly module: no version"}, n: 1},
		{name: "component.wasm", wasm: []byte("\x00asm\x0d\x00\x01\x00"), want: []string{"a WebAssembly component"}, n: 1},
		{name: "missing-handle.wasm", wasm: fixture(t, "missing-handle"),
			want: []string{"missing required export ih_handle (i32) -> i32"}, n: 1},
		{name: "unknown-import.wasm", wasm: fixture(t, "unknown-import"), n: 3, want: []string{
			`imports "env"."abort" (i32, i32, i32, i32) -> (), which this host does not provide`,
			`imports "informer_host_v1"."kv_get" (i32, i32) -> i32, which ABI v1 does not define`,
			`imports "wasi_snapshot_preview1"."fd_bogus" (i32) -> i32, which this host does not provide`,
		}},
		{name: "abi-v2.wasm", wasm: fixture(t, "abi-v2"), n: 1, want: []string{
			`speaks ABI v2 (imports module "informer_host_v2", exports informer_host_abi_v2); this host speaks v1`,
		}},
		{name: "command.wasm", wasm: fixture(t, "command"), n: 1, want: []string{"exports _start, so it is a WASI command"}},
		{name: "bad-reconcile.wasm", wasm: testenv.WATText(t, `(module
  (import "informer_host_v1" "reconcile_requeue_after" (func (param i32) (result i32)))
  (import "informer_host_v1" "children_apply" (func (param i32 i32 i32) (result i32)))
  (memory (export "memory") 1)
  (func (export "informer_host_abi_v1"))
  (func (export "ih_handle") (param i32) (result i32) (i32.const 0))
  (func (export "ih_reconcile") (param i64) (result i32) (i32.const 0)))`), n: 3, want: []string{
			"export ih_reconcile has signature (i64) -> i32, want (i32) -> i32",
			`imports "informer_host_v1"."reconcile_requeue_after" with signature (i32) -> i32, want (i64) -> i32`,
			`imports "informer_host_v1"."children_apply" with signature (i32, i32, i32) -> i32, want (i32, i32) -> i32`,
		}},
		{name: "bad-signatures.wasm", wasm: fixture(t, "bad-signatures"), n: 7, want: []string{
			"exports _start",
			`missing required export "memory"`,
			"export informer_host_abi_v1 has signature (i32) -> (), want () -> ()",
			"export ih_handle has signature (i64) -> i32, want (i32) -> i32",
			"export ih_init has signature (i32) -> (), want (i32) -> i32",
			`imports memory "env"."memory"; the host provides only functions`,
			`imports "informer_host_v1"."log" with signature (i32, i32) -> i32, want (i32, i32, i32) -> i32`,
		}},
	}
	e := newEngine(t, Options{})
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m, err := e.Load(context.Background(), tc.name, tc.wasm, Limits{CallTimeout: time.Second})
			if err == nil {
				m.Close(context.Background())
				t.Fatal("loaded")
			}
			msg := err.Error()
			if !strings.HasPrefix(msg, fmt.Sprintf("plugin %q: ", tc.name)) {
				t.Errorf("error does not name the file: %s", msg)
			}
			for _, w := range tc.want {
				if !strings.Contains(msg, w) {
					t.Errorf("error lacks %q:\n%s", w, msg)
				}
			}
			var le *LoadError
			if !errors.As(err, &le) {
				t.Fatalf("not a *LoadError: %T", err)
			}
			if len(le.Problems) != tc.n {
				t.Errorf("%d problems, want %d:\n%s", len(le.Problems), tc.n, msg)
			}
		})
	}
	// The engine still loads and runs a healthy plugin.
	checkHealthy(t, e)
}

// checkHealthy proves e still works: a healthy plugin loads, instantiates
// and handles an event.
func checkHealthy(t *testing.T, e *Engine) {
	t.Helper()
	m := load(t, e, "healthy", Limits{CallTimeout: time.Minute, MemoryPages: 16})
	i := instantiate(t, m, InstanceOptions{})
	r, err := i.Handle(context.Background(), addEvent(pod("default", "still-ok", "Running")))
	if err != nil || r.Code != CodeOK {
		t.Fatalf("healthy plugin after the others: %v, %+v", err, r)
	}
}

func TestFailures(t *testing.T) {
	tests := []struct {
		fixture string
		limits  Limits
		kind    Kind
		want    string // in the Failure's message
		stack   bool   // a wasm stack trace is expected
		exit    uint32
	}{
		{fixture: "trap", limits: Limits{CallTimeout: time.Minute}, kind: KindTrap, want: "unreachable", stack: true},
		{fixture: "trap", limits: Limits{}, kind: KindTrap, want: "unreachable", stack: true},
		{fixture: "loop", limits: Limits{CallTimeout: 50 * time.Millisecond}, kind: KindTimeout, want: "exceeded its 50ms limit"},
		{fixture: "membomb", limits: Limits{CallTimeout: time.Minute, MemoryPages: 64}, kind: KindMemory, want: "of 64 pages)", stack: true},
		{fixture: "membomb", limits: Limits{MemoryPages: 40}, kind: KindMemory, want: "of 40 pages", stack: true},
		{fixture: "exit", limits: Limits{CallTimeout: time.Minute}, kind: KindTrap, want: "exited with code 3", exit: 3},
		{fixture: "stackoverflow", limits: Limits{CallTimeout: time.Minute}, kind: KindTrap, want: "stack overflow"},
	}
	logs := &logBuffer{}
	e := newEngine(t, Options{Logger: newLogger(logs)})
	for _, tc := range tests {
		t.Run(fmt.Sprintf("%s/%+v", tc.fixture, tc.limits), func(t *testing.T) {
			m := load(t, e, tc.fixture, tc.limits)
			i := instantiate(t, m, InstanceOptions{})
			// A healthy instance in the same runtime class, running before
			// and after the failure.
			hm := load(t, e, "healthy", tc.limits)
			h := instantiate(t, hm, InstanceOptions{})
			if _, err := h.Handle(context.Background(), addEvent(pod("ns", "before", "Running"))); err != nil {
				t.Fatal(err)
			}

			_, err := i.Handle(context.Background(), addEvent(pod("ns", "victim", "Running")))
			var f *Failure
			if !errors.As(err, &f) {
				t.Fatalf("got %v (%T), want a *Failure", err, err)
			}
			if f.Kind != tc.kind {
				t.Errorf("kind %v, want %v: %v", f.Kind, tc.kind, err)
			}
			if !strings.Contains(err.Error(), tc.want) || !strings.HasPrefix(err.Error(), `plugin "`+tc.fixture+`.wasm": ih_handle: `) {
				t.Errorf("error %q, want it to name the plugin and contain %q", err, tc.want)
			}
			if tc.stack && f.Stack == "" {
				t.Errorf("no stack trace")
			}
			if f.ExitCode != tc.exit {
				t.Errorf("exit code %d, want %d", f.ExitCode, tc.exit)
			}
			// Dead from now on.
			if _, err := i.Handle(context.Background(), addEvent(pod("ns", "again", "Running"))); !errors.Is(err, ErrInstanceDead) {
				t.Errorf("second call: %v, want ErrInstanceDead", err)
			}
			if err := i.Close(context.Background()); err != nil && tc.kind != KindTrap {
				t.Logf("close: %v", err)
			}
			// The healthy instance carries on, and so does a fresh one of the
			// failed module.
			if r, err := h.Handle(context.Background(), addEvent(pod("ns", "after", "Running"))); err != nil || r.Code != CodeOK {
				t.Fatalf("healthy instance after a failure: %v %+v", err, r)
			}
			if _, err := instantiate(t, m, InstanceOptions{}).Handle(context.Background(), addEvent(pod("ns", "x", ""))); err == nil {
				t.Errorf("fresh instance of %s did not fail again", tc.fixture)
			}
		})
	}
}

func TestStartNeverReturns(t *testing.T) {
	e := newEngine(t, Options{StartTimeout: 100 * time.Millisecond})
	wasm := fixture(t, "startloop")

	// With a call deadline, the compiled code is termination-checked and
	// Instantiate gives up after StartTimeout.
	m, err := e.Load(context.Background(), "startloop.wasm", wasm, Limits{CallTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close(context.Background())
	_, err = m.Instantiate(context.Background(), InstanceOptions{})
	var f *Failure
	if !errors.As(err, &f) || f.Kind != KindTimeout || f.Phase != "instantiate" {
		t.Fatalf("instantiate: %v, want a timeout in phase instantiate", err)
	}
	if !strings.Contains(err.Error(), `plugin "startloop.wasm": instantiate: timeout: call exceeded its 100ms limit`) {
		t.Errorf("message: %v", err)
	}

	// Without one, Load runs the start functions once, checked, and
	// refuses the module.
	_, err = e.Load(context.Background(), "startloop.wasm", wasm, Limits{})
	if err == nil || !strings.Contains(err.Error(), `plugin "startloop.wasm": start functions (run once at load, with a 100ms limit): instantiate: timeout`) {
		t.Fatalf("load without deadline: %v", err)
	}
	checkHealthy(t, e)
}

func TestInitNeverReturns(t *testing.T) {
	e := newEngine(t, Options{StartTimeout: 100 * time.Millisecond})
	m := load(t, e, "initloop", Limits{CallTimeout: time.Second})
	_, err := m.Instantiate(context.Background(), InstanceOptions{})
	var f *Failure
	if !errors.As(err, &f) || f.Kind != KindTimeout || f.Phase != "ih_init" {
		t.Fatalf("got %v, want a timeout in ih_init", err)
	}
	checkHealthy(t, e)
}

func TestInitRefusesConfig(t *testing.T) {
	e := newEngine(t, Options{})
	m := load(t, e, "healthy", Limits{CallTimeout: time.Second})
	_, err := m.Instantiate(context.Background(), InstanceOptions{Config: []byte("refuse")})
	if !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), `plugin "healthy.wasm": ih_init: plugin refused its configuration: config refused as asked`) {
		t.Fatalf("got %v", err)
	}
	// Another config is accepted.
	instantiate(t, m, InstanceOptions{Config: []byte("accept")})
}

func TestResultCodes(t *testing.T) {
	e := newEngine(t, Options{})
	tests := []struct {
		fixture string
		code    Code
		msg     string
	}{
		{"healthy", CodeOK, ""},
		{"retry", CodeRetry, "not ready yet"},
		{"badptr", CodeOK, ""}, // every bad pointer got the documented error code
	}
	for _, tc := range tests {
		t.Run(tc.fixture, func(t *testing.T) {
			i := instantiate(t, load(t, e, tc.fixture, Limits{CallTimeout: time.Minute}), InstanceOptions{})
			for n := 0; n < 3; n++ {
				r, err := i.Handle(context.Background(), addEvent(pod("ns", "p", "Pending")))
				if err != nil {
					t.Fatal(err)
				}
				if r.Code != tc.code || r.Message != tc.msg {
					t.Fatalf("got %+v, want %v %q", r, tc.code, tc.msg)
				}
			}
		})
	}
}

func TestLogsAndShutdown(t *testing.T) {
	logs := &logBuffer{}
	e := newEngine(t, Options{})
	// The caller names the plugin in its logger; the engine adds nothing.
	i := instantiate(t, load(t, e, "healthy", Limits{CallTimeout: time.Minute}), InstanceOptions{Logger: newLogger(logs).With("plugin", "healthy.wasm")})
	for _, name := range []string{"web-0", "web-1"} {
		if _, err := i.Handle(context.Background(), addEvent(pod("default", name, "Running"))); err != nil {
			t.Fatal(err)
		}
	}
	if err := i.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	out := logs.String()
	for _, want := range []string{
		`level=INFO msg=web-0 plugin=healthy.wasm stream=log`,
		`level=INFO msg=web-1 plugin=healthy.wasm stream=log`,
		`level=INFO msg=bye plugin=healthy.wasm stream=log`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("log lacks %q:\n%s", want, out)
		}
	}
}

func TestLogRateLimit(t *testing.T) {
	logs := &logBuffer{}
	e := newEngine(t, Options{})
	i := instantiate(t, load(t, e, "logspam", Limits{CallTimeout: time.Minute}), InstanceOptions{
		Logger:  newLogger(logs),
		LogRate: LogRate{PerSecond: 1e-9, Burst: 50},
	})
	// Each call writes 2000 lines.
	for n := 0; n < 3; n++ {
		if r, err := i.Handle(context.Background(), addEvent(pod("ns", "p", ""))); err != nil || r.Code != CodeOK {
			t.Fatal(err, r)
		}
	}
	if got := logs.count("msg=spam"); got != 50 {
		t.Errorf("%d lines logged, want the burst of 50", got)
	}
	checkHealthy(t, e)
}

func TestOutputDropReport(t *testing.T) {
	logs := &logBuffer{}
	now := time.Unix(0, 0)
	o := newOutput(newLogger(logs), LogRate{PerSecond: 1, Burst: 2})
	o.clock = func() time.Time { return now }
	w := &lineWriter{out: o, stream: "stdout"}
	fmt.Fprint(w, "a\nb\nc\nd\npartial")
	w.flush()
	now = now.Add(time.Second)
	fmt.Fprint(w, "e\n")
	out := logs.String()
	for _, want := range []string{"msg=a ", "msg=b ", "plugin output rate limited: 3 lines dropped", "msg=e "} {
		if !strings.Contains(out, want) {
			t.Errorf("lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "msg=c ") || strings.Contains(out, "msg=partial") {
		t.Errorf("dropped lines logged:\n%s", out)
	}
	if got := o.takeTail(); got != "a\nb\nc\nd\npartial\ne\n" {
		t.Errorf("tail %q", got)
	}
	long := strings.Repeat("é", abi.MaxLogLineLen) // 2 bytes each
	if got := truncateUTF8([]byte(long), abi.MaxLogLineLen+1); len(got) != abi.MaxLogLineLen {
		t.Errorf("truncate at a rune boundary: %d bytes", len(got))
	}
}

func TestConcurrentLoadsShareOneCompile(t *testing.T) {
	e := newEngine(t, Options{})
	wasm := fixture(t, "healthy")
	const n = 8
	mods := make([]*Module, n)
	var wg sync.WaitGroup
	for k := 0; k < n; k++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			m, err := e.Load(context.Background(), fmt.Sprintf("copy-%d.wasm", k), wasm, Limits{CallTimeout: time.Minute})
			if err != nil {
				t.Error(err)
				return
			}
			mods[k] = m
		}()
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	for _, m := range mods[1:] {
		if m.c != mods[0].c {
			t.Fatal("identical bytes compiled twice")
		}
	}
	if mods[3].Name() != "copy-3.wasm" || mods[3].SHA256() != mods[0].SHA256() || mods[0].ABIVersion() != 1 {
		t.Error("module identity")
	}
	for _, m := range mods {
		m.Close(context.Background())
	}
	e.mu.Lock()
	left := len(e.compiled)
	e.mu.Unlock()
	if left != 0 {
		t.Errorf("%d compilations left after closing every module", left)
	}
}

func TestCompilationCacheDir(t *testing.T) {
	dir := t.TempDir()
	for round := 0; round < 2; round++ {
		e := newEngine(t, Options{CacheDir: dir})
		checkHealthy(t, e)
		e.Close(context.Background())
	}
}

func TestClosedEngine(t *testing.T) {
	e := newEngine(t, Options{})
	m := load(t, e, "healthy", Limits{CallTimeout: time.Minute})
	i := instantiate(t, m, InstanceOptions{})
	e.Close(context.Background())
	if _, err := e.Load(context.Background(), "x.wasm", fixture(t, "healthy"), Limits{}); err == nil {
		t.Error("load after close")
	}
	if _, err := i.Handle(context.Background(), addEvent(pod("a", "b", ""))); err == nil {
		t.Error("handle after engine close")
	}
}

func TestCanceledContext(t *testing.T) {
	e := newEngine(t, Options{})
	i := instantiate(t, load(t, e, "healthy", Limits{CallTimeout: time.Minute}), InstanceOptions{})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := i.Handle(ctx, addEvent(pod("a", "b", ""))); !errors.Is(err, context.Canceled) {
		t.Fatalf("got %v", err)
	}
	// Not a failure: the instance is still usable.
	if _, err := i.Handle(context.Background(), addEvent(pod("a", "b", ""))); err != nil {
		t.Fatal(err)
	}
}

func TestMemoryLimitBelowModuleMinimum(t *testing.T) {
	e := newEngine(t, Options{})
	_, err := e.Load(context.Background(), "echo.wasm", fixture(t, "echo"), Limits{MemoryPages: 1, CallTimeout: time.Second})
	if err == nil || !strings.Contains(err.Error(), `plugin "echo.wasm": compile: `) || !strings.Contains(err.Error(), "over limit of 1 pages") {
		t.Fatalf("got %v", err)
	}
	_, err = e.Load(context.Background(), "echo.wasm", fixture(t, "echo"), Limits{MemoryPages: MaxMemoryPages + 1})
	if err == nil || !strings.Contains(err.Error(), "exceeds the wasm32 maximum") {
		t.Fatalf("got %v", err)
	}
	checkHealthy(t, e)
}

// A Failure's output keeps a Go panic's report from its headline on, so
// the first frames (where it was raised) survive a deep stack, within
// maxTraceLines; without a panic it is the tail.
func TestOutputPanicReport(t *testing.T) {
	frames := func(n int) []string {
		var out []string
		for i := range n {
			out = append(out, fmt.Sprintf("main.f%d()", i), fmt.Sprintf("\t/src/main.go:%d +0x1", i+10))
		}
		return out
	}
	for _, tc := range []struct {
		name  string
		lines []string
		want  []string // in the output, in order
		not   []string
	}{
		{name: "no panic: the tail", lines: append([]string{"first"}, frames(10)...),
			want: []string{"main.f2()", "main.f9()"}, not: []string{"first", "main.f1()"}},
		{name: "deep stack: the whole report", lines: append([]string{"before", "panic: boom", "", "goroutine 1 [running]:"}, frames(40)...),
			want: []string{"panic: boom\n", "main.f0()\n\t/src/main.go:10", "main.f39()"}, not: []string{"before", "more lines"}},
		{name: "report past its bound: cut", lines: append([]string{"panic: boom"}, frames(maxTraceLines)...),
			want: []string{"panic: boom\nmain.f0()", fmt.Sprintf("... (%d more lines)\n", 2*maxTraceLines+1-maxTraceLines)}},
		{name: "lines before a short report", lines: []string{"before", "panic: boom", "main.f()"},
			want: []string{"before\npanic: boom\nmain.f()\n"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := newOutput(newLogger(&logBuffer{}), LogRate{PerSecond: -1})
			for _, l := range tc.lines {
				o.emit(0, "stderr", []byte(l))
			}
			got := o.takeTail()
			rest := got
			for _, w := range tc.want {
				i := strings.Index(rest, w)
				if i < 0 {
					t.Fatalf("output lacks %q (in order):\n%s", w, got)
				}
				rest = rest[i+len(w):]
			}
			for _, n := range tc.not {
				if strings.Contains(got, n) {
					t.Errorf("output holds %q:\n%s", n, got)
				}
			}
			if again := o.takeTail(); again != "" {
				t.Errorf("taken twice: %q", again)
			}
		})
	}
}
