package engine

import (
	"context"
	"testing"
	"time"

	"github.com/tetratelabs/wazero/api"

	"github.com/informer-host/informer-host/abi"
)

// fakeHTTP answers every request to upstream "u" with status, header and
// body, and records what it was asked; others are ERR_DENIED.
type fakeHTTP struct {
	status       int32
	header, body string
	calls        []HTTPRequest
	// wait, when set, is called inside Do with its context (a slow
	// upstream for the io test).
	wait func(ctx context.Context) int32
}

func (f *fakeHTTP) Do(ctx context.Context, req *HTTPRequest, resp *HTTPResponse) (int32, string) {
	r := *req
	r.Header, r.Body = append([]byte(nil), req.Header...), append([]byte(nil), req.Body...)
	f.calls = append(f.calls, r)
	if req.Upstream != "u" {
		return abi.ErrDenied, "not granted"
	}
	if f.wait != nil {
		if c := f.wait(ctx); c < 0 {
			return c, "waited"
		}
	}
	resp.Header = append(resp.Header[:0], f.header...)
	resp.Body = append(resp.Body[:0], f.body...)
	return f.status, ""
}

// fakeEvents records what it is asked to record; reason "Bad" is invalid.
type fakeEvents struct {
	got []string
}

func (f *fakeEvents) Record(_ context.Context, obj map[string]any, eventType, reason, message string) (int32, string) {
	if reason == "Bad" {
		return abi.ErrInvalid, "bad reason"
	}
	md, _ := obj["metadata"].(map[string]any)
	name, _ := md["name"].(string)
	f.got = append(f.got, eventType+" "+reason+" "+message+" "+name)
	return 0, ""
}

// call32 is call with stack[0] as an i32 result.
func call32(inst *Instance, fn api.GoModuleFunc, args ...uint64) int32 {
	return int32(call(inst, fn, args...))
}

func TestHTTPFunctions(t *testing.T) {
	e := newEngine(t, Options{})
	m := load(t, e, "healthy", Limits{CallTimeout: time.Minute, MemoryPages: 2})
	fh := &fakeHTTP{status: 201, header: "X-A: 1\n", body: "created"}
	inst := instantiate(t, m, InstanceOptions{HTTP: fh})
	denied := instantiate(t, m, InstanceOptions{})

	up, upl := put(inst, 0, "u")
	me, mel := put(inst, 8, "POST")
	pa, pal := put(inst, 16, "/x")
	hd, hdl := put(inst, 32, "A: b")
	bo, bol := put(inst, 48, "{}")
	args := []uint64{up, upl, me, mel, pa, pal, hd, hdl, bo, bol}

	// Before any request: nothing to read.
	if c := call32(inst, httpResponseRead, uint64(abi.HTTPBody), 100, 10); c != abi.ErrAbsent {
		t.Fatalf("response before a request: %d", c)
	}
	if c := call32(inst, httpRequest, args...); c != 201 {
		t.Fatalf("http_request = %d", c)
	}
	if g := fh.calls[0]; g.Upstream != "u" || g.Method != "POST" || g.Path != "/x" || string(g.Header) != "A: b" || string(g.Body) != "{}" {
		t.Fatalf("request %+v", g)
	}
	for _, tc := range []struct {
		part int32
		n    uint64
		want int32
		text string
	}{
		{abi.HTTPBody, 100, 7, "created"},
		{abi.HTTPBody, 3, 7, ""}, // too small: the size, nothing written
		{abi.HTTPHeader, 100, 7, "X-A: 1\n"},
		{7, 100, abi.ErrInvalid, ""},
	} {
		inst.mod.Memory().Write(200, make([]byte, 100))
		if c := call32(inst, httpResponseRead, uint64(tc.part), 200, tc.n); c != tc.want {
			t.Errorf("part %d len %d: %d, want %d", tc.part, tc.n, c, tc.want)
		}
		if b, _ := inst.mod.Memory().Read(200, uint32(len(tc.text))); string(b) != tc.text {
			t.Errorf("part %d: wrote %q", tc.part, b)
		}
	}
	// Bounds first, even when denied; then the grant.
	if c := call32(denied, httpRequest, 0, 1, 0, 1, 0, 1, 0, 1, 1<<20, 1); c != abi.ErrBounds {
		t.Errorf("out of bounds body: %d", c)
	}
	if c := call32(denied, httpRequest, args...); c != abi.ErrDenied {
		t.Errorf("without the grant: %d", c)
	}
	if c := call32(denied, httpResponseRead, 0, 0, 0); c != abi.ErrDenied {
		t.Errorf("read without the grant: %d", c)
	}
	// A failed request leaves no response to read, and its message.
	up2, up2l := put(inst, 0, "v")
	if c := call32(inst, httpRequest, append([]uint64{up2, up2l}, args[2:]...)...); c != abi.ErrDenied {
		t.Fatalf("ungranted upstream: %d", c)
	}
	if c := call32(inst, httpResponseRead, uint64(abi.HTTPBody), 200, 100); c != abi.ErrAbsent {
		t.Errorf("response after a failed request: %d", c)
	}
	if c := call32(inst, resultMessage, 300, 100); c != int32(len("not granted")) {
		t.Errorf("result_message: %d", c)
	}
	// The response does not outlive the export call.
	put(inst, 0, "u")
	call32(inst, httpRequest, args...)
	inst.st.dropHandles()
	if c := call32(inst, httpResponseRead, uint64(abi.HTTPBody), 200, 100); c != abi.ErrAbsent {
		t.Errorf("response after the call ended: %d", c)
	}
}

