package host

import (
	"runtime"
	"sync"
	"weak"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/informer-host/informer-host/host/internal/engine"
	"github.com/informer-host/informer-host/informer"
)

// envelopeCache lets every plugin that receives one notification share one
// Envelope, so the event is encoded once however many plugins get it.
//
// Each plugin is its own client-go listener, so the host sees one
// notification once per plugin, but always with the same object pointers:
// client-go hands every listener the same cached objects. The cache is
// keyed by those pointers, held weakly, and holds the Envelope weakly too.
// The strong references live in the plugins' queues: once the last plugin
// has handled the event, the Envelope is collected and its entry removed
// by a cleanup. So the cache never keeps an object alive and never grows
// beyond the events still waiting somewhere.
type envelopeCache struct {
	mu sync.Mutex
	m  map[envelopeKey]weak.Pointer[engine.Envelope]
}

type envelopeKey struct {
	obj, old weak.Pointer[unstructured.Unstructured]
	res      *informer.ResourceRef
	typ      informer.EventType
	initial  bool
	unknown  bool
}

func newEnvelopeCache() *envelopeCache {
	return &envelopeCache{m: map[envelopeKey]weak.Pointer[engine.Envelope]{}}
}

// get returns the shared Envelope for ev, building it on first use.
func (c *envelopeCache) get(ev *informer.Event) *engine.Envelope {
	k := envelopeKey{obj: weak.Make(ev.Object), res: ev.Resource, typ: ev.Type,
		initial: ev.IsInInitialList, unknown: ev.FinalStateUnknown}
	if ev.OldObject != nil {
		k.old = weak.Make(ev.OldObject)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if wp, ok := c.m[k]; ok {
		if env := wp.Value(); env != nil {
			return env
		}
	}
	// The envelope keeps its own copy of the event: the caller's may be
	// changed by coalescing.
	cp := *ev
	env := engine.NewEnvelope(&cp)
	c.m[k] = weak.Make(env)
	runtime.AddCleanup(env, c.forget, k)
	return env
}

// forget removes k once its Envelope is gone, unless k was reused for a
// newer Envelope meanwhile.
func (c *envelopeCache) forget(k envelopeKey) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if wp, ok := c.m[k]; ok && wp.Value() == nil {
		delete(c.m, k)
	}
}

func (c *envelopeCache) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.m)
}
