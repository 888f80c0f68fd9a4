package engine

import (
	"sync/atomic"
	"testing"
	"time"
)

// fakeCall is an Instance as the watchdog sees it: a timeout, a start
// time and a context to kill, without a module.
func fakeCall(timeout time.Duration) *Instance {
	return &Instance{timeout: timeout, ctx: &instanceCtx{done: make(chan struct{})}}
}

// The watchdog kills exactly the calls that have run longer than their
// timeout, once, and never a call that returned or started again since
// it looked. scan is driven by hand with a fake clock: no ticker, no
// sleeping.
func TestWatchdogScan(t *testing.T) {
	var now atomic.Int64
	w := newWatchdog(now.Load)
	defer w.close()
	const ms = int64(time.Millisecond)
	idle := fakeCall(10 * time.Millisecond)
	fresh := fakeCall(10 * time.Millisecond)
	overdue := fakeCall(10 * time.Millisecond)
	exact := fakeCall(10 * time.Millisecond)
	slow := fakeCall(time.Second)
	initing := fakeCall(10 * time.Millisecond)
	for _, i := range []*Instance{idle, fresh, overdue, exact, slow, initing} {
		w.add(i)
	}
	now.Store(100 * ms)
	fresh.callStart.Store(95 * ms)
	overdue.callStart.Store(89 * ms)
	exact.callStart.Store(90 * ms) // exactly its timeout: not past it
	slow.callStart.Store(1 * ms)
	initing.callStart.Store(callInit) // the start timer's, not the watchdog's
	w.scan()

	killed := func(i *Instance) bool { return i.ctx.killed.Load() }
	for name, tc := range map[string]struct {
		i     *Instance
		kill  bool
		start int64
	}{
		"idle":    {idle, false, 0},
		"fresh":   {fresh, false, 95 * ms},
		"overdue": {overdue, true, callKilled},
		"exact":   {exact, false, 90 * ms},
		"slow":    {slow, false, 1 * ms},
		"initing": {initing, false, callInit},
	} {
		if killed(tc.i) != tc.kill {
			t.Errorf("%s: killed=%v, want %v", name, killed(tc.i), tc.kill)
		}
		if got := tc.i.callStart.Load(); got != tc.start {
			t.Errorf("%s: callStart %d, want %d", name, got, tc.start)
		}
		select {
		case <-tc.i.ctx.done:
			if !tc.kill {
				t.Errorf("%s: context closed", name)
			}
		default:
			if tc.kill {
				t.Errorf("%s: context open", name)
			}
		}
	}

	// A call that returned and started again after the watchdog read its
	// start time keeps running: the kill is a compare-and-swap from the
	// start time read.
	fresh.callStart.Store(0)
	fresh.callStart.Store(99 * ms)
	now.Store(108 * ms)
	w.scan()
	if killed(fresh) {
		t.Error("a call started 9ms ago with a 10ms timeout was killed")
	}
	now.Store(110 * ms)
	w.scan()
	if !killed(fresh) || fresh.callStart.Load() != callKilled {
		t.Error("an overdue call was not killed")
	}
	// A removed instance is not looked at any more, and a second scan of
	// a killed call changes nothing (kill is idempotent).
	w.remove(slow)
	now.Store(10_000 * ms)
	w.scan()
	if killed(slow) {
		t.Error("a removed instance was killed")
	}
	if overdue.callStart.Load() != callKilled {
		t.Error("a killed call's state changed")
	}
}

// The tick is a tenth of the shortest timeout, clamped, and follows the
// instance set; the goroutine runs only while instances exist, and close
// waits for it.
func TestWatchdogTick(t *testing.T) {
	w := newWatchdog(func() int64 { return 0 })
	a, b, c := fakeCall(50*time.Millisecond), fakeCall(time.Hour), fakeCall(time.Microsecond)
	tick := func() (time.Duration, bool) {
		w.mu.Lock()
		defer w.mu.Unlock()
		return w.tick, w.t != nil
	}
	w.add(b)
	if d, on := tick(); d != maxTick || !on {
		t.Errorf("one hour: tick %v running %v, want %v", d, on, maxTick)
	}
	w.add(a)
	if d, _ := tick(); d != 5*time.Millisecond {
		t.Errorf("50ms: tick %v, want 5ms", d)
	}
	w.add(c)
	if d, _ := tick(); d != minTick {
		t.Errorf("1µs: tick %v, want %v", d, minTick)
	}
	w.remove(c)
	w.remove(a)
	if d, _ := tick(); d != maxTick {
		t.Errorf("after removals: tick %v, want %v", d, maxTick)
	}
	w.remove(b)
	if _, on := tick(); on {
		t.Error("the goroutine runs without instances")
	}
	w.add(a)
	w.close()
	if _, on := tick(); on {
		t.Error("the goroutine runs after close")
	}
	w.add(b) // after close: ignored
	if _, on := tick(); on {
		t.Error("add after close started the goroutine")
	}
}

// MaxCallTime is watched on wallStart, which a network wait does not
// pause: a call past it is killed whether it is waiting (callStart
// callIO) or running within its CPU deadline, once, with the reason
// recorded; a call within it, an idle instance and a call that returned
// and started again since the scan read it are not.
func TestWatchdogScanMaxCallTime(t *testing.T) {
	var now atomic.Int64
	w := newWatchdog(now.Load)
	defer w.close()
	const ms = int64(time.Millisecond)
	now.Store(1000 * ms)
	for _, tc := range []struct {
		name             string
		callStart, began int64 // began: wallStart
		kill             bool
	}{
		{"waiting past it", callIO, 899 * ms, true},
		{"running past it, within its CPU deadline", 995 * ms, 899 * ms, true},
		{"waiting within it", callIO, 901 * ms, false},
		{"exactly at it", callIO, 900 * ms, false},
		{"idle", 0, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			i := fakeCall(10 * time.Millisecond)
			i.maxCallTime = 100 * ms
			w.add(i)
			defer w.remove(i)
			i.callStart.Store(tc.callStart)
			i.wallStart.Store(tc.began)
			w.scan()
			if got := i.ctx.killed.Load(); got != tc.kill {
				t.Fatalf("killed=%v, want %v", got, tc.kill)
			}
			if !tc.kill {
				return
			}
			if got := stopReason(i.ctx.why.Load()); got != stopTotal {
				t.Errorf("reason %d, want stopTotal", got)
			}
			if i.wallStart.Load() != callKilled || i.callStart.Load() != tc.callStart {
				t.Errorf("wallStart %d callStart %d: want wallStart killed, callStart untouched", i.wallStart.Load(), i.callStart.Load())
			}
		})
	}

	// A call that returned and started again after the scan read its
	// wall start is not killed for the earlier call's time.
	i := fakeCall(time.Hour)
	i.maxCallTime = 100 * ms
	w.add(i)
	i.wallStart.Store(899 * ms)
	if i.wallStart.CompareAndSwap(899*ms, 0) { // as Instance.call returning
		i.wallStart.Store(999 * ms)
	}
	w.scan()
	if i.ctx.killed.Load() {
		t.Error("a call started 1ms ago was killed for its total time")
	}

	// The tick follows the shorter of the two bounds.
	w.mu.Lock()
	tick := w.tick
	w.mu.Unlock()
	if tick != 10*time.Millisecond {
		t.Errorf("tick %v with a 100ms MaxCallTime under a 1h timeout, want 10ms", tick)
	}
}
