package replay

import (
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/informer-host/informer-host/abi"
	"github.com/informer-host/informer-host/informer"
)

// memCache serves cache_* from the recording's cache lines, with the
// semantics of the host's reader (host/cacheread.go): keys
// "namespace/name" or "name", label selectors, the namespace and owner
// indexes. Only the replay's goroutine uses it.
type memCache struct {
	granted map[string]bool
	objs    map[string]map[string]*unstructured.Unstructured // resource -> key -> object
}

func newMemCache(resources []string) *memCache {
	c := &memCache{granted: map[string]bool{}, objs: map[string]map[string]*unstructured.Unstructured{}}
	for _, r := range resources {
		c.granted[r] = true
		c.objs[r] = map[string]*unstructured.Unstructured{}
	}
	return c
}

func key(ns, name string) string {
	if ns == "" {
		return name
	}
	return ns + "/" + name
}

// apply applies a cache or cache-delete line.
func (c *memCache) apply(l *Line) {
	m := c.objs[l.Resource]
	if m == nil {
		return // not a granted resource: the recording carries it for nothing
	}
	if l.Type == LineCacheDelete {
		delete(m, key(l.Namespace, l.Name))
		return
	}
	u := &unstructured.Unstructured{Object: l.Object}
	m[key(u.GetNamespace(), u.GetName())] = u
}

func (c *memCache) Get(res, ns, name []byte) (map[string]any, int32) {
	if !c.granted[string(res)] {
		return nil, abi.ErrDenied
	}
	u, ok := c.objs[string(res)][key(string(ns), string(name))]
	if !ok {
		return nil, abi.ErrAbsent
	}
	return u.Object, 0
}

func (c *memCache) List(keys []string, res, ns, sel []byte) ([]string, int32) {
	if !c.granted[string(res)] {
		return keys, abi.ErrDenied
	}
	s := labels.Everything()
	if len(sel) > 0 {
		var err error
		if s, err = labels.Parse(string(sel)); err != nil {
			return keys, abi.ErrInvalid
		}
	}
	for k, u := range c.objs[string(res)] {
		if len(ns) > 0 && u.GetNamespace() != string(ns) {
			continue
		}
		if s.Matches(labels.Set(u.GetLabels())) {
			keys = append(keys, k)
		}
	}
	return keys, 0
}

func (c *memCache) Index(keys []string, res, index, value []byte) ([]string, int32) {
	if !c.granted[string(res)] {
		return keys, abi.ErrDenied
	}
	for k, u := range c.objs[string(res)] {
		switch string(index) {
		case informer.NamespaceIndex:
			if u.GetNamespace() == string(value) {
				keys = append(keys, k)
			}
		case informer.OwnerIndex:
			if slices.ContainsFunc(u.GetOwnerReferences(), func(r metav1.OwnerReference) bool { return string(r.UID) == string(value) }) {
				keys = append(keys, k)
			}
		default:
			return keys, abi.ErrInvalid
		}
	}
	return keys, 0
}
