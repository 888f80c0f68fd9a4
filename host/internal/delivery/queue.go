package delivery

import (
	"container/heap"
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/cache"

	"github.com/informer-host/informer-host/event"
	"github.com/informer-host/informer-host/host/internal/engine"
)

// Mode says how a plugin's buffer treats events that wait.
type Mode int

const (
	// Every delivers each event, in order. Past the buffer's cap the
	// oldest waiting event is dropped and counted, and the plugin is
	// repaired from the cache once it catches up.
	Every Mode = iota
	// Latest coalesces waiting events by object: the buffer holds at
	// most one entry per object, so it never holds more entries than there
	// are distinct objects. See coalesce for what merges into what.
	Latest
)

// Entry is one entry of a Queue: a live event, or (Replay set) a key of
// the replay cursor, whose current state the worker reads from the
// informer's store when it gets to it. The worker that took it may read
// and change its exported fields until it hands it back (Next, Retry);
// the queue owns the rest.
type Entry struct {
	Event event.Event
	// Env is the envelope shared with every other plugin that got the
	// same notification. It is nil once coalescing changed Event; the
	// worker then builds one for this plugin alone.
	Env      *engine.Envelope
	Enqueued time.Time // when the first event merged into this entry arrived
	Key      Key
	dead     bool // coalesced away (an add and its delete); skipped by pop

	// Replay marks a replay entry (Event and Env are empty); Initial,
	// that it belongs to an initial list, so the binding is synced only
	// once the plugin has handled it.
	Replay, Initial bool
	// Attempts counts the times this entry was handed back with Retry
	// (0: its wait in the queue is still to be observed); notBefore is
	// when it may be delivered again.
	Attempts  int
	notBefore time.Time
	// A retry entry with Replay set stands for the object rather than an
	// event: when due it reads the store's current state, as a cursor
	// entry does. A retry becomes one when its key enters the cursor (an
	// overflow repair, a sharding change: the store has moved past the
	// retried event), when a restart replays the cache, and when the
	// object is parked. parked: the object failed too often and waits
	// out a long backoff; a live event of it (a change) makes it due at
	// once.
	parked bool
	// FromStore marks an event the worker built from the store (a replay
	// entry handed back with Retry): it is no live change, so it never
	// carries the self-write flag.
	FromStore bool
	// behind holds, in mode every, the object's later events, which wait
	// until this entry (waiting out a retry) is done.
	behind []*Entry
	// retryIndex is the entry's place in the queue's retry heap.
	retryIndex int
}

// DropBehind lets go of the object's events waiting behind e, for an
// entry that is not handed back: the instance restart that follows its
// failed call clears the queue, and these with it.
func (e *Entry) DropBehind() { e.behind = nil }

// retryHeap orders the entries waiting out a retry by when they are due.
type retryHeap []*Entry

func (h retryHeap) Len() int           { return len(h) }
func (h retryHeap) Less(i, j int) bool { return h[i].notBefore.Before(h[j].notBefore) }
func (h retryHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].retryIndex, h[j].retryIndex = i, j
}
func (h *retryHeap) Push(x any) {
	d := x.(*Entry)
	d.retryIndex = len(*h)
	*h = append(*h, d)
}
func (h *retryHeap) Pop() any {
	old := *h
	d := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	return d
}

// Key identifies an object within a binding: the resource's name in
// the configuration (stable when the resource's informers restart, unlike
// its *ResourceRef), the namespace and the name.
type Key struct {
	Resource, Namespace, Name string
}

// keyOf is ev's key; env, if it was built from ev's object, has its
// namespace and name at hand (no map lookups).
func keyOf(ev *event.Event, env *engine.Envelope) Key {
	if env != nil && env.Event().Object == ev.Object {
		return Key{Resource: ev.Resource.Name, Namespace: env.Namespace(), Name: env.Name()}
	}
	md := metadata(ev.Object)
	ns, _ := md["namespace"].(string)
	name, _ := md["name"].(string)
	return Key{Resource: ev.Resource.Name, Namespace: ns, Name: name}
}

