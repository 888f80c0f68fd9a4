package engine

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/informer-host/informer-host/bench/benchenv"
	"github.com/informer-host/informer-host/internal/testenv"
)

// Benchmarks measure; they assert nothing about time. Results on the
// development machine are recorded in abi/RATIONALE.md.

// deadlineStrategies are the ways a call can be bounded.
var deadlineStrategies = []struct {
	name   string
	limits Limits
	mode   deadlineMode
}{
	{"none", Limits{MemoryPages: 64}, modeWatchdog},
	{"watchdog", Limits{MemoryPages: 64, CallTimeout: time.Second}, modeWatchdog},
	{"ctxtimeout", Limits{MemoryPages: 64, CallTimeout: time.Second}, modeCtxTimeout},
}

func benchInstance(b *testing.B, wasm []byte, name string, limits Limits, mode deadlineMode, config string) *Instance {
	b.Helper()
	e := newEngine(b, Options{})
	e.mode = mode
	m, err := e.Load(context.Background(), name, wasm, limits)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { m.Close(context.Background()) })
	return instantiate(b, m, InstanceOptions{Config: []byte(config)})
}

func runHandle(b *testing.B, i *Instance, env *Envelope) {
	b.Helper()
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	cpu := benchenv.CPU()
	for n := 0; n < b.N; n++ {
		if _, err := i.Handle(ctx, env); err != nil {
			b.Fatal(err)
		}
	}
	reportCPU(b, cpu)
}

// reportCPU reports the process's CPU time since cpu per op (cpu-ns/op):
// on a loaded machine it moves less than ns/op, which counts the time the
// benchmark waited for a core.
func reportCPU(b *testing.B, cpu time.Duration) {
	b.StopTimer()
	b.ReportMetric(float64((benchenv.CPU()-cpu).Nanoseconds())/float64(b.N), "cpu-ns/op")
}

// BenchmarkHandleNoop is the cost of one ih_handle call that does nothing,
// per deadline strategy.
func BenchmarkHandleNoop(b *testing.B) {
	wasm := fixture(b, "bench")
	env := addEvent(pod("ns", "p", "Running"))
	for _, s := range deadlineStrategies {
		b.Run(s.name, func(b *testing.B) {
			runHandle(b, benchInstance(b, wasm, "bench.wasm", s.limits, s.mode, "n"), env)
		})
	}
}

// BenchmarkHandleSpin is a loop-heavy call (100k iterations, no host
// calls): the price of termination checks in compiled loops.
func BenchmarkHandleSpin(b *testing.B) {
	wasm := fixture(b, "bench")
	env := addEvent(pod("ns", "p", "Running"))
	for _, s := range deadlineStrategies[:2] {
		b.Run(s.name, func(b *testing.B) {
			runHandle(b, benchInstance(b, wasm, "bench.wasm", s.limits, s.mode, "s"), env)
		})
	}
}

