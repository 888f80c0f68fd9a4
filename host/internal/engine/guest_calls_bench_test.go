package engine

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/experimental"

	"github.com/informer-host/informer-host/bench/benchenv"
)

// hostCallCounter counts the calls a guest makes to each host function
// (WASI's and informer_host_v1's). wazero's compiled guest code is opaque
// to pprof, so these counts are how a benchmark sees what a guest's event
// asks of the host: clock reads by Go's runtime, the kit's reads.
type hostCallCounter struct {
	names []string
	n     []atomic.Int64
	index map[string]int
}

func newHostCallCounter() *hostCallCounter {
	return &hostCallCounter{n: make([]atomic.Int64, 256), index: map[string]int{}}
}

// NewFunctionListener listens to host functions only: a listener on every
// guest function would change what is measured.
func (c *hostCallCounter) NewFunctionListener(def api.FunctionDefinition) experimental.FunctionListener {
	if def.GoFunction() == nil {
		return nil
	}
	mod, _, _ := def.Import()
	if mod == "" {
		mod = def.ModuleName()
	}
	name := mod + "." + def.Name()
	k, ok := c.index[name]
	if !ok {
		k = len(c.names)
		c.index[name] = k
		c.names = append(c.names, name)
	}
	return countingListener{n: &c.n[k]}
}

func (c *hostCallCounter) snapshot() map[string]int64 {
	m := map[string]int64{}
	for k, name := range c.names {
		m[name] = c.n[k].Load()
	}
	return m
}

type countingListener struct{ n *atomic.Int64 }

func (l countingListener) Before(context.Context, api.Module, api.FunctionDefinition, []uint64, experimental.StackIterator) {
	l.n.Add(1)
}
func (countingListener) After(context.Context, api.Module, api.FunctionDefinition, []uint64) {}
func (countingListener) Abort(context.Context, api.Module, api.FunctionDefinition, error)    {}

// BenchmarkGuestHostCalls reports, per event, how many times a Go guest
// calls each host function (metric "<module>.<function>/op"), with the
// benchmark plugins of BenchmarkGuest and the deadline on. ns/op here
// includes the listeners and is not a cost figure: BenchmarkGuest is.
func BenchmarkGuestHostCalls(b *testing.B) {
	obj := benchenv.Objects[0]
	o := obj.New()
	config := fmt.Sprintf(`{"fields":[%q,%q]}`, benchenv.TwoFields[0], benchenv.TwoFields[1])
	for _, plugin := range []string{"noop-go", "twofields"} {
		b.Run(plugin, func(b *testing.B) {
			counter := newHostCallCounter()
			ctx := experimental.WithFunctionListenerFactory(context.Background(), counter)
			e := newEngine(b, Options{})
			wasm, err := benchenv.Wasm(plugin)
			if err != nil {
				b.Fatal(err)
			}
			m, err := e.Load(ctx, plugin+".wasm", wasm, Limits{MemoryPages: 1024, CallTimeout: time.Second})
			if err != nil {
				b.Fatal(err)
			}
			defer m.Close(context.Background())
			i, err := m.Instantiate(ctx, InstanceOptions{Config: []byte(config)})
			if err != nil {
				b.Fatal(err)
			}
			defer i.Close(context.Background())
			env := guestEnvelope(b, o, obj.Ref)
			before := counter.snapshot()
			runHandle(b, i, env)
			b.StopTimer()
			after := counter.snapshot()
			names := make([]string, 0, len(after))
			for name := range after {
				names = append(names, name)
			}
			slices.Sort(names)
			for _, name := range names {
				if d := after[name] - before[name]; d > 0 {
					b.ReportMetric(float64(d)/float64(b.N), strings.TrimPrefix(name, "wasi_snapshot_preview1.")+"/op")
				}
			}
		})
	}
}
