package engine

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tetratelabs/wazero/api"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/informer-host/informer-host/abi"
	"github.com/informer-host/informer-host/event"
	"github.com/informer-host/informer-host/host/internal/wasmbin"
	"github.com/informer-host/informer-host/internal/testenv"
)

// fakeController is a ControllerCall that records what it is handed and
// answers what the test set. block, when set, is called inside the
// apply methods with their context (a slow apiserver).
type fakeController struct {
	mu       sync.Mutex
	requeues []time.Duration
	children []string
	status   []string
	failed   int32
	code     int32
	msg      string
	block    func(ctx context.Context) int32
}

func (f *fakeController) RequeueAfter(d time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.requeues = append(f.requeues, d)
}

func (f *fakeController) wait(ctx context.Context) int32 {
	if f.block != nil {
		return f.block(ctx)
	}
	return 0
}

func (f *fakeController) ApplyChildren(ctx context.Context, body []byte) (int32, int32, string) {
	f.mu.Lock()
	f.children = append(f.children, string(body))
	f.mu.Unlock()
	if c := f.wait(ctx); c != 0 {
		return 0, c, ""
	}
	return f.failed, f.code, f.msg
}

func (f *fakeController) ApplyStatus(ctx context.Context, body []byte) (int32, string) {
	f.mu.Lock()
	f.status = append(f.status, string(body))
	f.mu.Unlock()
	if c := f.wait(ctx); c != 0 {
		return c, ""
	}
	return f.code, f.msg
}

func (f *fakeController) calls() (children, status int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.children), len(f.status)
}

// The reconciler fixture's control bits and addresses (reconciler.wat).
const (
	doRequeue  = 1
	doChildren = 2
	doStatus   = 4
	doTrap     = 8

	atHeaderRead   = 2048
	atObjectRead   = 2052
	atOldRead      = 2056
	atFieldRead    = 2064
	atRequeue      = 2072
	atChildren     = 2076
	atStatus       = 2080
	atHeaderLen    = 2084
	atHandleCalls  = 2088
	atChildrenBody = 20000
	atStatusBody   = 28000
)

// probe drives the reconciler fixture.
type probe struct {
	t    *testing.T
	inst *Instance
}

func newProbe(t *testing.T, timeout time.Duration, o InstanceOptions) probe {
	t.Helper()
	e := newEngine(t, Options{})
	m := load(t, e, "reconciler", Limits{CallTimeout: timeout, MemoryPages: 2})
	if !m.Reconciles() {
		t.Fatal("Reconciles() is false for a module exporting ih_reconcile")
	}
	return probe{t, instantiate(t, m, o)}
}

// set writes the control block: what the next ih_reconcile does.
func (p probe) set(bits int32, millis int64, children, status string, ret int32) {
	mem := p.inst.mod.Memory()
	mem.WriteUint32Le(3076, uint32(bits))
	mem.WriteUint64Le(3080, uint64(millis))
	mem.WriteUint32Le(3088, uint32(len(children)))
	mem.WriteUint32Le(3092, uint32(len(status)))
	mem.WriteUint32Le(3096, uint32(ret))
	mem.Write(atChildrenBody, []byte(children))
	mem.Write(atStatusBody, []byte(status))
	for a := uint32(2048); a < 2100; a += 4 {
		mem.WriteUint32Le(a, 0xdeadbeef) // so a function not called shows
	}
}

func (p probe) i32(addr uint32) int32 {
	v, _ := p.inst.mod.Memory().ReadUint32Le(addr)
	return int32(v)
}

func (p probe) bytes(addr, n uint32) []byte {
	b, _ := p.inst.mod.Memory().Read(addr, n)
	return append([]byte(nil), b...)
}

func (p probe) reconcile(req *ReconcileRequest) Result {
	p.t.Helper()
	r, err := p.inst.Reconcile(context.Background(), req)
	if err != nil {
		p.t.Fatalf("Reconcile: %v", err)
	}
	return r
}

