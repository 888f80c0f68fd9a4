package engine

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/informer-host/informer-host/abi"
)

// batchOf is a batch of add events, one per name.
func batchOf(names ...string) []BatchItem {
	items := make([]BatchItem, len(names))
	for k, n := range names {
		items[k] = BatchItem{Env: addEvent(pod("ns", n, "Running"))}
	}
	return items
}

// Each event of a batch is settled on its own: its own code, its own
// set_error message, in order, and the guest saw the batch's size.
func TestHandleBatchSettlesEachEvent(t *testing.T) {
	logs := &logBuffer{}
	e := newEngine(t, Options{Logger: newLogger(logs)})
	i := instantiate(t, load(t, e, "batch", Limits{CallTimeout: time.Minute}), InstanceOptions{})
	if !i.CanBatch() {
		t.Fatal("CanBatch is false for a module exporting ih_handle_batch")
	}
	res, err := i.HandleBatch(context.Background(), batchOf("a", "e1", "b", "c"), nil)
	if err != nil {
		t.Fatal(err)
	}
	want := []Result{{Code: CodeOK}, {Code: CodeError, Raw: 3, Message: "asked to fail"}, {Code: CodeOK}, {Code: CodeOK}}
	if len(res) != len(want) {
		t.Fatalf("results %+v, want %+v", res, want)
	}
	for k := range want {
		if res[k] != want[k] {
			t.Errorf("event %d: %+v, want %+v", k, res[k], want[k])
		}
	}
	if got := int32(i.mod.ExportedGlobal("max_batch").Get()); got != 4 {
		t.Errorf("the guest saw a batch of %d, want 4", got)
	}
	if got := int32(i.mod.ExportedGlobal("calls").Get()); got != 1 {
		t.Errorf("%d guest calls, want 1", got)
	}
	if n := logs.count("batch 4"); n != 1 {
		t.Errorf("logged %q %d times, want once:\n%s", "batch 4", n, logs)
	}
	// A lone event still goes through ih_handle.
	if r, err := i.Handle(context.Background(), addEvent(pod("ns", "solo", "Running"))); err != nil || r.Code != CodeOK {
		t.Fatalf("Handle: %+v, %v", r, err)
	}
	if _, err := i.HandleBatch(context.Background(), batchOf("x"), nil); err == nil {
		t.Error("a batch of one event was accepted")
	}
}

// A plugin may settle fewer events than it was given: the rest are not
// handled, and the call is no failure.
func TestHandleBatchStopsEarly(t *testing.T) {
	e := newEngine(t, Options{})
	i := instantiate(t, load(t, e, "batch", Limits{CallTimeout: time.Minute}), InstanceOptions{})
	res, err := i.HandleBatch(context.Background(), batchOf("a", "b", "s", "c"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != 2 {
		t.Fatalf("%d events settled, want 2 (the plugin stops before s)", len(res))
	}
	if got := int32(i.mod.ExportedGlobal("events").Get()); got != 2 {
		t.Errorf("the guest handled %d events, want 2", got)
	}
	// The instance is fine: the stopping event, first of the next batch,
	// is handled.
	res, err = i.HandleBatch(context.Background(), batchOf("s", "c"), nil)
	if err != nil || len(res) != 2 {
		t.Fatalf("next batch: %+v, %v", res, err)
	}
}

// A trap mid-batch fails the event being handled: the ones before it are
// settled, the failure is reported at its index, the instance is dead.
func TestHandleBatchTrapFailsCurrentEvent(t *testing.T) {
	e := newEngine(t, Options{})
	i := instantiate(t, load(t, e, "batch", Limits{CallTimeout: time.Minute}), InstanceOptions{})
	res, err := i.HandleBatch(context.Background(), batchOf("a", "e", "trap", "c"), nil)
	var f *Failure
	if !errors.As(err, &f) || f.Kind != KindTrap || f.Phase != abi.ExportHandleBatch {
		t.Fatalf("err = %v, want a trap in %s", err, abi.ExportHandleBatch)
	}
	if len(res) != 2 || res[0].Code != CodeOK || res[1].Code != CodeError {
		t.Fatalf("settled %+v, want OK and ERROR before the trap", res)
	}
	if _, err := i.Handle(context.Background(), addEvent(pod("ns", "a", "Running"))); !errors.Is(err, ErrInstanceDead) {
		t.Fatalf("after the trap: %v, want ErrInstanceDead", err)
	}
}

// The bounds of a call apply to each event of a batch on its own: a
// batch whose events together make more host calls than
// MaxHostCallsPerCall allows, each within it, is not stopped.
func TestHandleBatchBoundsPerEvent(t *testing.T) {
	e := newEngine(t, Options{})
	// Per event: batch_select, header_read, log, batch_result.
	i := instantiate(t, load(t, e, "batch", Limits{CallTimeout: time.Minute, MaxHostCallsPerCall: 5}), InstanceOptions{})
	res, err := i.HandleBatch(context.Background(), batchOf("a", "b", "c", "d", "f", "g"), nil)
	if err != nil || len(res) != 6 {
		t.Fatalf("%+v, %v: a batch of events each within the host call cap was stopped", res, err)
	}
	// One event alone over the cap is still stopped.
	i2 := instantiate(t, load(t, e, "batch", Limits{CallTimeout: time.Minute, MaxHostCallsPerCall: 2}), InstanceOptions{})
	res, err = i2.HandleBatch(context.Background(), batchOf("a", "b"), nil)
	var f *Failure
	if !errors.As(err, &f) || !errors.Is(f.Err, ErrMaxHostCalls) {
		t.Fatalf("err = %v, want the host call cap", err)
	}
	if len(res) != 0 {
		t.Errorf("settled %d events, want 0", len(res))
	}
}

// A module without the export (every plugin built for v1.3) cannot be
// handed a batch, and is called as before.
func TestHandleBatchWithoutExport(t *testing.T) {
	e := newEngine(t, Options{})
	i := instantiate(t, load(t, e, "healthy", Limits{CallTimeout: time.Minute}), InstanceOptions{})
	if i.CanBatch() {
		t.Fatal("CanBatch is true for a module without ih_handle_batch")
	}
	if _, err := i.HandleBatch(context.Background(), batchOf("a", "b"), nil); err == nil {
		t.Fatal("HandleBatch succeeded without the export")
	}
	if r, err := i.Handle(context.Background(), addEvent(pod("ns", "a", "Running"))); err != nil || r.Code != CodeOK {
		t.Fatalf("Handle: %+v, %v", r, err)
	}
}
