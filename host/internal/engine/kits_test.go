package engine

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/informer-host/informer-host/abi"
	"github.com/informer-host/informer-host/internal/pluginmetrics"
)

// kitExample is an example plugin of the Rust or AssemblyScript kit, as
// `make plugins` (mk/kits.mk) builds it with the kits' own toolchains.
func kitExample(t testing.TB, rel string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "..", "build", rel))
	if err != nil {
		t.Fatalf("kit example %s not built: run `make plugins` (make test does; Debian's rustc and npm are needed, hack/install-deps.sh): %v", rel, err)
	}
	return b
}

// customSections lists the names of a module's custom sections.
func customSections(t testing.TB, wasm []byte) []string {
	t.Helper()
	var names []string
	uleb := func(b []byte) (uint64, int) {
		v, n := binary.Uvarint(b)
		if n <= 0 {
			t.Fatalf("bad LEB128 in module")
		}
		return v, n
	}
	for at := 8; at < len(wasm); {
		id := wasm[at]
		size, n := uleb(wasm[at+1:])
		body := wasm[at+1+n : at+1+n+int(size)]
		if id == 0 {
			l, m := uleb(body)
			names = append(names, string(body[m:m+int(l)]))
		}
		at += 1 + n + int(size)
	}
	return names
}

// The Rust kit's example on both of Debian's wasm targets: it is a
// reactor (the kit's _initialize), tracks each pod's phase in state across
// a restart, counts the changes and reads the namespace's pods from the
// cache; its module keeps the name section for stack traces.
func TestKitRustExample(t *testing.T) {
	for _, rel := range []string{"plugins/pod-phase-rs.wasm", "kits/pod-phase-rs.wasm32-unknown-unknown.wasm"} {
		t.Run(filepath.Base(rel), func(t *testing.T) {
			wasm := kitExample(t, rel)
			if s := customSections(t, wasm); !strings.Contains(strings.Join(s, ","), "name") {
				t.Errorf("custom sections %q: no name section, stack traces would have no names", s)
			}
			bucket := newBucket(0, 0)
			reg := pluginmetrics.New(pluginmetrics.Options{})
			set := reg.Plugin("pod-phase-rs.wasm", 0)
			e := newEngine(t, Options{})
			m, err := e.Load(context.Background(), "pod-phase-rs.wasm", wasm, Limits{CallTimeout: time.Minute, MemoryPages: 256})
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close(context.Background())
			if _, ok := m.c.cm.ExportedFunctions()["_initialize"]; !ok {
				t.Errorf("no _initialize export: wasm-ld wraps every export in constructors and destructors (command exports)")
			}
			logs := &logBuffer{}
			start := func() *Instance {
				return instantiate(t, m, InstanceOptions{Logger: newLogger(logs), Cache: newFakeCache(), State: bucket, Metrics: set.Instance()})
			}
			handle := func(i *Instance, ev *Envelope) {
				t.Helper()
				if r, err := i.Handle(context.Background(), ev); err != nil || r.Code != CodeOK {
					t.Fatalf("handle: %v %+v\n%s", err, r, logs)
				}
			}
			i := start()
			handle(i, listEvent(pod("ns", "p1", "Running")))
			handle(i, listEvent(pod("ns", "p2", "Pending")))
			if _, err := i.Synced(context.Background(), podsRef); err != nil {
				t.Fatal(err)
			}
			handle(i, updateEvent(pod("ns", "p2", "Pending"), pod("ns", "p2", "Running")))
			handle(i, updateEvent(pod("ns", "p1", "Running"), pod("ns", "p1", "Running")))
			handle(i, deleteEvent(pod("ns", "p1", "Running"), false))
			i.Close(context.Background())
			// A restart: the cache replayed; p2's phase is known from state.
			i = start()
			handle(i, listEvent(pod("ns", "p2", "Running")))
			if _, err := i.Synced(context.Background(), podsRef); err != nil {
				t.Fatal(err)
			}
			for _, want := range []string{
				`msg="pod ns/p1: none -> Running"`,
				`msg="pod ns/p2: none -> Pending"`,
				`msg="initial list of pods handled: 2 pods tracked"`,
				`msg="pod ns/p2: Pending -> Running"`,
				`msg="pod ns/p1 deleted (was Running)"`,
				`msg="initial list of pods handled: 1 pods tracked"`,
			} {
				if logs.count(want) != 1 {
					t.Errorf("logged %d times, want once: %s\n%s", logs.count(want), want, logs)
				}
			}
			if n := logs.count(`msg="pod `); n != 4 {
				t.Errorf("%d pod lines, want 4 (no line for an unchanged phase or a known one after the restart):\n%s", n, logs)
			}
			if v, _, ok := bucket.Get([]byte("phase/ns/p2")); !ok || string(v) != "Running" {
				t.Errorf("state phase/ns/p2 = %q %v", v, ok)
			}
			if _, _, ok := bucket.Get([]byte("phase/ns/p1")); ok {
				t.Errorf("state phase/ns/p1 kept after the delete")
			}
			want := `
# HELP informer_host_plugin_metric_pod_phase_changes_total Pod phase changes by namespace and new phase.
# TYPE informer_host_plugin_metric_pod_phase_changes_total counter
informer_host_plugin_metric_pod_phase_changes_total{namespace="ns",phase="Pending",plugin="pod-phase-rs.wasm"} 1
informer_host_plugin_metric_pod_phase_changes_total{namespace="ns",phase="Running",plugin="pod-phase-rs.wasm"} 2
# HELP informer_host_plugin_metric_namespace_pods Pods in the namespace, from the host's cache.
# TYPE informer_host_plugin_metric_namespace_pods gauge
informer_host_plugin_metric_namespace_pods{namespace="ns",plugin="pod-phase-rs.wasm"} 2
`
			if err := testutil.CollectAndCompare(reg, strings.NewReader(want),
				"informer_host_plugin_metric_pod_phase_changes_total", "informer_host_plugin_metric_namespace_pods"); err != nil {
				t.Error(err)
			}
		})
	}
}

