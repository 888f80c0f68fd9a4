package host

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	goruntime "runtime"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/informer-host/informer-host/bench/benchenv"
	"github.com/informer-host/informer-host/event"
	"github.com/informer-host/informer-host/host/internal/engine"
	"github.com/informer-host/informer-host/informer"
	"github.com/informer-host/informer-host/internal/config"
	"github.com/informer-host/informer-host/internal/filter"
)

// The host's per-event path, measured from the plugin's informer listener
// (bindingListener, what client-go calls) through the filter, the shared
// envelope, the plugin's queue and its worker, into the plugin and back.
// Results go to BENCHMARKS.md (`make bench`); nothing here asserts a time.
//
// ns/op is wall time per event with the listener and the worker running
// at once, as they do in the daemon; cpu-ns/op is the process's CPU time
// per event (getrusage: every goroutine, the garbage collector included),
// the figure to compare with a native handler, which runs on the listener
// goroutine itself.

// benchHost is a Host without informers: the benchmarks feed its plugins'
// listeners directly.
type benchHost struct {
	h    *Host
	done atomic.Int64 // ih_handle calls completed
	tick chan struct{}
	// failed is the first failed call. The benchmark drives generations
	// directly, so it cannot follow the restart a failure starts: the
	// listeners keep feeding the stopped generation, whose events nobody
	// handles, and waiting for them would never end.
	failed atomic.Pointer[failedCall]
	// ahead is how many events the producer runs ahead of the slowest
	// plugin (window unless paced), and every how many completed calls
	// the workers tick it (256, or one event's calls when paced, so
	// the producer wakes once an event).
	ahead int64
	every atomic.Int64
}

type failedCall struct {
	plugin string
	err    error
}

// newBenchHost starts a host whose plugins bind to configmaps and pods,
// with a call deadline or without. The deadline is a minute: what it
// costs (the injected checks and the watchdog's tick, 100 ms for any
// bound of a second or more) does not depend on its length, and a
// shorter one could kill a call on a loaded machine, where a worker
// goroutine can wait its turn for longer than a second in the middle
// of a call (the watchdog counts that wait). Compiled code is cached in
// build/bench/wazero, so the Go plugins compile once per machine.
func newBenchHost(b *testing.B, deadline bool) *benchHost {
	b.Helper()
	root, err := benchenv.Root()
	if err != nil {
		b.Fatal(err)
	}
	timeout := "1m"
	if !deadline {
		timeout = "0s"
	}
	dir := b.TempDir()
	yaml := fmt.Sprintf(`
apiVersion: informer-host/v1
resources:
  - {name: configmaps, version: v1, resource: configmaps}
  - {name: pods, version: v1, resource: pods}
plugins:
  directory: %s
  compilationCache: %s
  default:
    bindings: [{resource: configmaps}, {resource: pods}]
    delivery: {bufferSize: 1000000}
    limits: {callTimeout: %s, memoryPages: 1024}
    config: {fields: [%q, %q]}
`, dir, filepath.Join(root, "build", "bench", "wazero"), timeout, benchenv.TwoFields[0], benchenv.TwoFields[1])
	cfg, err := config.Parse(filepath.Join(dir, "config.yaml"), []byte(yaml))
	if err != nil {
		b.Fatal(err)
	}
	p, err := informer.New(informer.Options{RESTConfig: controlPlane(b).Config})
	if err != nil {
		b.Fatal(err)
	}
	bh := &benchHost{tick: make(chan struct{}, 1), ahead: window}
	bh.every.Store(256)
	bh.h, err = New(context.Background(), Options{Pipeline: p, Config: cfg, Logger: slog.New(slog.DiscardHandler),
		observe: func(plugin string, _ *event.Event, _ engine.Result, err error) {
			if err != nil {
				bh.failed.CompareAndSwap(nil, &failedCall{plugin, err})
			}
			if bh.done.Add(1)%bh.every.Load() == 0 {
				select {
				case bh.tick <- struct{}{}:
				default:
				}
			}
		}})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { bh.h.Stop(context.Background()) })
	return bh
}

// start loads plugin under file name, starts its worker and returns one
// listener per resource, with an empty filter (every event passes), as
// register would make them.
func (bh *benchHost) start(b *testing.B, name, plugin string) map[string]*bindingListener {
	b.Helper()
	h := bh.h
	wasm, err := benchenv.Wasm(plugin)
	if err != nil {
		b.Fatal(err)
	}
	settings := h.cfg.SettingsFor(name)
	cfgJSON, err := h.cfg.ConfigJSON(name)
	if err != nil {
		b.Fatal(err)
	}
	mod, err := h.engine.Load(context.Background(), name, wasm, engine.Limits{
		MemoryPages: settings.Limits.MemoryPages, CallTimeout: settings.Limits.CallTimeout.Duration})
	if err != nil {
		b.Fatal(err)
	}
	slot := h.slot(name)
	g := newGeneration(slot, mod, settings, cfgJSON)
	inst, err := g.instantiate(context.Background())
	if err != nil {
		b.Fatal(err)
	}
	// The steady state: the initial list is handled (this host registers
	// no informer listeners, so nothing would ever report it).
	g.synced.Store(true)
	go g.run(inst)
	slot.mu.Lock()
	slot.current, slot.state = g, StateRunning
	slot.mu.Unlock()
	f, err := h.filters.Compile(filter.Spec{})
	if err != nil {
		b.Fatal(err)
	}
	ls := map[string]*bindingListener{}
	for _, res := range []string{"configmaps", "pods"} {
		ls[res] = &bindingListener{g: g, binding: res, filter: f, counts: slot.bindingCounts(res), add: true, update: true, delete: true}
	}
	return ls
}

