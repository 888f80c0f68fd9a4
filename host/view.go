package host

import (
	"sync"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/informer-host/informer-host/event"
	"github.com/informer-host/informer-host/host/internal/delivery"
)

// A plugin's view of the cache (generation.seen) is, per object, the last
// state the plugin was given. A map per plugin from the object's key to
// that state cost about a hundred bytes an object (the key's three
// strings in every slot, the map's slack, an entry allocated apart): 4.8
// MiB per plugin at 50,000 objects. Here the keys are interned once per
// Host, in one table per resource name that every generation shares
// (viewKeys), and a view keeps only what is its own: the object, and
// which of its few resource references the object came with, in
// fixed-size chunks indexed by the key's id. That is 9 bytes an object
// when the view holds the resource's objects densely, and never more than
// that times the number of the resource's keys however sparsely it holds
// them (a chunk is allocated for the first object the view holds in it
// and freed with its last). BenchmarkView measures both.

// viewChunk is how many ids one chunk of a view covers.
const viewChunk = 64

// viewKeys interns the keys of the objects plugins have seen, one table
// per resource name, for all the generations of a Host. Safe for
// concurrent use; its lock is a leaf, and so is each table's.
type viewKeys struct {
	mu    sync.Mutex
	byRes map[string]*keyTable // guarded by mu
}

func newViewKeys() *viewKeys { return &viewKeys{byRes: map[string]*keyTable{}} }

// table returns the key table of resource, creating it on first use. A
// table stays for the life of the Host: it is emptied when its keys are
// released, but its own size is one map header per resource name.
func (vk *viewKeys) table(resource string) *keyTable {
	vk.mu.Lock()
	defer vk.mu.Unlock()
	t := vk.byRes[resource]
	if t == nil {
		t = &keyTable{ids: map[objName]uint32{}}
		vk.byRes[resource] = t
	}
	return t
}

// objName is an object's key within its resource.
type objName struct{ namespace, name string }

// keyTable gives each key that at least one view holds a small id, and
// counts the views holding it; an id whose last view lets go is reused.
type keyTable struct {
	mu    sync.RWMutex
	ids   map[objName]uint32
	names []objName // by id; the zero objName for a free id
	holds []uint32  // by id: how many views hold it
	free  []uint32
}

// lookup returns the id of n, if a view holds it.
func (t *keyTable) lookup(n objName) (uint32, bool) {
	t.mu.RLock()
	id, ok := t.ids[n]
	t.mu.RUnlock()
	return id, ok
}

// acquire returns the id of n for one more view holding it.
func (t *keyTable) acquire(n objName) uint32 {
	t.mu.Lock()
	defer t.mu.Unlock()
	if id, ok := t.ids[n]; ok {
		t.holds[id]++
		return id
	}
	var id uint32
	if k := len(t.free); k > 0 {
		id = t.free[k-1]
		t.free = t.free[:k-1]
		t.names[id], t.holds[id] = n, 1
	} else {
		id = uint32(len(t.names))
		t.names = append(t.names, n)
		t.holds = append(t.holds, 1)
	}
	t.ids[n] = id
	return id
}

// release lets go of ids for one view each.
func (t *keyTable) release(ids ...uint32) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, id := range ids {
		if t.holds[id]--; t.holds[id] == 0 {
			delete(t.ids, t.names[id])
			t.names[id] = objName{}
			t.free = append(t.free, id)
		}
	}
}

// cacheView is one generation's view of the cache: per object, the last state
// the current instance was given. The worker's own, like the field it is
// in (generation.seen).
type cacheView struct {
	keys  *viewKeys
	byRes map[string]*resView
	last  *resView // the last one looked up: most plugins have one binding
	n     int
	// unsettled holds the objects the view has that are unsettled
	// (seenObject.unsettled). Only a call its member fenced makes one,
	// so it is nearly always empty and costs the dense slots nothing.
	unsettled map[delivery.Key]bool
}

// newCacheView returns an empty view over keys (a view's own when nil).
func newCacheView(keys *viewKeys) *cacheView {
	if keys == nil {
		keys = newViewKeys()
	}
	return &cacheView{keys: keys, byRes: map[string]*resView{}}
}