// The AssemblyScript kit's example: it loads (no env.abort import: the
// kit's abort replaces it), logs each event with UTF-8 text converted both
// ways, counts events per namespace and type, and keeps the name section.
func TestKitAssemblyScriptExample(t *testing.T) {
	wasm := kitExample(t, "plugins/pod-logger-as.wasm")
	if s := customSections(t, wasm); !strings.Contains(strings.Join(s, ","), "name") {
		t.Errorf("custom sections %q: no name section (asc needs --debug with -O)", s)
	}
	reg := pluginmetrics.New(pluginmetrics.Options{})
	e := newEngine(t, Options{})
	m, err := e.Load(context.Background(), "pod-logger-as.wasm", wasm, Limits{CallTimeout: time.Minute, MemoryPages: 256})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close(context.Background())
	logs := &logBuffer{}
	i := instantiate(t, m, InstanceOptions{Logger: newLogger(logs), Metrics: reg.Plugin("pod-logger-as.wasm", 0).Instance()})
	events := []*Envelope{
		listEvent(pod("shop", "web-0", "Running")),
		listEvent(pod("shop", "wéb-1", "Pending")), // UTF-8 both ways
		addEvent(pod("", "node-agent", "Running")),
		updateEvent(pod("shop", "wéb-1", "Pending"), pod("shop", "wéb-1", "Running")),
		deleteEvent(pod("shop", "web-0", "Running"), true),
	}
	for n, ev := range events {
		if r, err := i.Handle(context.Background(), ev); err != nil || r.Code != CodeOK {
			t.Fatalf("handle: %v %+v\n%s", err, r, logs)
		}
		if n == 1 {
			if _, err := i.Synced(context.Background(), podsRef); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, w := range []string{
		`msg="pod listed: shop/web-0 phase=Running"`,
		`msg="pod listed: shop/wéb-1 phase=Pending"`,
		`msg="initial list of pods handled: 2 pods"`,
		`msg="pod added: node-agent phase=Running"`,
		`msg="pod updated: shop/wéb-1 phase=Running (was Pending)"`,
		`msg="pod deleted: shop/web-0 phase=Running (missed by the watch; last known state)"`,
	} {
		if !strings.Contains(logs.String(), w) {
			t.Errorf("log lacks %s:\n%s", w, logs)
		}
	}
	want := `
# HELP informer_host_plugin_metric_pod_events_total Pod events by namespace and type.
# TYPE informer_host_plugin_metric_pod_events_total counter
informer_host_plugin_metric_pod_events_total{namespace="",plugin="pod-logger-as.wasm",type="add"} 1
informer_host_plugin_metric_pod_events_total{namespace="shop",plugin="pod-logger-as.wasm",type="add"} 2
informer_host_plugin_metric_pod_events_total{namespace="shop",plugin="pod-logger-as.wasm",type="delete"} 1
informer_host_plugin_metric_pod_events_total{namespace="shop",plugin="pod-logger-as.wasm",type="update"} 1
`
	if err := testutil.CollectAndCompare(reg, strings.NewReader(want), "informer_host_plugin_metric_pod_events_total"); err != nil {
		t.Error(err)
	}
	// Without the metrics grant the plugin still handles its events.
	plain := instantiate(t, m, InstanceOptions{Logger: newLogger(logs)})
	if r, err := plain.Handle(context.Background(), addEvent(pod("a", "b", "Running"))); err != nil || r.Code != CodeOK {
		t.Fatalf("not granted: %v %+v", err, r)
	}
}

// The scaffold templates (abi/rust/template, abi/assemblyscript/template),
// as their own one-command builds make them: each loads and says what
// its handler says.
func TestKitTemplates(t *testing.T) {
	e := newEngine(t, Options{})
	for _, name := range []string{"template-rs", "template-as"} {
		t.Run(name, func(t *testing.T) {
			m, err := e.Load(context.Background(), name+".wasm", kitExample(t, "kits/"+name+".wasm"), Limits{CallTimeout: time.Minute, MemoryPages: 256})
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close(context.Background())
			logs := &logBuffer{}
			i := instantiate(t, m, InstanceOptions{Logger: newLogger(logs)})
			if r, err := i.Handle(context.Background(), addEvent(pod("shop", "web-0", "Running"))); err != nil || r.Code != CodeOK {
				t.Fatalf("handle: %v %+v\n%s", err, r, logs)
			}
			if _, err := i.Synced(context.Background(), podsRef); err != nil {
				t.Fatal(err)
			}
			for _, w := range []string{`msg="add shop/web-0 phase=Running"`, `msg="initial list of pods handled"`} {
				if !strings.Contains(logs.String(), w) {
					t.Errorf("log lacks %s:\n%s", w, logs)
				}
			}
		})
	}
}

// The AssemblyScript kit's wrappers, each called by its test plugin
// (abi/assemblyscript/test/kit.ts) against the real host functions: the
// size protocol, UTF-8 both ways, error codes, cache pages, state versions
// and lists, a histogram declaration, the init refusal, and the kit's
// abort, which logs and traps with named functions in the stack trace.
func TestKitAssemblyScriptFunctions(t *testing.T) {
	wasm := kitExample(t, "kits/as-kit-test.wasm")
	reg := pluginmetrics.New(pluginmetrics.Options{})
	e := newEngine(t, Options{})
	m, err := e.Load(context.Background(), "as-kit-test.wasm", wasm, Limits{CallTimeout: time.Minute, MemoryPages: 256})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close(context.Background())
	logs := &logBuffer{}
	writes, events := &kitWriter{}, &fakeEvents{}
	hc := newKitHTTP()
	opts := InstanceOptions{Config: []byte("hello"), Logger: newLogger(logs), Cache: newFakeCache(),
		State: newBucket(0, 0), Metrics: reg.Plugin("as-kit-test.wasm", 0).Instance(),
		Writes: writes, HTTP: hc, Events: events}
	i := instantiate(t, m, opts)
	r, err := i.Handle(context.Background(), addEvent(pod("ns", "p1", "Running")))
	if err != nil || r.Code != CodeDrop || r.Message != "dropped é" {
		t.Fatalf("handle: %v %+v, want DROP with the handler's message\n%s", err, r, logs)
	}
	for _, w := range append([]string{
		`check config: hello`,
		`check configJSON: unexpected character at character 0`,
		`check header: add ns/p1 rv=42 uid=uid-p1`,
		`check flags: selfWrite=no initialList=no handedOver=no`,
		`check parseJSON: téam/x -25.0 on 2 true`,
		`check parseJSON bad: unexpected character at character 3`,
		`check field: 5 {\"image\":\"nginx:1.27\",\"name\":\"main\",\"ports\":[{\"containerPort\":80}]}`,
		`check missing: ERR_NOT_FOUND`,
		`check old: ERR_ABSENT`,
		`check json: short {\"apiVersion\":\"v1\"`,
		`check cacheGet: phase Pending`,
		`check cacheGet absent: ERR_ABSENT`,
		`check cacheGet denied: ERR_DENIED`,
		`check cacheGet denied call: cache_get secrets ns/p2: ERR_DENIED`,
		`check cacheList: ns/p1,other/p3`,
		`check cacheIndex: ns/p1,ns/p2`,
		`check cacheIndex bad: ERR_INVALID`,
		`check cacheIndex bad call: cache_index pods nope=x: ERR_INVALID`,
		`check stateSet again: ERR_CONFLICT`,
		`check stateGet: wert ü at its version`,
		`check stateList: k/b,k/é`,
		`check stateKeys: k/a,k/b,k/é`,
		`check stateDelete: 0 ERR_ABSENT`,
		`check stateGet absent: ERR_ABSENT`,
		`check stateSet invalid: state_set \"\": ERR_INVALID`,
		`check observe: 0`,
		`check metric invalid: metric_declare bad-name: ERR_INVALID`,
		`check resultMessage: []`,
		`check lastErrorMessage: not granted`,
	}, kitCapabilitiesIIChecks...) {
		if !strings.Contains(logs.String(), w) {
			t.Errorf("log lacks %s", w)
		}
	}
	checkKitCapabilitiesII(t, writes, events, hc)
	if t.Failed() {
		t.Logf("log:\n%s", logs)
	}
	if err := testutil.CollectAndCompare(reg, strings.NewReader(`
# HELP informer_host_plugin_metric_lat_seconds Latency "quoted".
# TYPE informer_host_plugin_metric_lat_seconds histogram
informer_host_plugin_metric_lat_seconds_bucket{ns="ns",plugin="as-kit-test.wasm",le="0.5"} 0
informer_host_plugin_metric_lat_seconds_bucket{ns="ns",plugin="as-kit-test.wasm",le="1"} 1
informer_host_plugin_metric_lat_seconds_bucket{ns="ns",plugin="as-kit-test.wasm",le="+Inf"} 1
informer_host_plugin_metric_lat_seconds_sum{ns="ns",plugin="as-kit-test.wasm"} 0.7
informer_host_plugin_metric_lat_seconds_count{ns="ns",plugin="as-kit-test.wasm"} 1
`), "informer_host_plugin_metric_lat_seconds"); err != nil {
		t.Error(err)
	}
	// ih_init's refusal carries the handler's message.
	if _, err := m.Instantiate(context.Background(), InstanceOptions{Config: []byte("refuse")}); !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), "refused: refuse") {
		t.Errorf("refusing config: %v", err)
	}
	// An AssemblyScript assert: the kit's abort logs where, then traps.
	_, err = i.Handle(context.Background(), addEvent(pod("ns", "abort", "Running")))
	var f *Failure
	if !errors.As(err, &f) || f.Kind != KindTrap {
		t.Fatalf("abort: %v, want a trap", err)
	}
	if !strings.Contains(logs.String(), `abort: asked to abort at test/kit.ts:`) {
		t.Errorf("the abort's message and place are not logged:\n%s", logs)
	}
	if !strings.Contains(f.Stack, "assembly/index/abort") {
		t.Errorf("the trap's stack trace does not name the kit's abort:\n%s", f.Stack)
	}
}

