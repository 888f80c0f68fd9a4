package host

import (
	"context"
	"sync"
	"time"

	"github.com/informer-host/informer-host/host/internal/engine"
	"github.com/informer-host/informer-host/informer"
)

// DeliveryMode says how a plugin's buffer treats events that wait.
type DeliveryMode int

const (
	// DeliverEvery delivers each event, in order. Past the buffer's cap the
	// oldest waiting event is dropped and counted.
	DeliverEvery DeliveryMode = iota
	// DeliverLatest coalesces waiting events by object: the buffer holds at
	// most one entry per object, so it never holds more entries than there
	// are distinct objects. See coalesce for what merges into what.
	DeliverLatest
)

// delivery is one entry of a DeliveryQueue.
type delivery struct {
	ev informer.Event
	// env is the envelope shared with every other plugin that got the
	// same notification. It is nil once coalescing changed ev; the worker
	// then builds one for this plugin alone.
	env      *engine.Envelope
	enqueued time.Time // when the first event merged into this entry arrived
	key      objectKey
	dead     bool // coalesced away (an add and its delete); skipped by pop
}

// objectKey identifies an object within a resource.
type objectKey struct {
	res             *informer.ResourceRef
	namespace, name string
}

func keyOf(ev *informer.Event) objectKey {
	return objectKey{res: ev.Resource, namespace: ev.Object.GetNamespace(), name: ev.Object.GetName()}
}

// DeliveryQueue is a plugin's bounded buffer between its informer listeners
// (producers, one per binding, each on its own client-go goroutine) and its
// worker (the single consumer). Producers never block: a slow plugin fills
// its own queue, never client-go's unbounded ring, and never delays another
// plugin.
//
// Order is kept per object in both modes: entries leave in the order their
// object first entered, and an object has at most one waiting entry in
// latest mode.
type DeliveryQueue struct {
	mode DeliveryMode
	cap  int
	now  func() time.Time

	// ready holds a token whenever the queue may be non-empty and its
	// consumer may be asleep; push adds one (never blocking), pop takes it
	// before sleeping. A consumer that finds the queue empty after taking a
	// token sleeps until the next push.
	ready chan struct{}

	mu sync.Mutex
	// ring holds waiting entries in arrival order from head; dead entries
	// (latest mode only) stay until popped or compacted away. live counts
	// the entries that are not dead. Its length is zero or a power of two
	// (grow doubles from 16, compaction keeps the length), so indexes wrap
	// with a mask.
	ring []*delivery
	head int
	size int // entries in ring from head, dead included
	live int
	// pending maps each object with a waiting entry to it (latest mode):
	// an object is in pending iff it has a live entry in ring.
	pending map[objectKey]*delivery

	dropped, coalesced uint64

	// sleeping is set by a take that found the queue empty (its consumer is
	// about to wait on ready) and cleared by the next push, which then
	// sends the token. While the consumer keeps finding entries, pushes do
	// not touch the channel. No wake-up is lost: the consumer sets sleeping
	// under mu before it waits, and a push appends and reads sleeping under
	// mu; a token sent before the consumer waits stays in the buffer.
	sleeping bool

	// free holds entries the worker has finished with, for reuse by push:
	// one allocation less per event and plugin. An entry goes back only
	// once nothing refers to it (takeAfter), never more than maxFree.
	free []*delivery
}

const maxFree = 256

// NewDeliveryQueue returns a queue holding at most capacity entries.
func NewDeliveryQueue(mode DeliveryMode, capacity int) *DeliveryQueue {
	if capacity < 1 {
		capacity = 1
	}
	q := &DeliveryQueue{mode: mode, cap: capacity, now: time.Now, ready: make(chan struct{}, 1)}
	if mode == DeliverLatest {
		q.pending = map[objectKey]*delivery{}
	}
	return q
}

// Push adds ev. It never blocks.
func (q *DeliveryQueue) Push(ev *informer.Event, env *engine.Envelope) { q.push(ev, env, q.now()) }

// push is Push with the arrival time read by the caller (the listener
// reads the clock anyway, to time its filter).
func (q *DeliveryQueue) push(ev *informer.Event, env *engine.Envelope, now time.Time) {
	q.mu.Lock()
	if q.mode == DeliverLatest {
		k := keyOf(ev)
		if d, ok := q.pending[k]; ok {
			q.coalesced++
			if !coalesce(d, ev) {
				d.dead = true
				delete(q.pending, k)
				q.live--
				q.compactIfSparse()
			}
			q.mu.Unlock()
			return
		}
		d := q.newDelivery()
		d.ev, d.env, d.enqueued, d.key = *ev, env, now, k
		q.pending[k] = d
		q.append(d)
	} else {
		d := q.newDelivery()
		d.ev, d.env, d.enqueued = *ev, env, now
		q.append(d)
	}
	wake := q.sleeping
	q.sleeping = false
	q.mu.Unlock()
	if wake {
		select {
		case q.ready <- struct{}{}:
		default:
		}
	}
}

// newDelivery returns a zero entry, reused if one is free. Called with mu
// held.
func (q *DeliveryQueue) newDelivery() *delivery {
	if n := len(q.free); n > 0 {
		d := q.free[n-1]
		q.free[n-1] = nil
		q.free = q.free[:n-1]
		return d
	}
	return &delivery{}
}

