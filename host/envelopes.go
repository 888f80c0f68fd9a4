package host

import (
	"sync/atomic"
	"unsafe"

	"github.com/informer-host/informer-host/event"
	"github.com/informer-host/informer-host/host/internal/engine"
)

// envelopeCache lets every plugin that receives one notification share one
// Envelope, so the event is encoded once however many plugins get it.
//
// Each plugin is its own client-go listener, so the host sees one
// notification once per plugin, but always with the same object pointers:
// client-go hands every listener the same cached objects. The cache is a
// small direct-mapped table of the most recent Envelopes, indexed by a hash
// of those pointers: a listener finds the Envelope another plugin's
// listener built for the same notification moments before, and builds one
// (and takes the slot over) when the slot holds something else.
//
// Invariants:
//   - Identity by pointer is sound: a slot holds its Envelope strongly, and
//     the Envelope holds the event's objects, so an object cannot be freed
//     and its address reused for another while its Envelope is in a slot.
//   - Sharing is best effort: a notification whose slot was taken over
//     between two plugins' listeners (more than a few hundred events apart,
//     or a hash collision) gets a second Envelope. Each is complete; only
//     the encoding is repeated.
//   - Memory is bounded: at most envelopeSlots Envelopes are held beyond
//     the plugins' queues, with their objects (mostly still in the informer
//     cache anyway) and, once a plugin has read them, their JSON.
//   - Lock-free and allocation-free on a hit: a lookup is an atomic load
//     and a few compares; racing listeners may both miss and both build,
//     and the last store wins.
//
// An earlier version held Envelopes and objects through weak pointers with
// runtime cleanups. Every weak pointer to a cached object puts a record on
// its memory span for the object's whole life, and adding one walks the
// span's list: with many cached objects that walk was two thirds of the
// host's CPU per event (BENCHMARKS.md).
type envelopeCache struct {
	slots [envelopeSlots]atomic.Pointer[engine.Envelope]
}

const (
	envelopeBits  = 8
	envelopeSlots = 1 << envelopeBits
)

func newEnvelopeCache() *envelopeCache { return &envelopeCache{} }

// get returns the shared Envelope for ev, building it on first use. The
// Envelope keeps its own copy of the event (the caller's may later be
// changed by coalescing).
func (c *envelopeCache) get(ev *event.Event) *engine.Envelope {
	slot := &c.slots[envelopeSlot(ev)]
	if env := slot.Load(); env != nil && sameNotification(env.Event(), ev) {
		return env
	}
	env := engine.NewEnvelope(ev)
	slot.Store(env)
	return env
}

func envelopeSlot(ev *event.Event) uint64 {
	h := uint64(uintptr(unsafe.Pointer(ev.Object)))>>4 ^ uint64(uintptr(unsafe.Pointer(ev.OldObject)))>>3 ^ uint64(ev.Type)
	return (h * 0x9e3779b97f4a7c15) >> (64 - envelopeBits) // Fibonacci hashing
}

func sameNotification(a, b *event.Event) bool {
	return a.Object == b.Object && a.OldObject == b.OldObject && a.Resource == b.Resource && a.Type == b.Type &&
		a.IsInInitialList == b.IsInInitialList && a.FinalStateUnknown == b.FinalStateUnknown && a.HandedOver == b.HandedOver
}
