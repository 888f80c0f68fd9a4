package informer

import (
	"sync"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/cache"

	"github.com/informer-host/informer-host/event"
)

// Registration is a listener's place on a configured resource.
type Registration struct {
	p        *Pipeline
	resource string
	listener Listener

	// Guarded by p.mu.
	attached []attachment // one per informer of the resource while it is active
	removed  bool

	// detaching counts client-go listeners of this registration that are
	// being shut down outside p.mu. Add happens under p.mu and only while
	// removed is false, so Remove's Wait sees every one of them.
	detaching sync.WaitGroup
	removedCh chan struct{} // closed when Remove has finished
}

type attachment struct {
	w *sharedWatch
	h cache.ResourceEventHandlerRegistration
}

// detachment is a set of client-go listeners taken off a registration
// under p.mu and still to be shut down.
type detachment struct {
	reg      *Registration
	attached []attachment
}

// HasSynced reports whether the resource is active and this listener has
// received every object of the informers' initial lists.
func (r *Registration) HasSynced() bool {
	r.p.mu.Lock()
	defer r.p.mu.Unlock()
	st := r.p.resources[r.resource]
	if r.removed || st == nil || st.phase != PhaseActive || len(r.attached) != len(st.watches) || len(r.attached) == 0 {
		return false
	}
	for _, a := range r.attached {
		if !a.h.HasSynced() {
			return false
		}
	}
	return true
}

// Remove stops delivery to the listener and returns only when it has
// returned from its last callback (client-go's ShutDownEventHandler). It
// is idempotent. It must not be called from the listener's own callbacks.
func (r *Registration) Remove() {
	r.p.mu.Lock()
	if r.removed {
		r.p.mu.Unlock()
		<-r.removedCh
		return
	}
	r.removed = true
	delete(r.p.regs[r.resource], r)
	d := detachment{reg: r, attached: r.attached}
	r.attached = nil
	r.p.mu.Unlock()

	d.shutDown()
	r.detaching.Wait()
	close(r.removedCh)
}

// detachLocked takes the registration's client-go listeners off it so the
// caller can shut them down without p.mu.
func (r *Registration) detachLocked() (detachment, bool) {
	if r.removed || len(r.attached) == 0 {
		return detachment{}, false
	}
	d := detachment{reg: r, attached: r.attached}
	r.attached = nil
	r.detaching.Add(1)
	return d, true
}

func (d detachment) shutDown() {
	for _, a := range d.attached {
		// Errors only for a foreign handle type, which cannot happen here.
		_ = cache.ShutDownEventHandler(a.w.informer, a.h)
	}
}

func finishDetach(ds []detachment) {
	for _, d := range ds {
		d.shutDown()
		d.reg.detaching.Done()
	}
}

// Get returns the current state of the object with store key key
// ("namespace/name", or "name" when cluster-scoped) from the informers'
// caches, and the resource's coordinates (nil when the resource is not
// active). The object is the cache's own and must not be modified.
func (r *Registration) Get(key string) (*event.ResourceRef, *unstructured.Unstructured, bool) {
	r.p.mu.Lock()
	ref := r.refLocked()
	attached := r.attached
	r.p.mu.Unlock()
	// The stores are safe for concurrent use, and the attachments a copy
	// of the slice sees are never changed (attaching appends past them,
	// detaching replaces the slice).
	for _, a := range attached {
		obj, ok, err := a.w.informer.GetStore().GetByKey(key)
		if err != nil || !ok {
			continue
		}
		if u, ok := obj.(*unstructured.Unstructured); ok {
			return ref, u, true
		}
	}
	return ref, nil, false
}

// Ref returns the coordinates of the registration's resource, nil while
// it is not active.
func (r *Registration) Ref() *event.ResourceRef {
	r.p.mu.Lock()
	defer r.p.mu.Unlock()
	return r.refLocked()
}

func (r *Registration) refLocked() *event.ResourceRef {
	if st := r.p.resources[r.resource]; st != nil && st.phase == PhaseActive {
		return st.ref
	}
	return nil
}

// Keys returns the store keys of every object in the informers' caches of
// the registration's resource (empty while the resource is not active).
func (r *Registration) Keys() []string {
	r.p.mu.Lock()
	attached := r.attached
	r.p.mu.Unlock()
	var keys []string
	for _, a := range attached {
		keys = append(keys, a.w.informer.GetStore().ListKeys()...)
	}
	return keys
}
