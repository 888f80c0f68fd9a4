package engine

import (
	"context"
	"encoding/binary"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/tetratelabs/wazero/api"

	"github.com/informer-host/informer-host/abi"
)

// fakeWriter is a ClusterWriter granted "pods" in namespace "ns" (every
// verb) and nothing else. Do answers with the object the request names,
// or waits: block, when set, is called inside Do with Do's context. The
// host's real writer (kubewrite) is tested against the apiserver; this
// one lets the engine's side be fuzzed and timed.
type fakeWriter struct {
	mu     sync.Mutex
	checks int
	dos    int
	last   WriteRequest // copied strings, for assertions
	block  func(ctx context.Context) int32
	denied []string
}

func (w *fakeWriter) Check(r *WriteRequest) (int32, string) {
	w.mu.Lock()
	w.checks++
	w.mu.Unlock()
	switch {
	case string(r.Resource) != "pods" || string(r.Namespace) != "ns":
		return abi.ErrDenied, "no write grant for resource " + string(r.Resource)
	case abi.WriteVerb(r.Op) == "":
		return abi.ErrInvalid, fmt.Sprintf("unknown op %d", r.Op)
	case len(r.Name) == 0 && r.Op != abi.WriteCreate:
		return abi.ErrInvalid, "a name is required"
	}
	return 0, ""
}

func (w *fakeWriter) Do(ctx context.Context, r *WriteRequest) (map[string]any, int32, string) {
	w.mu.Lock()
	w.dos++
	w.last = WriteRequest{Op: r.Op, Name: append([]byte(nil), r.Name...), Body: append([]byte(nil), r.Body...), Force: r.Force, MustExist: r.MustExist}
	block := w.block
	w.mu.Unlock()
	if block != nil {
		if code := block(ctx); code != 0 {
			return nil, code, "blocked: " + abi.ErrorName(code)
		}
	}
	if r.Op == abi.WriteDelete {
		return nil, 0, ""
	}
	return map[string]any{"metadata": map[string]any{"namespace": string(r.Namespace), "name": string(r.Name), "resourceVersion": "7"}}, 0, ""
}

// writeCall lays a k8s_write call out in inst's memory and makes it.
type writeCall struct {
	op                                int32
	res, ns, name, sub, body, uid, rv string
	flags                             int32
}

func (c writeCall) do(inst *Instance) int32 {
	st := make([]uint64, 16)
	st[0] = uint64(uint32(c.op))
	at := uint32(0)
	for k, s := range []string{c.res, c.ns, c.name, c.sub, c.body, c.uid, c.rv} {
		inst.mod.Memory().Write(at, []byte(s))
		st[1+2*k], st[2+2*k] = uint64(at), uint64(len(s))
		at += 512
	}
	st[15] = uint64(uint32(c.flags))
	k8sWrite(inst.ctx, inst.mod, st)
	return int32(uint32(st[0]))
}

func resultMessageOf(t *testing.T, inst *Instance) string {
	t.Helper()
	st := []uint64{8192, 4096}
	resultMessage(inst.ctx, inst.mod, st)
	n := int32(uint32(st[0]))
	if n < 0 || n > 4096 {
		t.Fatalf("result_message = %d", n)
	}
	b, _ := inst.mod.Memory().Read(8192, uint32(n))
	return string(b)
}

