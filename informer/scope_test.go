package informer

import (
	"context"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	fakediscovery "k8s.io/client-go/discovery/fake"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	clienttesting "k8s.io/client-go/testing"

	"github.com/informer-host/informer-host/internal/config"
)

// A resolved resource says whether it is namespaced, as discovery reports
// it, so that no listener has to guess the scope from cached keys (an
// empty cache tells nothing).
func TestResolvedRefCarriesTheScope(t *testing.T) {
	disco := &fakediscovery.FakeDiscovery{Fake: &clienttesting.Fake{Resources: []*metav1.APIResourceList{{
		GroupVersion: "v1",
		APIResources: []metav1.APIResource{
			{Name: "configmaps", SingularName: "configmap", Namespaced: true, Kind: "ConfigMap", Verbs: []string{"list", "watch"}},
			{Name: "namespaces", SingularName: "namespace", Namespaced: false, Kind: "Namespace", Verbs: []string{"list", "watch"}},
		},
	}}}}
	p, err := New(Options{Dynamic: dynamicfake.NewSimpleDynamicClient(runtime.NewScheme()), Discovery: disco})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Stop)
	for _, tc := range []struct {
		spec       config.Resource
		namespaced bool
	}{
		{config.Resource{Name: "cms", Version: "v1", Resource: "configmaps"}, true},
		{config.Resource{Name: "nss", Version: "v1", Resource: "namespaces"}, false},
		{config.Resource{Name: "nss-by-kind", Version: "v1", Kind: "Namespace"}, false},
	} {
		ref, err := p.Resolve(context.Background(), tc.spec)
		if err != nil {
			t.Fatalf("Resolve(%s): %v", tc.spec.Name, err)
		}
		if ref.Namespaced != tc.namespaced {
			t.Errorf("Resolve(%s).Namespaced = %v, want %v", tc.spec.Name, ref.Namespaced, tc.namespaced)
		}
	}
}