// metadata is o's metadata map, nil if it has none: what GetNamespace,
// GetName and GetResourceVersion read, in one lookup instead of one walk
// each (they are on every event's path).
func metadata(o *unstructured.Unstructured) map[string]any {
	if o == nil {
		return nil
	}
	md, _ := o.Object["metadata"].(map[string]any)
	return md
}

// ResourceVersion is o.GetResourceVersion(), by the same short path.
func ResourceVersion(o *unstructured.Unstructured) string {
	rv, _ := metadata(o)["resourceVersion"].(string)
	return rv
}

// StoreKey is the key of the object in the informer's store.
func (k Key) StoreKey() string {
	if k.Namespace == "" {
		return k.Name
	}
	return k.Namespace + "/" + k.Name
}

// KeysOf turns store keys of one binding into object keys.
func KeysOf(resource string, storeKeys []string) []Key {
	out := make([]Key, 0, len(storeKeys))
	for _, sk := range storeKeys {
		ns, name, err := cache.SplitMetaNamespaceKey(sk)
		if err == nil {
			out = append(out, Key{Resource: resource, Namespace: ns, Name: name})
		}
	}
	return out
}

// Queue is a plugin's buffer between its informer listeners
// (producers, one per binding, each on its own client-go goroutine) and its
// worker (the single consumer). Producers never block: a slow plugin fills
// its own queue, never client-go's unbounded ring, and never delays another
// plugin.
//
// It holds three things:
//
//   - live events, in arrival order, at most cap of them (in mode latest at
//     most one per object, see coalesce). Past the cap the oldest is
//     dropped and the queue is marked overflowed: the worker then repairs
//     the plugin from the cache once it has caught up.
//   - the replay cursor: keys of objects to bring up to date from the
//     informer's store (the initial list, a restart's replay, an overflow
//     repair). It holds keys, never objects, one per object at most, so it
//     is bounded by the store's own size however small cap is. A live add
//     or update of a key in the cursor is absorbed by it (the store already
//     holds that state); a live delete takes the key out and is delivered.
//   - retries: entries the plugin answered RETRY (or ERROR) for, each
//     waiting out its object's backoff while other objects go on. In mode
//     every the object's later events wait behind its retry, so order per
//     object is kept; in mode latest a newer event merges into the waiting
//     retry (coalesce), which keeps its backoff. A retry whose key entered
//     the cursor, or survived a restart (Restart), or that holds a parked
//     object (Defer), stands for the object instead of an event: when due
//     it reads the store, as a cursor entry does, and it absorbs the
//     object's live events but a delete. A parked object's live event
//     makes its entry due at once.
//
// Order is kept per object: entries leave in the order their object first
// entered, an object has at most one waiting entry in mode latest, and no
// event of an object overtakes its waiting retry.
type Queue struct {
	mode Mode
	cap  int
	now  func() time.Time

	// ready holds a token whenever the queue may be non-empty and its
	// consumer may be asleep; push adds one (never blocking), pop takes it
	// before sleeping. A consumer that finds the queue empty after taking a
	// token sleeps until the next push.
	ready chan struct{}

	// mu guards the fields below. It is the last of the host's locks: a
	// caller may hold its own, the queue takes none under mu but what
	// onReleased takes.
	mu sync.Mutex
	// ring holds waiting entries in arrival order from head; dead entries
	// (latest mode only) stay until popped or compacted away. live counts
	// the entries that are not dead. Its length is zero or a power of two
	// (grow doubles from 16, compaction keeps the length), so indexes wrap
	// with a mask.
	ring []*Entry
	head int
	size int // entries in ring from head, dead included
	live int
	// pending maps each object with a waiting entry to it (latest mode):
	// an object is in pending iff it has a live entry in ring.
	pending map[Key]*Entry

	// retrying maps each object waiting out a retry to its entry, which
	// retries holds too, ordered by when it is due; behind counts the
	// entries waiting behind them (mode every).
	retrying map[Key]*Entry
	retries  retryHeap
	behind   int

	// replay is the cursor: keys in the order they entered, from
	// replayHead; replaySet holds the keys still to do, with whether each
	// is part of an initial list. A key taken out of the set (by a live
	// delete) stays in the slice until passed over, so the slice is
	// compacted when it holds more than twice the set.
	replay     []Key
	replayHead int
	replaySet  map[Key]bool
	// replayBig: the cursor held more than ReplayKeep keys since it was
	// last empty; when it empties, its slice and map are dropped rather
	// than kept (releaseReplay).
	replayBig bool
	// onReleased, if set, is called (with mu held; it must not block)
	// when releaseReplay has dropped a big cursor's storage (New).
	onReleased func()
	// initialLeft counts, per binding, the initial-list keys the plugin
	// has not handled yet: in the cursor, or taken and not yet done.
	initialLeft map[string]int
	// replayNext alternates the worker between live events and the
	// cursor, so neither starves the other.
	replayNext bool

	// overflowed is set when an event is dropped past the cap and cleared
	// when the worker starts the repair; repairing is set from then until
	// the repair is done. The plugin is degraded while either is set, and
	// so is degraded, which the worker reads without the lock on every
	// event (it is written under mu).
	overflowed, repairing bool
	degraded              atomic.Bool

	// superseded counts live events not delivered because a retry
	// entry standing for their object brings it to the store's state.
	dropped, coalesced, superseded uint64

	// sleeping is set by a take that found the queue empty (its consumer is
	// about to wait on ready) and cleared by the next push, which then
	// sends the token. While the consumer keeps finding entries, pushes do
	// not touch the channel. No wake-up is lost: the consumer sets sleeping
	// under mu before it waits, and a push appends and reads sleeping under
	// mu; a token sent before the consumer waits stays in the buffer.
	sleeping bool

	// free holds entries the worker has finished with, for reuse by push:
	// one allocation less per event and plugin. An entry goes back only
	// once nothing refers to it (takeAfter). It keeps maxFree entries, or
	// as many as wait in the ring if that is more: under a backlog every
	// push finds one (a fixed maxFree missed on all but the first few
	// hundred), and there are never more free than in use. An empty ring
	// trims it back to maxFree (nextLocked).
	free []*Entry
}