// kitCapabilitiesIIChecks are the log lines of the kits' test plugins'
// capabilities II calls (abi/assemblyscript/test/kit.ts,
// abi/rust/test/kit.rs: the same calls) against kitWriter, fakeEvents and
// the fakeHTTP of newKitHTTP.
var kitCapabilitiesIIChecks = []string{
	`check k8sCreate: nü rv 7`,
	`check k8sApply: rv 7`,
	`check k8sApply mustExist: k8s_write apply --must-exist pods ns/p1: ERR_FIELD_CONFLICT: conflict with kubectl`,
	`check k8sMergePatch: k8s_write merge-patch pods ns/p1: ERR_CONFLICT: the object has been modified`,
	`check k8sJSONPatch: rv 7`,
	`check k8sDelete: 0`,
	`check k8sDelete denied: k8s_write delete secrets ns/s: ERR_DENIED: no write grant for resource secrets`,
	`check k8sWrite op: k8s_write op 9 pods ns/p1: ERR_INVALID: unknown op 9`,
	`check recordEvent: 0`,
	`check recordEvent bad: event_record Normal Bad about ns/p1: ERR_INVALID: bad reason`,
	`check recordEvent cached: 0`,
	`check httpPost: 201 créé yes`,
	`check httpGet denied: http_request nope GET /: ERR_DENIED: not granted`,
	`check httpResponseRead: ERR_ABSENT`,
}

