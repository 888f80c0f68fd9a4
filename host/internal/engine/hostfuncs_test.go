package engine

import (
	"bytes"
	"context"
	"encoding/binary"
	"testing"
	"time"

	"github.com/tetratelabs/wazero/api"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/informer-host/informer-host/abi"
	"github.com/informer-host/informer-host/event"
)

// TestHostFunctionsThroughWasm drives every read function from a guest
// (the echo fixture), through the size protocol.
func TestHostFunctionsThroughWasm(t *testing.T) {
	old, cur := pod("shop", "web-0", "Pending"), pod("shop", "web-0", "Running")
	add, upd := addEvent(cur), updateEvent(old, cur)
	objJSON, _ := encodeJSON(cur.Object)
	oldJSON, _ := encodeJSON(old.Object)
	tests := []struct {
		config string
		env    *Envelope
		raw    int32  // kind, 0, or error code
		value  string // the bytes returned
	}{
		{config: "h", env: upd, raw: 0, value: string(upd.Header())},
		{config: "o", env: upd, raw: 0, value: string(objJSON)},
		{config: "O", env: upd, raw: 0, value: string(oldJSON)},
		{config: "O", env: add, raw: abi.ErrAbsent},
		{config: "fstatus.phase", env: upd, raw: abi.KindString, value: "Running"},
		{config: "Fstatus.phase", env: upd, raw: abi.KindString, value: "Pending"},
		{config: "Fstatus.phase", env: add, raw: abi.ErrAbsent},
		{config: "fstatus.message", env: add, raw: abi.KindString, value: `<ok> & "quoted"`},
		{config: "fmetadata.labels.app", env: add, raw: abi.KindString, value: "web"},
		{config: `fmetadata.labels["app.kubernetes.io/name"]`, env: add, raw: abi.KindString, value: "shop"},
		{config: "fspec.containers[0].image", env: add, raw: abi.KindString, value: "nginx:1.27"},
		{config: "fspec.containers[0].ports[0].containerPort", env: add, raw: abi.KindNumber, value: "80"},
		{config: "fspec.priority", env: add, raw: abi.KindNumber, value: "-3"},
		{config: "fspec.weight", env: add, raw: abi.KindNumber, value: "1.5"},
		{config: "fspec.hostNetwork", env: add, raw: abi.KindBool, value: "false"},
		{config: "fspec.overhead", env: add, raw: abi.KindNull, value: "null"},
		{config: "fmetadata.labels", env: add, raw: abi.KindObject, value: `{"app":"web","app.kubernetes.io/name":"shop"}`},
		{config: "fspec.containers[0].ports", env: add, raw: abi.KindArray, value: `[{"containerPort":80}]`},
		{config: "fstatus.nope", env: add, raw: abi.ErrNotFound},
		{config: "fspec.containers[1]", env: add, raw: abi.ErrNotFound},
		{config: "fspec.containers.x", env: add, raw: abi.ErrNotFound},
		{config: "fstatus[0]", env: add, raw: abi.ErrNotFound},
		{config: "fstatus.phase.x", env: add, raw: abi.ErrNotFound},
		{config: "fnope..x", env: add, raw: abi.ErrBadPath},
		{config: "f", env: add, raw: abi.ErrBadPath},
		{config: `fstatus["phase`, env: add, raw: abi.ErrBadPath},
	}
	e := newEngine(t, Options{})
	m := load(t, e, "echo", Limits{CallTimeout: time.Minute})
	for _, tc := range tests {
		t.Run(tc.config, func(t *testing.T) {
			i := instantiate(t, m, InstanceOptions{Config: []byte(tc.config)})
			r, err := i.Handle(context.Background(), tc.env)
			if err != nil {
				t.Fatal(err)
			}
			if tc.raw < 0 {
				r.Message = "" // the host's "not a result code" note
			}
			if r.Raw != tc.raw || r.Message != tc.value {
				t.Fatalf("got %d %q, want %d %q", r.Raw, r.Message, tc.raw, tc.value)
			}
		})
	}
}