const maxFree = 256

// New returns a queue holding at most capacity live events. onReleased,
// if not nil, is called (with the queue's lock held; it must not block)
// when a big replay cursor, delivered to its end, has dropped its storage.
func New(mode Mode, capacity int, onReleased func()) *Queue {
	if capacity < 1 {
		capacity = 1
	}
	q := &Queue{mode: mode, cap: capacity, now: time.Now, ready: make(chan struct{}, 1), onReleased: onReleased,
		retrying: map[Key]*Entry{}, replaySet: map[Key]bool{}, initialLeft: map[string]int{}}
	if mode == Latest {
		q.pending = map[Key]*Entry{}
	}
	return q
}

// Push adds ev. It never blocks.
func (q *Queue) Push(ev *event.Event, env *engine.Envelope) { q.PushAt(ev, env, q.now()) }

// PushAt is Push with the arrival time read by the caller (the listener
// reads the clock anyway, to time its filter). An add of an initial list
// goes to the replay cursor, as its key.
func (q *Queue) PushAt(ev *event.Event, env *engine.Envelope, now time.Time) {
	k := keyOf(ev, env)
	q.mu.Lock()
	if ev.Type == event.EventAdd && ev.IsInInitialList {
		q.addReplayLocked(k, true)
		q.wakeLocked()
		return
	}
	if initial, ok := q.replaySet[k]; ok {
		if ev.Type != event.EventDelete {
			// The store holds this state already; the cursor delivers it.
			q.mu.Unlock()
			return
		}
		delete(q.replaySet, k)
		if initial {
			q.initialLeft[k.Resource]--
		}
	}
	if d := q.retrying[k]; d != nil && (d.Replay || q.mode == Latest) {
		due := d.parked
		if due {
			// The object changed: the plugin deserves another try now.
			d.parked, d.notBefore = false, now
			heap.Fix(&q.retries, d.retryIndex)
		}
		if !q.mergeRetryLocked(d, ev, env) {
			delete(q.retrying, k)
			heap.Remove(&q.retries, d.retryIndex)
		}
		if due {
			q.wakeLocked() // the consumer sleeps until the earliest retry
			return
		}
		q.mu.Unlock()
		return
	}
	if q.mode == Latest {
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
		d.Event, d.Env, d.Enqueued, d.Key = *ev, env, now, k
		if !q.append(d) {
			q.mu.Unlock()
			return
		}
		q.pending[k] = d
	} else {
		d := q.newDelivery()
		d.Event, d.Env, d.Enqueued, d.Key = *ev, env, now, k
		if !q.append(d) {
			q.mu.Unlock()
			return
		}
	}
	q.wakeLocked()
}