// append adds d at the tail, dropping the oldest live entry when full.
// Called with mu held.
func (q *DeliveryQueue) append(d *delivery) {
	if q.live >= q.cap {
		for q.size > 0 {
			old := q.takeHead()
			if !old.dead {
				q.live--
				q.dropped++
				if q.pending != nil {
					delete(q.pending, old.key)
				}
				break
			}
		}
	}
	if q.size == len(q.ring) {
		q.grow()
	}
	q.ring[(q.head+q.size)&(len(q.ring)-1)] = d
	q.size++
	q.live++
}

func (q *DeliveryQueue) takeHead() *delivery {
	d := q.ring[q.head]
	q.ring[q.head] = nil
	q.head = (q.head + 1) & (len(q.ring) - 1)
	q.size--
	return d
}

func (q *DeliveryQueue) grow() {
	n := 2 * len(q.ring)
	if n == 0 {
		n = 16
	}
	ring := make([]*delivery, n)
	for i := 0; i < q.size; i++ {
		ring[i] = q.ring[(q.head+i)&(len(q.ring)-1)]
	}
	q.ring, q.head = ring, 0
}

// compactIfSparse drops dead entries once they outnumber live ones, so
// add/delete pairs that cancel out cannot grow the ring without bound
// while the consumer is stuck. Amortised O(1) per push.
func (q *DeliveryQueue) compactIfSparse() {
	if dead := q.size - q.live; dead <= q.live || dead < 16 {
		return
	}
	ring := make([]*delivery, len(q.ring))
	n := 0
	for i := 0; i < q.size; i++ {
		if d := q.ring[(q.head+i)&(len(q.ring)-1)]; !d.dead {
			ring[n] = d
			n++
		}
	}
	q.ring, q.head, q.size = ring, 0, n
}

// pop returns the oldest live entry, waiting for one until ctx ends.
func (q *DeliveryQueue) pop(ctx context.Context) (*delivery, bool) {
	for {
		if d, ok := q.take(); ok {
			return d, true
		}
		select {
		case <-q.ready:
		case <-ctx.Done():
			return nil, false
		}
	}
}

// take returns the oldest live entry, or false when there is none.
func (q *DeliveryQueue) take() (*delivery, bool) { return q.takeAfter(nil) }

// takeAfter is take for a consumer that is done with prev, the entry its
// previous take returned (nil if none): prev goes back for reuse under the
// same lock, so the consumer locks the queue once per event. The caller
// must hold no reference to prev or into it. Its references (objects,
// envelope) are cleared at once, so a free entry keeps nothing alive.
func (q *DeliveryQueue) takeAfter(prev *delivery) (*delivery, bool) {
	if prev != nil {
		*prev = delivery{}
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if prev != nil && len(q.free) < maxFree {
		q.free = append(q.free, prev)
	}
	for q.size > 0 {
		d := q.takeHead()
		if d.dead {
			continue
		}
		q.live--
		if q.pending != nil {
			delete(q.pending, d.key)
		}
		return d, true
	}
	q.sleeping = true
	return nil, false
}

// Clear drops every waiting entry and returns how many there were.
func (q *DeliveryQueue) Clear() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	n := q.live
	for i := range q.ring {
		q.ring[i] = nil
	}
	q.head, q.size, q.live = 0, 0, 0
	if q.pending != nil {
		clear(q.pending)
	}
	return n
}

// QueueStats is a snapshot of a queue's counters.
type QueueStats struct {
	Depth     int    // entries waiting
	Dropped   uint64 // entries dropped because the queue was full
	Coalesced uint64 // events merged into a waiting entry (latest mode)
}

// Stats returns the queue's counters.
func (q *DeliveryQueue) Stats() QueueStats {
	q.mu.Lock()
	defer q.mu.Unlock()
	return QueueStats{Depth: q.live, Dropped: q.dropped, Coalesced: q.coalesced}
}

// coalesce merges the newer event n into the waiting entry d of the same
// object and reports whether an entry remains. The plugin has seen neither
// event yet, so the merged entry must take the plugin from what it saw
// last to the object's current state:
//
//	waiting  newer   result
//	add      update  add of the newer object (isInInitialList kept)
//	add      delete  nothing: the object came and went unseen
//	update   update  update from the first old object to the newest
//	update   delete  delete of the last known object
//	delete   add     update from the deleted object to the new one (the
//	                 object was recreated: its uid differs)
//
// Other pairs cannot follow one another for one listener; the newer
// event wins.
func coalesce(d *delivery, n *informer.Event) bool {
	w := &d.ev
	d.env = nil
	switch {
	case w.Type == informer.EventAdd && n.Type == informer.EventUpdate:
		w.Object = n.Object
	case w.Type == informer.EventAdd && n.Type == informer.EventDelete:
		return false
	case w.Type == informer.EventUpdate && n.Type == informer.EventUpdate:
		w.Object = n.Object
	case w.Type == informer.EventUpdate && n.Type == informer.EventDelete:
		*w = informer.Event{Type: informer.EventDelete, Resource: n.Resource, Object: n.Object, FinalStateUnknown: n.FinalStateUnknown}
	case w.Type == informer.EventDelete && n.Type == informer.EventAdd:
		*w = informer.Event{Type: informer.EventUpdate, Resource: n.Resource, Object: n.Object, OldObject: w.Object}
	default:
		*w = *n
	}
	return true
}