// window bounds how far the producer runs ahead of the workers: a plugin's
// queue drops its oldest event past its cap.
const window = 4096

// feed delivers b.N adds of fresh copies of o (new pointers over the same
// content, as client-go hands out a new object per watch event) to every
// listener, and returns when every plugin has handled every event. It
// reports wall and CPU time per event.
func (bh *benchHost) feed(b *testing.B, ls []*bindingListener, o *unstructured.Unstructured, ref *event.ResourceRef) {
	b.Helper()
	// Warm up (queues, free lists, the guests), then collect the garbage
	// that loading the plugins left, which the first measured run would
	// otherwise pay for.
	bh.run(b, ls, o, ref, window)
	goruntime.GC()
	b.ReportAllocs()
	b.ResetTimer()
	cpu, wakeups := benchenv.CPU(), benchenv.Wakeups()
	bh.run(b, ls, o, ref, b.N)
	b.StopTimer()
	b.ReportMetric(float64((benchenv.CPU()-cpu).Nanoseconds())/float64(b.N), "cpu-ns/op")
	b.ReportMetric(float64(benchenv.Wakeups()-wakeups)/float64(b.N), "wakeups/op")
}

// run delivers n events to every listener and waits for them all.
func (bh *benchHost) run(b *testing.B, ls []*bindingListener, o *unstructured.Unstructured, ref *event.ResourceRef, n int) {
	per := int64(len(ls))
	bh.done.Store(0)
	for i := 0; i < n; i++ {
		for int64(i)-bh.done.Load()/per >= bh.ahead {
			bh.wait(b)
		}
		obj := &unstructured.Unstructured{Object: o.Object}
		for _, l := range ls {
			l.OnAdd(ref, obj, false)
		}
	}
	for bh.done.Load() < int64(n)*per {
		bh.wait(b)
	}
}

// wait waits for the workers' next tick, or a millisecond. A failed call
// ends the benchmark: the events it restarts the plugin over would never
// be counted.
func (bh *benchHost) wait(b *testing.B) {
	if f := bh.failed.Load(); f != nil {
		b.Fatalf("plugin %q: a call failed, so its generation restarts, which the benchmark cannot follow: %v", f.plugin, f.err)
	}
	select {
	case <-bh.tick:
	case <-time.After(time.Millisecond):
	}
}