// Ready returns the channel that holds a token whenever the queue may
// have an entry for a consumer that Next found it empty for: the
// consumer waits on it (and on the earliest retry's due time) before it
// calls Next again.
func (q *Queue) Ready() <-chan struct{} { return q.ready }

// Wake wakes a sleeping consumer, so it looks at what it follows besides
// the queue (the host's sharding Assignment).
func (q *Queue) Wake() {
	q.mu.Lock()
	q.wakeLocked()
}

// wakeLocked wakes a sleeping consumer and unlocks mu.
func (q *Queue) wakeLocked() {
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

// mergeRetryLocked merges the live event ev into d, an entry waiting out
// a retry, and reports whether an entry remains. An entry standing for
// the object (replay) absorbs an add or update, since the store holds
// that state, and turns into a delete, which the store no longer has,
// as a cursor entry does. A live entry coalesces with ev (mode latest)
// and restarts its count of attempts: the merged event is one the
// plugin has not judged yet.
func (q *Queue) mergeRetryLocked(d *Entry, ev *event.Event, env *engine.Envelope) bool {
	if d.Replay {
		if ev.Type == event.EventDelete {
			d.Replay, d.FromStore, d.Event, d.Env = false, false, *ev, env
		}
		return true
	}
	q.coalesced++
	d.Attempts = 0
	return coalesce(d, ev)
}

// toReplayLocked turns d, an entry waiting out a retry, into one standing
// for its object: when due it brings the plugin to the store's current
// state, which supersedes the retried event and those waiting behind it.
func (q *Queue) toReplayLocked(d *Entry) {
	if !d.Replay {
		d.Replay, d.FromStore, d.Event, d.Env = true, false, event.Event{}, nil
	}
	q.superseded += uint64(len(d.behind))
	q.behind -= len(d.behind)
	for _, b := range d.behind {
		q.recycle(b)
	}
	d.behind = nil
}

// recycle puts d, which nothing refers to any more, back for reuse.
// Called with mu held.
func (q *Queue) recycle(d *Entry) {
	*d = Entry{}
	if len(q.free) < max(maxFree, q.live) {
		q.free = append(q.free, d)
	}
}

// Defer makes the object k wait until notBefore before it is handed to
// the plugin again, and then be brought to the store's state: a restart
// replays the cache but for such objects, and a parked object (parked
// set) is handed again as soon as it changes. A key waiting in the
// cursor is taken out of it: the entry stands for it.
func (q *Queue) Defer(k Key, notBefore time.Time, parked bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if initial, ok := q.replaySet[k]; ok {
		delete(q.replaySet, k)
		if initial {
			q.initialLeft[k.Resource]--
		}
	}
	d := q.retrying[k]
	if d == nil {
		d = q.newDelivery()
		d.Key, d.Enqueued = k, q.now()
		d.notBefore = notBefore
		q.retrying[k] = d
		heap.Push(&q.retries, d)
	} else {
		d.notBefore = notBefore
		heap.Fix(&q.retries, d.retryIndex)
	}
	q.toReplayLocked(d)
	d.parked = parked
}

// AddReplay adds keys to the replay cursor (initial: they are an initial
// list the binding's sync waits for).
func (q *Queue) AddReplay(keys []Key, initial bool) {
	q.mu.Lock()
	for _, k := range keys {
		q.addReplayLocked(k, initial)
	}
	q.wakeLocked()
}

func (q *Queue) addReplayLocked(k Key, initial bool) {
	if d := q.retrying[k]; d != nil {
		// The object waits out a retry: the entry, due when its backoff
		// ends, brings it to the store's state in the cursor's place. It
		// holds no binding's sync up, as a restart replaying the cache
		// must not wait for a parked object.
		q.toReplayLocked(d)
		return
	}
	was, ok := q.replaySet[k]
	switch {
	case !ok:
		q.replay = append(q.replay, k)
	case was || !initial:
		return
	}
	q.replaySet[k] = initial
	if initial {
		q.initialLeft[k.Resource]++
	}
	if len(q.replaySet) > ReplayKeep {
		q.replayBig = true
	}
}

// ReplayKeep is the size up to which an empty cursor keeps its storage
// for the next replay. A Go map never gives its buckets back and a slice
// keeps its array: after an initial list of 50,000 objects every plugin
// would hold about 6 MiB of empty cursor for the rest of its life (and
// the collector as much again of headroom for it).
const ReplayKeep = 1024

// releaseReplay empties the cursor's storage; called with mu held once
// the cursor is empty. done: the replay was delivered to its end (not
// cleared by a restart, which a plugin failing in a loop repeats every
// backoff), so onReleased is told.
func (q *Queue) releaseReplay(done bool) {
	q.replay, q.replayHead = q.replay[:0], 0
	if q.replayBig && len(q.replaySet) == 0 {
		q.replay, q.replaySet, q.replayBig = nil, map[Key]bool{}, false
		if done && q.onReleased != nil {
			q.onReleased()
		}
	}
}

// newDelivery returns a zero entry, reused if one is free. Called with mu
// held.
func (q *Queue) newDelivery() *Entry {
	if n := len(q.free); n > 0 {
		d := q.free[n-1]
		q.free[n-1] = nil
		q.free = q.free[:n-1]
		return d
	}
	return &Entry{}
}

// append adds d at the tail, dropping the oldest live entry when full. It
// reports false when d itself had to be dropped (every waiting event is
// held behind a retry). Called with mu held.
func (q *Queue) append(d *Entry) bool {
	if q.live+q.behind >= q.cap {
		q.overflowed = true
		q.degraded.Store(true)
		q.dropped++
		dropped := false
		for q.size > 0 {
			old := q.takeHead()
			if !old.dead {
				q.live--
				if q.pending != nil {
					delete(q.pending, old.Key)
				}
				dropped = true
				break
			}
		}
		if !dropped {
			return false
		}
	}
	q.appendRing(d)
	return true
}

func (q *Queue) appendRing(d *Entry) {
	if q.size == len(q.ring) {
		q.grow()
	}
	q.ring[(q.head+q.size)&(len(q.ring)-1)] = d
	q.size++
	q.live++
}

// prependRing puts ds back at the head, in order.
func (q *Queue) prependRing(ds []*Entry) {
	for i := len(ds) - 1; i >= 0; i-- {
		if q.size == len(q.ring) {
			q.grow()
		}
		q.head = (q.head - 1) & (len(q.ring) - 1)
		q.ring[q.head] = ds[i]
		q.size++
		q.live++
	}
}

func (q *Queue) takeHead() *Entry {
	d := q.ring[q.head]
	q.ring[q.head] = nil
	q.head = (q.head + 1) & (len(q.ring) - 1)
	q.size--
	return d
}

func (q *Queue) grow() {
	n := 2 * len(q.ring)
	if n == 0 {
		n = 16
	}
	ring := make([]*Entry, n)
	for i := 0; i < q.size; i++ {
		ring[i] = q.ring[(q.head+i)&(len(q.ring)-1)]
	}
	q.ring, q.head = ring, 0
}

// compactIfSparse drops dead entries once they outnumber live ones, so
// add/delete pairs that cancel out cannot grow the ring without bound
// while the consumer is stuck. Amortised O(1) per push.
func (q *Queue) compactIfSparse() {
	if dead := q.size - q.live; dead <= q.live || dead < 16 {
		return
	}
	ring := make([]*Entry, len(q.ring))
	n := 0
	for i := 0; i < q.size; i++ {
		if d := q.ring[(q.head+i)&(len(q.ring)-1)]; !d.dead {
			ring[n] = d
			n++
		}
	}
	q.ring, q.head, q.size = ring, 0, n
}

// pop returns the next entry, waiting for one until ctx ends.
func (q *Queue) pop(ctx context.Context) (*Entry, bool) {
	for {
		d, wait, ok := q.Next(nil)
		if ok {
			return d, true
		}
		if wait <= 0 {
			wait = time.Hour // no retry waits: only a push wakes us
		}
		t := time.NewTimer(wait)
		select {
		case <-q.ready:
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return nil, false
		}
		t.Stop()
	}
}

// take returns the next ready entry, or false when there is none.
func (q *Queue) take() (*Entry, bool) {
	d, _, ok := q.Next(nil)
	return d, ok
}

// Next is take for a consumer that is done with prev, the entry its
// previous take returned (nil if none). Unless prev was handed back with
// Retry, the object's events that waited behind it go back to the head of
// the ring, and prev goes back for reuse under the same lock, so the
// consumer locks the queue once per event; the caller must hold no
// reference to prev or into it.
//
// It returns, in turn, a retry whose backoff has ended, a live event or
// a key of the replay cursor (alternating between the two). When nothing
// is ready, wait is how long until the earliest retry is due (0 if none
// waits): the consumer sleeps on ready for at most that long.
func (q *Queue) Next(prev *Entry) (d *Entry, wait time.Duration, ok bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if prev != nil {
		q.doneLocked(prev)
	}
	return q.nextLocked(nil, true)
}

// More takes, for a batch (ABI.md §5, ih_handle_batch), the entries that
// are ready now after batch, the ones the consumer took last: up to max
// entries in all, in the order Next would return them, never waiting and
// never two of one object (it stops before an entry of an object already
// in the batch, which stays first in the queue). The consumer hands each
// back as it would one from Next: with Retry, or by passing it to Next
// as prev or to Done.
func (q *Queue) More(batch []*Entry, max int) []*Entry {
	q.mu.Lock()
	defer q.mu.Unlock()
	in := func(k Key) bool {
		for _, d := range batch {
			if d.Key == k {
				return true
			}
		}
		return false
	}
	for len(batch) < max {
		d, _, ok := q.nextLocked(in, false)
		if !ok {
			break
		}
		batch = append(batch, d)
	}
	return batch
}

// Done hands back an entry the consumer is finished with that it does not
// pass to Next as prev (all but the last of a batch), as Next would.
func (q *Queue) Done(d *Entry) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.doneLocked(d)
}

