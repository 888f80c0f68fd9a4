package replay

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/informer-host/informer-host/abi"
)

// fixtures are the conformance fixtures (host/testdata/fixtures) and this
// package's own (testdata), assembled once per test binary by TestMain.
var fixtures string

func TestMain(m *testing.M) {
	os.Exit(func() int {
		dir, err := os.MkdirTemp("", "replay-fixtures-")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer os.RemoveAll(dir)
		srcs, _ := filepath.Glob("../testdata/fixtures/*.wat")
		own, _ := filepath.Glob("testdata/*.wat")
		for _, src := range append(srcs, own...) {
			out := filepath.Join(dir, strings.TrimSuffix(filepath.Base(src), ".wat")+".wasm")
			if b, err := exec.Command("wat2wasm", src, "-o", out).CombinedOutput(); err != nil {
				fmt.Fprintf(os.Stderr, "FAIL: fixtures: %s: %v\n%s", src, err, b)
				return 1
			}
		}
		fixtures = dir
		return m.Run()
	}())
}

// stream is a small recording: one initial-list add, synced, an update.
const stream = `{"informerHostEvents":1,"resources":{"pods":{"version":"v1","resource":"pods","kind":"Pod"}},"cache":["pods"]}
{"type":"cache","resource":"pods","object":{"metadata":{"name":"a","namespace":"demo","labels":{"app":"x"}}}}
{"type":"add","resource":"pods","initialList":true,"object":{"metadata":{"name":"a","namespace":"demo","resourceVersion":"1"}},"result":"ok"}
{"type":"synced","resource":"pods"}
{"type":"update","resource":"pods","oldObject":{"metadata":{"name":"a","namespace":"demo","resourceVersion":"1"}},"object":{"metadata":{"name":"a","namespace":"demo","resourceVersion":"2"}}}
`

func run(t *testing.T, plugin string, o Options) *Report {
	t.Helper()
	rec, err := Read("stream.jsonl", strings.NewReader(stream))
	if err != nil {
		t.Fatal(err)
	}
	o.Plugin = filepath.Join(fixtures, plugin+".wasm")
	o.Events = rec
	rep, err := Run(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

func TestOutcomes(t *testing.T) {
	for _, tc := range []struct {
		plugin     string
		retries    int
		results    []string // of the ih_handle steps
		failures   int
		wantStack  bool
		wantLogSub string
	}{
		{plugin: "healthy", results: []string{"ok", "ok"}},
		{plugin: "retry", retries: 2, results: []string{"retry", "retry", "retry-exhausted", "retry", "retry", "retry-exhausted"}},
		// A trap kills the instance; the next event gets a fresh one.
		{plugin: "trap", results: []string{"trap", "trap"}, failures: 2, wantStack: true},
		{plugin: "exit", results: []string{"trap", "trap"}, failures: 2},
	} {
		t.Run(tc.plugin, func(t *testing.T) {
			rep := run(t, tc.plugin, Options{MaxRetries: tc.retries})
			var got []string
			stack := false
			for _, s := range rep.Steps {
				if s.Call == "ih_handle" {
					got = append(got, s.Result)
				}
				if s.Failure != nil && s.Failure.Stack != "" {
					stack = true
				}
			}
			if strings.Join(got, ",") != strings.Join(tc.results, ",") {
				t.Errorf("results %v, want %v", got, tc.results)
			}
			if rep.Counts.Failures != tc.failures {
				t.Errorf("%d failures, want %d", rep.Counts.Failures, tc.failures)
			}
			if stack != tc.wantStack {
				t.Errorf("wasm stack reported: %v, want %v (%+v)", stack, tc.wantStack, rep.Steps)
			}
		})
	}
}

// The clocks and random source are fixed: two replays of the same stream
// give the same state, and --real-clock does not.
func TestDeterministic(t *testing.T) {
	a := run(t, "clockrand", Options{})
	b := run(t, "clockrand", Options{})
	if a.State["t"] == "" || a.State["r"] == "" {
		t.Fatalf("plugin stored nothing: %v", a.State)
	}
	if a.State["t"] != b.State["t"] || a.State["r"] != b.State["r"] {
		t.Errorf("two replays differ: %v and %v", a.State, b.State)
	}
	c := run(t, "clockrand", Options{Seed: 1})
	if c.State["r"] == a.State["r"] {
		t.Errorf("another seed gave the same random bytes %q", c.State["r"])
	}
	d := run(t, "clockrand", Options{RealClock: true})
	if d.State["r"] == a.State["r"] || d.State["t"] == a.State["t"] {
		t.Errorf("the real clock and crypto/rand gave the fixed values: %v", d.State)
	}
}

func TestStateSeededAndKept(t *testing.T) {
	rep := run(t, "state", Options{State: map[string]string{"seeded": "yes"}})
	if rep.State["seeded"] != "yes" || rep.State["obj/a"] != "a" {
		t.Errorf("state %v: want the seed and obj/a", rep.State)
	}
}

func TestReadErrorsNameTheLine(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"", "empty"},
		{`{"type":"add"}`, "x.jsonl:1: the first line must be the head"},
		{`{"informerHostEvents":2,"resources":{}}`, "x.jsonl:1: events file format v2"},
		{"{\"informerHostEvents\":1,\"resources\":{}}\n{\"type\":\"add\",\"resource\":\"pods\",\"object\":{}}", `x.jsonl:2: resource "pods" is not in the head`},
		{"{\"informerHostEvents\":1,\"resources\":{\"p\":{}}}\n\n{\"type\":\"upsert\",\"resource\":\"p\"}", `x.jsonl:3: unknown line type "upsert"`},
		{"{\"informerHostEvents\":1,\"resources\":{\"p\":{}}}\n{\"type\":\"update\",\"resource\":\"p\",\"object\":{}}", "x.jsonl:2: an update line needs an oldObject"},
	} {
		_, err := Read("x.jsonl", strings.NewReader(tc.in))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: error %v, want %q", tc.in, err, tc.want)
		}
	}
}