// BenchmarkRead is one call that reads the header, one field, or the whole
// object (already encoded, and encoded afresh for every call).
func BenchmarkRead(b *testing.B) {
	wasm := fixture(b, "bench")
	p := pod("ns", "p", "Running")
	lim := Limits{MemoryPages: 64, CallTimeout: time.Second}
	for _, tc := range []struct{ name, config string }{{"header", "h"}, {"field", "f"}, {"object", "o"}} {
		b.Run(tc.name, func(b *testing.B) {
			runHandle(b, benchInstance(b, wasm, "bench.wasm", lim, modeWatchdog, tc.config), addEvent(p))
		})
	}
	b.Run("object-encode", func(b *testing.B) {
		i := benchInstance(b, wasm, "bench.wasm", lim, modeWatchdog, "o")
		ctx := context.Background()
		b.ReportAllocs()
		for n := 0; n < b.N; n++ {
			if _, err := i.Handle(ctx, addEvent(p)); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkNewEnvelope is the per-event cost paid once for all plugins.
func BenchmarkNewEnvelope(b *testing.B) {
	p := pod("ns", "web-0", "Running")
	b.ReportAllocs()
	for n := 0; n < b.N; n++ {
		_ = addEvent(p)
	}
}

// BenchmarkGoDecode is a Go plugin decoding the object with encoding/json,
// with and without termination checks.
func BenchmarkGoDecode(b *testing.B) {
	wasm := examples.get(b, "gofail")
	env := addEvent(pod("ns", "p", "Running"))
	for _, s := range deadlineStrategies[:2] {
		b.Run(s.name, func(b *testing.B) {
			lim := s.limits
			lim.MemoryPages = 1024
			runHandle(b, benchInstance(b, wasm, "gofail.wasm", lim, s.mode, "decode"), env)
		})
	}
}

// BenchmarkGoNoop is a Go plugin's handler that reads the header and
// returns: the kit's fixed cost.
func BenchmarkGoNoop(b *testing.B) {
	wasm := examples.get(b, "gofail")
	env := addEvent(pod("ns", "p", "Running"))
	runHandle(b, benchInstance(b, wasm, "gofail.wasm", Limits{MemoryPages: 1024, CallTimeout: time.Second}, modeWatchdog, "none"), env)
}

// BenchmarkCompile is Load of the Go examples, from scratch (a new engine
// without cache each time) and from a warm on-disk compilation cache.
// Run with -benchtime=3x: a cold compile takes seconds.
func BenchmarkCompile(b *testing.B) {
	for _, name := range []string{"pod-logger", "pod-phases"} {
		wasm := examples.get(b, name)
		for _, deadline := range []bool{false, true} {
			lim := Limits{MemoryPages: 1024}
			if deadline {
				lim.CallTimeout = time.Second
			}
			b.Run(fmt.Sprintf("%s/deadline=%v/cold", name, deadline), func(b *testing.B) {
				for n := 0; n < b.N; n++ {
					e, _ := New(context.Background(), Options{})
					if _, err := e.Load(context.Background(), name, wasm, lim); err != nil {
						b.Fatal(err)
					}
					e.Close(context.Background())
				}
			})
			dir := b.TempDir()
			warm, _ := New(context.Background(), Options{CacheDir: dir})
			if _, err := warm.Load(context.Background(), name, wasm, lim); err != nil {
				b.Fatal(err)
			}
			warm.Close(context.Background())
			b.Run(fmt.Sprintf("%s/deadline=%v/cached", name, deadline), func(b *testing.B) {
				for n := 0; n < b.N; n++ {
					e, _ := New(context.Background(), Options{CacheDir: dir})
					if _, err := e.Load(context.Background(), name, wasm, lim); err != nil {
						b.Fatal(err)
					}
					e.Close(context.Background())
				}
			})
		}
	}
}

// BenchmarkInstantiate is a fresh instance of a compiled Go plugin: the
// cost of a restart.
func BenchmarkInstantiate(b *testing.B) {
	wasm := examples.get(b, "pod-phases")
	e := newEngine(b, Options{})
	m, err := e.Load(context.Background(), "pod-phases.wasm", wasm, Limits{MemoryPages: 1024, CallTimeout: time.Second})
	if err != nil {
		b.Fatal(err)
	}
	defer m.Close(context.Background())
	b.ReportAllocs()
	b.ResetTimer()
	for n := 0; n < b.N; n++ {
		i, err := m.Instantiate(context.Background(), InstanceOptions{Config: []byte(`{"logEvery":1}`)})
		if err != nil {
			b.Fatal(err)
		}
		i.Close(context.Background())
	}
}

// BenchmarkOverrun is how long a call that runs for ever outlives its
// deadline (overrun-ms: the call's duration minus CallTimeout, the
// watchdog's tick included), and the longest a garbage collection took
// while it ran (gc-max-ms: a collection must stop the guest's goroutine,
// which only happens when the guest exits to Go), for each of
// unboundedGuests and for one memory.fill of 256 MiB per iteration. Run
// with -benchtime=5x.
func BenchmarkOverrun(b *testing.B) {
	const timeout = 20 * time.Millisecond
	guests := append(unboundedGuests[:len(unboundedGuests):len(unboundedGuests)], struct {
		name   string
		counts bool
		wat    string
	}{"memory.fill of 256 MiB per iteration", true, `(module (memory (export "memory") 4097)` + wasmHeader + `
  (func (export "ih_handle") (param i32) (result i32)
    (loop $l (memory.fill (i32.const 64) (i32.const 7) (i32.const 0x10000000)) (br $l))
    (i32.const 0)))`})
	for _, g := range guests {
		b.Run(strings.ReplaceAll(g.name, " ", "_"), func(b *testing.B) {
			e := newEngine(b, Options{})
			m, err := e.Load(context.Background(), "spin.wasm", testenv.WATText(b, g.wat), Limits{CallTimeout: timeout})
			if err != nil {
				b.Fatal(err)
			}
			defer m.Close(context.Background())
			var overrun, gcMax time.Duration
			for n := 0; n < b.N; n++ {
				i, err := m.Instantiate(context.Background(), InstanceOptions{})
				if err != nil {
					b.Fatal(err)
				}
				done := make(chan time.Duration, 1)
				go func() {
					start := time.Now()
					_, err := i.Handle(context.Background(), addEvent(pod("ns", "p", "Running")))
					if err == nil {
						b.Error("the call returned")
					}
					done <- time.Since(start)
				}()
			wait:
				for {
					select {
					case d := <-done:
						overrun += d - timeout
						break wait
					default:
						start := time.Now()
						runtime.GC()
						gcMax = max(gcMax, time.Since(start))
					}
				}
				i.Close(context.Background())
			}
			b.ReportMetric(float64(overrun)/float64(b.N)/1e6, "overrun-ms")
			b.ReportMetric(float64(gcMax)/1e6, "gc-max-ms")
		})
	}
}

// BenchmarkLoadWarm is the compile of a warm reload: Load, in an engine
// that keeps running, of a small Go plugin whose compiled code (and, with
// injected checks, rewrite) the on-disk cache has from an earlier load.
func BenchmarkLoadWarm(b *testing.B) {
	wasm := examples.get(b, "pod-phases")
	ctx := context.Background()
	lim := Limits{MemoryPages: 1024, CallTimeout: time.Second}
	dir := b.TempDir()
	first, _ := New(ctx, Options{CacheDir: dir})
	m, err := first.Load(ctx, "pod-phases.wasm", wasm, lim)
	if err != nil {
		b.Fatal(err)
	}
	m.Close(ctx)
	first.Close(ctx)
	loadCPU(b, newEngine(b, Options{CacheDir: dir}), "pod-phases.wasm", wasm, lim)
}

// BenchmarkLoadCold is BenchmarkLoadWarm's baseline: the same Load in an
// engine without an on-disk cache, so every Load compiles (and rewrites)
// the module afresh, which is what a reload of a plugin never loaded
// before costs.
func BenchmarkLoadCold(b *testing.B) {
	wasm := examples.get(b, "pod-phases")
	lim := Limits{MemoryPages: 1024, CallTimeout: time.Second}
	loadCPU(b, newEngine(b, Options{}), "pod-phases.wasm", wasm, lim)
}

// loadCPU loads wasm b.N times in e, closing each module before the next
// Load, and reports the process's CPU per Load.
func loadCPU(b *testing.B, e *Engine, name string, wasm []byte, lim Limits) {
	ctx := context.Background()
	b.ResetTimer()
	cpu0 := processCPU()
	for n := 0; n < b.N; n++ {
		m, err := e.Load(ctx, name, wasm, lim)
		if err != nil {
			b.Fatal(err)
		}
		m.Close(ctx) // the last reference: the next Load finds nothing in memory
	}
	// CPU, not wall: on a shared machine the wall time is mostly waiting.
	b.ReportMetric(float64(processCPU()-cpu0)/float64(b.N)/1e6, "cpu-ms/op")
}

// processCPU is the process's user and system CPU time so far.
func processCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
