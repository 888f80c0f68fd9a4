package kit

import (
	"errors"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/informer-host/informer-host/abi"
)

// fakeHost implements the import module over a JSON object, the way the
// host does, so the kit's side of the protocol can be tested natively.
type fakeHost struct {
	header    []byte
	obj, old  []byte
	config    []byte
	errMsg    string
	logs      []string
	inEvent   bool
	headerLie int32 // if set, header_read returns this
}

func (h *fakeHost) headerRead(buf []byte) int32 {
	if !h.inEvent {
		return abi.ErrNoEvent
	}
	if h.headerLie != 0 {
		return h.headerLie
	}
	return copySized(buf, h.header)
}

func copySized(buf, data []byte) int32 {
	if len(data) <= len(buf) {
		copy(buf, data)
	}
	return int32(len(data))
}

func (h *fakeHost) pick(which int32) []byte {
	if which == abi.ObjectOld {
		return h.old
	}
	return h.obj
}

func (h *fakeHost) objectRead(which int32, buf []byte) int32 {
	o := h.pick(which)
	if o == nil {
		return abi.ErrAbsent
	}
	return copySized(buf, o)
}

func (h *fakeHost) fieldRead(which int32, path string, buf []byte) int64 {
	o := h.pick(which)
	if o == nil {
		return int64(abi.ErrAbsent)
	}
	return NativeFieldRead(o, path, buf)
}

func (h *fakeHost) configRead(buf []byte) int32 { return copySized(buf, h.config) }
func (h *fakeHost) setError(msg string) int32   { h.errMsg = msg; return 0 }
func (h *fakeHost) log(level int32, msg string) int32 {
	h.logs = append(h.logs, msg)
	return 0
}

func newPlugin(h *fakeHost, handle func(*Event) error) *plugin {
	return &plugin{host: h, onHandle: handle}
}

func (h *fakeHost) deliver(p *plugin, typ uint8, flags uint8, obj, old string) int32 {
	h.header = abi.AppendHeader(nil, &abi.Header{Type: typ, Flags: flags, Fields: [abi.HeaderFieldCount]string{
		"pods", "", "v1", "pods", "Pod", "shop", "web-0", "u1", "7"}})
	h.obj, h.old = nil, nil
	if obj != "" {
		h.obj = []byte(obj)
	}
	if old != "" {
		h.old = []byte(old)
	}
	h.errMsg = ""
	h.inEvent = true
	defer func() { h.inEvent = false }()
	return p.handle(int32(len(h.header)))
}

const bigPod = `{"metadata":{"name":"web-0","labels":{"app.kubernetes.io/name":"shop"}},"spec":{"containers":[{"image":"nginx"}]},"status":{"phase":"Running","padding":"` +
	"................................................................................................................................................................................................................................................................................................" + `"}}`

func TestHandle(t *testing.T) {
	h := &fakeHost{}
	var seen []string
	p := newPlugin(h, func(ev *Event) error {
		phase, _ := ev.Get("status.phase")
		oldPhase, hasOld := ev.GetOld("status.phase")
		name, _ := ev.Get(`metadata.labels["app.kubernetes.io/name"]`)
		pad, _ := ev.Field("status.padding")
		var o struct {
			Spec struct {
				Containers []struct{ Image string }
			}
		}
		if err := ev.Decode(&o); err != nil {
			return err
		}
		seen = append(seen, strings.Join([]string{ev.Type().String(), ev.Key(), ev.Resource().Kind, ev.UID(), ev.ResourceVersion(),
			phase, oldPhase, name, o.Spec.Containers[0].Image}, " "))
		if hasOld != ev.HasOld() || len(pad.Text) < 200 || pad.Kind != String {
			return errors.New("old object or padding mismatch")
		}
		return nil
	})
	if rc := h.deliver(p, abi.EventAdd, abi.FlagInitialList, bigPod, ""); rc != abi.ResultOK {
		t.Fatalf("rc %d: %s", rc, h.errMsg)
	}
	if rc := h.deliver(p, abi.EventUpdate, abi.FlagHasOldObject, bigPod, `{"status":{"phase":"Pending"}}`); rc != abi.ResultOK {
		t.Fatalf("rc %d: %s", rc, h.errMsg)
	}
	want := []string{
		"add shop/web-0 Pod u1 7 Running  shop nginx",
		"update shop/web-0 Pod u1 7 Running Pending shop nginx",
	}
	if strings.Join(seen, "\n") != strings.Join(want, "\n") {
		t.Fatalf("got\n%s\nwant\n%s", strings.Join(seen, "\n"), strings.Join(want, "\n"))
	}
}