func newKitHTTP() *fakeHTTP { return &fakeHTTP{status: 201, header: "X-Reply: yes\n", body: "créé"} }

// The Rust kit's capabilities II wrappers, each called by its test plugin
// (abi/rust/test/kit.rs) against the real host functions and fakes behind
// them: what reached the host, what the plugin got back, and a CallError
// returned from the handler as its ERROR with the host's message.
func TestKitRustFunctions(t *testing.T) {
	e := newEngine(t, Options{})
	m, err := e.Load(context.Background(), "rs-kit-test.wasm", kitExample(t, "kits/rs-kit-test.wasm"), Limits{CallTimeout: time.Minute, MemoryPages: 256})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close(context.Background())
	logs := &logBuffer{}
	writes, events, hc := &kitWriter{}, &fakeEvents{}, newKitHTTP()
	i := instantiate(t, m, InstanceOptions{Logger: newLogger(logs), Cache: newFakeCache(), Writes: writes, HTTP: hc, Events: events})
	r, err := i.Handle(context.Background(), addEvent(pod("ns", "p1", "Running")))
	if err != nil || r.Code != CodeError || r.Message != "http_request nope GET /: ERR_DENIED: not granted" {
		t.Errorf("handle: %v %+v, want ERROR with the denied GET's CallError", err, r)
	}
	for _, w := range append([]string{
		`check cacheGet denied: cache_get secrets ns/p2: ERR_DENIED`,
		`check stateSet denied: state_set \"k\": ERR_DENIED`,
		`check metric denied: metric_declare ungranted_total: ERR_DENIED`,
		`check lastCallError: metric_declare ungranted_total: ERR_DENIED`,
		`check lastCallError after ?: taken`,
	}, kitCapabilitiesIIChecks...) {
		if !strings.Contains(logs.String(), w) {
			t.Errorf("log lacks %s", w)
		}
	}
	if t.Failed() {
		t.Logf("log:\n%s", logs)
	}
	checkKitCapabilitiesII(t, writes, events, hc)
}

