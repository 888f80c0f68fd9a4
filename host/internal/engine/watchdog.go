package engine

import (
	"sync"
	"time"
)

// watchdog enforces CallTimeout for every instance of an engine with one
// goroutine and no per-call allocation.
//
// Why not context.WithTimeout per call: a timeout context costs a timer, a
// cancel function and two allocations per call, for a deadline that almost
// never fires. Here a call costs a clock read, an atomic store and a
// compare-and-swap (Instance.call). To kill a call the watchdog raises the
// instance's injected stop flag (wasmbin/checks.go) and closes the instance's
// context, created once, on which a guest sleeping or writing in a WASI
// call wakes (and which wazero watches, with a goroutine per call, for a
// module compiled with wazero's own checks: Engine.wazeroChecks, kept for
// comparisons). See BENCHMARKS.md for measurements.
//
// The watchdog wakes every tick while at least one instance with a
// deadline exists, and kills the calls that have run longer than their
// timeout (running time: callStart, which stands still while the call
// waits on the network but not while its thread waits for a core) or
// than their MaxCallTime (wall time: wallStart, which does not). A call is therefore stopped between its bound and its bound
// plus one tick (plus scheduling delay). The tick is a tenth of the
// shortest bound, clamped to [1ms, 100ms].
type watchdog struct {
	now func() int64

	mu    sync.Mutex // guards the fields below
	insts map[*Instance]struct{}
	tick  time.Duration
	t     *time.Ticker
	stop  chan struct{} // closed to end the current goroutine
	done  chan struct{} // closed when it has ended
}

const (
	minTick = time.Millisecond
	maxTick = 100 * time.Millisecond
)

func newWatchdog(now func() int64) *watchdog {
	return &watchdog{now: now, insts: map[*Instance]struct{}{}}
}

func (w *watchdog) add(i *Instance) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.insts == nil { // closed
		return
	}
	w.insts[i] = struct{}{}
	w.retick()
}

func (w *watchdog) remove(i *Instance) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if _, ok := w.insts[i]; !ok {
		return
	}
	delete(w.insts, i)
	w.retick()
}

// retick starts, stops or re-paces the goroutine after a change of the
// instance set. Called with mu held.
func (w *watchdog) retick() {
	if len(w.insts) == 0 {
		w.halt()
		return
	}
	tick := maxTick
	for i := range w.insts {
		bound := i.timeout
		if m := time.Duration(i.maxCallTime); m > 0 && m < bound {
			bound = m
		}
		if t := bound / 10; t < tick {
			tick = t
		}
	}
	if tick < minTick {
		tick = minTick
	}
	if w.t == nil {
		w.t = time.NewTicker(tick)
		w.stop, w.done = make(chan struct{}), make(chan struct{})
		go w.run(w.t, w.stop, w.done)
	} else if tick != w.tick {
		w.t.Reset(tick)
	}
	w.tick = tick
}

// halt stops the goroutine. Called with mu held; it does not wait for the
// goroutine, which may be waiting for mu to scan.
func (w *watchdog) halt() {
	if w.t != nil {
		w.t.Stop()
		close(w.stop)
		w.t, w.stop, w.done = nil, nil, nil
	}
}

func (w *watchdog) run(t *time.Ticker, stop, done chan struct{}) {
	defer close(done)
	for {
		select {
		case <-stop:
			return
		case <-t.C:
			w.scan()
		}
	}
}

func (w *watchdog) scan() {
	now := w.now()
	w.mu.Lock()
	defer w.mu.Unlock()
	for i := range w.insts {
		start := i.callStart.Load()
		if start > 0 && now-start > int64(i.timeout) && i.callStart.CompareAndSwap(start, callKilled) {
			i.ctx.kill(stopCPU)
			continue
		}
		// A call waiting on the network (callStart callIO) is killed
		// here too: io's wait ends with the instance's context.
		began := i.wallStart.Load()
		if i.maxCallTime > 0 && began > 0 && now-began > i.maxCallTime && i.wallStart.CompareAndSwap(began, callKilled) {
			i.ctx.kill(stopTotal)
		}
	}
}

// close stops the watchdog for good and waits for its goroutine.
func (w *watchdog) close() {
	w.mu.Lock()
	done := w.done
	w.halt()
	w.insts = nil
	w.mu.Unlock()
	if done != nil {
		<-done
	}
}