func TestResults(t *testing.T) {
	// The panic's message names its file and line: where the handler
	// below raises it.
	var panicSite string
	raise := func(*Event) error {
		_, file, line, _ := runtime.Caller(0)
		panicSite = fmt.Sprintf(" (%s:%d in ", file, line+2) // the panic's line
		panic("kaboom")
	}
	tests := []struct {
		name string
		f    func(*Event) error
		rc   int32
		msg  string
	}{
		{"ok", func(*Event) error { return nil }, abi.ResultOK, ""},
		{"retry", func(*Event) error { return Retry(errors.New("later")) }, abi.ResultRetry, "later"},
		{"drop", func(*Event) error { return Drop(nil) }, abi.ResultDrop, ""},
		{"error", func(*Event) error { return errors.New("boom") }, abi.ResultError, "boom"},
		{"panic", raise, abi.ResultError, "panic: kaboom"},
		{"missing field", func(ev *Event) error {
			_, err := ev.Field("status.nope")
			if !errors.Is(err, ErrNotFound) {
				return Drop(err)
			}
			_, err = ev.OldField("x")
			if !errors.Is(err, ErrNoObject) {
				return Drop(err)
			}
			return nil
		}, abi.ResultOK, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := &fakeHost{}
			p := newPlugin(h, tc.f)
			panicSite = ""
			rc := h.deliver(p, abi.EventAdd, 0, bigPod, "")
			want := tc.msg + panicSite
			if rc != tc.rc || !strings.HasPrefix(h.errMsg, want) || panicSite == "" && h.errMsg != want {
				t.Fatalf("got %d %q, want %d %q", rc, h.errMsg, tc.rc, want)
			}
		})
	}
}

func TestHeaderReadMismatch(t *testing.T) {
	h := &fakeHost{headerLie: abi.ErrBounds}
	p := newPlugin(h, func(*Event) error { return nil })
	if rc := h.deliver(p, abi.EventAdd, 0, "{}", ""); rc != abi.ResultError || !strings.Contains(h.errMsg, "header_read returned -4") {
		t.Fatalf("%d %q", rc, h.errMsg)
	}
}

func TestInit(t *testing.T) {
	h := &fakeHost{config: []byte(`{"logEvery":2}`)}
	p := newPlugin(h, func(*Event) error { return nil })
	var got []byte
	p.onInit = func(c []byte) error { got = c; return nil }
	if rc := p.init(int32(len(h.config))); rc != abi.InitOK || string(got) != `{"logEvery":2}` {
		t.Fatalf("rc %d, config %q", rc, got)
	}
	p.onInit = func([]byte) error { return errors.New("bad config") }
	if rc := p.init(int32(len(h.config))); rc != abi.InitRefused || h.errMsg != "bad config" {
		t.Fatalf("rc %d %q", rc, h.errMsg)
	}
	p.onHandle = nil
	p.onInit = nil
	if rc := p.init(int32(len(h.config))); rc != abi.InitRefused || !strings.Contains(h.errMsg, "no handler") {
		t.Fatalf("rc %d %q", rc, h.errMsg)
	}
}

func TestHeaderNoAlloc(t *testing.T) {
	h := &fakeHost{}
	p := newPlugin(h, func(ev *Event) error {
		_ = ev.Resource()
		_ = ev.Namespace()
		_ = ev.Type()
		return nil
	})
	h.deliver(p, abi.EventAdd, 0, "{}", "") // warm up buffers and interned strings
	h.header = abi.AppendHeader(nil, &abi.Header{Type: abi.EventAdd, Fields: [abi.HeaderFieldCount]string{
		"pods", "", "v1", "pods", "Pod", "shop", "web-0", "u1", "7"}})
	h.inEvent = true
	allocs := testing.AllocsPerRun(100, func() { p.handle(int32(len(h.header))) })
	if allocs != 0 {
		t.Errorf("%v allocations per event for the header", allocs)
	}
}

func TestLog(t *testing.T) {
	h := &fakeHost{}
	old := the.host
	the.host = h
	defer func() { the.host = old }()
	Log.With("pod", "shop/web-0").Info("moved", "from", "Pending", "to", "Running", "note", "two words")
	Infof("n=%d", 3)
	want := []string{`moved pod=shop/web-0 from=Pending to=Running note="two words"`, "n=3"}
	if strings.Join(h.logs, "\n") != strings.Join(want, "\n") {
		t.Fatalf("got %q", h.logs)
	}
}

// ih_synced reaches OnSynced with the binding's resource, read from the
// header the host gives it; without OnSynced it does nothing.
func TestSynced(t *testing.T) {
	h := &fakeHost{}
	p := newPlugin(h, func(*Event) error { return nil })
	call := func() {
		h.header = abi.AppendHeader(nil, &abi.Header{Fields: [abi.HeaderFieldCount]string{"web", "apps", "v1", "deployments", "Deployment"}})
		h.inEvent = true
		defer func() { h.inEvent = false }()
		p.synced(int32(len(h.header)))
	}
	call() // no OnSynced: nothing happens
	var got []Resource
	p.onSynced = func(r Resource) { got = append(got, r) }
	call()
	want := Resource{Name: "web", Group: "apps", Version: "v1", Resource: "deployments", Kind: "Deployment"}
	if len(got) != 1 || got[0] != want {
		t.Errorf("OnSynced got %+v, want [%+v]", got, want)
	}
}

