package host

import (
	"fmt"
	"runtime"
	"slices"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/informer-host/informer-host/event"
	"github.com/informer-host/informer-host/host/internal/delivery"
)

func viewObj(ns, name, rv string) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{"metadata": map[string]any{
		"namespace": ns, "name": name, "resourceVersion": rv}}}
}

// TestViewSharedKeys: two views over one Host's keys keep their own
// states, an id lives while any view holds it and is reused after, and a
// view's keys, length and clear are its own.
func TestViewSharedKeys(t *testing.T) {
	keys := newViewKeys()
	a, b := newCacheView(keys), newCacheView(keys)
	ref := &event.ResourceRef{Name: "cms"}
	k1 := delivery.Key{Resource: "cms", Namespace: "ns", Name: "one"}
	k2 := delivery.Key{Resource: "cms", Namespace: "ns", Name: "two"}
	o1, o1b, o2 := viewObj("ns", "one", "1"), viewObj("ns", "one", "2"), viewObj("ns", "two", "3")

	a.set(k1, ref, o1, seenObject{})
	if s := b.get(k1); s.has() {
		t.Fatal("b has what only a was given")
	}
	b.set(k1, ref, o1b, b.get(k1))
	if s := a.get(k1); s.obj != o1 || s.res != ref || s.rv() != "1" {
		t.Fatalf("a: %+v", s)
	}
	if s := b.get(k1); s.obj != o1b || s.rv() != "2" {
		t.Fatalf("b: %+v", s)
	}
	// In place, by what get returned.
	a.set(k1, ref, o1b, a.get(k1))
	if a.len() != 1 || a.get(k1).obj != o1b {
		t.Fatalf("a after update: len %d, %+v", a.len(), a.get(k1))
	}
	a.set(k2, ref, o2, seenObject{})
	got := a.appendKeys(nil)
	slices.SortFunc(got, func(x, y delivery.Key) int { return cmpString(x.Name, y.Name) })
	if want := []delivery.Key{k1, k2}; !slices.Equal(got, want) {
		t.Fatalf("keys %v, want %v", got, want)
	}
	t1 := keys.table("cms")
	id1, _ := t1.lookup(objName{"ns", "one"})
	a.delete(k1, a.get(k1))
	if _, ok := t1.lookup(objName{"ns", "one"}); !ok {
		t.Fatal("the key went while b still holds it")
	}
	b.delete(k1, seenObject{})
	if _, ok := t1.lookup(objName{"ns", "one"}); ok {
		t.Fatal("the key stayed with no view holding it")
	}
	k3 := delivery.Key{Resource: "cms", Namespace: "ns", Name: "three"}
	b.set(k3, ref, viewObj("ns", "three", "4"), seenObject{})
	if id3, _ := t1.lookup(objName{"ns", "three"}); id3 != id1 {
		t.Fatalf("freed id %d not reused (got %d)", id1, id3)
	}
	a.clear()
	if a.len() != 0 || a.get(k2).has() {
		t.Fatal("clear left objects")
	}
	if _, ok := t1.lookup(objName{"ns", "two"}); ok {
		t.Fatal("clear did not let go of its keys")
	}
	if !b.get(k3).has() {
		t.Fatal("a's clear took b's object")
	}
	// A delete of what the view does not have changes nothing.
	b.delete(k2, seenObject{})
	if b.len() != 1 {
		t.Fatalf("len %d", b.len())
	}
}