func TestEnvelopeHeader(t *testing.T) {
	ref := &event.ResourceRef{Name: "widgets", Group: "example.com", Version: "v1alpha1", Resource: "widgets", Kind: "Widget"}
	o := &unstructured.Unstructured{Object: map[string]any{"metadata": map[string]any{
		"name": "w", "uid": "u-1", "resourceVersion": "9"}}}
	tests := []struct {
		ev    event.Event
		flags uint8
	}{
		{event.Event{Type: event.EventAdd, Resource: ref, Object: o, IsInInitialList: true}, abi.FlagInitialList},
		{event.Event{Type: event.EventUpdate, Resource: ref, Object: o, OldObject: o}, abi.FlagHasOldObject},
		{event.Event{Type: event.EventDelete, Resource: ref, Object: o, FinalStateUnknown: true}, abi.FlagFinalStateUnknown},
		{event.Event{Type: event.EventDelete, Resource: ref, Object: o, HandedOver: true}, abi.FlagHandedOver},
	}
	for _, tc := range tests {
		env := NewEnvelope(&tc.ev)
		v, err := abi.ParseHeader(env.Header())
		if err != nil {
			t.Fatal(err)
		}
		want := abi.Header{Type: uint8(tc.ev.Type), Flags: tc.flags, Fields: [abi.HeaderFieldCount]string{
			"widgets", "example.com", "v1alpha1", "widgets", "Widget", "", "w", "u-1", "9"}}
		if got := v.Header(); got != want {
			t.Errorf("got %+v\nwant %+v", got, want)
		}
	}
	// An event without a resource or object does not panic.
	env := NewEnvelope(&event.Event{Type: event.EventDelete})
	if _, err := abi.ParseHeader(env.Header()); err != nil {
		t.Fatal(err)
	}
}

// TestEnvelopeSharedJSON checks the object is encoded once and shared.
func TestEnvelopeSharedJSON(t *testing.T) {
	env := addEvent(pod("a", "b", "Running"))
	a, err := env.json(abi.ObjectNew)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := env.json(abi.ObjectNew)
	if &a[0] != &b[0] {
		t.Error("encoded twice")
	}
	if bytes.Contains(a, []byte(`\u003c`)) {
		t.Error("HTML-escaped JSON")
	}
}

// fuzzHarness calls host functions directly on a real instance's memory.
type fuzzHarness struct {
	inst *Instance
	mod  api.Module
	env  *Envelope
}

func newFuzzHarness(t testing.TB) *fuzzHarness {
	e := newEngine(t, Options{})
	m := load(t, e, "healthy", Limits{CallTimeout: time.Minute, MemoryPages: 2})
	i := instantiate(t, m, InstanceOptions{Config: []byte(`{"x":1}`), LogRate: LogRate{PerSecond: -1}})
	return &fuzzHarness{inst: i, mod: i.mod, env: updateEvent(pod("ns", "old", "Pending"), pod("ns", "cur", "Running"))}
}