func (q *Queue) doneLocked(prev *Entry) {
	if q.retrying[prev.Key] != prev {
		if len(prev.behind) > 0 {
			q.behind -= len(prev.behind)
			q.prependRing(prev.behind)
		}
		q.recycle(prev)
	}
}

// nextLocked is Next's take, with mu held. An entry whose object stop
// reports (nil: none) is left where it is and ends the take; sleep: an
// empty queue marks its consumer asleep.
func (q *Queue) nextLocked(stop func(Key) bool, sleep bool) (d *Entry, wait time.Duration, ok bool) {
	if len(q.retries) > 0 {
		now := q.now()
		if r := q.retries[0]; !r.notBefore.After(now) {
			if stop != nil && stop(r.Key) {
				return nil, 0, false
			}
			heap.Pop(&q.retries)
			delete(q.retrying, r.Key)
			return r, 0, true
		}
		wait = max(q.retries[0].notBefore.Sub(now), time.Millisecond)
	}
	for {
		if q.replayNext || q.live == 0 {
			if d, ok, stopped := q.takeReplay(stop); ok {
				q.replayNext = false
				return d, 0, true
			} else if stopped {
				return nil, wait, false
			}
		}
		q.replayNext = true
		if q.live == 0 {
			if sleep {
				q.sleeping = true
			}
			if len(q.free) > maxFree {
				// The backlog is over: let its entries go.
				q.free = slices.Clone(q.free[:maxFree])
			}
			return nil, wait, false
		}
		if h := q.ring[q.head]; stop != nil && !h.dead && q.retrying[h.Key] == nil && stop(h.Key) {
			return nil, wait, false
		}
		d := q.takeHead()
		if d.dead {
			continue
		}
		q.live--
		if q.pending != nil {
			delete(q.pending, d.Key)
		}
		if r := q.retrying[d.Key]; r != nil {
			if r.Replay {
				// The entry brings the object to the store's state,
				// which is at least as new as this event.
				if d.Event.Type == event.EventDelete {
					q.mergeRetryLocked(r, &d.Event, d.Env)
				}
				q.superseded++
				q.recycle(d)
				continue
			}
			// The object waits out a retry: its later events wait behind
			// it (mode latest merges them at push, so only mode every
			// gets here).
			r.behind = append(r.behind, d)
			q.behind++
			continue
		}
		return d, 0, true
	}
}