// http_request waits through callState.io: the host's stop reaches the
// request (ERR_CANCELED), and the watchdog does not kill the call.
func TestHTTPRequestWaitsOutsideTheDeadline(t *testing.T) {
	e := newEngine(t, Options{})
	m := load(t, e, "healthy", Limits{CallTimeout: time.Minute, MemoryPages: 2})
	fh := &fakeHTTP{status: 200, wait: func(ctx context.Context) int32 {
		<-ctx.Done()
		return abi.ErrCanceled
	}}
	inst := instantiate(t, m, InstanceOptions{HTTP: fh})
	ctx, cancel := context.WithCancel(context.Background())
	inst.st.callCtx = ctx
	defer func() { inst.st.callCtx = nil }()
	cancel()
	up, upl := put(inst, 0, "u")
	if c := call32(inst, httpRequest, up, upl, 0, 0, 0, 0, 0, 0, 0, 0); c != abi.ErrCanceled {
		t.Errorf("canceled call: %d, want ERR_CANCELED", c)
	}
	if len(fh.calls) != 0 {
		t.Error("a call canceled before it started reached the client")
	}
}

func TestEventRecord(t *testing.T) {
	e := newEngine(t, Options{})
	m := load(t, e, "healthy", Limits{CallTimeout: time.Minute, MemoryPages: 2})
	fe := &fakeEvents{}
	inst := instantiate(t, m, InstanceOptions{Events: fe})
	denied := instantiate(t, m, InstanceOptions{})
	inst.st.handles = append(inst.st.handles, map[string]any{"metadata": map[string]any{"name": "cached"}})
	defer inst.st.dropHandles()
	r, rl := put(inst, 0, "TooBig")
	msg, msgl := put(inst, 16, "over")
	bad, badl := put(inst, 32, "Bad")
	for _, tc := range []struct {
		name  string
		inst  *Instance
		args  []uint64
		want  int32
		event string
	}{
		{"cached object", inst, []uint64{uint64(abi.FirstHandle), uint64(abi.KubeEventWarning), r, rl, msg, msgl}, 0, "Warning TooBig over cached"},
		{"normal", inst, []uint64{uint64(abi.FirstHandle), uint64(abi.KubeEventNormal), r, rl, 0, 0}, 0, "Normal TooBig  cached"},
		{"no event outside ih_handle", inst, []uint64{uint64(abi.ObjectNew), 0, r, rl, msg, msgl}, abi.ErrNoEvent, ""},
		{"no such handle", inst, []uint64{9, 0, r, rl, msg, msgl}, abi.ErrInvalid, ""},
		{"bad type", inst, []uint64{uint64(abi.FirstHandle), 2, r, rl, msg, msgl}, abi.ErrInvalid, ""},
		{"recorder refuses", inst, []uint64{uint64(abi.FirstHandle), 0, bad, badl, msg, msgl}, abi.ErrInvalid, ""},
		{"bounds", inst, []uint64{uint64(abi.FirstHandle), 0, r, 1 << 30, msg, msgl}, abi.ErrBounds, ""},
		{"denied", denied, []uint64{uint64(abi.FirstHandle), 0, r, rl, msg, msgl}, abi.ErrDenied, ""},
		{"bounds before denied", denied, []uint64{0, 0, 1 << 30, 1, 0, 0}, abi.ErrBounds, ""},
	} {
		before := len(fe.got)
		if c := call32(tc.inst, eventRecord, tc.args...); c != tc.want {
			t.Errorf("%s: %d, want %d", tc.name, c, tc.want)
		}
		switch {
		case tc.event == "" && len(fe.got) != before:
			t.Errorf("%s: recorded %q", tc.name, fe.got[before:])
		case tc.event != "" && (len(fe.got) != before+1 || fe.got[before] != tc.event):
			t.Errorf("%s: recorded %q, want %q", tc.name, fe.got[before:], tc.event)
		}
	}
}

