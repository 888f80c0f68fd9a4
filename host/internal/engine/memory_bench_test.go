package engine

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/informer-host/informer-host/bench/benchenv"
)

// BenchmarkInstanceMemory is what one more instance of a Go plugin costs
// the process in resident memory: N instances of the twofields
// plugin, each Loaded separately as the host loads every file, handle
// events events each, and the process's VmRSS is read before and after
// (after a garbage collection and returning freed memory to the OS, so
// the figure is what the instances hold, not the collector's timing).
// Reported per instance: rss-MiB/inst (the process's growth),
// guest-MiB/inst (the size of the instance's linear memory) and
// goheap-MiB/inst (the growth of the live Go heap, which the collector
// lets grow by as much again before it collects: the headroom a settled
// RSS does not show).
func BenchmarkInstanceMemory(b *testing.B) {
	root, err := benchenv.Root()
	if err != nil {
		b.Fatal(err)
	}
	wasm, err := benchenv.Wasm("twofields")
	if err != nil {
		b.Fatal(err)
	}
	o := benchenv.Objects[0]
	env := guestEnvelope(b, o.New(), o.Ref)
	config := fmt.Sprintf(`{"fields":[%q,%q]}`, benchenv.TwoFields[0], benchenv.TwoFields[1])
	const n = 20
	events := 5000
	if testing.Short() {
		events = 100
	}
	for b.Loop() {
		e := newEngine(b, Options{CacheDir: root + "/build/bench/wazero"})
		// Compile (or load from the cache) once before the baseline: the
		// compiled code is shared by every instance, and is not what one
		// more instance costs.
		m0, err := e.Load(context.Background(), "twofields-0.wasm", wasm, Limits{MemoryPages: 1024, CallTimeout: time.Second})
		if err != nil {
			b.Fatal(err)
		}
		before := settledRSS(b)
		heapBefore := heapInUse()
		var guest uint64
		var insts []*Instance
		for k := 0; k < n; k++ {
			m, err := e.Load(context.Background(), fmt.Sprintf("twofields-%d.wasm", k), wasm, Limits{MemoryPages: 1024, CallTimeout: time.Second})
			if err != nil {
				b.Fatal(err)
			}
			i, err := m.Instantiate(context.Background(), InstanceOptions{Config: []byte(config)})
			if err != nil {
				b.Fatal(err)
			}
			for j := 0; j < events; j++ {
				if _, err := i.Handle(context.Background(), env); err != nil {
					b.Fatal(err)
				}
			}
			insts = append(insts, i)
		}
		after := settledRSS(b)
		heapAfter := heapInUse()
		for _, i := range insts {
			guest += uint64(i.mod.Memory().Size())
		}
		b.ReportMetric(float64(after-before)/n/(1<<20), "rss-MiB/inst")
		b.ReportMetric(float64(guest)/n/(1<<20), "guest-MiB/inst")
		b.ReportMetric(float64(heapAfter-heapBefore)/n/(1<<20), "goheap-MiB/inst")
		for _, i := range insts {
			i.Close(context.Background())
		}
		m0.Close(context.Background())
	}
}

// heapInUse is the live Go heap after a collection: what the collector
// paces on (the heap may grow by GOGC% of it before the next one).
func heapInUse() int64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return int64(ms.HeapAlloc)
}

// settledRSS is the process's VmRSS after a collection that returns
// freed memory to the OS.
func settledRSS(b *testing.B) int64 {
	b.Helper()
	runtime.GC()
	debug.FreeOSMemory()
	s, err := os.ReadFile("/proc/self/status")
	if err != nil {
		b.Fatal(err)
	}
	for _, line := range strings.Split(string(s), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.Fields(v)[0], 10, 64)
			if err != nil {
				b.Fatal(err)
			}
			return kb << 10
		}
	}
	b.Fatal("no VmRSS in /proc/self/status")
	return 0
}