// takeReplay returns the cursor's next key as a replay entry. Keys of
// objects waiting out a retry are passed over, and their retry turned
// into one standing for the object: the store has moved past the retried
// event (the cursor absorbed the live events since), so the retry, when
// due, brings the plugin to the store's state as this entry would have.
func (q *Queue) takeReplay(stop func(Key) bool) (d *Entry, ok, stopped bool) {
	for q.replayHead < len(q.replay) {
		k := q.replay[q.replayHead]
		initial, ok := q.replaySet[k]
		if ok && stop != nil && q.retrying[k] == nil && stop(k) {
			return nil, false, true
		}
		q.replay[q.replayHead] = Key{}
		q.replayHead++
		if !ok {
			continue
		}
		delete(q.replaySet, k)
		if r := q.retrying[k]; r != nil {
			if initial {
				q.initialLeft[k.Resource]--
			}
			q.toReplayLocked(r)
			continue
		}
		d := q.newDelivery()
		d.Key, d.Replay, d.Initial, d.Enqueued = k, true, initial, q.now()
		q.compactReplay()
		return d, true, false
	}
	q.releaseReplay(true)
	return nil, false, false
}

// compactReplay drops passed-over keys once they are most of the slice.
func (q *Queue) compactReplay() {
	if rest := len(q.replay) - q.replayHead; q.replayHead < 1024 || q.replayHead < rest {
		return
	}
	n := copy(q.replay, q.replay[q.replayHead:])
	clear(q.replay[n:])
	q.replay, q.replayHead = q.replay[:n], 0
}

