package informer

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	fakediscovery "k8s.io/client-go/discovery/fake"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"

	"github.com/informer-host/informer-host/internal/config"
	"github.com/informer-host/informer-host/internal/testenv"
)

// A resource whose config asks for an Options.Indexers index is built
// with it, and CacheByIndex answers from it: only the objects the index
// maps the value to reach f. A resource that does not ask has no such
// index (ErrNoIndex), so the callers can tell and fall back.
func TestCacheByIndexOptionsIndexers(t *testing.T) {
	const index = "test/group"
	disco := &fakediscovery.FakeDiscovery{Fake: &clienttesting.Fake{Resources: []*metav1.APIResourceList{{
		GroupVersion: "v1",
		APIResources: []metav1.APIResource{
			{Name: "configmaps", SingularName: "configmap", Namespaced: true, Kind: "ConfigMap", Verbs: []string{"list", "watch"}},
		},
	}}}}
	var objs []runtime.Object
	for i, g := range []string{"a", "b", "b", "c", "c", "c"} {
		u := &unstructured.Unstructured{}
		u.SetAPIVersion("v1")
		u.SetKind("ConfigMap")
		u.SetNamespace("ns")
		u.SetName(string(rune('p' + i)))
		u.SetAnnotations(map[string]string{"group": g})
		objs = append(objs, u)
	}
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		map[schema.GroupVersionResource]string{{Version: "v1", Resource: "configmaps"}: "ConfigMapList"}, objs...)
	var indexed atomic.Int64
	p, err := New(Options{Dynamic: dyn, Discovery: disco, Indexers: cache.Indexers{index: func(obj any) ([]string, error) {
		indexed.Add(1)
		return []string{obj.(*unstructured.Unstructured).GetAnnotations()["group"]}, nil
	}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Stop)
	specs := []config.Resource{
		{Name: "indexed", Version: "v1", Resource: "configmaps", Indexes: []string{index}},
		{Name: "plain", Version: "v1", Resource: "configmaps", Namespaces: []string{"ns"}},
	}
	if err := p.Apply(context.Background(), specs); err != nil {
		t.Fatal(err)
	}
	testenv.EventuallyWithin(t, 30*time.Second, fmt.Sprintf("the indexed resource's cache to hold %d objects", len(objs)), func() bool {
		n := 0
		p.CacheList("indexed", "", nil, func(*unstructured.Unstructured) { n++ })
		return n == len(objs)
	})
	var got []string
	if err := p.CacheByIndex("indexed", index, "c", func(u *unstructured.Unstructured) { got = append(got, u.GetName()) }); err != nil {
		t.Fatal(err)
	}
	slices.Sort(got)
	if want := []string{"s", "t", "u"}; !slices.Equal(got, want) {
		t.Errorf("CacheByIndex(c) visited %v, want %v (only group c's objects)", got, want)
	}
	if indexed.Load() < int64(len(objs)) {
		t.Errorf("the index function ran %d times, want at least once per object (%d)", indexed.Load(), len(objs))
	}
	err = p.CacheByIndex("plain", index, "c", func(*unstructured.Unstructured) { t.Error("f called for a resource without the index") })
	if !errors.Is(err, ErrNoIndex) {
		t.Errorf("CacheByIndex on a resource without the index: %v, want ErrNoIndex", err)
	}
	// An index no function backs is not an index: the key stays that of
	// a plain informer, shared with any other plain spec.
	if k := p.watchOpts.extraIndexes([]string{"unknown", index, index}); k != index {
		t.Errorf("extraIndexes = %q, want %q", k, index)
	}
}
