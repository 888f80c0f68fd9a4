package engine

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/informer-host/informer-host/abi"
	"github.com/informer-host/informer-host/internal/testenv"
)

// loopbackHTTP is an HTTPClient that sends every request to base over
// real loopback TCP, with no timeout of its own: only the context the
// engine hands Do ends a request.
type loopbackHTTP struct {
	base     string
	requests atomic.Int64
}

func (l *loopbackHTTP) Do(ctx context.Context, req *HTTPRequest, resp *HTTPResponse) (int32, string) {
	l.requests.Add(1)
	r, err := http.NewRequestWithContext(ctx, req.Method, l.base+req.Path, bytes.NewReader(req.Body))
	if err != nil {
		return abi.ErrInvalid, err.Error()
	}
	res, err := http.DefaultClient.Do(r)
	if err != nil {
		if ctx.Err() != nil {
			return abi.ErrCanceled, ""
		}
		return abi.ErrUnavailable, err.Error()
	}
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	if err != nil {
		return ioCode(ctx, err, abi.ErrUnavailable), err.Error()
	}
	resp.Body = append(resp.Body[:0], body...)
	return int32(res.StatusCode), ""
}

// refusedURL is the URL of a loopback port nothing listens on: every
// connection to it is refused at once, so each http_request is a short
// network wait, the case CallTimeout does not count.
func refusedURL(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return "http://" + addr
}

// loopingPlugin is a plugin whose ih_handle and ih_shutdown call the host
// function call (a complete call instruction on the imported $host)
// forever, counting the calls that returned in the exported global
// "calls".
func loopingPlugin(t *testing.T, imp, call string) []byte {
	t.Helper()
	loop := fmt.Sprintf(`(loop $again
      %s
      (global.set $n (i32.add (global.get $n) (i32.const 1)))
      (br $again))`, call)
	return testenv.WATText(t, fmt.Sprintf(`(module
  (import "informer_host_v1" %s)
  (memory (export "memory") 1)
  (data (i32.const 0) "uGET/")
  (global $n (export "calls") (mut i32) (i32.const 0))
  (func (export "informer_host_abi_v1"))
  (func (export "ih_handle") (param i32) (result i32)
    %s
    (i32.const 0))
  (func (export "ih_shutdown")
    %s))`, imp, loop, loop))
}

const (
	// http_request("u", "GET", "/", no headers, no body)
	httpImport   = `"http_request" (func $host (param i32 i32 i32 i32 i32 i32 i32 i32 i32 i32) (result i32))`
	httpLoopCall = `(drop (call $host (i32.const 0) (i32.const 1) (i32.const 1) (i32.const 3) (i32.const 4) (i32.const 1) (i32.const 0) (i32.const 0) (i32.const 0) (i32.const 0)))`
	// result_message(0, 0): the cheapest host function there is.
	msgImport = `"result_message" (func $host (param i32 i32) (result i32))`
	msgCall   = `(drop (call $host (i32.const 0) (i32.const 0)))`
)

// A call that keeps coming back to the host is stopped by the bounds
// besides CallTimeout, whatever its CPU time: MaxCallTime counts the
// network waits CallTimeout leaves out, and MaxHostCallsPerCall counts
// every host call. The CPU deadline is set out of reach (generous), so
// only the bound under test can stop the call; the Failure says which.
func TestCallBounds(t *testing.T) {
	refused := refusedURL(t)
	for _, tc := range []struct {
		name      string
		imp, call string
		limits    Limits
		shutdown  bool // call ih_shutdown rather than ih_handle
		want      error
		calls     int32 // the host calls that returned, when exact
	}{{
		name:   "handler looping on http_request to a refused port",
		imp:    httpImport,
		call:   httpLoopCall,
		limits: Limits{CallTimeout: generous, MaxCallTime: 200 * time.Millisecond, MaxHostCallsPerCall: 1 << 30},
		want:   ErrMaxCallTime,
	}, {
		name:     "ih_shutdown looping on http_request to a refused port",
		imp:      httpImport,
		call:     httpLoopCall,
		limits:   Limits{CallTimeout: generous, MaxCallTime: 200 * time.Millisecond, MaxHostCallsPerCall: 1 << 30},
		shutdown: true,
		want:     ErrMaxCallTime,
	}, {
		name:   "handler making too many host calls",
		imp:    msgImport,
		call:   msgCall,
		limits: Limits{CallTimeout: generous, MaxCallTime: generous, MaxHostCallsPerCall: 1000},
		want:   ErrMaxHostCalls,
		calls:  1000,
	}, {
		name:   "handler looping on http_request under the host call cap",
		imp:    httpImport,
		call:   httpLoopCall,
		limits: Limits{CallTimeout: generous, MaxCallTime: generous, MaxHostCallsPerCall: 50},
		want:   ErrMaxHostCalls,
		calls:  50,
	}, {
		name:   "trusted handler (no deadline) making too many host calls",
		imp:    msgImport,
		call:   msgCall,
		limits: Limits{MaxHostCallsPerCall: 1000},
		want:   ErrMaxHostCalls,
		calls:  1000,
	}} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEngine(t, Options{})
			m, err := e.Load(context.Background(), "looper.wasm", loopingPlugin(t, tc.imp, tc.call), tc.limits)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { m.Close(context.Background()) })
			client := &loopbackHTTP{base: refused}
			inst := instantiate(t, m, InstanceOptions{HTTP: client})

			done := make(chan error, 1)
			go func() {
				if tc.shutdown {
					done <- inst.Shutdown(context.Background())
					return
				}
				_, err := inst.Handle(context.Background(), addEvent(pod("ns", "p", "Running")))
				done <- err
			}()
			select {
			case err = <-done:
			case <-time.After(generous):
				t.Fatal("the call was never stopped")
			}
			var f *Failure
			if !errors.As(err, &f) || f.Kind != KindTimeout || !errors.Is(err, tc.want) {
				t.Fatalf("call returned %v, want a timeout Failure by %v", err, tc.want)
			}
			t.Logf("stopped: %v", err)
			if _, err := inst.Handle(context.Background(), addEvent(pod("ns", "p", "Running"))); !errors.Is(err, ErrInstanceDead) {
				t.Fatalf("after the failure: %v, want ErrInstanceDead", err)
			}
			if tc.imp == httpImport && client.requests.Load() == 0 {
				t.Fatal("the plugin made no request")
			}
			if tc.calls > 0 {
				if got := int32(inst.mod.ExportedGlobal("calls").Get()); got != tc.calls {
					t.Fatalf("%d host calls returned, want exactly the cap, %d", got, tc.calls)
				}
			}
		})
	}
}

