package reconcile

import (
	"cmp"
	"slices"
	"strings"
	"sync"
	"time"

	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"
)

// Queue is a controller plugin's queue of primary keys: client-go's
// rate-limiting workqueue, so a key is queued once however often it is
// added, never handed to two workers at once, and handed out again after
// Done when it was added while being processed.
//
// Requeue-after timers (AddAfter) follow client-go's delaying queue: a key
// has at most one timer, and arming a second one keeps whichever is due
// first. A later timer does not replace a sooner one, so a key whose
// plugin asked for 1m and then for 1h is reconciled after 1m (and may ask
// again then); a sooner one replaces a later one. Backoffs (AddRetryAfter,
// AddRateLimited) share that one timer per key. Queue mirrors the armed
// timers in a map of its own, each marked with what armed it, which Due
// (requeue-after) and Retrying (backoff) read: an entry goes when its key
// is handed out at or after its time.
type Queue struct {
	q       workqueue.TypedRateLimitingInterface[Request]
	limiter workqueue.TypedRateLimiter[Request]
	clock   clock.PassiveClock

	mu     sync.Mutex
	timers map[Request]timer
}

// timer is a key's armed delayed add: retry when a backoff armed it, not
// a requeue-after the plugin asked for.
type timer struct {
	at    time.Time
	retry bool
}

// QueueOption changes how NewQueue builds a Queue.
type QueueOption func(*queueOptions)

type queueOptions struct {
	clock clock.WithTicker
}

// WithClock makes the queue's timers and metrics run on c; tests pass a
// fake clock to fire requeue-after timers without waiting.
func WithClock(c clock.WithTicker) QueueOption {
	return func(o *queueOptions) { o.clock = c }
}

// NewQueue returns the queue of the controller plugin name. A nil limiter
// is client-go's default controller rate limiter; a nil m reports no
// metrics. Call ShutDown when done with it: it ends the queue's
// goroutines.
func NewQueue(name string, limiter workqueue.TypedRateLimiter[Request], m *Metrics, opts ...QueueOption) *Queue {
	o := queueOptions{clock: clock.RealClock{}}
	for _, opt := range opts {
		opt(&o)
	}
	if limiter == nil {
		limiter = workqueue.DefaultTypedControllerRateLimiter[Request]()
	}
	cfg := workqueue.TypedRateLimitingQueueConfig[Request]{Name: name, Clock: o.clock}
	if m != nil {
		cfg.MetricsProvider = m.provider(name)
	}
	return &Queue{
		q:       workqueue.NewTypedRateLimitingQueueWithConfig(limiter, cfg),
		limiter: limiter,
		clock:   o.clock,
		timers:  make(map[Request]timer),
	}
}

// Add queues r unless it is queued already.
func (q *Queue) Add(r Request) { q.q.Add(r) }

// AddAfter queues r once d has passed (at once when d <= 0): a
// requeue-after timer, which Due lists. A sooner timer already armed for
// r wins over this one.
func (q *Queue) AddAfter(r Request, d time.Duration) { q.addAfter(r, d, false) }

// AddRetryAfter is AddAfter for a key waiting out a backoff (a retry, a
// parked key) rather than a requeue the plugin asked for: Retrying lists
// it, Due does not.
func (q *Queue) AddRetryAfter(r Request, d time.Duration) { q.addAfter(r, d, true) }

func (q *Queue) addAfter(r Request, d time.Duration, retry bool) {
	if q.q.ShuttingDown() {
		return
	}
	if d > 0 {
		at := q.clock.Now().Add(d)
		q.mu.Lock()
		// An entry whose time has passed is a timer that fired (or is
		// about to): client-go no longer knows it, so the new one stands.
		if cur, ok := q.timers[r]; !ok || at.Before(cur.at) || !cur.at.After(q.clock.Now()) {
			q.timers[r] = timer{at: at, retry: retry}
		}
		q.mu.Unlock()
	}
	q.q.AddAfter(r, d)
}

// AddRateLimited queues r after its rate limiter's delay (per-key
// exponential backoff with client-go's default limiter), a backoff
// Retrying lists. It is client-go's AddRateLimited, with the delay seen.
func (q *Queue) AddRateLimited(r Request) { q.AddRetryAfter(r, q.limiter.When(r)) }

// Forget clears r's backoff: the next AddRateLimited starts from the
// shortest delay again.
func (q *Queue) Forget(r Request) { q.q.Forget(r) }

// NumRequeues is how many times r was rate-limited since it was last
// forgotten.
func (q *Queue) NumRequeues(r Request) int { return q.q.NumRequeues(r) }

// Get blocks until a key is ready and returns it, marked as being
// processed until Done. It returns false once the queue is shut down.
func (q *Queue) Get() (Request, bool) {
	r, shutdown := q.q.Get()
	if shutdown {
		return Request{}, false
	}
	q.mu.Lock()
	if t, ok := q.timers[r]; ok && !t.at.After(q.clock.Now()) {
		delete(q.timers, r)
	}
	q.mu.Unlock()
	return r, true
}

// Done marks r as processed; if it was added meanwhile, it is queued
// again.
func (q *Queue) Done(r Request) { q.q.Done(r) }

// Len is the number of keys waiting to be handed out (not those being
// processed, nor those waiting on a timer).
func (q *Queue) Len() int { return q.q.Len() }

// ShutDown stops the queue: Get returns false once called, timers and
// the metrics goroutine end. Keys being processed may still be Done.
func (q *Queue) ShutDown() {
	q.q.ShutDown()
	q.mu.Lock()
	clear(q.timers)
	q.mu.Unlock()
}

// ShuttingDown reports whether ShutDown was called.
func (q *Queue) ShuttingDown() bool { return q.q.ShuttingDown() }

// Due returns the armed requeue-after timers, soonest first, at most n
// of them (all when n <= 0). Backoffs (AddRetryAfter, AddRateLimited) are
// not among them: Retrying lists those.
func (q *Queue) Due(n int) []Due { return q.armed(n, false) }

// Retrying returns the keys waiting out a backoff, with the time each is
// added back, soonest first, at most n of them (all when n <= 0).
func (q *Queue) Retrying(n int) []Due { return q.armed(n, true) }

func (q *Queue) armed(n int, retry bool) []Due {
	q.mu.Lock()
	out := make([]Due, 0, len(q.timers))
	for r, t := range q.timers {
		if t.retry == retry {
			out = append(out, Due{Request: r, At: t.at})
		}
	}
	q.mu.Unlock()
	slices.SortFunc(out, func(a, b Due) int {
		return cmp.Or(a.At.Compare(b.At), strings.Compare(a.Namespace, b.Namespace), strings.Compare(a.Name, b.Name))
	})
	if n > 0 && len(out) > n {
		out = out[:n]
	}
	return out
}