func TestMemCache(t *testing.T) {
	c := newMemCache([]string{"pods"})
	for _, l := range []Line{
		{Type: LineCache, Resource: "pods", Object: map[string]any{"metadata": map[string]any{"name": "a", "namespace": "n1", "labels": map[string]any{"app": "x"},
			"ownerReferences": []any{map[string]any{"uid": "u1", "name": "o", "kind": "K", "apiVersion": "v1"}}}}},
		{Type: LineCache, Resource: "pods", Object: map[string]any{"metadata": map[string]any{"name": "b", "namespace": "n2"}}},
		{Type: LineCache, Resource: "pods", Object: map[string]any{"metadata": map[string]any{"name": "c", "namespace": "n2"}}},
		{Type: LineCacheDelete, Resource: "pods", Namespace: "n2", Name: "c"},
	} {
		c.apply(&l)
	}
	if _, code := c.Get([]byte("pods"), []byte("n2"), []byte("c")); code != -1 {
		t.Errorf("deleted object: code %d, want ERR_ABSENT", code)
	}
	if _, code := c.Get([]byte("nodes"), nil, []byte("x")); code != -8 {
		t.Errorf("ungranted resource: code %d, want ERR_DENIED", code)
	}
	for _, tc := range []struct {
		keys []string
		code int32
	}{
		func() (r struct {
			keys []string
			code int32
		}) {
			r.keys, r.code = c.List(nil, []byte("pods"), nil, []byte("app=x"))
			return
		}(),
	} {
		if strings.Join(tc.keys, ",") != "n1/a" || tc.code != 0 {
			t.Errorf("list app=x: %v %d", tc.keys, tc.code)
		}
	}
	if keys, _ := c.Index(nil, []byte("pods"), []byte("owner"), []byte("u1")); strings.Join(keys, ",") != "n1/a" {
		t.Errorf("owner index: %v", keys)
	}
	if keys, _ := c.Index(nil, []byte("pods"), []byte("namespace"), []byte("n2")); strings.Join(keys, ",") != "n2/b" {
		t.Errorf("namespace index: %v", keys)
	}
}