// A call stopped while it waits in a host call ends that wait at once:
// the request's context is canceled (the server sees it), rather than
// the call waiting for the I/O to end by itself, which here it never
// would (the server answers only when the request is canceled, and the
// client has no timeout).
func TestMaxCallTimeEndsTheHostCallItStopsIn(t *testing.T) {
	arrived, canceled := make(chan struct{}, 1), make(chan struct{}, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		arrived <- struct{}{}
		<-r.Context().Done()
		canceled <- struct{}{}
	}))
	defer srv.Close()

	e := newEngine(t, Options{})
	limits := Limits{CallTimeout: generous, MaxCallTime: 100 * time.Millisecond, MaxHostCallsPerCall: 1 << 30}
	m, err := e.Load(context.Background(), "looper.wasm", loopingPlugin(t, httpImport, httpLoopCall), limits)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close(context.Background())
	client := &loopbackHTTP{base: srv.URL}
	inst := instantiate(t, m, InstanceOptions{HTTP: client})

	done := make(chan error, 1)
	go func() {
		_, err := inst.Handle(context.Background(), addEvent(pod("ns", "p", "Running")))
		done <- err
	}()
	for _, step := range []struct {
		what string
		ch   <-chan struct{}
	}{{"the request to arrive", arrived}, {"the request to be canceled", canceled}} {
		select {
		case <-step.ch:
		case <-time.After(generous):
			t.Fatalf("waited in vain for %s", step.what)
		}
	}
	select {
	case err = <-done:
	case <-time.After(generous):
		t.Fatal("the call did not return")
	}
	if !errors.Is(err, ErrMaxCallTime) {
		t.Fatalf("call returned %v, want a Failure by ErrMaxCallTime", err)
	}
	if n := client.requests.Load(); n != 1 {
		t.Fatalf("%d requests, want 1: the call went on after its wait was canceled", n)
	}
	if n := int32(inst.mod.ExportedGlobal("calls").Get()); n != 0 {
		t.Fatalf("the guest ran on after the stopped host call (%d calls returned)", n)
	}
}

// The bounds' defaults follow CallTimeout: ten of it, never under a
// minute (so a wait that times out reaches the plugin as ERR_TIMEOUT);
// none without a deadline, which has no checks to stop a call by; a
// given value is kept.
func TestCallBoundDefaults(t *testing.T) {
	e := newEngine(t, Options{})
	for _, tc := range []struct {
		in        Limits
		wantTime  time.Duration
		wantCalls int
	}{
		{Limits{CallTimeout: time.Second}, time.Minute, DefaultMaxHostCallsPerCall},
		{Limits{CallTimeout: 30 * time.Second}, 5 * time.Minute, DefaultMaxHostCallsPerCall},
		{Limits{CallTimeout: time.Second, MaxCallTime: 3 * time.Second, MaxHostCallsPerCall: 9}, 3 * time.Second, 9},
		{Limits{}, 0, DefaultMaxHostCallsPerCall},
	} {
		m := load(t, e, "healthy", tc.in)
		if got := m.Limits(); got.MaxCallTime != tc.wantTime || got.MaxHostCallsPerCall != tc.wantCalls {
			t.Errorf("Load(%+v): MaxCallTime %v MaxHostCallsPerCall %d, want %v %d", tc.in, got.MaxCallTime, got.MaxHostCallsPerCall, tc.wantTime, tc.wantCalls)
		}
	}
	if _, err := e.Load(context.Background(), "x.wasm", fixture(t, "healthy"), Limits{CallTimeout: time.Second, MaxCallTime: -1}); err == nil {
		t.Error("a negative MaxCallTime was accepted")
	}
}