var cronRef = &event.ResourceRef{Name: "cronjobs", Group: "batch.example.com", Version: "v1", Resource: "cronjobs", Kind: "CronJob"}

func cronJob(ns, name string, deleting bool) *unstructured.Unstructured {
	md := map[string]any{"namespace": ns, "name": name, "uid": "uid-" + name, "resourceVersion": "17", "generation": int64(3)}
	if deleting {
		md["deletionTimestamp"] = "2026-12-04T23:00:00Z"
		md["finalizers"] = []any{"example.com/cleanup"}
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "batch.example.com/v1", "kind": "CronJob", "metadata": md,
		"spec": map[string]any{"schedule": "*/1 * * * *"},
	}}
}

// The header of ih_reconcile is section 8's layout with event type 4 and
// the primary key's strings; the flags say absent, deleting and initial;
// object_read(0) and field_read(0) read the primary, and the old object
// is always absent.
func TestReconcileHeaderAndObject(t *testing.T) {
	p := newProbe(t, time.Minute, InstanceOptions{})
	live, deleting := cronJob("team-a", "nightly", false), cronJob("team-a", "nightly", true)
	for _, tc := range []struct {
		name      string
		obj       *unstructured.Unstructured
		reqFlags  uint8
		wantFlags uint8
		uid, rv   string
	}{
		{"present", live, 0, 0, "uid-nightly", "17"},
		{"absent", nil, 0, abi.FlagAbsent, "", ""},
		{"deleting", deleting, 0, abi.FlagDeleting, "uid-nightly", "17"},
		{"initial replay", live, abi.FlagInitialList, abi.FlagInitialList, "uid-nightly", "17"},
		{"absent in a replay", nil, abi.FlagInitialList | abi.FlagAbsent, abi.FlagInitialList | abi.FlagAbsent, "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := NewReconcileEnvelope(cronRef, "team-a", "nightly", tc.obj)
			p.set(0, 0, "", "", abi.ResultOK)
			r := p.reconcile(&ReconcileRequest{Env: env, Flags: tc.reqFlags, Call: &fakeController{}})
			if r.Code != CodeOK {
				t.Fatalf("result %+v", r)
			}
			want := abi.AppendHeader(nil, &abi.Header{Type: abi.EventReconcile, Flags: tc.wantFlags, Fields: [abi.HeaderFieldCount]string{
				"cronjobs", "batch.example.com", "v1", "cronjobs", "CronJob", "team-a", "nightly", tc.uid, tc.rv}})
			if got := p.i32(atHeaderRead); got != int32(len(want)) {
				t.Fatalf("header_read = %d, want %d", got, len(want))
			}
			if got := p.bytes(0, uint32(len(want))); !bytes.Equal(got, want) {
				t.Fatalf("header\n got %x\nwant %x", got, want)
			}
			if got := p.i32(atHeaderLen); got != int32(len(want)) {
				t.Fatalf("ih_reconcile's header_len %d, want %d", got, len(want))
			}
			if env.Header()[2] != tc.wantFlags&(abi.FlagAbsent|abi.FlagDeleting) {
				t.Fatalf("the shared envelope's flags %#x changed by the call's", env.Header()[2])
			}
			if got := p.i32(atOldRead); got != abi.ErrAbsent {
				t.Fatalf("object_read(1) = %d, want ERR_ABSENT", got)
			}
			field, _ := p.inst.mod.Memory().ReadUint64Le(atFieldRead)
			if tc.obj == nil {
				if got := p.i32(atObjectRead); got != abi.ErrAbsent {
					t.Fatalf("object_read(0) of an absent key = %d, want ERR_ABSENT", got)
				}
				if _, _, code := abi.UnpackField(int64(field)); code != abi.ErrAbsent {
					t.Fatalf("field_read(0) of an absent key: code %d, want ERR_ABSENT", code)
				}
				return
			}
			js, _ := encodeJSON(tc.obj.Object)
			if got := p.i32(atObjectRead); got != int32(len(js)) || !bytes.Equal(p.bytes(4096, uint32(len(js))), js) {
				t.Fatalf("object_read(0) = %d %q, want %q", got, p.bytes(4096, uint32(max(got, 0))), js)
			}
			if kind, size, code := abi.UnpackField(int64(field)); code != 0 || kind != abi.KindString || string(p.bytes(16400, size)) != "nightly" {
				t.Fatalf("field_read(0, metadata.name): kind %d size %d code %d", kind, size, code)
			}
		})
	}
}

