package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/informer-host/informer-host/bench/benchenv"
	"github.com/informer-host/informer-host/event"
)

// What a guest costs, per event, for the benchmark plugins of bench/ (see
// BENCHMARKS.md, made by `make bench`), next to the native Go code doing
// the same work, in the same run. Every guest here gets an event whose
// object is already encoded (the host encodes an object once per event,
// for all plugins: BenchmarkEncode is that cost), so the figures are the
// guest's work plus the call.

// guestModules keeps one compiled Module per (plugin, deadline) for the
// life of the test binary: compiling a Go plugin takes seconds, and with
// -count every benchmark function runs several times.
var guestModules struct {
	sync.Mutex
	e map[string]*Engine
	m map[string]*Module
}

// Deadline settings: none, the default (injected termination checks and
// the watchdog), and wazero's own termination checks with the watchdog
// (the engine's previous default, for comparison).
var guestDeadlines = []string{"on", "off", "wazero"}

func guestModule(b *testing.B, plugin, deadline string) *Module {
	b.Helper()
	guestModules.Lock()
	defer guestModules.Unlock()
	if guestModules.e == nil {
		guestModules.e, guestModules.m = map[string]*Engine{}, map[string]*Module{}
	}
	key := plugin + "/" + deadline
	if m := guestModules.m[key]; m != nil {
		return m
	}
	e := guestModules.e[deadline]
	if e == nil {
		root, err := benchenv.Root()
		if err != nil {
			b.Fatal(err)
		}
		// Compiled code is kept on disk: later runs load it in milliseconds.
		if e, err = New(context.Background(), Options{CacheDir: filepath.Join(root, "build", "bench", "wazero")}); err != nil {
			b.Fatal(err)
		}
		e.wazeroChecks = deadline == "wazero"
		guestModules.e[deadline] = e
	}
	wasm, err := benchenv.Wasm(plugin)
	if err != nil {
		b.Fatal(err)
	}
	lim := Limits{MemoryPages: 1024}
	if deadline != "off" {
		lim.CallTimeout = time.Second
	}
	m, err := e.Load(context.Background(), plugin+".wasm", wasm, lim)
	if err != nil {
		b.Fatal(err)
	}
	guestModules.m[key] = m
	return m
}

// guestEnvelope is an add of o with its JSON already encoded.
func guestEnvelope(b *testing.B, o *unstructured.Unstructured, ref *event.ResourceRef) *Envelope {
	env := NewEnvelope(&event.Event{Type: event.EventAdd, Resource: ref, Object: o})
	if _, err := env.json(0); err != nil {
		b.Fatal(err)
	}
	return env
}

// BenchmarkGuest is one ih_handle call per op, for each benchmark plugin,
// object size and deadline setting (on: a 1s call deadline with injected
// termination checks, the default; off: no deadline; wazero: a 1s deadline
// with wazero's termination checks, for comparison):
//
//	noop-wat, noop-c  return at once: the call itself
//	noop-go           a Go (kit) handler that returns at once
//	twofields         a Go handler reading two fields through field_read
//	decode-go         a Go handler decoding the object into map[string]any
//	k8sapi            a Go handler decoding it into corev1.Pod / ConfigMap
//
// and, under native/, the same work done by Go code in the host process
// on the same object: reading the two fields of the unstructured object,
// decoding the JSON into a map or the typed struct, converting the
// unstructured object into the typed struct (what a native handler on a
// dynamic informer does).
func BenchmarkGuest(b *testing.B) {
	for _, obj := range benchenv.Objects {
		o := obj.New()
		config := fmt.Sprintf(`{"fields":[%q,%q]}`, benchenv.TwoFields[0], benchenv.TwoFields[1])
		for _, plugin := range []string{"noop-wat", "noop-c", "noop-go", "twofields", "decode-go", "k8sapi"} {
			for _, deadline := range guestDeadlines {
				b.Run(fmt.Sprintf("%s/%s/deadline=%s", plugin, obj.Name, deadline), func(b *testing.B) {
					i, err := guestModule(b, plugin, deadline).Instantiate(context.Background(), InstanceOptions{Config: []byte(config)})
					if err != nil {
						b.Fatal(err)
					}
					defer i.Close(context.Background())
					runHandle(b, i, guestEnvelope(b, o, obj.Ref))
				})
			}
		}
		jsonBytes, err := json.Marshal(o.Object)
		if err != nil {
			b.Fatal(err)
		}
		b.Run("native/twofields/"+obj.Name, func(b *testing.B) {
			b.ReportAllocs()
			n := 0
			for b.Loop() {
				a, _, _ := unstructured.NestedString(o.Object, "metadata", "labels", "app.kubernetes.io/name")
				u, _, _ := unstructured.NestedString(o.Object, "metadata", "uid")
				n += len(a) + len(u)
			}
			_ = n
		})
		b.Run("native/decode-map/"+obj.Name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				var v map[string]any
				if err := json.Unmarshal(jsonBytes, &v); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run("native/decode-typed/"+obj.Name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if err := json.Unmarshal(jsonBytes, typedFor(obj.Name)); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run("native/convert-typed/"+obj.Name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, typedFor(obj.Name)); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func typedFor(obj string) any {
	if obj == "pod" {
		return &corev1.Pod{}
	}
	return &corev1.ConfigMap{}
}

// BenchmarkEncode is the host's per-event work before any plugin runs:
// the header (every event) and the object's JSON (the first plugin that
// asks for it; shared by the others).
func BenchmarkEncode(b *testing.B) {
	for _, obj := range benchenv.Objects {
		o := obj.New()
		b.Run("header/"+obj.Name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				NewEnvelope(&event.Event{Type: event.EventAdd, Resource: obj.Ref, Object: o})
			}
		})
		b.Run("json/"+obj.Name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				env := NewEnvelope(&event.Event{Type: event.EventAdd, Resource: obj.Ref, Object: o})
				if _, err := env.json(0); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