// resView is the part of a view of one resource name.
type resView struct {
	resource string
	t        *keyTable
	// refs are the resource references the view's objects came with
	// (one, unless the resource was resolved again), indexed by
	// viewSlots.ref.
	refs   []*event.ResourceRef
	chunks []*viewSlots // by id / viewChunk; nil where it holds none
}

// viewSlots is one chunk of a resView: 576 bytes, one of Go's size
// classes, for 64 objects.
type viewSlots struct {
	obj [viewChunk]*unstructured.Unstructured
	ref [viewChunk]uint8
}

// seenObject is the last state of an object a plugin was given, and
// where the view keeps it; the zero seenObject is an object the plugin
// has not been given (or has been given the delete of).
type seenObject struct {
	res *event.ResourceRef
	obj *unstructured.Unstructured
	at  *resView
	id  uint32
	// unsettled: the plugin has no settled state of the object, but was
	// handed obj in a call that its member's loss of the object fenced
	// (sharding), and answered RETRY or ERROR. Its network wait returned
	// ERR_CANCELED, yet the request may have reached the apiserver or the
	// upstream already (RATIONALE.md, "Why two members never own one
	// object"): the plugin may hold, or have caused, state of it. So the
	// object counts as the plugin's for a delete (a handed-over one, when
	// the replay finds it another member's; the object's own), and as
	// not had for anything that hands a state: that goes as an add, since
	// the plugin asked for it again.
	unsettled bool
}

// has reports whether the plugin has the object.
func (s seenObject) has() bool { return s.obj != nil }

// settled reports whether the plugin has a state of the object it took.
func (s seenObject) settled() bool { return s.obj != nil && !s.unsettled }

// rv is the resourceVersion of the state the plugin has.
func (s seenObject) rv() string { return delivery.ResourceVersion(s.obj) }

func (v *cacheView) resView(resource string, create bool) *resView {
	if r := v.last; r != nil && r.resource == resource {
		return r
	}
	r := v.byRes[resource]
	if r == nil {
		if !create {
			return nil
		}
		r = &resView{resource: resource, t: v.keys.table(resource)}
		v.byRes[resource] = r
	}
	v.last = r
	return r
}

// slot returns the chunk and index of id, nil when the view holds no
// object there.
func (r *resView) slot(id uint32) (*viewSlots, int) {
	j := int(id / viewChunk)
	if j >= len(r.chunks) {
		return nil, 0
	}
	return r.chunks[j], int(id % viewChunk)
}

// get returns what the plugin has of the object k.
func (v *cacheView) get(k delivery.Key) seenObject {
	r := v.resView(k.Resource, false)
	if r == nil {
		return seenObject{}
	}
	id, ok := r.t.lookup(objName{k.Namespace, k.Name})
	if !ok {
		return seenObject{}
	}
	c, i := r.slot(id)
	if c == nil || c.obj[i] == nil {
		return seenObject{}
	}
	return seenObject{res: r.refs[c.ref[i]], obj: c.obj[i], at: r, id: id, unsettled: len(v.unsettled) > 0 && v.unsettled[k]}
}

// setUnsettled records obj (of res) as an unsettled state of k
// (seenObject.unsettled); at is what get returned for k.
func (v *cacheView) setUnsettled(k delivery.Key, res *event.ResourceRef, obj *unstructured.Unstructured, at seenObject) {
	v.set(k, res, obj, at)
	if v.unsettled == nil {
		v.unsettled = map[delivery.Key]bool{}
	}
	v.unsettled[k] = true
}

// set records obj (of res) as the plugin's state of k, a settled one; at
// is what get returned for k, so a state the view has is replaced
// without a lookup.
func (v *cacheView) set(k delivery.Key, res *event.ResourceRef, obj *unstructured.Unstructured, at seenObject) {
	if len(v.unsettled) > 0 {
		delete(v.unsettled, k)
	}
	r, id := at.at, at.id
	if r == nil {
		if at = v.get(k); at.has() {
			r, id = at.at, at.id
		}
	}
	if r != nil {
		if c, i := r.slot(id); c != nil && c.obj[i] != nil {
			c.obj[i], c.ref[i] = obj, r.refIndex(res)
			return
		}
	}
	r = v.resView(k.Resource, true)
	id = r.t.acquire(objName{k.Namespace, k.Name})
	j, i := int(id/viewChunk), int(id%viewChunk)
	for len(r.chunks) <= j {
		r.chunks = append(r.chunks, nil)
	}
	c := r.chunks[j]
	if c == nil {
		c = &viewSlots{}
		r.chunks[j] = c
	}
	c.obj[i], c.ref[i] = obj, r.refIndex(res)
	v.n++
}