func cmpString(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// TestViewRefs: an object keeps the resource reference it came with,
// across more resolutions of the resource than a chunk's index holds.
func TestViewRefs(t *testing.T) {
	v := newCacheView(nil)
	first := &event.ResourceRef{Name: "cms", Version: "v0"}
	k0 := delivery.Key{Resource: "cms", Name: "kept"}
	v.set(k0, first, viewObj("", "kept", "1"), seenObject{})
	var last *event.ResourceRef
	for i := range 600 {
		last = &event.ResourceRef{Name: "cms", Version: fmt.Sprint("v", i+1)}
		k := delivery.Key{Resource: "cms", Name: "churn"}
		v.set(k, last, viewObj("", "churn", fmt.Sprint(i+2)), v.get(k))
	}
	if s := v.get(k0); s.res != first {
		t.Fatalf("kept object's ref %v, want %v", s.res, first)
	}
	if s := v.get(delivery.Key{Resource: "cms", Name: "churn"}); s.res != last {
		t.Fatalf("churned object's ref %v, want %v", s.res, last)
	}
}

// BenchmarkView is the memory of a plugin's view of the cache at 50,000
// objects (B/object): the map per plugin it replaced (map), the first
// view of a Host (first: its keys interned with it) and one more view
// over keys another view interned (more: what one more plugin pays), and
// one more view holding one object in a hundred (sparse: per object
// it holds, a chunk each).
func BenchmarkView(b *testing.B) {
	const n = 50000
	ref := &event.ResourceRef{Name: "cms"}
	keys := make([]delivery.Key, n)
	objs := make([]*unstructured.Unstructured, n)
	for i := range n {
		keys[i] = delivery.Key{Resource: "cms", Namespace: "memory", Name: fmt.Sprintf("m-%05d", i)}
		objs[i] = viewObj("memory", keys[i].Name, fmt.Sprint(i))
	}
	heap := func() uint64 {
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return m.HeapAlloc
	}
	type oldSeen struct {
		res *event.ResourceRef
		obj *unstructured.Unstructured
		rv  string
	}
	measure := func(b *testing.B, held int, build func() any) {
		var per float64
		for range b.N {
			before := heap()
			x := build()
			per = float64(heap()-before) / float64(held)
			runtime.KeepAlive(x)
		}
		b.ReportMetric(per, "B/object")
	}
	b.Run("map", func(b *testing.B) {
		measure(b, n, func() any {
			m := map[delivery.Key]*oldSeen{}
			for i, k := range keys {
				m[k] = &oldSeen{res: ref, obj: objs[i], rv: delivery.ResourceVersion(objs[i])}
			}
			return m
		})
	})
	b.Run("first", func(b *testing.B) {
		measure(b, n, func() any {
			v := newCacheView(newViewKeys())
			for i, k := range keys {
				v.set(k, ref, objs[i], seenObject{})
			}
			return v
		})
	})
	shared := newViewKeys()
	other := newCacheView(shared)
	for i, k := range keys {
		other.set(k, ref, objs[i], seenObject{})
	}
	for _, c := range []struct {
		name  string
		every int
	}{{"more", 1}, {"sparse", 100}} {
		b.Run(c.name, func(b *testing.B) {
			measure(b, n/c.every, func() any {
				v := newCacheView(shared)
				for i := 0; i < n; i += c.every {
					v.set(keys[i], ref, objs[i], seenObject{})
				}
				return v
			})
		})
	}
	runtime.KeepAlive(other)
}

// BenchmarkViewLookup is the worker's lookup of the plugin's state of an
// object (eventFor), at 50,000 objects: the map it replaced, and the view.
func BenchmarkViewLookup(b *testing.B) {
	const n = 50000
	ref := &event.ResourceRef{Name: "cms"}
	keys := make([]delivery.Key, n)
	type oldSeen struct {
		res *event.ResourceRef
		obj *unstructured.Unstructured
		rv  string
	}
	m := map[delivery.Key]*oldSeen{}
	v := newCacheView(nil)
	for i := range n {
		keys[i] = delivery.Key{Resource: "cms", Namespace: "memory", Name: fmt.Sprintf("m-%05d", i)}
		o := viewObj("memory", keys[i].Name, fmt.Sprint(i))
		m[keys[i]] = &oldSeen{res: ref, obj: o, rv: fmt.Sprint(i)}
		v.set(keys[i], ref, o, seenObject{})
	}
	b.Run("map", func(b *testing.B) {
		for i := range b.N {
			if m[keys[i%n]] == nil {
				b.Fatal("missing")
			}
		}
	})
	b.Run("view", func(b *testing.B) {
		for i := range b.N {
			if !v.get(keys[i%n]).has() {
				b.Fatal("missing")
			}
		}
	})
}