// kitWriter is a ClusterWriter granted "pods" that records every request
// it is asked to send, preconditions and flags included, so a kit test
// sees what the kit put into k8s_write; a resourceVersion "old" is a
// conflict.
type kitWriter struct{ got []string }

func (w *kitWriter) Check(r *WriteRequest) (int32, string) {
	switch {
	case string(r.Resource) != "pods":
		return abi.ErrDenied, "no write grant for resource " + string(r.Resource)
	case abi.WriteVerb(r.Op) == "":
		return abi.ErrInvalid, fmt.Sprintf("unknown op %d", r.Op)
	}
	return 0, ""
}

func (w *kitWriter) Do(_ context.Context, r *WriteRequest) (map[string]any, int32, string) {
	got := fmt.Sprintf("op=%d %s %s/%s sub=%s uid=%s rv=%s force=%v body=%s",
		r.Op, r.Resource, r.Namespace, r.Name, r.Subresource, r.UID, r.ResourceVersion, r.Force, r.Body)
	if r.MustExist {
		got += " mustExist"
	}
	w.got = append(w.got, got)
	switch {
	case r.MustExist:
		return nil, abi.ErrFieldConflict, "conflict with kubectl"
	case string(r.ResourceVersion) == "old":
		return nil, abi.ErrConflict, "the object has been modified"
	case r.Op == abi.WriteDelete:
		return nil, 0, ""
	}
	name := string(r.Name)
	if name == "" {
		var b struct {
			Metadata struct{ Name string } `json:"metadata"`
		}
		_ = json.Unmarshal(r.Body, &b)
		name = b.Metadata.Name
	}
	return map[string]any{"metadata": map[string]any{"namespace": string(r.Namespace), "name": name, "resourceVersion": "7"}}, 0, ""
}

