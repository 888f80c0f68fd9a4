package filter

import (
	"fmt"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/informer-host/informer-host/event"
)

// benchObjects returns n distinct copies of the test pod, so that each
// benchmark iteration sees an object the memo has not seen since its slot
// was last overwritten: the numbers are evaluation costs, not memo hits.
func benchObjects(b *testing.B, n int) []*unstructured.Unstructured {
	pod := loadPod(b)
	objs := make([]*unstructured.Unstructured, n)
	for i := range objs {
		objs[i] = pod.DeepCopy()
		objs[i].SetResourceVersion(fmt.Sprint(1000 + i))
	}
	return objs
}

func BenchmarkDecide(b *testing.B) {
	// MemoSize 1: consecutive events always miss the memo, as one plugin
	// alone would.
	opts := Options{MemoSize: 1}
	res := &event.ResourceRef{Name: "pods", Version: "v1", Resource: "pods", Kind: "Pod"}

	single := func(b *testing.B, spec Spec) {
		f := mustCompile(b, spec, opts)
		objs := benchObjects(b, 64)
		evs := make([]event.Event, len(objs))
		for i := range evs {
			evs[i] = event.Event{Type: event.EventAdd, Resource: res, Object: objs[i]}
		}
		b.ReportAllocs()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			if d := f.Decide(&evs[i%len(evs)]); !d.Deliver || d.Err != nil {
				b.Fatalf("decision %+v", d)
			}
		}
	}
	b.Run("label", func(b *testing.B) {
		single(b, Spec{Expression: `object.metadata.labels["tier"] == "web"`})
	})
	b.Run("field", func(b *testing.B) {
		single(b, Spec{Expression: `object.status.phase == "Running"`})
	})
	b.Run("exists", func(b *testing.B) {
		// A comprehension: cost-tracked, for comparison.
		single(b, Spec{Expression: `object.spec.containers.exists(c, c.name == "web")`})
	})
	b.Run("changed", func(b *testing.B) {
		f := mustCompile(b, Spec{Changed: []string{"status.phase"}}, opts)
		olds := benchObjects(b, 64)
		news := benchObjects(b, 64)
		evs := make([]event.Event, len(olds))
		for i := range evs {
			news[i].SetResourceVersion(fmt.Sprint(5000 + i))
			_ = unstructured.SetNestedField(news[i].Object, "Succeeded", "status", "phase")
			evs[i] = event.Event{Type: event.EventUpdate, Resource: res, Object: news[i], OldObject: olds[i]}
		}
		b.ReportAllocs()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			if d := f.Decide(&evs[i%len(evs)]); !d.Deliver {
				b.Fatalf("decision %+v", d)
			}
		}
	})
	b.Run("shared10", func(b *testing.B) {
		c, err := NewCache(opts)
		if err != nil {
			b.Fatal(err)
		}
		fs := make([]*Filter, 10)
		for i := range fs {
			if fs[i], err = c.Compile(Spec{Expression: `object.metadata.labels["tier"] == "web"`}); err != nil {
				b.Fatal(err)
			}
		}
		objs := benchObjects(b, 64)
		// Each plugin's listener builds its own Event for the same object.
		evs := make([][10]event.Event, len(objs))
		for i := range evs {
			for j := range evs[i] {
				evs[i][j] = event.Event{Type: event.EventAdd, Resource: res, Object: objs[i]}
			}
		}
		b.ReportAllocs()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			ev := &evs[i%len(evs)]
			for j, f := range fs {
				if d := f.Decide(&ev[j]); !d.Deliver {
					b.Fatalf("decision %+v", d)
				}
			}
		}
		b.StopTimer()
		if n := fs[0].prog.evals.Load(); n > uint64(b.N) {
			b.Fatalf("%d evaluations for %d events", n, b.N)
		}
	})
	b.Run("transition", func(b *testing.B) {
		// An update judged on both states; the old state's verdict is
		// not memoized here (MemoSize 1), so this is two evaluations.
		f := mustCompile(b, Spec{Expression: `object.metadata.labels["tier"] == "web"`}, opts)
		olds := benchObjects(b, 64)
		news := benchObjects(b, 64)
		evs := make([]event.Event, len(olds))
		for i := range evs {
			news[i].SetResourceVersion(fmt.Sprint(5000 + i))
			evs[i] = event.Event{Type: event.EventUpdate, Resource: res, Object: news[i], OldObject: olds[i]}
		}
		b.ReportAllocs()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			if d := f.Decide(&evs[i%len(evs)]); !d.Deliver {
				b.Fatalf("decision %+v", d)
			}
		}
	})
}

// configMapWithKeys is a ConfigMap of n data keys, each state new to the memo.
func configMapWithKeys(n int, rv string) *unstructured.Unstructured {
	data := map[string]any{}
	for i := range n {
		data[fmt.Sprintf("key-%04d", i)] = fmt.Sprintf("value-%04d", i)
	}
	return &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": "big", "resourceVersion": rv}, "data": data}}
}

// runaway is an expression the static estimate accepts that no object
// of 1,000 keys lets finish within the runtime limit.
const runaway = `object.data.all(k, object.data.all(j, true))`

// How long a runaway expression runs on a 1,000-key ConfigMap before the
// runtime cost limit stops it: the default limit, and Kubernetes' ten
// times larger one for comparison (the ratio of the two is the point;
// filter/doc.go quotes the absolute figure).
func BenchmarkRunawayStopped(b *testing.B) {
	res := &event.ResourceRef{Name: "cms", Version: "v1", Resource: "configmaps", Kind: "ConfigMap"}
	for _, limit := range []uint64{DefaultCostLimit, 1_000_000} {
		b.Run(fmt.Sprintf("limit=%d", limit), func(b *testing.B) {
			f := mustCompile(b, Spec{Expression: runaway}, Options{MemoSize: 1, CostLimit: limit})
			obj := configMapWithKeys(1000, "1")
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				obj.SetResourceVersion(fmt.Sprint(i + 2))
				if d := f.Decide(&event.Event{Type: event.EventAdd, Resource: res, Object: obj}); d.Err == nil {
					b.Fatal("the runaway expression was not stopped")
				}
			}
		})
	}
}