// FuzzOutboundFunctions: no input makes event_record, http_request or
// http_response_read panic, write outside the buffer it was given, or
// return an undocumented code.
func FuzzOutboundFunctions(f *testing.F) {
	f.Add(uint8(0), uint32(0), int32(1), uint32(1), int32(4), uint32(5), int32(2), int32(0), uint32(512), int32(100), []byte("uPOST/x"))
	f.Add(uint8(1), uint32(0), int32(1), uint32(0), int32(0), uint32(0), int32(0), int32(0), uint32(512), int32(3), []byte("u"))
	f.Add(uint8(2), uint32(0), int32(6), uint32(6), int32(4), uint32(0), int32(0), int32(2), uint32(0), int32(1), []byte("TooBigover"))
	f.Add(uint8(2), uint32(0xfffffff0), int32(32), uint32(4), int32(-1), uint32(9), int32(4), int32(-5), uint32(0), int32(-1), []byte("x"))
	f.Add(uint8(1), uint32(0), int32(0), uint32(0), int32(0), uint32(0), int32(0), int32(1), uint32(65530), int32(100), []byte(""))
	e := newEngine(f, Options{})
	m := load(f, e, "healthy", Limits{CallTimeout: time.Minute, MemoryPages: 1})
	fh := &fakeHTTP{status: 200, header: "Content-Type: text/plain\n", body: "hello, plugin"}
	inst := instantiate(f, m, InstanceOptions{HTTP: fh, Events: &fakeEvents{}})
	f.Fuzz(func(t *testing.T, fn uint8, p0 uint32, n0 int32, p1 uint32, n1 int32, p2 uint32, n2 int32, arg int32, ptr uint32, n int32, data []byte) {
		fh.calls = fh.calls[:0]
		mem, size, before := fuzzMemory(inst, data)
		st := inst.st
		st.dropHandles()
		st.handles = append(st.handles, map[string]any{"metadata": map[string]any{"name": "h"}})
		defer st.dropHandles()
		in := func(p uint32, l int32) bool { return l >= 0 && uint64(p)+uint64(l) <= uint64(size) }
		var res int32
		var written int64
		switch fn % 3 {
		case 0:
			// The body is (ptr, n): five regions in all.
			res = call32(inst, httpRequest, uint64(p0), uint64(uint32(n0)), uint64(p1), uint64(uint32(n1)), uint64(p2), uint64(uint32(n2)),
				uint64(p0), uint64(uint32(n1)), uint64(ptr), uint64(uint32(n)))
			if !(in(p0, n0) && in(p1, n1) && in(p2, n2) && in(p0, n1) && in(ptr, n)) && res != abi.ErrBounds {
				t.Fatalf("http_request: out-of-bounds region returned %d", res)
			}
		case 1:
			call32(inst, httpRequest, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0) // the upstream is data[0]
			res = call32(inst, httpResponseRead, uint64(uint32(arg)), uint64(ptr), uint64(uint32(n)))
			if !in(ptr, n) && res != abi.ErrBounds {
				t.Fatalf("http_response_read: out-of-bounds buffer returned %d", res)
			}
			if res >= 0 && int64(res) <= int64(n) {
				written = int64(res)
			}
		case 2:
			res = call32(inst, eventRecord, uint64(uint32(arg)), uint64(uint32(n2)), uint64(p0), uint64(uint32(n0)), uint64(p1), uint64(uint32(n1)))
			if !(in(p0, n0) && in(p1, n1)) && res != abi.ErrBounds {
				t.Fatalf("event_record: out-of-bounds region returned %d", res)
			}
		}
		if res < 0 && abi.ErrorName(res) == "" {
			t.Fatalf("fn %d: undocumented code %d", fn%3, res)
		}
		after, _ := mem.Read(0, size)
		for i := range after {
			if after[i] != before[i] && (int64(i) < int64(ptr) || int64(i) >= int64(ptr)+written) {
				t.Fatalf("fn %d wrote byte %d outside [%d, %d)", fn%3, i, ptr, int64(ptr)+written)
			}
		}
	})
}