// Retry hands d back to wait until notBefore; the object's later events
// wait behind it (mode every) or merge into it (mode latest).
func (q *Queue) Retry(d *Entry, notBefore time.Time) {
	q.mu.Lock()
	defer q.mu.Unlock()
	d.notBefore = notBefore
	if q.mode == Latest {
		if p, ok := q.pending[d.Key]; ok {
			// A newer event arrived during the call: it merges into the
			// retried one, as it would have had it arrived later.
			p.dead = true
			delete(q.pending, d.Key)
			q.live--
			if !q.mergeRetryLocked(d, &p.Event, p.Env) {
				return
			}
		}
	}
	q.retrying[d.Key] = d
	heap.Push(&q.retries, d)
}

// InitialDone records that the plugin handled an entry of res's initial
// list.
func (q *Queue) InitialDone(res string) {
	q.mu.Lock()
	q.initialLeft[res]--
	q.mu.Unlock()
}

// InitialLeft returns how many keys of res's initial list the plugin has
// not handled yet.
func (q *Queue) InitialLeft(res string) int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.initialLeft[res]
}

// RepairStep moves an overflow repair on. start reports that the queue
// overflowed and has no live events left: the repair is marked begun and
// the caller adds the keys to repair to the cursor. end reports that a
// repair under way has nothing left to do (no new overflow, the cursor
// empty): it is marked done. Without an overflow it costs an atomic load.
func (q *Queue) RepairStep() (start, end bool) {
	if !q.degraded.Load() {
		return false, false
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	switch {
	case q.overflowed && q.live == 0:
		q.overflowed, q.repairing = false, true
		return true, false
	case q.repairing && !q.overflowed && len(q.replaySet) == 0:
		q.repairing = false
		q.degraded.Store(false)
		return false, true
	}
	return false, false
}

// Clear drops every waiting entry, live, retried and replayed, and
// returns how many live events there were. The overflow is forgotten.
func (q *Queue) Clear() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	n := q.live + q.behind + len(q.retrying)
	clear(q.retrying)
	clear(q.retries)
	q.retries = q.retries[:0]
	q.clearLocked()
	return n
}