// k8s_write's outcomes, in the documented order: bounds, denied (no
// grant, then the grant's answer), invalid, then the request; a success
// is a handle object_read and field_read read, and result_message says
// why for every error.
func TestWriteFunctionsDirect(t *testing.T) {
	e := newEngine(t, Options{})
	m := load(t, e, "healthy", Limits{CallTimeout: time.Minute, MemoryPages: 2})
	fw := &fakeWriter{}
	var denied []string
	inst := instantiate(t, m, InstanceOptions{Writes: fw, OnDenied: func(c, f string) { denied = append(denied, c+" "+f) }})
	none := instantiate(t, m, InstanceOptions{OnDenied: func(c, f string) { denied = append(denied, "none "+c+" "+f) }})

	ok := writeCall{op: abi.WriteApply, res: "pods", ns: "ns", name: "p1", body: `{"metadata":{"labels":{"a":"b"}}}`, flags: abi.WriteForce}
	h := ok.do(inst)
	if h != abi.FirstHandle {
		t.Fatalf("k8s_write = %d (%s), want the first handle", h, resultMessageOf(t, inst))
	}
	if msg := resultMessageOf(t, inst); msg != "" {
		t.Fatalf("result message after a success %q", msg)
	}
	if !fw.last.Force || fw.last.MustExist || string(fw.last.Body) != ok.body || string(fw.last.Name) != "p1" {
		t.Fatalf("the writer got %+v", fw.last)
	}
	mustExist := ok
	mustExist.flags = abi.WriteMustExist
	if h := mustExist.do(inst); h < 0 || fw.last.Force || !fw.last.MustExist {
		t.Fatalf("must-exist apply = %d; the writer got %+v, want MustExist without Force", h, fw.last)
	}
	fs := []uint64{uint64(uint32(h)), 300, 0, 400, 64}
	inst.mod.Memory().Write(300, []byte("metadata.resourceVersion"))
	fs[2] = uint64(len("metadata.resourceVersion"))
	fieldRead(inst.ctx, inst.mod, fs)
	if kind, size, code := abi.UnpackField(int64(fs[0])); code != 0 || kind != abi.KindString || size != 1 {
		t.Fatalf("field_read of the handle: kind %d size %d code %d", kind, size, code)
	}
	if d := (writeCall{op: abi.WriteDelete, res: "pods", ns: "ns", name: "p1"}).do(inst); d != 0 {
		t.Fatalf("delete = %d, want 0 (no object)", d)
	}

	dos := fw.dos
	cases := []struct {
		name string
		inst *Instance
		call writeCall
		want int32
		msg  string
	}{
		{"not granted", none, ok, abi.ErrDenied, "not granted"},
		{"resource not granted", inst, writeCall{op: abi.WriteApply, res: "secrets", ns: "ns", name: "s", body: "{}"}, abi.ErrDenied, "no write grant"},
		// Denied before invalid: a bad op on an ungranted resource.
		{"denied before invalid", inst, writeCall{op: 99, res: "secrets", ns: "ns", name: "s", body: "nope"}, abi.ErrDenied, "no write grant"},
		{"unknown op", inst, writeCall{op: 99, res: "pods", ns: "ns", name: "p"}, abi.ErrInvalid, "unknown op"},
		{"no name", inst, writeCall{op: abi.WriteMergePatch, res: "pods", ns: "ns", body: "{}"}, abi.ErrInvalid, "name"},
		{"unknown flag", inst, writeCall{op: abi.WriteApply, res: "pods", ns: "ns", name: "p", body: "{}", flags: 4}, abi.ErrInvalid, "flag"},
		{"body not JSON", inst, writeCall{op: abi.WriteApply, res: "pods", ns: "ns", name: "p", body: "{"}, abi.ErrInvalid, "JSON"},
		{"delete with a body", inst, writeCall{op: abi.WriteDelete, res: "pods", ns: "ns", name: "p", body: "{}"}, abi.ErrInvalid, "no body"},
	}
	for _, tc := range cases {
		if got := tc.call.do(tc.inst); got != tc.want {
			t.Errorf("%s: k8s_write = %d, want %d", tc.name, got, tc.want)
		}
		if msg := resultMessageOf(t, tc.inst); !contains(msg, tc.msg) {
			t.Errorf("%s: result message %q, want it to mention %q", tc.name, msg, tc.msg)
		}
	}
	if fw.dos != dos {
		t.Fatalf("%d requests sent for refused calls", fw.dos-dos)
	}
	if len(denied) != 3 || denied[0] != "none writes k8s_write" || denied[1] != "writes k8s_write" {
		t.Fatalf("OnDenied calls %q", denied)
	}

	// Bounds before everything, the writer not even asked.
	checks := fw.checks
	st := make([]uint64, 16)
	st[0], st[1], st[2] = uint64(abi.WriteApply), 0xfffffff0, 64
	k8sWrite(inst.ctx, inst.mod, st)
	if got := int32(uint32(st[0])); got != abi.ErrBounds || fw.checks != checks {
		t.Fatalf("out-of-bounds resource: %d, %d checks", got, fw.checks-checks)
	}
	st = make([]uint64, 16)
	st[0], st[14] = uint64(abi.WriteApply), 0xffffffff
	k8sWrite(inst.ctx, inst.mod, st)
	if got := int32(uint32(st[0])); got != abi.ErrBounds {
		t.Fatalf("negative rv length: %d", got)
	}

	// No handle left: invalid, and no request.
	for len(inst.st.handles) < abi.MaxHandles {
		inst.st.handles = append(inst.st.handles, map[string]any{})
	}
	if got := ok.do(inst); got != abi.ErrInvalid || fw.dos != dos {
		t.Fatalf("with every handle live: %d, %d requests", got, fw.dos-dos)
	}
	inst.st.dropHandles()
}

