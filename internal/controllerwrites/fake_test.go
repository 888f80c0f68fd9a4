package controllerwrites

import (
	"context"
	"encoding/json"
	"sync"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/informer-host/informer-host/abi"
	"github.com/informer-host/informer-host/internal/kubewrite"
)

// fakeWrites records the requests a Writer makes and answers them with
// answer (nil: success), for the decisions that need no cluster. The
// cluster's side of the same calls is in the e2e tests.
type fakeWrites struct {
	mu     sync.Mutex
	reqs   []kubewrite.Request
	deny   func(r *kubewrite.Request) string // non-empty: Check says ERR_DENIED with it
	answer func(r *kubewrite.Request) (int32, string)
}

func (f *fakeWrites) Check(r *kubewrite.Request) (int32, string) {
	if f.deny != nil {
		if msg := f.deny(r); msg != "" {
			return abi.ErrDenied, msg
		}
	}
	return 0, ""
}

func (f *fakeWrites) Do(_ context.Context, r *kubewrite.Request) (map[string]any, int32, string) {
	f.mu.Lock()
	f.reqs = append(f.reqs, *r)
	f.mu.Unlock()
	if f.answer != nil {
		if code, msg := f.answer(r); code != 0 {
			return nil, code, msg
		}
	}
	return map[string]any{}, 0, ""
}

func (f *fakeWrites) requests(op int32) []kubewrite.Request {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []kubewrite.Request
	for _, r := range f.reqs {
		if r.Op == op {
			out = append(out, r)
		}
	}
	return out
}

// listerFunc is an OwnedLister from a function.
type listerFunc func(resource, owner string) []*unstructured.Unstructured

func (f listerFunc) ListOwned(resource, owner string) []*unstructured.Unstructured {
	return f(resource, owner)
}

var (
	widgets    = Resource{Name: "widgets", GVR: schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "widgets"}, Kind: "Widget", Namespaced: true}
	configmaps = Resource{Name: "configmaps", GVR: schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}, Kind: "ConfigMap", Namespaced: true}
	clusterWs  = Resource{Name: "clusterwidgets", GVR: schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "clusterwidgets"}, Kind: "ClusterWidget"}
	namespaces = Resource{Name: "namespaces", GVR: schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}, Kind: "Namespace"}
)

func obj(s string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON([]byte(s)); err != nil { // numbers as the apiserver's: int64
		panic(err)
	}
	return u
}

func body(r kubewrite.Request) map[string]any {
	var m map[string]any
	if err := json.Unmarshal(r.Body, &m); err != nil {
		panic(err)
	}
	return m
}