// NewReconcileEnvelope names the key even when the object is absent, and
// a cluster-scoped key has an empty namespace.
func TestNewReconcileEnvelope(t *testing.T) {
	for _, tc := range []struct {
		ns, name string
		obj      *unstructured.Unstructured
		flags    uint8
	}{
		{"", "cluster-wide", nil, abi.FlagAbsent},
		{"ns", "gone", &unstructured.Unstructured{}, abi.FlagAbsent},
		{"ns", "x", cronJob("ns", "x", false), 0},
		{"ns", "x", cronJob("ns", "x", true), abi.FlagDeleting},
	} {
		env := NewReconcileEnvelope(cronRef, tc.ns, tc.name, tc.obj)
		v, err := abi.ParseHeader(env.Header())
		if err != nil {
			t.Fatal(err)
		}
		h := v.Header()
		if h.Type != abi.EventReconcile || h.Flags != tc.flags || h.Fields[abi.FieldNamespace] != tc.ns || h.Fields[abi.FieldName] != tc.name || h.Fields[abi.FieldKind] != "CronJob" {
			t.Errorf("%s/%s: header %+v", tc.ns, tc.name, h)
		}
		if env.Namespace() != tc.ns || env.Name() != tc.name || env.Event().Type != event.EventType(abi.EventReconcile) {
			t.Errorf("%s/%s: envelope says %q/%q type %d", tc.ns, tc.name, env.Namespace(), env.Name(), env.Event().Type)
		}
	}
}

// reconcile_requeue_after hands the delay to the call's ControllerCall
// (0 clears; the last call wins, which is the host's to keep), and
// refuses a negative delay or one beyond 366 days without recording it.
func TestReconcileRequeueAfter(t *testing.T) {
	p := newProbe(t, time.Minute, InstanceOptions{})
	env := NewReconcileEnvelope(cronRef, "team-a", "nightly", cronJob("team-a", "nightly", false))
	for _, tc := range []struct {
		millis int64
		want   int32
		rec    []time.Duration
	}{
		{5000, 0, []time.Duration{5 * time.Second}},
		{0, 0, []time.Duration{0}},
		{abi.MaxRequeueAfterMillis, 0, []time.Duration{366 * 24 * time.Hour}},
		{-1, abi.ErrInvalid, nil},
		{abi.MaxRequeueAfterMillis + 1, abi.ErrInvalid, nil},
		{-1 << 63, abi.ErrInvalid, nil},
	} {
		fc := &fakeController{}
		p.set(doRequeue, tc.millis, "", "", abi.ResultOK)
		p.reconcile(&ReconcileRequest{Env: env, Call: fc})
		if got := p.i32(atRequeue); got != tc.want {
			t.Errorf("requeue_after(%d) = %d, want %d", tc.millis, got, tc.want)
		}
		if len(fc.requeues) != len(tc.rec) || (len(tc.rec) == 1 && fc.requeues[0] != tc.rec[0]) {
			t.Errorf("requeue_after(%d) recorded %v, want %v", tc.millis, fc.requeues, tc.rec)
		}
		if msg := resultMessageOf(t, p.inst); (tc.want != 0) != strings.Contains(msg, "366 days") {
			t.Errorf("requeue_after(%d): result message %q", tc.millis, msg)
		}
	}
}

