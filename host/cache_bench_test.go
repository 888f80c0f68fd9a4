package host

import (
	"context"
	"fmt"
	"log/slog"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/cache"

	"github.com/informer-host/informer-host/event"
	"github.com/informer-host/informer-host/host/internal/engine"
	"github.com/informer-host/informer-host/informer"
	"github.com/informer-host/informer-host/internal/config"
	"github.com/informer-host/informer-host/internal/testenv"
)

// BenchmarkCacheRead is the cost of the cache reads of ABI.md §16.1, from
// a plugin, over the host's real informer cache of 100 ConfigMaps, next to
// what a native controller pays for the same with client-go: a Lister Get
// and unstructured.NestedString, and a Lister List of the namespace.
// Sub-benchmarks, all in one run:
//
//	noop         ih_handle that does nothing (the baseline of the others)
//	get-field    ih_handle doing cache_get + one field_read
//	list-100     ih_handle doing cache_list of 100 keys (one page); the
//	             caches do not change, so every read after the first is
//	             answered from the reader's memo (informer.CacheStamp)
//	list-100-changed  the same read with the caches changed since the last
//	             one: the memo is dropped before each read, which is all a
//	             change does to the reader (its stamp no longer matches),
//	             so it lists afresh. Updating an object through the
//	             apiserver between reads would add a round trip per read
//	             to the benchmark's wall time, not to what it measures.
//	lister-get   native: Lister.ByNamespace(ns).Get + NestedString
//	lister-list  native: Lister.ByNamespace(ns).List + the keys
//
// The targets are get-field − noop ≤ 1.5µs and list-100 − noop ≤ 10µs,
// list-100-changed − noop too. Every sub-benchmark reports cpu-ns/op
// (the process's CPU per op) next to ns/op: on a loaded machine the wall
// time of a read is mostly the wait for a core.
func BenchmarkCacheRead(b *testing.B) {
	env := controlPlane(b)
	ns := env.Namespace(b)
	ctx := context.Background()
	for i := range 100 {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("cm-%03d", i), Labels: map[string]string{"app": "bench"}},
			Data: map[string]string{"v": fmt.Sprint(i)}}
		if _, err := env.Client.CoreV1().ConfigMaps(ns).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
			b.Fatal(err)
		}
	}
	cfg, err := config.Parse("config.yaml", []byte(fmt.Sprintf(`
apiVersion: informer-host/v1
resources: [{name: cms, version: v1, resource: configmaps, namespaces: [%s]}]
plugins:
  default:
    grants: {cache: [{resource: cms}]}
`, ns)))
	if err != nil {
		b.Fatal(err)
	}
	p, err := informer.New(informer.Options{RESTConfig: env.Config, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(p.Stop)
	if err := p.Apply(ctx, cfg.Resources); err != nil {
		b.Fatal(err)
	}
	var objs []*unstructured.Unstructured
	testenv.Eventually(b, "100 configmaps in the cache", func() bool {
		objs = objs[:0]
		p.CacheList("cms", ns, nil, func(u *unstructured.Unstructured) { objs = append(objs, u) })
		return len(objs) == 100
	})

	eng, err := engine.New(ctx, engine.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { eng.Close(context.Background()) })
	mod, err := eng.Load(ctx, "cachebench.wasm", testPlugin(b, "cachebench"), engine.Limits{MemoryPages: 16, CallTimeout: time.Second})
	if err != nil {
		b.Fatal(err)
	}
	ev := engine.NewEnvelope(&event.Event{Type: event.EventAdd, Resource: &event.ResourceRef{Name: "cms"}, Object: objs[0]})
	for _, mode := range []struct {
		name, config string
		changed      bool
	}{{"noop", `"n"`, false}, {"get-field", `"g"`, false}, {"list-100", `"l"`, false}, {"list-100-changed", `"l"`, true}} {
		b.Run(mode.name, func(b *testing.B) {
			reader := newCacheReader(p, cfg.SettingsFor("x.wasm").Grants, "")
			if mode.changed {
				reader = changedReader{reader.(*cacheReader)}
			}
			inst, err := mod.Instantiate(ctx, engine.InstanceOptions{Config: []byte(mode.config), Cache: reader})
			if err != nil {
				b.Fatal(err)
			}
			defer inst.Close(ctx)
			handleN(b, inst, ev)
		})
	}

	// The native equivalent: a Lister over a client-go indexer holding the
	// same objects, as a controller built on a shared informer has.
	idx := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	for _, o := range objs {
		if err := idx.Add(o); err != nil {
			b.Fatal(err)
		}
	}
	lister := cache.NewGenericLister(idx, schema.GroupResource{Resource: "configmaps"}).ByNamespace(ns)
	b.Run("lister-get", func(b *testing.B) {
		b.ReportAllocs()
		defer cpuPerOp(b)()
		for range b.N {
			o, err := lister.Get("cm-050")
			if err != nil {
				b.Fatal(err)
			}
			if v, ok, _ := unstructured.NestedString(o.(*unstructured.Unstructured).Object, "data", "v"); !ok || v != "50" {
				b.Fatal(v)
			}
		}
	})
	b.Run("lister-list", func(b *testing.B) {
		b.ReportAllocs()
		keys := make([]string, 0, 100)
		defer cpuPerOp(b)()
		for range b.N {
			os, err := lister.List(labels.Everything())
			if err != nil || len(os) != 100 {
				b.Fatal(err)
			}
			keys = keys[:0]
			for _, o := range os {
				u := o.(*unstructured.Unstructured)
				keys = append(keys, u.GetNamespace()+"/"+u.GetName())
			}
		}
	})
}

// changedReader is a cacheReader whose every list read comes after a
// change to the caches: it drops the memo a change would make stale.
type changedReader struct{ *cacheReader }

func (r changedReader) List(keys []string, res, ns, sel []byte) ([]string, int32) {
	r.last = keysMemo{}
	return r.cacheReader.List(keys, res, ns, sel)
}
