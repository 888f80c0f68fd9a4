package engine

import (
	"context"
	"time"

	"github.com/tetratelabs/wazero/api"

	"github.com/informer-host/informer-host/abi"
)

// The functions of capabilities II (ABI.md §17: Kubernetes writes, Events,
// HTTP upstreams) wait on the network. That wait is not the plugin's CPU:
// it does not count against CallTimeout, and is bounded instead by the
// I/O timeout the capability applies itself and, over the whole call, by
// MaxCallTime (wallStart), which counts it. callState.io is the one way a
// host function waits, so the watchdog always knows the difference.

// callIO is the callStart value while the running call waits in
// callState.io. The watchdog kills only positive start times for the CPU
// deadline, so a call waiting on the network is never killed for it; the
// I/O timeout, the host's own stop (the export call's context) and
// MaxCallTime bound it.
const callIO = -3

// io runs wait, a host function's network round trip, outside the call's
// CPU deadline, and returns its code. wait gets a context that ends when
// the host stops the export call (shutdown, reload, lost lease: wait
// returns abi.ErrCanceled) and when the call is killed (MaxCallTime, or
// StartTimeout during ih_init); it applies its own I/O timeout.
//
// A call that is killed, before or during the wait, ends at once: io does
// not return to the guest (abortCall), and the call fails as a deadline
// failure. Without that a guest looping on a capability would go on
// until its next termination check, and every wait it started in between
// would cost a network round trip.
//
// The time spent in wait is added to the call's start time afterwards, so
// the CPU deadline resumes where it stopped. Called on the instance's
// goroutine, inside a call.
func (st *callState) io(wait func(ctx context.Context) int32) int32 {
	ctx := st.callCtx
	if ctx == nil {
		ctx = context.Background()
	}
	if err := ctx.Err(); err != nil {
		return abi.ErrCanceled
	}
	i := st.inst
	if i == nil || i.timeout <= 0 || i.e.mode == modeCtxTimeout {
		// No deadline to pause (trusted plugins), or a test mode that
		// enforces it with a context: the wait simply runs.
		return wait(ctx)
	}
	start := i.callStart.Load()
	switch {
	case start == callKilled || i.ctx.killed.Load():
		// Killed already, for its CPU deadline or its total time: no
		// wait is started for a call that is over.
		abortCall()
	case start <= 0:
		// Instantiating under the start timer (callInit): ih_init's waits
		// count against StartTimeout, which is the whole start's bound.
		return i.killable(ctx, wait)
	case !i.callStart.CompareAndSwap(start, callIO):
		abortCall() // the watchdog killed it just now
	}
	t0 := i.e.now()
	code := i.killable(ctx, wait)
	resumed := start + (i.e.now() - t0)
	if resumed <= i.lastStart {
		resumed = i.lastStart + 1
	}
	i.lastStart, i.curStart = resumed, resumed
	// Only this goroutine leaves callIO, so the swap cannot fail.
	i.callStart.Store(resumed)
	return code
}

// killable runs wait under ctx and the instance's own context, which the
// watchdog (or the start timer) closes when it kills the call, and ends
// the call if that happened.
func (i *Instance) killable(ctx context.Context, wait func(ctx context.Context) int32) int32 {
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(i.ctx, cancel)
	code := wait(wctx)
	stop()
	if i.ctx.killed.Load() {
		abortCall()
	}
	return code
}

// setResult records the outcome of a capabilities II call for
// result_message: msg is the message that came with an error code, or
// empty on success. It is copied, truncated to abi.MaxErrorLen.
func (st *callState) setResult(msg string) {
	if len(msg) > abi.MaxErrorLen {
		msg = msg[:abi.MaxErrorLen]
	}
	st.resultMsg = append(st.resultMsg[:0], msg...)
}

// result_message(ptr, len i32) -> i32
func resultMessage(ctx context.Context, mod api.Module, stack []uint64) {
	st := stateOf(ctx)
	var msg []byte
	if st != nil {
		msg = st.resultMsg
	}
	setI32(stack, copyOut(mod, uint32(stack[0]), i32(stack[1]), msg))
}

// ioTimeout is the context a capability's wait runs under: ctx bounded by
// timeout (none if timeout <= 0), and whether ctx itself (the host's stop)
// rather than the timeout ended it tells ErrCanceled from ErrTimeout.
func ioTimeout(ctx context.Context, timeout time.Duration) (context.Context, context.CancelFunc) {
	if timeout <= 0 {
		return context.WithCancel(ctx)
	}
	return context.WithTimeout(ctx, timeout)
}

// ioCode maps the end of a wait that failed with err to its code: the
// host's stop is ErrCanceled, the I/O timeout ErrTimeout, anything else
// fallback.
func ioCode(parent context.Context, err error, fallback int32) int32 {
	switch {
	case parent.Err() != nil:
		return abi.ErrCanceled
	case err == context.DeadlineExceeded:
		return abi.ErrTimeout
	}
	return fallback
}