// delete forgets the object k; at is what get returned for it.
func (v *cacheView) delete(k delivery.Key, at seenObject) {
	if len(v.unsettled) > 0 {
		delete(v.unsettled, k)
	}
	if at.at == nil {
		if at = v.get(k); !at.has() {
			return
		}
	}
	r := at.at
	c, i := r.slot(at.id)
	if c == nil || c.obj[i] == nil {
		return
	}
	c.obj[i], c.ref[i] = nil, 0
	v.n--
	if c.empty() {
		r.chunks[at.id/viewChunk] = nil
	}
	r.t.release(at.id)
}

func (c *viewSlots) empty() bool {
	for _, o := range c.obj {
		if o != nil {
			return false
		}
	}
	return true
}

// refIndex returns the index of res in r.refs, adding it. With 256 refs
// already (a resource resolved again that many times while the view held
// objects of each), the ones no object uses any more are dropped first.
func (r *resView) refIndex(res *event.ResourceRef) uint8 {
	for i, x := range r.refs {
		if x == res {
			return uint8(i)
		}
	}
	if len(r.refs) > 255 {
		r.compactRefs()
	}
	r.refs = append(r.refs, res)
	return uint8(len(r.refs) - 1)
}

// compactRefs drops the refs no object of r uses. The ref being added
// makes at most 256 of them in use: a view's chunk cannot have more
// objects of one resource than its keys, and every live ref is one
// reactivation of the resource whose objects the view still holds.
func (r *resView) compactRefs() {
	var used [256]bool
	for _, c := range r.chunks {
		if c == nil {
			continue
		}
		for i, o := range c.obj {
			if o != nil {
				used[c.ref[i]] = true
			}
		}
	}
	var remap [256]uint8
	var kept []*event.ResourceRef
	for i, x := range r.refs {
		if used[i] {
			remap[i] = uint8(len(kept))
			kept = append(kept, x)
		}
	}
	if len(kept) > 255 {
		// 256 live references: the oldest is folded into the next
		// (only the delete event of such an object would show it).
		kept = kept[1:]
		for i := range remap {
			if remap[i] > 0 {
				remap[i]--
			}
		}
	}
	for _, c := range r.chunks {
		if c == nil {
			continue
		}
		for i, o := range c.obj {
			if o != nil {
				c.ref[i] = remap[c.ref[i]]
			}
		}
	}
	r.refs = kept
}

// len is the number of objects the plugin has.
func (v *cacheView) len() int { return v.n }

// appendKeys appends the key of every object the plugin has.
func (v *cacheView) appendKeys(dst []delivery.Key) []delivery.Key {
	for _, r := range v.byRes {
		r.t.mu.RLock()
		for j, c := range r.chunks {
			if c == nil {
				continue
			}
			for i, o := range c.obj {
				if o != nil {
					n := r.t.names[j*viewChunk+i]
					dst = append(dst, delivery.Key{Resource: r.resource, Namespace: n.namespace, Name: n.name})
				}
			}
		}
		r.t.mu.RUnlock()
	}
	return dst
}

// clear forgets every object, letting go of their keys: a restart's
// view starts empty, and a generation whose worker ended releases what
// its view held for the others' sake.
func (v *cacheView) clear() {
	var ids []uint32
	for _, r := range v.byRes {
		ids = ids[:0]
		for j, c := range r.chunks {
			if c == nil {
				continue
			}
			for i, o := range c.obj {
				if o != nil {
					ids = append(ids, uint32(j*viewChunk+i))
				}
			}
		}
		if len(ids) > 0 {
			r.t.release(ids...)
		}
	}
	clear(v.byRes)
	v.last = nil
	v.n = 0
	v.unsettled = nil
}