// checkKitCapabilitiesII checks what a kit's test plugin sent through
// k8s_write, event_record and http_request (the calls of kit.ts).
func checkKitCapabilitiesII(t *testing.T, w *kitWriter, ev *fakeEvents, hc *fakeHTTP) {
	t.Helper()
	want := []string{
		`op=1 pods ns/ sub= uid= rv= force=false body={"metadata":{"name":"nü"}}`,
		`op=4 pods ns/p1 sub= uid=uid-p1 rv=42 force=true body={"kind":"Pod"}`,
		`op=4 pods ns/p1 sub= uid= rv= force=false body={"kind":"Pod"} mustExist`,
		`op=2 pods ns/p1 sub= uid= rv=old force=false body={}`,
		`op=3 pods ns/p1 sub=status uid= rv= force=false body=[]`,
		`op=5 pods ns/p1 sub= uid=uid-p1 rv= force=false body=`,
	}
	if strings.Join(w.got, "\n") != strings.Join(want, "\n") {
		t.Errorf("writes sent:\n%s\nwant:\n%s", strings.Join(w.got, "\n"), strings.Join(want, "\n"))
	}
	wantEv := []string{"Warning TooLarge size é p1", "Normal Seen from the cache p2"}
	if strings.Join(ev.got, "|") != strings.Join(wantEv, "|") {
		t.Errorf("events recorded %q, want %q", ev.got, wantEv)
	}
	if len(hc.calls) != 2 {
		t.Fatalf("http calls %+v, want the POST and the denied GET", hc.calls)
	}
	if c := hc.calls[0]; c.Upstream != "u" || c.Method != "POST" || c.Path != "/hook?x=1" ||
		string(c.Header) != "Content-Type: application/json\n" || string(c.Body) != `{"é":1}` {
		t.Errorf("POST sent as %s %s %s header %q body %q", c.Upstream, c.Method, c.Path, c.Header, c.Body)
	}
	if c := hc.calls[1]; c.Upstream != "nope" || c.Method != "GET" || c.Path != "/" {
		t.Errorf("GET sent as %s %s %s", c.Upstream, c.Method, c.Path)
	}
}

// imports lists a module's imported functions as module.name.
func imports(m *Module) []string {
	var out []string
	for _, d := range m.c.cm.ImportedFunctions() {
		mod, name, _ := d.Import()
		out = append(out, mod+"."+name)
	}
	return out
}

// pluginLines are the msg values of the log lines, in order.
func pluginLines(logs *logBuffer) []string {
	var out []string
	for _, m := range regexp.MustCompile(`msg="([^"]*)"`).FindAllStringSubmatch(logs.String(), -1) {
		out = append(out, m[1])
	}
	return out
}

