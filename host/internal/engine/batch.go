package engine

import (
	"context"
	"fmt"

	"github.com/tetratelabs/wazero/api"

	"github.com/informer-host/informer-host/abi"
)

// Batches (ABI.md §5, ih_handle_batch, since v1.4): a plugin that exports
// ih_handle_batch may be handed several events in one call when the host
// has a backlog, so that a guest whose every call costs more than the
// event (a Go wasip1 guest enters its runtime, reads clocks and schedules
// goroutines on each) pays that once per batch. Each event of the batch is
// still its own unit for everything the host settles: the guest makes it
// current with batch_select and settles it with batch_result, and the
// limits that bound a call (CallTimeout, MaxCallTime, MaxHostCallsPerCall),
// set_error, result_message and cache_get handles start over at each
// batch_select, so an event in a batch gets exactly what it would get
// alone.

// BatchExport names the export in failures and logs.
const BatchExport = abi.ExportHandleBatch

// MaxBatch is the most events the host hands in one ih_handle_batch call.
const MaxBatch = 64

// BatchItem is one event of a batch: the shared envelope and the header
// flags this plugin alone sees (HandleWith's flags).
type BatchItem struct {
	Env   *Envelope
	Flags uint8
}

// batchState is callState's view of the batch being handled.
type batchState struct {
	items []BatchItem // nil outside ih_handle_batch
	// results holds one Result per settled event, in order.
	results []Result
	// cur is the index of the current event, -1 when none is (before the
	// first batch_select, and after batch_result until the next one).
	cur int
}

// CanBatch reports whether the instance's module exports ih_handle_batch
// and the engine can bound each of its events on its own (the watchdog's
// deadlines restart per event; a context per call, a mode kept for
// comparisons, cannot).
func (i *Instance) CanBatch() bool {
	return i.batch != nil && (i.timeout <= 0 || i.e.mode == modeWatchdog)
}

// HandleBatch hands items, at least two, to ih_handle_batch in one call.
// It returns the results of the events the plugin settled, in order: on a
// nil error, len(results) events (the rest, if any, were not handled and
// are to be handed again); on a *Failure, the instance is dead, the
// events before len(results) were settled and event len(results), if
// there is one, is the one that was being handled (selected and not yet
// settled, or the next one when the call failed between events). Other
// errors (ctx done, instance closed or dead, a module without the export)
// leave the instance as it was and settle nothing. results is appended to
// buf[:0].
func (i *Instance) HandleBatch(ctx context.Context, items []BatchItem, buf []Result) ([]Result, error) {
	if err := i.usable(); err != nil {
		return nil, err
	}
	if !i.CanBatch() {
		return nil, fmt.Errorf("plugin %q: no %s to call", i.name, abi.ExportHandleBatch)
	}
	if len(items) < 2 || len(items) > MaxBatch {
		return nil, fmt.Errorf("plugin %q: a batch of %d events (want 2 to %d)", i.name, len(items), MaxBatch)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	b := &i.st.batch
	b.items, b.results, b.cur = items, buf[:0], -1
	i.st.callCtx = ctx
	i.stack[0] = uint64(len(items))
	err := i.call(i.batch)
	results := b.results
	i.st.env, i.st.callCtx, i.st.flags = nil, nil, 0
	b.items, b.results, b.cur = nil, nil, -1
	if err == nil {
		if n := int32(uint32(i.stack[0])); n != int32(len(results)) {
			err = fmt.Errorf("%s returned %d, but settled %d of its %d events with %s", abi.ExportHandleBatch, n, len(results), len(items), abi.ImportBatchResult)
			i.dead = &Failure{Plugin: i.name, Phase: abi.ExportHandleBatch, Kind: KindABI, Err: err, Output: i.st.out.takeTail()}
			return results, i.dead
		}
		return results, nil
	}
	return results, i.failure(ctx, abi.ExportHandleBatch, err, true)
}

// result turns an ih_handle return value, with the set_error message of
// the call (or of the event, in a batch), into a Result.
func (st *callState) result(raw int32, export string) Result {
	r := Result{Raw: raw}
	switch raw {
	case abi.ResultOK:
		r.Code = CodeOK
	case abi.ResultRetry:
		r.Code = CodeRetry
	case abi.ResultDrop:
		r.Code = CodeDrop
	default:
		r.Code = CodeError
	}
	if st.errSet {
		r.Message = string(st.errMsg)
	} else if r.Code == CodeError && raw != abi.ResultError {
		r.Message = fmt.Sprintf("%s returned %d, which is not a result code", export, raw)
	}
	return r
}

// nextEvent starts the clocks of the call over for the event batch_select
// makes current, as a call of its own would: CPU time, wall time and the
// count of host calls. Called on the instance's goroutine, inside the
// call. A call the watchdog killed meanwhile ends here (abortCall).
func (i *Instance) nextEvent() {
	st := i.st
	st.hostCalls = 0
	if i.timeout <= 0 {
		return
	}
	start, wall := i.callStart.Load(), i.wallStart.Load()
	if start == 0 && wall == 0 {
		return // no timed call is running (a host function called directly, in tests)
	}
	if start <= 0 || wall <= 0 || i.ctx.killed.Load() {
		abortCall()
	}
	now := i.e.now()
	if now <= i.lastStart {
		now = i.lastStart + 1
	}
	if !i.callStart.CompareAndSwap(start, now) {
		abortCall() // the watchdog killed it just now
	}
	if !i.wallStart.CompareAndSwap(wall, now) {
		abortCall()
	}
	i.lastStart, i.curStart, i.curWall = now, now, now
}

// batch_select(index i32) -> i32
func batchSelect(ctx context.Context, mod api.Module, stack []uint64) {
	st := stateOf(ctx)
	index := i32(stack[0])
	if st == nil || st.batch.items == nil {
		setI32(stack, abi.ErrNoEvent)
		return
	}
	b := &st.batch
	settled := int32(len(b.results))
	// Events are handled in order: the next unsettled one, which may be
	// selected again while it is current.
	if index != settled || int(index) >= len(b.items) {
		setI32(stack, abi.ErrInvalid)
		return
	}
	if b.cur != int(index) {
		st.errMsg, st.errSet = st.errMsg[:0], false
		st.resultMsg = st.resultMsg[:0]
		st.dropHandles()
		st.out.resetCall()
		if st.inst != nil {
			st.inst.nextEvent()
		}
		b.cur = int(index)
	}
	it := b.items[index]
	st.env, st.flags = it.Env, it.Flags
	setI32(stack, int32(len(it.Env.header)))
}

// batch_result(code i32) -> i32
func batchResult(ctx context.Context, mod api.Module, stack []uint64) {
	st := stateOf(ctx)
	code := i32(stack[0])
	if st == nil || st.batch.items == nil || st.batch.cur < 0 {
		setI32(stack, abi.ErrNoEvent)
		return
	}
	b := &st.batch
	b.results = append(b.results, st.result(code, abi.ExportHandleBatch))
	b.cur = -1
	st.env, st.flags = nil, 0
	setI32(stack, 0)
}