// children_apply and status_apply pass the plugin's bytes to the
// ControllerCall and return its answer: the number of failed children or
// a code, its message in result_message. What the engine refuses itself
// (no writes grant, not a JSON array or object, status of an absent key)
// never reaches the ControllerCall.
func TestReconcileChildrenAndStatus(t *testing.T) {
	var denied []string
	onDenied := func(c, f string) { denied = append(denied, c+" "+f) }
	p := newProbe(t, time.Minute, InstanceOptions{Writes: &fakeWriter{}, OnDenied: onDenied})
	ungranted := newProbe(t, time.Minute, InstanceOptions{OnDenied: onDenied})
	present := NewReconcileEnvelope(cronRef, "team-a", "nightly", cronJob("team-a", "nightly", false))
	absent := NewReconcileEnvelope(cronRef, "team-a", "nightly", nil)
	children := `[{"apiVersion":"batch/v1","kind":"Job","metadata":{"name":"nightly-1"}}]`
	status := `{"conditions":[{"type":"Ready","status":"True","reason":"Scheduled"}]}`
	twoFailed := "Job team-a/nightly-1: forbidden\nJob team-a/nightly-2: conflict"
	for _, tc := range []struct {
		name    string
		p       probe
		env     *Envelope
		bits    int32
		body    string
		fc      *fakeController
		at      uint32
		want    int32
		msg     string // result_message contains
		reached bool   // the ControllerCall was called with body
	}{
		{"children applied", p, present, doChildren, children, &fakeController{}, atChildren, 0, "", true},
		{"children empty set", p, present, doChildren, " [] ", &fakeController{}, atChildren, 0, "", true},
		{"children, two failed", p, present, doChildren, children, &fakeController{failed: 2, msg: twoFailed}, atChildren, 2, twoFailed, true},
		{"children of an absent key", p, absent, doChildren, `[]`, &fakeController{}, atChildren, 0, "", true},
		{"children denied by the host", p, present, doChildren, children, &fakeController{code: abi.ErrDenied, msg: "Secret is not in controller.owns"}, atChildren, abi.ErrDenied, "controller.owns", true},
		{"children invalid by the host", p, present, doChildren, `[{}]`, &fakeController{code: abi.ErrInvalid, msg: "child 0: no apiVersion"}, atChildren, abi.ErrInvalid, "no apiVersion", true},
		{"children: an undefined code is the host's bug", p, present, doChildren, children, &fakeController{code: 7}, atChildren, abi.ErrInternal, "code 7", true},
		{"children not an array", p, present, doChildren, `{"kind":"Job"}`, &fakeController{}, atChildren, abi.ErrInvalid, "JSON array", false},
		{"children not JSON", p, present, doChildren, `[{`, &fakeController{}, atChildren, abi.ErrInvalid, "JSON array", false},
		{"children without the writes grant", ungranted, present, doChildren, children, &fakeController{}, atChildren, abi.ErrDenied, "grants.writes", false},
		{"status applied", p, present, doStatus, status, &fakeController{}, atStatus, 0, "", true},
		{"status apiserver failure", p, present, doStatus, status, &fakeController{code: abi.ErrUnavailable, msg: "apiserver unavailable"}, atStatus, abi.ErrUnavailable, "unavailable", true},
		{"status of an absent key", p, absent, doStatus, status, &fakeController{}, atStatus, abi.ErrAbsent, "absent", false},
		{"status not an object", p, present, doStatus, `[]`, &fakeController{}, atStatus, abi.ErrInvalid, "JSON object", false},
		{"status without the writes grant", ungranted, present, doStatus, status, &fakeController{}, atStatus, abi.ErrDenied, "grants.writes", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fc := tc.fc
			var cb, sb string
			if tc.bits == doChildren {
				cb = tc.body
			} else {
				sb = tc.body
			}
			tc.p.set(tc.bits, 0, cb, sb, abi.ResultOK)
			if r := tc.p.reconcile(&ReconcileRequest{Env: tc.env, Call: fc}); r.Code != CodeOK {
				t.Fatalf("result %+v", r)
			}
			if got := tc.p.i32(tc.at); got != tc.want {
				t.Fatalf("returned %d, want %d (%s)", got, tc.want, resultMessageOf(t, tc.p.inst))
			}
			if msg := resultMessageOf(t, tc.p.inst); !strings.Contains(msg, tc.msg) || (tc.msg == "" && msg != "") {
				t.Fatalf("result message %q, want it to contain %q", msg, tc.msg)
			}
			got := append(fc.children, fc.status...)
			if tc.reached != (len(got) == 1) || (tc.reached && got[0] != tc.body) {
				t.Fatalf("the ControllerCall got %q; reached want %v", got, tc.reached)
			}
		})
	}
	// Every ERR_DENIED is reported, the engine's and the host's.
	want := []string{"writes children_apply", "writes children_apply", "writes status_apply"}
	if strings.Join(denied, ",") != strings.Join(want, ",") {
		t.Errorf("OnDenied calls %q, want %q", denied, want)
	}
}

