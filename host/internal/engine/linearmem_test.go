package engine

import (
	"context"
	"log/slog"
	"runtime"
	"testing"
	"time"

	"github.com/informer-host/informer-host/internal/testenv"
)

// TestLinearMemoryOutsideGoHeap: a plugin's linear memory is mapped
// outside the Go heap (linearmem.go), grows in place and keeps its
// contents, and stops at the limit. With wazero's Go buffer, growing to
// 128 MiB added 128 MiB (and a copy) to the live Go heap, which the
// collector then let grow by as much again.
func TestLinearMemoryOutsideGoHeap(t *testing.T) {
	const limit = 2048 // 128 MiB
	e := newEngine(t, Options{})
	for _, lim := range []Limits{{MemoryPages: limit}, {MemoryPages: limit, CallTimeout: time.Second}} {
		t.Run("deadline="+lim.CallTimeout.String(), func(t *testing.T) {
			m, err := e.Load(context.Background(), "bench.wasm", fixture(t, "bench"), lim)
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close(context.Background())
			i := instantiate(t, m, InstanceOptions{Config: []byte("n")})
			mem := i.mod.Memory()
			if !mem.Write(100, []byte("kept")) {
				t.Fatal("write at 100 failed")
			}
			before := liveHeap()
			pages := mem.Size() / 65536
			if _, ok := mem.Grow(limit - pages); !ok {
				t.Fatalf("grow from %d to %d pages failed", pages, limit)
			}
			if !mem.WriteUint32Le(limit*65536-4, 7) {
				t.Fatal("write at the last word failed")
			}
			grown := liveHeap() - before
			if b, _ := mem.Read(100, 4); string(b) != "kept" {
				t.Errorf("after the grow, memory at 100 is %q, want %q", b, "kept")
			}
			if v, _ := mem.ReadUint32Le(limit*65536 - 4); v != 7 {
				t.Errorf("last word is %d, want 7", v)
			}
			if _, ok := mem.Grow(1); ok {
				t.Error("grew past the limit")
			}
			if grown > 16<<20 {
				t.Errorf("growing the plugin's memory by %d MiB grew the live Go heap by %d MiB; want it outside the heap",
					(limit-pages)/16, grown>>20)
			}
			if _, err := i.Handle(context.Background(), addEvent(pod("ns", "p", "Running"))); err != nil {
				t.Fatalf("a call after the grow: %v", err)
			}
		})
	}
}

func liveHeap() int64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return int64(ms.HeapAlloc)
}

// blockingHandler is a slog.Handler whose first record signals entered
// and then waits for release: a guest's log call that holds the guest in
// the middle of its call for as long as the test wants.
type blockingHandler struct {
	entered, release chan struct{}
}

func (h *blockingHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h *blockingHandler) Handle(context.Context, slog.Record) error {
	select {
	case <-h.entered:
	default:
		close(h.entered)
		<-h.release
	}
	return nil
}
func (h *blockingHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *blockingHandler) WithGroup(string) slog.Handler      { return h }

// logThenStore logs, then writes and reads its memory.
const logThenStore = `(module
  (import "informer_host_v1" "log" (func $log (param i32 i32 i32) (result i32)))
  (memory (export "memory") 1)
  (data (i32.const 0) "in")
  (func (export "informer_host_abi_v1"))
  (func (export "ih_handle") (param i32) (result i32)
    (drop (call $log (i32.const 1) (i32.const 0) (i32.const 2)))
    (i32.store (i32.const 1024) (i32.const 42))
    (i32.load (i32.const 1024))))
`

// TestEngineCloseDuringCall: Engine.Close frees every instance's memory,
// also of an instance whose call is running on another goroutine. Unmapped
// under the running guest, its next store would fault and kill the
// process; the memory is unmapped when the call leaves it instead.
func TestEngineCloseDuringCall(t *testing.T) {
	e, err := New(context.Background(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close(context.Background())
	var insts []*Instance
	var hs []*blockingHandler
	for _, lim := range []Limits{{MemoryPages: 16}, {MemoryPages: 16, CallTimeout: time.Minute}} {
		m, err := e.Load(context.Background(), "store.wasm", testenv.WATText(t, logThenStore), lim)
		if err != nil {
			t.Fatal(err)
		}
		defer m.Close(context.Background())
		h := &blockingHandler{entered: make(chan struct{}), release: make(chan struct{})}
		i, err := m.Instantiate(context.Background(), InstanceOptions{Logger: slog.New(h)})
		if err != nil {
			t.Fatal(err)
		}
		insts, hs = append(insts, i), append(hs, h)
	}
	done := make(chan error, len(insts))
	for k, i := range insts {
		go func() {
			_, err := i.Handle(context.Background(), addEvent(pod("ns", "p", "Running")))
			done <- err
		}()
		<-hs[k].entered
	}
	if err := e.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	for _, h := range hs {
		close(h.release)
	}
	for range insts {
		<-done // any outcome but a fault
	}
	for _, i := range insts {
		if i.mem == nil {
			t.Fatal("the instance's memory is not mapped")
		}
		if s := i.mem.state.Load(); s&memUnmapped == 0 {
			t.Errorf("memory state %#x: not unmapped after Engine.Close and the call's end", s)
		}
		i.Close(context.Background())
	}
}