// The Rust and AssemblyScript kits' optional ih_handle_batch export
// (abi/rust/test/batch.rs, abi/assemblyscript/test/batch.ts, the same
// plugin): the handler runs once per event of the batch, in order, each
// reading its own object, and each event is settled with its own result
// and message (an ERROR and a RETRY among OKs); a lone event still goes
// through ih_handle; a panic or abort mid-batch fails the event being
// handled and keeps the ones settled before it, as ABI.md §5 says. The
// kits' examples, built without it, neither export it nor import
// batch_select and batch_result, so they load on hosts before v1.4.
func TestKitBatch(t *testing.T) {
	for _, tc := range []struct{ name, rel, example, panicked string }{
		{"rust", "kits/rs-batch-test.wasm", "plugins/pod-phase-rs.wasm", "panic: panicked at 'asked to panic in p1'"},
		{"assemblyscript", "kits/as-batch-test.wasm", "plugins/pod-logger-as.wasm", "abort: asked to panic in p1 at test/batch.ts:"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEngine(t, Options{})
			m, err := e.Load(context.Background(), tc.name+".wasm", kitExample(t, tc.rel), Limits{CallTimeout: time.Minute, MemoryPages: 256})
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close(context.Background())
			logs := &logBuffer{}
			i := instantiate(t, m, InstanceOptions{Logger: newLogger(logs)})
			if !i.CanBatch() {
				t.Fatalf("CanBatch is false: the kit's plugin does not export %s", abi.ExportHandleBatch)
			}
			items := []BatchItem{
				{Env: addEvent(pod("ns", "a", "Running"))},
				{Env: addEvent(pod("ns", "e1", "Pending"))},
				{Env: updateEvent(pod("ns", "b", "Pending"), pod("ns", "b", "Failed"))},
				{Env: addEvent(pod("ns", "r2", "Running"))},
				{Env: deleteEvent(pod("ns", "c", "Succeeded"), false)},
			}
			res, err := i.HandleBatch(context.Background(), items, nil)
			if err != nil {
				t.Fatalf("HandleBatch: %v\n%s", err, logs)
			}
			want := []Result{{Code: CodeOK}, {Code: CodeError, Raw: 3, Message: "asked to fail e1"}, {Code: CodeOK},
				{Code: CodeRetry, Raw: 1, Message: "not yet r2"}, {Code: CodeOK}}
			if fmt.Sprint(res) != fmt.Sprint(want) {
				t.Errorf("settled %+v, want %+v", res, want)
			}
			wantLines := []string{"a Running", "e1 Pending", "b Failed", "r2 Running", "c Succeeded"}
			if got := pluginLines(logs); strings.Join(got, "|") != strings.Join(wantLines, "|") {
				t.Errorf("the handler saw %q, want %q", got, wantLines)
			}
			// A lone event still goes through ih_handle.
			if r, err := i.Handle(context.Background(), addEvent(pod("ns", "r3", "Running"))); err != nil || r.Code != CodeRetry || r.Message != "not yet r3" {
				t.Errorf("ih_handle: %+v, %v", r, err)
			}

			// A panic (Rust) or abort (AssemblyScript) mid-batch.
			logs = &logBuffer{}
			i = instantiate(t, m, InstanceOptions{Logger: newLogger(logs)})
			res, err = i.HandleBatch(context.Background(), batchOf("a", "p1", "c"), nil)
			var f *Failure
			if !errors.As(err, &f) || f.Kind != KindTrap || f.Phase != abi.ExportHandleBatch {
				t.Fatalf("err = %v, want a trap in %s", err, abi.ExportHandleBatch)
			}
			if len(res) != 1 || res[0].Code != CodeOK {
				t.Errorf("settled %+v, want a's OK before the trap", res)
			}
			if !strings.Contains(logs.String(), tc.panicked) {
				t.Errorf("log lacks %q:\n%s", tc.panicked, logs)
			}
			if strings.Contains(logs.String(), `msg="c `) {
				t.Errorf("the event after the trap was handled:\n%s", logs)
			}

			ex, err := e.Load(context.Background(), "example.wasm", kitExample(t, tc.example), Limits{CallTimeout: time.Minute, MemoryPages: 256})
			if err != nil {
				t.Fatal(err)
			}
			defer ex.Close(context.Background())
			if _, ok := ex.c.cm.ExportedFunctions()[abi.ExportHandleBatch]; ok {
				t.Errorf("%s exports %s without asking for it", tc.example, abi.ExportHandleBatch)
			}
			for _, imp := range imports(ex) {
				if strings.HasSuffix(imp, "."+abi.ImportBatchSelect) || strings.HasSuffix(imp, "."+abi.ImportBatchResult) {
					t.Errorf("%s imports %s without the batch export", tc.example, imp)
				}
			}
		})
	}
}