func contains(s, sub string) bool {
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub {
			return true
		}
	}
	return false
}

// writerPlugin instantiates the writer fixture (a merge patch of the
// event's object on every event) with fw.
func writerPlugin(t *testing.T, timeout time.Duration, fw ClusterWriter) *Instance {
	t.Helper()
	e := newEngine(t, Options{})
	m := load(t, e, "writer", Limits{CallTimeout: timeout, MemoryPages: 4})
	return instantiate(t, m, InstanceOptions{Writes: fw, Config: []byte(`{"metadata":{"labels":{"a":"b"}}}`)})
}

func lastWriteCode(inst *Instance) int32 {
	b, _ := inst.mod.Memory().Read(0, 4)
	return int32(binary.LittleEndian.Uint32(b))
}

// slowAPIServer is a wait of d that only the host's stop ends early
// (ERR_CANCELED): an apiserver slower than a plugin's call timeout.
func slowAPIServer(d time.Duration) func(ctx context.Context) int32 {
	return func(ctx context.Context) int32 {
		select {
		case <-time.After(d):
			return 0
		case <-ctx.Done():
			return abi.ErrCanceled
		}
	}
}

// A write that waits on the network far longer than the plugin's call
// timeout succeeds: the wait is not the plugin's CPU. The wait here is
// the scenario (a slow apiserver), not a stand-in for a condition.
func TestWriteWaitIsNotCPU(t *testing.T) {
	const callTimeout = 20 * time.Millisecond
	fw := &fakeWriter{block: slowAPIServer(10 * callTimeout)}
	inst := writerPlugin(t, callTimeout, fw)
	p := pod("ns", "p1", "Running")
	res, err := inst.Handle(context.Background(), addEvent(p))
	if err != nil {
		t.Fatalf("Handle: %v (the wait counted against the call timeout)", err)
	}
	if res.Code != CodeOK || lastWriteCode(inst) != abi.FirstHandle {
		t.Fatalf("result %+v, k8s_write %d", res, lastWriteCode(inst))
	}
}

// The host stopping a call (its context) while the write waits returns
// ERR_CANCELED to the plugin at once, and the instance stays usable.
func TestWriteCanceledByHost(t *testing.T) {
	waiting := make(chan struct{})
	var once sync.Once
	fw := &fakeWriter{block: func(ctx context.Context) int32 {
		once.Do(func() { close(waiting) })
		<-ctx.Done() // only the host's stop ends this wait
		return abi.ErrCanceled
	}}
	inst := writerPlugin(t, time.Second, fw)
	ctx, cancel := context.WithCancel(context.Background())
	go func() { <-waiting; cancel() }()
	res, err := inst.HandleWith(ctx, addEvent(pod("ns", "p1", "Running")), 0)
	if err != nil {
		t.Fatalf("Handle: %v", err)
	}
	if got := lastWriteCode(inst); got != abi.ErrCanceled || res.Code != CodeRetry {
		t.Fatalf("k8s_write %d, result %v; want ERR_CANCELED and the plugin's RETRY", got, res.Code)
	}
	fw.mu.Lock()
	fw.block = nil
	fw.mu.Unlock()
	res, err = inst.Handle(context.Background(), addEvent(pod("ns", "p2", "Running")))
	if err != nil || res.Code != CodeOK || lastWriteCode(inst) != abi.FirstHandle {
		t.Fatalf("after the cancel: %+v %v, k8s_write %d", res, err, lastWriteCode(inst))
	}
}

// HandleWith's flags reach this plugin's header, and only this call's.
func TestHandleWithSelfWriteFlag(t *testing.T) {
	inst := writerPlugin(t, time.Second, &fakeWriter{})
	env := updateEvent(pod("ns", "p1", "Pending"), pod("ns", "p1", "Running"))
	flagsSeen := func() uint8 { b, _ := inst.mod.Memory().Read(8, 1); return b[0] }
	if _, err := inst.HandleWith(context.Background(), env, abi.FlagSelfWrite); err != nil {
		t.Fatal(err)
	}
	if got := flagsSeen(); got != abi.FlagHasOldObject|abi.FlagSelfWrite {
		t.Fatalf("flags %#x, want has-old-object and self-write", got)
	}
	if env.Header()[2] != abi.FlagHasOldObject {
		t.Fatal("the shared envelope's header was changed")
	}
	if _, err := inst.Handle(context.Background(), env); err != nil {
		t.Fatal(err)
	}
	if got := flagsSeen(); got != abi.FlagHasOldObject {
		t.Fatalf("flags %#x on the next call, want has-old-object only", got)
	}
}