// Outside ih_reconcile (here, ih_handle) every controller function is
// ERR_NO_EVENT, and the instance's ControllerCall does not outlive its
// call.
func TestControllerFunctionsOutsideReconcile(t *testing.T) {
	fc := &fakeController{}
	p := newProbe(t, time.Minute, InstanceOptions{Writes: &fakeWriter{}})
	p.set(0, 0, "", "", abi.ResultOK)
	p.reconcile(&ReconcileRequest{Env: NewReconcileEnvelope(cronRef, "a", "b", nil), Call: fc})
	if _, err := p.inst.Handle(context.Background(), addEvent(pod("ns", "p", "Running"))); err != nil {
		t.Fatal(err)
	}
	for k, fn := range []string{abi.ImportReconcileRequeueAfter, abi.ImportChildrenApply, abi.ImportStatusApply} {
		if got := p.i32(atHandleCalls + 4*uint32(k)); got != abi.ErrNoEvent {
			t.Errorf("%s from ih_handle = %d, want ERR_NO_EVENT", fn, got)
		}
	}
	if c, s := fc.calls(); c+s != 0 || len(fc.requeues) != 0 {
		t.Errorf("the last reconcile's ControllerCall was called from ih_handle")
	}
}

// The controller functions check their buffer before anything else: out
// of bounds is ERR_BOUNDS inside or outside ih_reconcile, granted or not,
// and the ControllerCall is not asked.
func TestControllerFunctionsBoundsFirst(t *testing.T) {
	p := newProbe(t, time.Minute, InstanceOptions{})
	fc := &fakeController{}
	size := uint64(p.inst.mod.Memory().Size())
	for _, ctl := range []ControllerCall{nil, fc} {
		p.inst.st.ctl = ctl
		p.inst.st.env = NewReconcileEnvelope(cronRef, "a", "b", cronJob("a", "b", false))
		for _, region := range [][2]uint64{{0xfffffff0, 64}, {0, 0xffffffff}, {size - 1, 2}, {size + 1, 0}} {
			for name, fn := range map[string]func(context.Context, api.Module, []uint64){
				abi.ImportChildrenApply: childrenApply, abi.ImportStatusApply: statusApply,
			} {
				st := []uint64{region[0], region[1]}
				fn(p.inst.ctx, p.inst.mod, st)
				if got := int32(uint32(st[0])); got != abi.ErrBounds {
					t.Errorf("%s(%#x, %d) = %d, want ERR_BOUNDS", name, region[0], int32(uint32(region[1])), got)
				}
			}
		}
	}
	p.inst.st.ctl, p.inst.st.env = nil, nil
	if c, s := fc.calls(); c+s != 0 {
		t.Fatal("the ControllerCall was asked for an out-of-bounds buffer")
	}
	// No call state at all (a context that is not an instance's).
	st := []uint64{1000}
	reconcileRequeueAfter(context.Background(), p.inst.mod, st)
	if got := int32(uint32(st[0])); got != abi.ErrNoEvent {
		t.Fatalf("requeue_after without a call = %d", got)
	}
	st = []uint64{0, 2}
	childrenApply(context.Background(), p.inst.mod, st)
	if got := int32(uint32(st[0])); got != abi.ErrNoEvent {
		t.Fatalf("children_apply without a call = %d", got)
	}
}

