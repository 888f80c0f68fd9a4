package host

import (
	"context"
	"fmt"
	"slices"
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

	"github.com/informer-host/informer-host/informer"
	"github.com/informer-host/informer-host/internal/config"
	"github.com/informer-host/informer-host/internal/controllerwrites"
	"github.com/informer-host/informer-host/internal/testenv"
)

// A reconcile's prune asks for its own primary's children: with the
// host's Indexers the owned cache answers by index, so the lister hands
// back that primary's children and never the others' (the cost of a
// reconcile is its own children, not every child of the plugin, which
// made each phase quadratic). Without the index (a pipeline built
// without Indexers) it falls back to the plugin's label, which the
// writes then filter by owner.
func TestControllerOwnedListerByIndex(t *testing.T) {
	const plugin = "copy.wasm"
	owner := func(name string) controllerwrites.Owner {
		return controllerwrites.Owner{Resource: schema.GroupResource{Resource: "configmaps"}, Namespace: "src", Name: name, UID: "u-" + name}
	}
	var objs []runtime.Object
	child := func(name string, o controllerwrites.Owner, pluginLabel string) {
		u := &unstructured.Unstructured{}
		u.SetAPIVersion("v1")
		u.SetKind("ConfigMap")
		u.SetNamespace("dst")
		u.SetName(name)
		u.SetLabels(map[string]string{controllerwrites.LabelPlugin: pluginLabel})
		u.SetAnnotations(map[string]string{controllerwrites.AnnotationOwner: o.String()})
		objs = append(objs, u)
	}
	for _, p := range []string{"a", "b", "c"} {
		for i := range 5 {
			child(p+string(rune('0'+i)), owner(p), controllerwrites.PluginLabel(plugin))
		}
	}
	child("other-plugin", owner("a"), controllerwrites.PluginLabel("other.wasm"))

	newPipeline := func(t *testing.T, ix cache.Indexers) *informer.Pipeline {
		disco := &fakediscovery.FakeDiscovery{Fake: &clienttesting.Fake{Resources: []*metav1.APIResourceList{{
			GroupVersion: "v1",
			APIResources: []metav1.APIResource{{Name: "configmaps", SingularName: "configmap", Namespaced: true, Kind: "ConfigMap", Verbs: []string{"list", "watch"}}},
		}}}}
		dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
			map[schema.GroupVersionResource]string{{Version: "v1", Resource: "configmaps"}: "ConfigMapList"}, objs...)
		p, err := informer.New(informer.Options{Dynamic: dyn, Discovery: disco, Indexers: ix})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(p.Stop)
		spec := config.Resource{Name: "dst", Version: "v1", Resource: "configmaps", Indexes: []string{config.IndexControllerOwner}}
		if err := p.Apply(context.Background(), []config.Resource{spec}); err != nil {
			t.Fatal(err)
		}
		testenv.EventuallyWithin(t, 30*time.Second, fmt.Sprintf("the owned cache to hold %d objects", len(objs)), func() bool {
			n := 0
			p.CacheList("dst", "", nil, func(*unstructured.Unstructured) { n++ })
			return n == len(objs)
		})
		return p
	}
	names := func(us []*unstructured.Unstructured) []string {
		var out []string
		for _, u := range us {
			out = append(out, u.GetName())
		}
		slices.Sort(out)
		return out
	}

	byIndex := ownedLister{p: newPipeline(t, Indexers()), plugin: plugin}
	if got, want := names(byIndex.ListOwned("dst", owner("b").IndexKey())), []string{"b0", "b1", "b2", "b3", "b4"}; !slices.Equal(got, want) {
		t.Errorf("ListOwned(b) by index = %v, want only b's children %v", got, want)
	}
	// The other plugin's child of the same primary key comes back too:
	// the index is by owner; the writes' label check keeps it.
	if got := byIndex.ListOwned("dst", owner("a").IndexKey()); len(got) != 6 {
		t.Errorf("ListOwned(a) by index = %v, want a's 5 children and the other plugin's", names(got))
	}

	byLabel := ownedLister{p: newPipeline(t, nil), plugin: plugin}
	if got := byLabel.ListOwned("dst", owner("b").IndexKey()); len(got) != 15 {
		t.Errorf("ListOwned(b) without the index = %d objects, want the plugin's 15 (label fallback)", len(got))
	}
}
