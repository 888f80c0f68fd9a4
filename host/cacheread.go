package host

import (
	"slices"

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
	// ns confines the reads to one namespace (a tenant's plugin): an
	// object of another is absent, as if it did not exist, and a list
	// or index read holds only ns's objects. "": not confined.
	ns string
	// lastSel and sel memoise the last label selector parsed: a plugin
	// lists with the same few selectors over and over.
	lastSel string
	sel     labels.Selector
	// f is the List/Index callback, built once; keys is where it appends.
	keys []string
	f    func(*unstructured.Unstructured)
	// last is the last list or index read's answer, sorted, with the
	// stamp of the caches it was read from: the same read while the
	// stamp stays is answered from it (informer.CacheStamp says why that
	// is what reading afresh would give).
	last keysMemo
}

// keysMemo is one list (index "") or index read and its sorted keys.
type keysMemo struct {
	ok        bool
	index     bool // cache_index, else cache_list
	res, a, b string
	stamp     informer.CacheStamp
	keys      []string
}

// memoMaxKeys bounds the answers kept: a plugin reading one page after
// another of a large list would otherwise hold its every key.
const memoMaxKeys = 4 * abi.MaxListPage

// memoized appends the kept answer to keys if it is the answer to this
// read of these caches.
func (r *cacheReader) memoized(keys []string, index bool, res, a, b []byte, stamp informer.CacheStamp) ([]string, bool) {
	m := &r.last
	if !m.ok || m.index != index || m.stamp != stamp || m.res != string(res) || m.a != string(a) || m.b != string(b) {
		return keys, false
	}
	return append(keys, m.keys...), true
}

// memoize keeps keys[from:], sorted, as the answer to this read.
func (r *cacheReader) memoize(keys []string, from int, index bool, res, a, b []byte, stamp informer.CacheStamp) {
	got := keys[from:]
	if len(got) > memoMaxKeys {
		r.last = keysMemo{}
		return
	}
	slices.Sort(got) // the engine sorts the page anyway; sorted, it only checks
	m := &r.last
	m.ok, m.index, m.stamp = true, index, stamp
	if m.res != string(res) {
		m.res = string(res)
	}
	if m.a != string(a) {
		m.a = string(a)
	}
	if m.b != string(b) {
		m.b = string(b)
	}
	m.keys = append(m.keys[:0], got...)
}

var _ engine.CacheReader = (*cacheReader)(nil)

// newCacheReader returns the reader for grants within namespace ns ("":
// all), or nil (cache reads denied) when there are none.
func newCacheReader(p *informer.Pipeline, g config.Grants, ns string) engine.CacheReader {
	if len(g.Cache) == 0 {
		return nil
	}
	r := &cacheReader{p: p, grants: make(map[string]config.CacheGrant, len(g.Cache)), ns: ns}
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
	if !inReach(r.ns, string(ns)) {
		return nil, abi.ErrAbsent
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
	if r.ns != "" {
		// All namespaces, to a confined plugin, are its own.
		if len(ns) == 0 {
			ns = []byte(r.ns)
		}
		if string(ns) != r.ns {
			return keys, 0
		}
	}
	// The stamp before the read: a change during it moves the stamp
	// again, so what is kept is never older than its stamp.
	stamp, active := r.p.CacheStamp(g.Resource)
	if active {
		if out, hit := r.memoized(keys, false, res, ns, sel, stamp); hit {
			return out, 0
		}
	}
	from := len(keys)
	keys, code := r.list(keys, g, ns, sel)
	if code == 0 && active {
		r.memoize(keys, from, false, res, ns, sel, stamp)
	}
	return keys, code
}

func (r *cacheReader) list(keys []string, g config.CacheGrant, ns, sel []byte) ([]string, int32) {
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
	stamp, active := r.p.CacheStamp(g.Resource)
	if active {
		if out, hit := r.memoized(keys, true, res, index, value, stamp); hit {
			return out, 0
		}
	}
	from := len(keys)
	if string(index) == informer.NamespaceIndex && !inReach(r.ns, string(value)) {
		return keys, 0
	}
	keys, err := r.p.CacheKeys(keys, g.Resource, string(index), string(value))
	if err != nil {
		return keys, abi.ErrInternal
	}
	// An owner's dependents may live in other namespaces (a
	// cluster-scoped owner's do).
	keys = storeKeysInReach(r.ns, keys, from)
	if active {
		r.memoize(keys, from, true, res, index, value, stamp)
	}
	return keys, 0
}