// A trap or a timeout in ih_reconcile is a *Failure like Handle's, and
// the instance is dead; a module without ih_reconcile answers an error
// that leaves the instance usable.
func TestReconcileFailures(t *testing.T) {
	p := newProbe(t, time.Minute, InstanceOptions{})
	p.set(doTrap, 0, "", "", abi.ResultOK)
	env := NewReconcileEnvelope(cronRef, "a", "b", nil)
	_, err := p.inst.Reconcile(context.Background(), &ReconcileRequest{Env: env, Call: &fakeController{}})
	var f *Failure
	if !errors.As(err, &f) || f.Kind != KindTrap || f.Phase != abi.ExportReconcile {
		t.Fatalf("trap: %v, want a trap Failure in ih_reconcile", err)
	}
	if _, err := p.inst.Reconcile(context.Background(), &ReconcileRequest{Env: env, Call: &fakeController{}}); !errors.Is(err, ErrInstanceDead) {
		t.Fatalf("after the trap: %v, want ErrInstanceDead", err)
	}

	e := newEngine(t, Options{})
	spin := testenv.WATText(t, `(module
  (memory (export "memory") 1)
  (func (export "informer_host_abi_v1"))
  (func (export "ih_handle") (param i32) (result i32) (i32.const 0))
  (func (export "ih_reconcile") (param i32) (result i32) (loop $l (br $l)) (i32.const 0)))`)
	m, err := e.Load(context.Background(), "spin.wasm", spin, Limits{CallTimeout: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close(context.Background())
	inst := instantiate(t, m, InstanceOptions{})
	_, err = inst.Reconcile(context.Background(), &ReconcileRequest{Env: env, Call: &fakeController{}})
	if !errors.As(err, &f) || f.Kind != KindTimeout || f.Phase != abi.ExportReconcile || !errors.Is(err, ErrCallTimeout) {
		t.Fatalf("spin: %v, want a timeout Failure in ih_reconcile", err)
	}

	h := load(t, e, "healthy", Limits{CallTimeout: time.Minute})
	if h.Reconciles() {
		t.Fatal("Reconciles() is true for a module without ih_reconcile")
	}
	hi := instantiate(t, h, InstanceOptions{})
	_, err = hi.Reconcile(context.Background(), &ReconcileRequest{Env: env, Call: &fakeController{}})
	if err == nil || errors.As(err, &f) || !strings.Contains(err.Error(), "does not export ih_reconcile") {
		t.Fatalf("no ih_reconcile: %v", err)
	}
	if _, err := p.inst.Reconcile(context.Background(), &ReconcileRequest{Env: env}); err == nil {
		t.Fatal("a request without a Call was accepted")
	}
	if r, err := hi.Handle(context.Background(), addEvent(pod("ns", "p", "Running"))); err != nil || r.Code != CodeOK {
		t.Fatalf("the instance after a refused Reconcile: %+v %v", r, err)
	}
}

// The children's and the status's network wait is not the plugin's CPU,
// as k8s_write's is not: an apply far slower than the call timeout
// succeeds. The wait is the scenario (a slow apiserver), not a stand-in
// for a condition.
func TestReconcileApplyWaitIsNotCPU(t *testing.T) {
	const callTimeout = 20 * time.Millisecond
	fc := &fakeController{block: slowAPIServer(10 * callTimeout)}
	p := newProbe(t, callTimeout, InstanceOptions{Writes: &fakeWriter{}})
	p.set(doChildren|doStatus, 0, `[]`, `{}`, abi.ResultOK)
	r := p.reconcile(&ReconcileRequest{Env: NewReconcileEnvelope(cronRef, "a", "b", cronJob("a", "b", false)), Call: fc})
	if r.Code != CodeOK || p.i32(atChildren) != 0 || p.i32(atStatus) != 0 {
		t.Fatalf("result %+v, children_apply %d, status_apply %d", r, p.i32(atChildren), p.i32(atStatus))
	}
}

// The host stopping the call (its context) while an apply waits returns
// ERR_CANCELED to the plugin, which answers as it likes.
func TestReconcileApplyCanceledByHost(t *testing.T) {
	waiting := make(chan struct{})
	var once sync.Once
	fc := &fakeController{block: func(ctx context.Context) int32 {
		once.Do(func() { close(waiting) })
		<-ctx.Done()
		return abi.ErrCanceled
	}}
	p := newProbe(t, time.Second, InstanceOptions{Writes: &fakeWriter{}})
	p.set(doChildren, 0, `[]`, ``, abi.ResultRetry)
	ctx, cancel := context.WithCancel(context.Background())
	go func() { <-waiting; cancel() }()
	r, err := p.inst.Reconcile(ctx, &ReconcileRequest{Env: NewReconcileEnvelope(cronRef, "a", "b", nil), Call: fc})
	if err != nil || r.Code != CodeRetry {
		t.Fatalf("Reconcile: %+v %v", r, err)
	}
	if got := p.i32(atChildren); got != abi.ErrCanceled || !strings.Contains(resultMessageOf(t, p.inst), "stopped the call") {
		t.Fatalf("children_apply = %d (%q), want ERR_CANCELED", got, resultMessageOf(t, p.inst))
	}
}

// A v1.5 controller loads as an ABI v1 plugin: ih_reconcile and the
// controller imports are known, with no problem and no reserved-prefix
// warning.
func TestReconcilerPassesValidation(t *testing.T) {
	info, err := wasmbin.Decode(fixture(t, "reconciler"))
	if err != nil {
		t.Fatal(err)
	}
	e := newEngine(t, Options{})
	if problems, warnings := checkABI(info, e.wasiSigs); len(problems)+len(warnings) != 0 {
		t.Fatalf("problems %q, warnings %q", problems, warnings)
	}
}

// The controller functions count against the host calls per call, like
// every host function: a reconcile looping on one is stopped at the cap,
// as a timeout naming the limit, after exactly the calls allowed.
func TestReconcileHostCallCap(t *testing.T) {
	wasm := testenv.WATText(t, `(module
  (import "informer_host_v1" "reconcile_requeue_after" (func $requeue (param i64) (result i32)))
  (memory (export "memory") 1)
  (func (export "informer_host_abi_v1"))
  (func (export "ih_handle") (param i32) (result i32) (i32.const 0))
  (func (export "ih_reconcile") (param i32) (result i32)
    (loop $again (drop (call $requeue (i64.const 1000))) (br $again))
    (i32.const 0)))`)
	e := newEngine(t, Options{})
	m, err := e.Load(context.Background(), "requeue-loop.wasm", wasm, Limits{CallTimeout: generous, MaxHostCallsPerCall: 1000})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close(context.Background())
	inst := instantiate(t, m, InstanceOptions{})
	fc := &fakeController{}
	_, err = inst.Reconcile(context.Background(), &ReconcileRequest{Env: NewReconcileEnvelope(cronRef, "a", "b", nil), Call: fc})
	var f *Failure
	if !errors.As(err, &f) || f.Kind != KindTimeout || f.Phase != abi.ExportReconcile || !errors.Is(err, ErrMaxHostCalls) {
		t.Fatalf("%v, want a host-call-cap timeout in ih_reconcile", err)
	}
	if len(fc.requeues) != 1000 {
		t.Fatalf("%d requeue_after calls reached the ControllerCall, want the 1000 allowed", len(fc.requeues))
	}
}
