package engine

import (
	"context"
	"fmt"
	"testing"

	"github.com/informer-host/informer-host/bench/benchenv"
)

// BenchmarkBatch is the cost per event of handing a backlog to a plugin
// that exports ih_handle_batch (ABI.md §5): batch=1 is the baseline, one
// ih_handle call per event (what the host does for a lone event, and for
// every event of a plugin without the export); batch=8 and batch=64 hand
// that many events per ih_handle_batch call. The plugins' handlers return
// at once, so the figure is the call and the ABI's per-event work: noop-go
// through the Go kit (which calls its handler once per event either way),
// noop-c-batch (noop-c with informer_host.h's IH_HANDLE_BATCH), noop-rs
// and noop-as (the Rust and AssemblyScript kits with their opt-in batch
// export; both kits, like Go's, read and parse each event's header).
// ns/op is per event, and so is cpu-ns/op, the process's CPU time (less
// moved by other load on the machine than the wall clock).
func BenchmarkBatch(b *testing.B) {
	obj := benchenv.Objects[0]
	o := obj.New()
	for _, plugin := range []string{"noop-go", "noop-c-batch", "noop-rs", "noop-as"} {
		for _, size := range []int{1, 8, 64} {
			b.Run(fmt.Sprintf("%s/batch=%d", plugin, size), func(b *testing.B) {
				i, err := guestModule(b, plugin, "on").Instantiate(context.Background(), InstanceOptions{})
				if err != nil {
					b.Fatal(err)
				}
				defer i.Close(context.Background())
				env := guestEnvelope(b, o, obj.Ref)
				ctx := context.Background()
				cpu0 := processCPU()
				defer func() { b.ReportMetric(float64(processCPU()-cpu0)/float64(b.N), "cpu-ns/op") }()
				if size == 1 {
					runHandle(b, i, env)
					return
				}
				if !i.CanBatch() {
					b.Fatalf("%s does not export ih_handle_batch", plugin)
				}
				items := make([]BatchItem, size)
				for k := range items {
					items[k] = BatchItem{Env: env}
				}
				var res []Result
				b.ReportAllocs()
				b.ResetTimer()
				cpu := benchenv.CPU()
				for n := 0; n < b.N; n += size {
					res, err = i.HandleBatch(ctx, items, res)
					if err != nil || len(res) != size {
						b.Fatalf("%d of %d settled: %v", len(res), size, err)
					}
				}
				reportCPU(b, cpu)
			})
		}
	}
}
