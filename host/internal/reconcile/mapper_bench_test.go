package reconcile

import (
	"fmt"
	"runtime"
	"sync"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/informer-host/informer-host/internal/config"
)

var referencing = &config.Controller{For: "cronjobs", Watches: []config.Watch{{Resource: "configmaps",
	ReferencedBy: `object.spec.volumes.filter(v, has(v.configMap)).map(v, v.configMap.name)`}}}

// primaryReferring is a primary whose volumes name the configmaps cms.
func primaryReferring(key string, cms ...string) *unstructured.Unstructured {
	var vols []any
	for _, cm := range cms {
		vols = append(vols, map[string]any{"configMap": map[string]any{"name": cm}})
	}
	return obj(key, map[string]any{"spec": map[string]any{"volumes": vols}})
}

// Listeners of different bindings call Map at once: the primary's
// listener updates the referencedBy index while a watched resource's
// reads it (run with -race).
func TestMapperIsSafeForConcurrentListeners(t *testing.T) {
	m := newTestMapper(t, referencing)
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			for i := range 200 {
				p := primaryReferring(fmt.Sprintf("ns/p%d-%d", w, i%10), "shared", fmt.Sprintf("cm%d", i%7))
				if _, err := m.Map("cronjobs", add(p)); err != nil {
					t.Error(err)
					return
				}
				if _, err := m.Map("configmaps", add(obj("ns/shared", nil))); err != nil {
					t.Error(err)
					return
				}
				if i%3 == 0 {
					if _, err := m.Map("cronjobs", del(p)); err != nil {
						t.Error(err)
						return
					}
				}
			}
		})
	}
	wg.Wait()
}

// BenchmarkReferencedByIndex measures what the index costs: the time to
// map a primary's event (one CEL evaluation and the index update) and
// the heap the index holds per reference once 10,000 primaries refer to
// 3 configmaps each, one of them shared by all.
func BenchmarkReferencedByIndex(b *testing.B) {
	const primaries = 10_000
	objs := make([]*unstructured.Unstructured, primaries)
	for i := range objs {
		objs[i] = primaryReferring(fmt.Sprintf("ns/p%d", i), "shared", fmt.Sprintf("a%d", i), fmt.Sprintf("b%d", i))
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	m, err := NewMapper(referencing, cronjobs)
	if err != nil {
		b.Fatal(err)
	}
	for _, o := range objs {
		if _, err := m.Map("cronjobs", add(o)); err != nil {
			b.Fatal(err)
		}
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	perRef := float64(after.HeapAlloc-before.HeapAlloc) / (3 * primaries)

	b.ResetTimer()
	for i := range b.N {
		if _, err := m.Map("cronjobs", update(objs[i%primaries], objs[i%primaries])); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	b.ReportMetric(perRef, "heapB/ref")
	runtime.KeepAlive(m)
}
