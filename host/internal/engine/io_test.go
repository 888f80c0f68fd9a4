package engine

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tetratelabs/wazero/sys"

	"github.com/informer-host/informer-host/abi"
)

// ioCall is fakeCall with the parts callState.io uses: an engine clock
// and the state that points back at the instance.
func ioCall(timeout time.Duration) (*Instance, *callState) {
	i := fakeCall(timeout)
	i.e = &Engine{epoch: time.Now()}
	st := &callState{inst: i}
	i.st = st
	return i, st
}

// While a host function waits on the network in callState.io, the
// watchdog never kills the call, however long past its CPU deadline the
// wait runs; afterwards the deadline resumes, shifted by the wait.
func TestIOWaitDoesNotCountAgainstTheDeadline(t *testing.T) {
	var now atomic.Int64
	w := newWatchdog(now.Load)
	defer w.close()
	i, st := ioCall(10 * time.Millisecond)
	w.add(i)
	const start = int64(time.Millisecond)
	i.lastStart, i.curStart = start, start
	i.callStart.Store(start)

	code := st.io(func(context.Context) int32 {
		if got := i.callStart.Load(); got != callIO {
			t.Errorf("callStart during the wait = %d, want callIO", got)
		}
		now.Store(start + int64(time.Hour)) // far past the CPU deadline
		w.scan()
		if i.ctx.killed.Load() {
			t.Error("the watchdog killed a call waiting on the network")
		}
		return 7
	})
	if code != 7 {
		t.Fatalf("io returned %d, want the wait's code", code)
	}
	resumed := i.callStart.Load()
	if resumed < start || resumed != i.curStart || resumed != i.lastStart {
		t.Fatalf("after the wait callStart=%d curStart=%d lastStart=%d, want one start time >= %d", resumed, i.curStart, i.lastStart, start)
	}
	now.Store(resumed + int64(10*time.Millisecond)) // exactly the deadline: not past it
	w.scan()
	if i.ctx.killed.Load() {
		t.Fatal("killed at the deadline, not past it")
	}
	now.Store(resumed + int64(10*time.Millisecond) + 1)
	w.scan()
	if !i.ctx.killed.Load() || i.callStart.Load() != callKilled {
		t.Fatal("the CPU deadline did not resume after the wait")
	}
}

// A call whose export context the host canceled gets ERR_CANCELED
// without waiting; a killed call, for either bound, does not get back to
// the guest at all: io ends it (abortCall) without waiting.
func TestIOCanceled(t *testing.T) {
	for name, tc := range map[string]struct {
		setup func(*Instance, *callState)
		abort bool
	}{
		"killed": {setup: func(i *Instance, _ *callState) { i.callStart.Store(callKilled) }, abort: true},
		"killed for its total time": {setup: func(i *Instance, _ *callState) {
			i.callStart.Store(5) // its CPU deadline is not past
			i.wallStart.Store(callKilled)
			i.ctx.kill(stopTotal)
		}, abort: true},
		"host stopped the call": {setup: func(i *Instance, st *callState) {
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			st.callCtx = ctx
			i.callStart.Store(5)
		}},
	} {
		t.Run(name, func(t *testing.T) {
			i, st := ioCall(time.Second)
			tc.setup(i, st)
			waited := false
			code, aborted := ioAborts(st, func(context.Context) int32 { waited = true; return 0 })
			if aborted != tc.abort || (!aborted && code != abi.ErrCanceled) {
				t.Fatalf("io = %d, aborted %v; want aborted %v or ERR_CANCELED", code, aborted, tc.abort)
			}
			if waited {
				t.Fatal("the wait ran")
			}
		})
	}
}

// ioAborts runs st.io(wait) and reports whether it ended the call
// (abortCall's panic) rather than returning a code.
func ioAborts(st *callState, wait func(context.Context) int32) (code int32, aborted bool) {
	defer func() {
		if r := recover(); r != nil {
			var exit *sys.ExitError
			if err, ok := r.(error); !ok || !errors.As(err, &exit) || exit.ExitCode() != sys.ExitCodeDeadlineExceeded {
				panic(r)
			}
			aborted = true
		}
	}()
	return st.io(wait), false
}

// A kill during the wait (MaxCallTime, by the watchdog) cancels the
// wait's context, and io ends the call instead of returning to the guest.
func TestIOKilledDuringTheWait(t *testing.T) {
	var now atomic.Int64
	w := newWatchdog(now.Load)
	defer w.close()
	i, st := ioCall(10 * time.Millisecond)
	i.maxCallTime = int64(50 * time.Millisecond)
	w.add(i)
	const start = int64(time.Millisecond)
	i.lastStart, i.curStart = start, start
	i.wallStart.Store(start)
	i.callStart.Store(start)
	_, aborted := ioAborts(st, func(ctx context.Context) int32 {
		now.Store(start + int64(50*time.Millisecond) + 1)
		w.scan()
		<-ctx.Done() // without the kill reaching it, this never ends
		return abi.ErrCanceled
	})
	if !aborted {
		t.Fatal("io returned to the guest after the call was killed")
	}
	if got := stopReason(i.ctx.why.Load()); got != stopTotal {
		t.Fatalf("stopped by %d, want stopTotal", got)
	}
}

// The wait gets the export call's context, so the host's stop reaches a
// request in flight; ioCode tells that stop from the I/O timeout.
func TestIOContextAndCodes(t *testing.T) {
	i, st := ioCall(time.Second)
	i.callStart.Store(5)
	ctx, cancel := context.WithCancel(context.Background())
	st.callCtx = ctx
	code := st.io(func(wctx context.Context) int32 {
		cancel()
		<-wctx.Done()
		return ioCode(ctx, wctx.Err(), abi.ErrUnavailable)
	})
	if code != abi.ErrCanceled {
		t.Fatalf("stopped by the host: %d, want ERR_CANCELED", code)
	}
	parent := context.Background()
	tctx, tcancel := ioTimeout(parent, time.Nanosecond)
	defer tcancel()
	<-tctx.Done()
	if c := ioCode(parent, tctx.Err(), abi.ErrUnavailable); c != abi.ErrTimeout {
		t.Fatalf("timeout: %d, want ERR_TIMEOUT", c)
	}
	if c := ioCode(parent, context.Canceled, abi.ErrUnavailable); c != abi.ErrUnavailable {
		t.Fatalf("other error: %d, want the fallback", c)
	}
}
