package host

import (
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/informer-host/informer-host/abi"
	"github.com/informer-host/informer-host/host/internal/engine"
	"github.com/informer-host/informer-host/informer"
	"github.com/informer-host/informer-host/internal/config"
)

// cacheReader serves one plugin instance's cache reads (ABI.md §16.1)
// from the pipeline's informer caches, within the plugin's cache grants.
// Nothing here makes an API request or starts an informer: a grant may
// only name a configured resource (config validation), and an index
// exists only on informers built for a grant that asks for it.
//
// It is used by one instance, whose calls are serialised, so the
// selector memo needs no lock.
type cacheReader struct {
	p      *informer.Pipeline
	grants map[string]config.CacheGrant // by resource name
	// lastSel and sel memoise the last label selector parsed: a plugin
	// lists with the same few selectors over and over.
	lastSel string
	sel     labels.Selector
	// f is the List/Index callback, built once; keys is where it appends.
	keys []string
	f    func(*unstructured.Unstructured)
}

var _ engine.CacheReader = (*cacheReader)(nil)

// newCacheReader returns the reader for grants, or nil (cache reads
// denied) when there are none.
func newCacheReader(p *informer.Pipeline, g config.Grants) engine.CacheReader {
	if len(g.Cache) == 0 {
		return nil
	}
	r := &cacheReader{p: p, grants: make(map[string]config.CacheGrant, len(g.Cache))}
	for _, cg := range g.Cache {
		r.grants[cg.Resource] = cg
	}
	r.f = func(u *unstructured.Unstructured) { r.keys = append(r.keys, storeKey(u)) }
	return r
}

// storeKey is client-go's store key of u, "namespace/name" or "name".
func storeKey(u *unstructured.Unstructured) string {
	md, _ := u.Object["metadata"].(map[string]any)
	ns, _ := md["namespace"].(string)
	name, _ := md["name"].(string)
	if ns == "" {
		return name
	}
	return ns + "/" + name
}

func (r *cacheReader) Get(res, ns, name []byte) (map[string]any, int32) {
	g, ok := r.grants[string(res)]
	if !ok {
		return nil, abi.ErrDenied
	}
	u, ok := r.p.CacheGet(g.Resource, string(ns), string(name))
	if !ok {
		return nil, abi.ErrAbsent
	}
	return u.Object, 0
}

func (r *cacheReader) List(keys []string, res, ns, sel []byte) ([]string, int32) {
	g, ok := r.grants[string(res)]
	if !ok {
		return keys, abi.ErrDenied
	}
	if len(sel) == 0 {
		// No selector: the keys straight from the index, no object touched.
		index := informer.NamespaceIndex
		if len(ns) == 0 {
			index = ""
		}
		keys, err := r.p.CacheKeys(keys, g.Resource, index, string(ns))
		if err != nil {
			return keys, abi.ErrInternal
		}
		return keys, 0
	}
	if string(sel) != r.lastSel || r.sel == nil {
		s, err := labels.Parse(string(sel))
		if err != nil {
			return keys, abi.ErrInvalid
		}
		r.lastSel, r.sel = string(sel), s
	}
	r.keys = keys
	r.p.CacheList(g.Resource, string(ns), r.sel, r.f)
	keys, r.keys = r.keys, nil
	return keys, 0
}

func (r *cacheReader) Index(keys []string, res, index, value []byte) ([]string, int32) {
	g, ok := r.grants[string(res)]
	if !ok {
		return keys, abi.ErrDenied
	}
	switch string(index) {
	case informer.NamespaceIndex:
	case informer.OwnerIndex:
		if !g.HasIndex(config.IndexOwner) {
			return keys, abi.ErrDenied
		}
	default:
		return keys, abi.ErrInvalid
	}
	keys, err := r.p.CacheKeys(keys, g.Resource, string(index), string(value))
	if err != nil {
		return keys, abi.ErrInternal
	}
	return keys, 0
}