// FuzzHostFunctions hands arbitrary pointers, lengths, selectors and paths
// to every host function (and batch_select and batch_result, which take
// an index and a code, inside and outside a batch; and the controller
// functions, inside and outside a reconcile call, granted writes when
// which is even, with the path as their body and which and ptr as
// requeue_after's millis). It checks they never panic, return only
// documented codes, never write outside the buffer they were given, and
// honour the size protocol.
func FuzzHostFunctions(f *testing.F) {
	f.Add(uint8(0), int32(0), uint32(0), int32(100), uint32(0), int32(12), []byte("status.phase"), true)
	f.Add(uint8(1), int32(1), uint32(65536), int32(1), uint32(0), int32(0), []byte("x"), true)
	f.Add(uint8(2), int32(0), uint32(0xfffffff0), int32(32), uint32(16), int32(-1), []byte(`metadata.labels["app.kubernetes.io/name"]`), true)
	f.Add(uint8(2), int32(0), uint32(100), int32(300), uint32(50), int32(41), []byte(`metadata.labels["app.kubernetes.io/name"]`), false)
	f.Add(uint8(3), int32(7), uint32(131071), int32(1), uint32(0), int32(0), []byte(""), false)
	f.Add(uint8(4), int32(-1), uint32(5), int32(-2147483648), uint32(0), int32(0), []byte("a..b"), true)
	f.Add(uint8(5), int32(2), uint32(0), int32(131072), uint32(0), int32(0), []byte("spec.containers[0].image"), true)
	f.Add(uint8(6), int32(0), uint32(64), int32(10), uint32(0), int32(0), []byte("apiserver says no"), true)
	f.Add(uint8(7), int32(0), uint32(0), int32(0), uint32(0), int32(0), []byte(""), true)
	f.Add(uint8(7), int32(-1), uint32(0), int32(0), uint32(0), int32(0), []byte(""), true)
	f.Add(uint8(8), int32(1), uint32(0), int32(0), uint32(0), int32(0), []byte(""), true)
	f.Add(uint8(8), int32(0), uint32(0), int32(0), uint32(0), int32(0), []byte(""), false)
	f.Add(uint8(9), int32(0), uint32(5000), int32(0), uint32(0), int32(0), []byte(""), true)
	f.Add(uint8(9), int32(-1), uint32(0), int32(0), uint32(0), int32(0), []byte(""), true)
	f.Add(uint8(9), int32(7), uint32(0), int32(0), uint32(0), int32(0), []byte(""), false)
	f.Add(uint8(10), int32(0), uint32(0), int32(0), uint32(100), int32(2), []byte("[]"), true)
	f.Add(uint8(10), int32(1), uint32(0), int32(0), uint32(100), int32(2), []byte("[]"), true)
	f.Add(uint8(10), int32(0), uint32(0), int32(0), uint32(0xfffffff0), int32(64), []byte("[{}]"), true)
	f.Add(uint8(11), int32(0), uint32(0), int32(0), uint32(100), int32(15), []byte(`{"conditions":[`), true)
	f.Add(uint8(11), int32(0), uint32(0), int32(0), uint32(100), int32(2), []byte(`{}`), false)
	h := newFuzzHarness(f)
	fc := &fakeController{failed: 1}
	f.Fuzz(func(t *testing.T, fn uint8, which int32, ptr uint32, n int32, pathPtr uint32, pathLen int32, path []byte, inEvent bool) {
		mem := h.mod.Memory()
		size := mem.Size()
		// Place the path in memory where the fuzzer says, if it fits.
		if len(path) > 0 && uint64(pathPtr)+uint64(len(path)) <= uint64(size) {
			mem.Write(pathPtr, path)
		}
		// Fill memory with a canary so writes can be checked.
		buf, _ := mem.Read(0, size)
		for i := range buf {
			buf[i] = 0xCD
		}
		if len(path) > 0 && uint64(pathPtr)+uint64(len(path)) <= uint64(size) {
			mem.Write(pathPtr, path)
		}
		before := append([]byte(nil), buf...)

		st := h.inst.st
		if inEvent {
			st.env = h.env
		} else {
			st.env = nil
		}
		k := fn % 12
		// inEvent puts batch_select and batch_result inside a batch of
		// two events, of which the first is current when which is odd.
		if inEvent && (k == 7 || k == 8) {
			st.env = nil
			st.batch = batchState{items: []BatchItem{{Env: h.env}, {Env: h.env}}, cur: -1}
			if which%2 != 0 {
				st.batch.cur, st.env = 0, h.env
			}
		}
		// inEvent puts the controller functions inside a reconcile call.
		if inEvent && k >= 9 {
			st.ctl = fc
		}
		if which%2 == 0 {
			st.writes = &fakeWriter{}
		}
		fc.requeues, fc.children, fc.status = nil, nil, nil
		defer func() { st.env, st.batch, st.ctl, st.writes = nil, batchState{cur: -1}, nil, nil }()
		ctx := h.inst.ctx
		stack := make([]uint64, 5)
		var res int64
		pathInBounds := pathLen >= 0 && uint64(pathPtr)+uint64(pathLen) <= uint64(size)
		switch k {
		case 0:
			stack[0], stack[1] = uint64(ptr), uint64(uint32(n))
			headerRead(ctx, h.mod, stack)
			res = int64(int32(stack[0]))
		case 1:
			stack[0], stack[1], stack[2] = uint64(uint32(which)), uint64(ptr), uint64(uint32(n))
			objectRead(ctx, h.mod, stack)
			res = int64(int32(stack[0]))
		case 2:
			stack[0], stack[1], stack[2], stack[3], stack[4] = uint64(uint32(which)), uint64(pathPtr), uint64(uint32(pathLen)), uint64(ptr), uint64(uint32(n))
			fieldRead(ctx, h.mod, stack)
			res = int64(stack[0])
		case 3:
			stack[0], stack[1] = uint64(ptr), uint64(uint32(n))
			configRead(ctx, h.mod, stack)
			res = int64(int32(stack[0]))
		case 4:
			stack[0], stack[1] = uint64(ptr), uint64(uint32(n))
			setError(ctx, h.mod, stack)
			res = int64(int32(stack[0]))
		case 5:
			stack[0], stack[1], stack[2] = uint64(uint32(which)), uint64(ptr), uint64(uint32(n))
			logFn(ctx, h.mod, stack)
			res = int64(int32(stack[0]))
		case 6:
			st.setResult(string(path)) // a capabilities II call's message
			stack[0], stack[1] = uint64(ptr), uint64(uint32(n))
			resultMessage(ctx, h.mod, stack)
			res = int64(int32(stack[0]))
			if res >= 0 && res != int64(len(path)) {
				t.Fatalf("result_message returned %d for a %d-byte message", res, len(path))
			}
		case 7:
			stack[0] = uint64(uint32(which))
			batchSelect(ctx, h.mod, stack)
			res = int64(int32(stack[0]))
			switch {
			case !inEvent && res != int64(abi.ErrNoEvent):
				t.Fatalf("batch_select outside a batch returned %d", res)
			case inEvent && which == 0 && res != int64(len(h.env.header)):
				t.Fatalf("batch_select(0) returned %d, want the header size %d", res, len(h.env.header))
			case inEvent && which != 0 && res != int64(abi.ErrInvalid):
				t.Fatalf("batch_select(%d) of a batch with nothing settled returned %d", which, res)
			}
		case 8:
			stack[0] = uint64(uint32(which))
			batchResult(ctx, h.mod, stack)
			res = int64(int32(stack[0]))
			current := inEvent && which%2 != 0
			switch {
			case current && (res != 0 || len(st.batch.results) != 1):
				t.Fatalf("batch_result of the current event returned %d, settled %d", res, len(st.batch.results))
			case !current && res != int64(abi.ErrNoEvent):
				t.Fatalf("batch_result without a current event returned %d", res)
			}
		case 9:
			millis := int64(uint64(uint32(which))<<32 | uint64(ptr))
			stack[0] = uint64(millis)
			reconcileRequeueAfter(ctx, h.mod, stack)
			res = int64(int32(stack[0]))
			valid := millis >= 0 && millis <= abi.MaxRequeueAfterMillis
			switch {
			case !inEvent && res != int64(abi.ErrNoEvent):
				t.Fatalf("reconcile_requeue_after outside a reconcile returned %d", res)
			case inEvent && valid && (res != 0 || len(fc.requeues) != 1 || fc.requeues[0] != time.Duration(millis)*time.Millisecond):
				t.Fatalf("reconcile_requeue_after(%d) returned %d, recorded %v", millis, res, fc.requeues)
			case inEvent && !valid && (res != int64(abi.ErrInvalid) || len(fc.requeues) != 0):
				t.Fatalf("reconcile_requeue_after(%d) returned %d, recorded %v", millis, res, fc.requeues)
			}
		case 10, 11:
			stack[0], stack[1] = uint64(pathPtr), uint64(uint32(pathLen))
			open := byte('[')
			if k == 10 {
				childrenApply(ctx, h.mod, stack)
			} else {
				open = '{'
				statusApply(ctx, h.mod, stack)
			}
			res = int64(int32(stack[0]))
			var body []byte
			if pathInBounds {
				body, _ = mem.Read(pathPtr, uint32(pathLen))
			}
			reached := len(fc.children) + len(fc.status)
			switch {
			case !pathInBounds && res != int64(abi.ErrBounds):
				t.Fatalf("fn %d: out-of-bounds body returned %d, want ERR_BOUNDS", k, res)
			case pathInBounds && !inEvent && res != int64(abi.ErrNoEvent):
				t.Fatalf("fn %d outside a reconcile returned %d", k, res)
			case pathInBounds && inEvent && which%2 != 0 && res != int64(abi.ErrDenied):
				t.Fatalf("fn %d without the writes grant returned %d", k, res)
			case reached > 1 || (reached == 1) != (res >= 0):
				t.Fatalf("fn %d returned %d and reached the ControllerCall %d times", k, res, reached)
			case res >= 0 && !jsonOpening(body, open):
				t.Fatalf("fn %d accepted %q", k, body)
			case reached == 1 && string(append(fc.children, fc.status...)[0]) != string(body):
				t.Fatal("the ControllerCall got other bytes than the plugin's")
			case k == 10 && res >= 0 && res != 1, k == 11 && res > 0:
				t.Fatalf("fn %d returned %d, not the ControllerCall's answer", k, res)
			}
		}
		if k >= 7 {
			// No output buffers: nothing else to check but memory untouched.
			if res < 0 && abi.ErrorName(int32(res)) == "" {
				t.Fatalf("fn %d: undocumented error %d", k, res)
			}
			if after, _ := mem.Read(0, size); !bytes.Equal(after, before) {
				t.Fatalf("fn %d wrote to memory", k)
			}
			return
		}

		inBounds := n >= 0 && uint64(ptr)+uint64(n) <= uint64(size)
		if (!inBounds || (k == 2 && !pathInBounds)) && res != int64(abi.ErrBounds) {
			t.Fatalf("fn %d: out-of-bounds region returned %d, want ERR_BOUNDS", k, res)
		}
		if res < 0 && abi.ErrorName(int32(res)) == "" {
			t.Fatalf("fn %d: undocumented error %d", k, res)
		}
		if res >= 0 && !inEvent && (k <= 2) {
			t.Fatalf("fn %d: outside an event returned %d", k, res)
		}
		var written int64 // bytes the function may have written at ptr
		switch k {
		case 0, 1, 3, 6:
			if res >= 0 && res <= int64(n) {
				written = res
			}
		case 2:
			if res >= 0 {
				kind, sz, _ := abi.UnpackField(res)
				if abi.KindName(kind) == "" {
					t.Fatalf("field_read: unknown kind %d", kind)
				}
				if int64(sz) <= int64(n) {
					written = int64(sz)
				}
			}
		case 5:
			if res != 0 && res != int64(abi.LogSuppressed) && res != int64(abi.ErrBounds) && res != int64(abi.ErrInvalid) {
				t.Fatalf("log returned %d", res)
			}
		}
		after, _ := mem.Read(0, size)
		for i := range after {
			if after[i] != before[i] && (int64(i) < int64(ptr) || int64(i) >= int64(ptr)+written) {
				t.Fatalf("fn %d wrote byte %d outside [%d, %d)", k, i, ptr, int64(ptr)+written)
			}
		}
		// The header read with room to spare is the real header.
		if k == 0 && res >= 0 && res <= int64(n) {
			got := after[ptr : ptr+uint32(res)]
			if !bytes.Equal(got, h.env.header) {
				t.Fatal("header_read copied the wrong bytes")
			}
			if binary.LittleEndian.Uint32(got[4:]) != uint32(len(got)) {
				t.Fatal("header length field")
			}
		}
	})
}