// BenchmarkDispatch is the cost of one event for one no-op plugin, by
// plugin language, object size and call deadline:
//
//	dispatch/...  listener to plugin and back, through the host
//	handle/...    the same plugin called directly (Instance.Handle): the
//	              call and the guest's own work, without the host's path
//	native/...    a client-go handler in Go doing the work in the process:
//	              nothing, reading two fields, or converting the object
//	              to its typed struct (runtime.DefaultUnstructuredConverter)
//
// Host overhead per event per plugin (BENCHMARKS.md) is dispatch minus the
// guest's own work, handle(plugin) - handle(noop-wat).
func BenchmarkDispatch(b *testing.B) {
	for _, deadline := range []bool{true, false} {
		// One host per deadline setting, stopped when the whole benchmark
		// ends (a sub-benchmark's cleanups run after each of its runs).
		parent := b
		var bh *benchHost
		host := func(*testing.B) *benchHost {
			if bh == nil {
				bh = newBenchHost(parent, deadline)
			}
			return bh
		}
		started := map[string]map[string]*bindingListener{}
		for _, plugin := range []string{"noop-wat", "noop-c", "noop-go"} {
			for _, obj := range benchenv.Objects {
				o := obj.New()
				b.Run(fmt.Sprintf("dispatch/%s/%s/deadline=%v", plugin, obj.Name, deadline), func(b *testing.B) {
					bh := host(b)
					ls := started[plugin]
					if ls == nil {
						ls = bh.start(b, plugin+".wasm", plugin)
						started[plugin] = ls
					}
					bh.feed(b, []*bindingListener{ls[obj.Ref.Name]}, o, obj.Ref)
				})
				b.Run(fmt.Sprintf("handle/%s/%s/deadline=%v", plugin, obj.Name, deadline), func(b *testing.B) {
					bh := host(b)
					if started[plugin] == nil {
						started[plugin] = bh.start(b, plugin+".wasm", plugin)
					}
					g := started[plugin][obj.Ref.Name].g
					inst, err := g.instantiate(context.Background())
					if err != nil {
						b.Fatal(err)
					}
					defer inst.Close(context.Background())
					env := engine.NewEnvelope(&event.Event{Type: event.EventAdd, Resource: obj.Ref, Object: o})
					b.ReportAllocs()
					b.ResetTimer()
					for i := 0; i < b.N; i++ {
						if _, err := inst.Handle(context.Background(), env); err != nil {
							b.Fatal(err)
						}
					}
				})
			}
		}
		// One event at a time: the latency of a hand-off to an idle worker.
		o := benchenv.Meta()
		ref := benchenv.Objects[0].Ref
		b.Run(fmt.Sprintf("pingpong/noop-wat/meta/deadline=%v", deadline), func(b *testing.B) {
			bh := host(b)
			l := started["noop-wat"][ref.Name]
			goruntime.GC()
			bh.done.Store(0)
			b.ResetTimer()
			cpu := benchenv.CPU()
			for i := 0; i < b.N; i++ {
				l.OnAdd(ref, &unstructured.Unstructured{Object: o.Object}, false)
				for bh.done.Load() <= int64(i) {
					// Spinning would steal the worker's CPU on two cores.
					goruntime.Gosched()
				}
			}
			b.StopTimer()
			b.ReportMetric(float64((benchenv.CPU()-cpu).Nanoseconds())/float64(b.N), "cpu-ns/op")
		})
	}
	for _, obj := range benchenv.Objects {
		o := obj.New()
		native := func(name string, handle func(*unstructured.Unstructured)) {
			b.Run(fmt.Sprintf("native/%s/%s", name, obj.Name), func(b *testing.B) {
				var l informer.Listener = informer.ListenerFunc(func(ev *event.Event) { handle(ev.Object) })
				goruntime.GC()
				b.ReportAllocs()
				b.ResetTimer()
				cpu := benchenv.CPU()
				for i := 0; i < b.N; i++ {
					l.OnAdd(obj.Ref, &unstructured.Unstructured{Object: o.Object}, false)
				}
				b.StopTimer()
				b.ReportMetric(float64((benchenv.CPU()-cpu).Nanoseconds())/float64(b.N), "cpu-ns/op")
			})
		}
		native("noop", func(*unstructured.Unstructured) {})
		var sink atomic.Int64
		native("twofields", func(u *unstructured.Unstructured) {
			a, _, _ := unstructured.NestedString(u.Object, "metadata", "labels", "app.kubernetes.io/name")
			id, _, _ := unstructured.NestedString(u.Object, "metadata", "uid")
			sink.Add(int64(len(a) + len(id)))
		})
		native("decode", func(u *unstructured.Unstructured) {
			var into any = &corev1.ConfigMap{}
			if obj.Name == "pod" {
				into = &corev1.Pod{}
			}
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, into); err != nil {
				b.Fatal(err)
			}
		})
	}
}

// BenchmarkFanout is one event (the full Pod) delivered to 1, 10 and 50
// plugins bound to the same resource; ns/op and cpu-ns/op are per event,
// all plugins together. The header and the object's JSON are encoded once
// per event and shared (object-wat copies the whole object; twofields, a Go
// plugin, reads two fields; noop-wat does nothing), so what grows with the
// number of plugins is each plugin's own path: its queue, its worker, the
// call.
func BenchmarkFanout(b *testing.B) {
	obj := benchenv.Objects[1]
	o := obj.New()
	bh := newBenchHost(b, true)
	started := map[string][]*bindingListener{}
	plugins := func(b *testing.B, plugin string, n int) []*bindingListener {
		for len(started[plugin]) < n {
			name := fmt.Sprintf("%s-%d.wasm", plugin, len(started[plugin]))
			started[plugin] = append(started[plugin], bh.start(b, name, plugin)[obj.Ref.Name])
		}
		return started[plugin][:n]
	}
	for _, plugin := range []string{"object-wat", "noop-wat", "twofields"} {
		for _, n := range []int{1, 10, 50} {
			b.Run(fmt.Sprintf("%s/plugins=%d", plugin, n), func(b *testing.B) {
				bh.feed(b, plugins(b, plugin, n), o, obj.Ref)
			})
		}
	}
	// paced: each event is sent once every plugin has handled the one
	// before, as events trickle in from a watch (case 3 sends a few
	// hundred a second): every worker sleeps between two events and is
	// woken for each, which the runs above, with thousands queued, do
	// not pay. The difference is the cost of the hand-overs.
	for _, n := range []int{1, 10} {
		b.Run(fmt.Sprintf("paced/twofields/plugins=%d", n), func(b *testing.B) {
			bh.ahead = 1
			bh.every.Store(int64(n))
			defer func() { bh.ahead = window; bh.every.Store(256) }()
			bh.feed(b, plugins(b, "twofields", n), o, obj.Ref)
		})
	}
}