func TestStubs(t *testing.T) {
	c := &Calls{stubs: NewStubs([]Stub{
		{Function: "k8s_create", Request: []byte(`{"b":1,"a":"x"}`), Code: 0, Response: []byte(`{"ok":true}`)},
		{Function: "http_request", Code: -16, Message: "down"},
	})}
	resp, code, _ := c.Serve("k8s_create", map[string]any{"a": "x", "b": 1})
	if code != 0 || string(resp) != `{"ok":true}` {
		t.Errorf("matching stub: %s %d", resp, code)
	}
	if _, code, _ := c.Serve("k8s_create", map[string]any{"a": "x", "b": 1}); code != 0 {
		t.Errorf("a repeated call is not answered by the stub it matched: %d", code)
	}
	if _, code, msg := c.Serve("http_request", map[string]any{"url": "u"}); code != -16 || msg != "down" {
		t.Errorf("function-wide stub: %d %q", code, msg)
	}
	_, code, msg := c.Serve("k8s_delete", map[string]any{"name": "n"})
	if code != -16 || !strings.Contains(msg, "no stub answers this k8s_delete call") {
		t.Errorf("unanswered call: %d %q", code, msg)
	}
	c.Serve("k8s_delete", map[string]any{"name": "n"})
	if len(c.toAdd) != 1 || string(c.toAdd[0].Request) != `{"name":"n"}` {
		t.Errorf("stubs to add, once per request: %+v", c.toAdd)
	}
	calls := c.take()
	if len(calls) != 5 || !calls[0].Stubbed || calls[3].Stubbed {
		t.Errorf("recorded calls: %+v", calls)
	}
}

// cache_get is recorded as the ABI returns it: the handle, numbered from
// abi.FirstHandle within one export call and again from it in the next,
// or the code.
func TestCacheGetRecordedHandles(t *testing.T) {
	mc := newMemCache([]string{"pods"})
	mc.apply(&Line{Type: LineCache, Resource: "pods", Object: map[string]any{"metadata": map[string]any{"name": "x", "namespace": "n"}}})
	type get struct{ res, name string }
	found, absent, denied := get{"pods", "x"}, get{"pods", "y"}, get{"secrets", "x"}
	for _, tc := range []struct {
		name string
		gets []get
		want []int32
	}{
		{name: "found twice", gets: []get{found, found}, want: []int32{abi.FirstHandle, abi.FirstHandle + 1}},
		{name: "absent between", gets: []get{found, absent, found}, want: []int32{abi.FirstHandle, abi.ErrAbsent, abi.FirstHandle + 1}},
		{name: "denied", gets: []get{denied, found}, want: []int32{abi.ErrDenied, abi.FirstHandle}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &Calls{}
			cache := recordedCache{c: mc, calls: c}
			for range 2 { // two export calls: the second numbers its handles afresh
				for _, g := range tc.gets {
					cache.Get([]byte(g.res), []byte("n"), []byte(g.name))
				}
				var got []int32
				for _, call := range c.take() {
					got = append(got, call.Code)
				}
				if fmt.Sprint(got) != fmt.Sprint(tc.want) {
					t.Errorf("cache_get codes %v, want %v", got, tc.want)
				}
			}
		})
	}
	c := &Calls{handles: abi.MaxHandles}
	if got := c.handle(map[string]any{}, 0); got != abi.ErrInvalid {
		t.Errorf("past MaxHandles: %d, want ERR_INVALID", got)
	}
}

// A real plugin's replay: team-labeler reads a ReplicaSet and its
// Deployment in one call, handles 2 and 3.
func TestCacheGetHandlesReplayed(t *testing.T) {
	wasm, err := os.ReadFile("../../build/plugins/team-labeler.wasm")
	if err != nil {
		t.Fatalf("example not built: run `make plugins` (make test does): %v", err)
	}
	dir := "../../plugins/examples/team-labeler/testdata"
	rec, err := ReadFile(filepath.Join(dir, "events.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	cfg, _ := os.ReadFile(filepath.Join(dir, "config.json"))
	rep, err := Run(context.Background(), Options{Plugin: "team-labeler.wasm", Wasm: wasm, Events: rec, Config: cfg})
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, s := range rep.Steps {
		var codes []int32
		for _, c := range s.Calls {
			if c.Function == "cache_get" {
				codes = append(codes, c.Code)
			}
		}
		if len(codes) == 2 {
			found = true
			if codes[0] != abi.FirstHandle || codes[1] != abi.FirstHandle+1 {
				t.Errorf("step %d: cache_get recorded %v, want the handles %d and %d", s.Seq, codes, abi.FirstHandle, abi.FirstHandle+1)
			}
		}
	}
	if !found {
		t.Errorf("no step read the ReplicaSet and the Deployment: %+v", rep.Steps)
	}
}