// A recovered panic's goroutine trace goes to stderr once per site: the
// host retries a failed event, and each retry's message names the site.
func TestPanicTraceOncePerSite(t *testing.T) {
	var stderr strings.Builder
	h := &fakeHost{}
	calls := 0
	p := newPlugin(h, func(ev *Event) error {
		calls++
		if calls <= 2 {
			panic("at a")
		}
		panic("at b")
	})
	p.stderr = &stderr
	for _, tc := range []struct {
		name   string // the panic's site
		traces int    // written so far
	}{
		{name: "a", traces: 1}, {name: "a again", traces: 1}, {name: "b", traces: 2},
	} {
		if rc := h.deliver(p, abi.EventAdd, 0, bigPod, ""); rc != abi.ResultError {
			t.Fatalf("%s: rc %d", tc.name, rc)
		}
		if n := strings.Count(stderr.String(), "[running]:"); n != tc.traces || !strings.Contains(stderr.String(), "kit_test.go:") {
			t.Errorf("after %s: %d traces, want %d:\n%s", tc.name, n, tc.traces, stderr.String())
		}
	}
}

// fakeBatch hands the events of a batch through fakeHost, one current at
// a time, as the host's batch_select and batch_result do.
type fakeBatch struct {
	h       *fakeHost
	names   []string
	results []int32
	msgs    []string
}

func (b *fakeBatch) selectEvent(i int32) int32 {
	b.h.header = abi.AppendHeader(nil, &abi.Header{Type: abi.EventAdd, Fields: [abi.HeaderFieldCount]string{
		"pods", "", "v1", "pods", "Pod", "shop", b.names[i], "u", "1"}})
	b.h.obj, b.h.inEvent, b.h.errMsg = []byte(`{}`), true, ""
	return int32(len(b.h.header))
}

func (b *fakeBatch) result(code int32) int32 {
	b.results, b.msgs = append(b.results, code), append(b.msgs, b.h.errMsg)
	b.h.inEvent = false
	return 0
}

// ih_handle_batch calls the handler once per event, in order, and
// settles each with its own result and message; a panic is its event's
// ERROR, not the batch's.
func TestHandleBatchCallsHandlerPerEvent(t *testing.T) {
	h := &fakeHost{}
	var seen []string
	p := newPlugin(h, func(e *Event) error {
		seen = append(seen, e.Name())
		switch e.Name() {
		case "bad":
			return errors.New("no good")
		case "boom":
			panic("boom")
		case "later":
			return Retry(errors.New("not yet"))
		}
		return nil
	})
	b := &fakeBatch{h: h, names: []string{"a", "bad", "boom", "later", "z"}}
	if n := p.handleBatch(b, int32(len(b.names))); n != 5 {
		t.Fatalf("handleBatch returned %d, want 5", n)
	}
	if got := strings.Join(seen, ","); got != "a,bad,boom,later,z" {
		t.Errorf("handler saw %s", got)
	}
	want := []int32{abi.ResultOK, abi.ResultError, abi.ResultError, abi.ResultRetry, abi.ResultOK}
	if fmt.Sprint(b.results) != fmt.Sprint(want) {
		t.Errorf("results %v, want %v", b.results, want)
	}
	if b.msgs[1] != "no good" || !strings.Contains(b.msgs[2], "boom") || b.msgs[3] != "not yet" || b.msgs[4] != "" {
		t.Errorf("messages %q", b.msgs)
	}
}

// TestYieldReadsClockSparselyWhenFast: calls that come less than readGap
// apart read the clock once per readSkip+1 calls, and still yield once
// yieldEvery has passed; calls that come slowly read it on every call.
func TestYieldReadsClockSparselyWhenFast(t *testing.T) {
	var now time.Duration
	reads := 0
	p := &plugin{clock: func() time.Duration { reads++; return now }}
	p.lastYield, p.lastRead = 0, 0

	// Fast: 10µs apart, 1600 calls (16 ms).
	for range 1600 {
		now += 10 * time.Microsecond
		p.yield()
	}
	// One read per readSkip+1 calls, plus the read after each yield.
	if want := 1600/(readSkip+1) + 1; reads > want+1 || reads < want-1 {
		t.Errorf("fast calls: %d clock reads, want about %d", reads, want)
	}
	if p.lastYield < yieldEvery {
		t.Errorf("fast calls: last yield at %v, want one after %v", p.lastYield, yieldEvery)
	}

	// Slow: 5 ms apart. After at most readSkip calls still skipped from the
	// burst, every call reads the clock.
	for range readSkip {
		now += 5 * time.Millisecond
		p.yield()
	}
	reads = 0
	for range 10 {
		now += 5 * time.Millisecond
		p.yield()
	}
	// Ten reads, and a yield (with its read) every second call.
	if reads != 15 {
		t.Errorf("slow calls: %d clock reads in 10 calls, want 15 (one per call, one per yield)", reads)
	}
}