// Restart is Clear for an instance restart, whose caller replays the
// whole cache: the objects waiting out a retry keep their entries, which
// now stand for the objects (the instance that was given the events is
// gone), so the replay passes them over until they are due. It returns
// how many live events were dropped.
func (q *Queue) Restart() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	n := q.live + q.behind
	for _, d := range q.retries {
		q.toReplayLocked(d)
	}
	q.clearLocked()
	return n
}

// clearLocked drops live events and the cursor, and forgets the
// overflow.
func (q *Queue) clearLocked() {
	clear(q.ring)
	q.head, q.size, q.live, q.behind = 0, 0, 0, 0
	if q.pending != nil {
		clear(q.pending)
	}
	clear(q.replaySet)
	clear(q.initialLeft)
	q.releaseReplay(false)
	q.overflowed, q.repairing = false, false
	q.degraded.Store(false)
}

// Stats is a snapshot of a queue's counters.
type Stats struct {
	Depth int // live events waiting, retries included
	// Capacity is the cap on live events (delivery.bufferSize): once
	// Depth-Retrying reaches it, each new event drops the oldest.
	Capacity  int
	Replay    int    // keys in the replay cursor
	Retrying  int    // objects waiting out a retry
	Dropped   uint64 // events dropped because the queue was full
	Coalesced uint64 // events merged into a waiting entry (latest mode)
	// Superseded counts events not delivered because the object was
	// waiting out a retry that reads its current state from the store.
	Superseded uint64
	// Degraded is set from an overflow until the repair from the cache
	// that follows it is done.
	Degraded bool
}

// Stats returns the queue's counters.
func (q *Queue) Stats() Stats {
	q.mu.Lock()
	defer q.mu.Unlock()
	return Stats{Depth: q.live + q.behind + len(q.retrying), Capacity: q.cap, Replay: len(q.replaySet), Retrying: len(q.retrying),
		Dropped: q.dropped, Coalesced: q.coalesced, Superseded: q.superseded, Degraded: q.overflowed || q.repairing}
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
func coalesce(d *Entry, n *event.Event) bool {
	w := &d.Event
	d.Env = nil
	switch {
	case w.Type == event.EventAdd && n.Type == event.EventUpdate:
		w.Object = n.Object
	case w.Type == event.EventAdd && n.Type == event.EventDelete:
		return false
	case w.Type == event.EventUpdate && n.Type == event.EventUpdate:
		w.Object = n.Object
	case w.Type == event.EventUpdate && n.Type == event.EventDelete:
		*w = event.Event{Type: event.EventDelete, Resource: n.Resource, Object: n.Object, FinalStateUnknown: n.FinalStateUnknown}
	case w.Type == event.EventDelete && n.Type == event.EventAdd:
		*w = event.Event{Type: event.EventUpdate, Resource: n.Resource, Object: n.Object, OldObject: w.Object}
	default:
		*w = *n
	}
	return true
}