// FuzzWriteFunctions: k8s_write with any arguments never panics, checks
// every region first, writes nothing into the plugin's memory, returns a
// documented code or a live handle, and sends a request only for a call
// that passed every check.
func FuzzWriteFunctions(f *testing.F) {
	f.Add(int32(abi.WriteApply), uint32(0), int32(4), uint32(4), int32(2), uint32(6), int32(2), uint32(0), int32(0), uint32(8), int32(2), int32(0), []byte("podsnsp1{}"))
	f.Add(int32(abi.WriteDelete), uint32(0), int32(4), uint32(4), int32(2), uint32(6), int32(2), uint32(0), int32(0), uint32(0), int32(0), int32(0), []byte("podsnsp1"))
	f.Add(int32(abi.WriteCreate), uint32(0), int32(4), uint32(4), int32(2), uint32(0), int32(0), uint32(0), int32(0), uint32(6), int32(1), int32(1), []byte("podsns{"))
	f.Add(int32(7), uint32(0xfffffff0), int32(32), uint32(4), int32(-1), uint32(6), int32(2), uint32(0), int32(0), uint32(0), int32(0), int32(-1), []byte("x"))
	f.Add(int32(abi.WriteJSONPatch), uint32(0), int32(7), uint32(4), int32(2), uint32(6), int32(2), uint32(8), int32(6), uint32(14), int32(2), int32(0), []byte("secretsnsp1statu[]"))
	e := newEngine(f, Options{})
	m := load(f, e, "healthy", Limits{CallTimeout: time.Minute, MemoryPages: 2})
	fw := &fakeWriter{}
	inst := instantiate(f, m, InstanceOptions{Writes: fw})
	f.Fuzz(func(t *testing.T, op int32, p0 uint32, n0 int32, p1 uint32, n1 int32, p2 uint32, n2 int32, p3 uint32, n3 int32, pb uint32, nb int32, flags int32, data []byte) {
		mem, size, before := fuzzMemory(inst, data)
		st := inst.st
		st.dropHandles()
		defer st.dropHandles()
		stack := make([]uint64, 16)
		stack[0] = uint64(uint32(op))
		regions := [][2]uint64{{uint64(p0), uint64(uint32(n0))}, {uint64(p1), uint64(uint32(n1))}, {uint64(p2), uint64(uint32(n2))},
			{uint64(p3), uint64(uint32(n3))}, {uint64(pb), uint64(uint32(nb))}, {uint64(p1), uint64(uint32(n1))}, {uint64(p2), uint64(uint32(n2))}}
		allIn := true
		for k, r := range regions {
			stack[1+2*k], stack[2+2*k] = r[0], r[1]
			allIn = allIn && int32(uint32(r[1])) >= 0 && r[0]+uint64(uint32(r[1])) <= uint64(size)
		}
		stack[15] = uint64(uint32(flags))
		dos := fw.dos
		k8sWrite(inst.ctx, inst.mod, stack)
		res := int32(uint32(stack[0]))
		switch {
		case !allIn && res != abi.ErrBounds:
			t.Fatalf("out-of-bounds region returned %d", res)
		case res < 0 && abi.ErrorName(res) == "":
			t.Fatalf("undocumented error %d", res)
		case res > 0 && (res < abi.FirstHandle || res >= abi.FirstHandle+int32(len(st.handles))):
			t.Fatalf("returned %d, not a live handle", res)
		case res == 0 && op != abi.WriteDelete:
			t.Fatalf("op %d returned 0", op)
		case res < 0 && fw.dos != dos:
			t.Fatalf("a refused call (%s) sent a request", abi.ErrorName(res))
		}
		after, _ := mem.Read(0, size)
		for i := range after {
			if after[i] != before[i] {
				t.Fatalf("k8s_write wrote byte %d of the plugin's memory", i)
			}
		}
	})
}

// fuzzMemory fills inst's memory with 0xCD, puts data at 0, and returns
// the memory, its size and a copy of its content, for a fuzz target to
// check what a host function wrote.
func fuzzMemory(inst *Instance, data []byte) (api.Memory, uint32, []byte) {
	mem := inst.mod.Memory()
	size := mem.Size()
	buf, _ := mem.Read(0, size)
	for i := range buf {
		buf[i] = 0xCD
	}
	if uint64(len(data)) <= uint64(size) {
		mem.Write(0, data)
	}
	return mem, size, append([]byte(nil), buf...)
}
