package host

import (
	"log/slog"
	"sort"
	"sync"
	"time"

	"golang.org/x/time/rate"
	"k8s.io/client-go/util/workqueue"

	"github.com/informer-host/informer-host/host/internal/delivery"
	"github.com/informer-host/informer-host/internal/config"
)

// convergence is a generation's per-object retry state, as client-go's
// workqueue keeps it for a controller: a rate limiter keyed by object
// (When, Forget, NumRequeues) and the failure counts that park a poison
// object. It lives on the generation, not the instance: a restart keeps
// it (the object that made the instance fail is still known), a reload
// starts it over (new code deserves a try).
type convergence struct {
	log        *slog.Logger
	c          *counters // the slot's: retries and objects given up
	maxRetries int       // config.UnlimitedRetries: never give up
	parkAfter  int       // 0: never park
	stable     time.Duration

	// limiter is per object ItemExponentialFailure (retryBackoff doubling
	// to maxRetryBackoff) under an overall token bucket (10 per second,
	// burst 100), client-go's DefaultControllerRateLimiter with the
	// plugin's bounds. It is safe for concurrent use; only the worker
	// calls it.
	limiter workqueue.TypedRateLimiter[delivery.Key]
	// known holds the keys limiter or objects may have state for, so
	// that an object that never failed costs a success no locks. The
	// worker's own.
	known map[delivery.Key]struct{}

	// mu guards objects and gaveUp: the worker writes, Status reads.
	mu sync.Mutex
	// objects holds the failures of each object that failed and has not
	// succeeded, changed or been given up since.
	objects map[delivery.Key]*objectFailure
	// gaveUp holds the objects given up on last (maxRetries exhausted),
	// at most maxGaveUp, oldest first.
	gaveUp []ObjectFailure
}

// objectFailure is what a generation knows of an object's failures.
type objectFailure struct {
	count   int
	lastErr string
	rv      string // the resourceVersion that failed: another one is a change
	parked  bool
	until   time.Time // when a parked object is handed again
}

// ObjectFailure reports an object that failed (/debug/plugins).
type ObjectFailure struct {
	Resource  string
	Namespace string
	Name      string
	// Failures counts the calls handling the object that failed (traps,
	// deadline kills, memory failures, ERROR answers) since it last
	// succeeded or changed.
	Failures  int
	LastError string
	// Until is when a parked object is handed to the plugin again unless
	// it changes first; At when an object was given up on.
	Until time.Time
	At    time.Time
}

// maxGaveUp bounds the list of given-up objects Status reports; the
// counter (retryExhausted) counts them all.
const maxGaveUp = 32

func newConvergence(log *slog.Logger, c *counters, d config.Delivery, l config.Limits) *convergence {
	return &convergence{
		log: log, c: c,
		maxRetries: d.MaxRetries, parkAfter: l.ParkAfter, stable: l.StablePeriod.Duration,
		limiter: workqueue.NewTypedMaxOfRateLimiter(
			workqueue.NewTypedItemExponentialFailureRateLimiter[delivery.Key](d.RetryBackoff.Duration, d.MaxRetryBackoff.Duration),
			&workqueue.TypedBucketRateLimiter[delivery.Key]{Limiter: rate.NewLimiter(rate.Limit(10), 100)},
		),
		known:   map[delivery.Key]struct{}{},
		objects: map[delivery.Key]*objectFailure{},
	}
}

// retryAfter returns how long k waits before it is handed again, or
// giveUp when maxRetries is set and k has been retried that often: its
// state is then forgotten, as a controller calls Forget on an object it
// drops.
func (c *convergence) retryAfter(k delivery.Key) (delay time.Duration, giveUp bool) {
	c.known[k] = struct{}{}
	if c.maxRetries != config.UnlimitedRetries && c.limiter.NumRequeues(k) >= c.maxRetries {
		return 0, true
	}
	return c.limiter.When(k), false
}

// handing is called before k, at resourceVersion rv, is handed to the
// plugin. A parked object is parked no more (it changed, or its backoff
// ended); one that changed since it failed starts a fresh count.
func (c *convergence) handing(k delivery.Key, rv string) {
	if _, ok := c.known[k]; !ok {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	f := c.objects[k]
	if f == nil {
		return
	}
	f.parked = false
	if f.rv != rv {
		delete(c.objects, k)
	}
}

// parkedFor reports whether k, at resourceVersion rv, is parked at now,
// and until when: the controller loop, handed a key by a related
// object's event, does not hand a parked primary that has not changed.
func (c *convergence) parkedFor(k delivery.Key, rv string, now time.Time) (until time.Time, parked bool) {
	if _, ok := c.known[k]; !ok {
		return time.Time{}, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	f := c.objects[k]
	if f == nil || !f.parked || f.rv != rv || !now.Before(f.until) {
		return time.Time{}, false
	}
	return f.until, true
}

// failed counts a failed call handling k at resourceVersion rv and
// reports whether k is now parked, and until when. A parked object waits
// out its per-object backoff, but at least the stable period: when it is
// handed again and fails again, the plugin's failure streak has ended in
// between, so one poison object never adds up to a quarantine.
func (c *convergence) failed(k delivery.Key, rv, msg string, now time.Time) (parked bool, until time.Time, n int) {
	c.known[k] = struct{}{}
	c.mu.Lock()
	defer c.mu.Unlock()
	f := c.objects[k]
	if f == nil || f.rv != rv {
		f = &objectFailure{rv: rv}
		c.objects[k] = f
	}
	f.count++
	f.lastErr = msg
	if c.parkAfter == 0 || f.count < c.parkAfter {
		return false, time.Time{}, f.count
	}
	f.parked = true
	f.until = now.Add(max(c.limiter.When(k), c.stable))
	return true, f.until, f.count
}

// forget ends k's retries: it succeeded, or the plugin gave up on it.
func (c *convergence) forget(k delivery.Key) {
	if _, ok := c.known[k]; !ok {
		return
	}
	delete(c.known, k)
	c.limiter.Forget(k)
	c.mu.Lock()
	delete(c.objects, k)
	c.mu.Unlock()
}

// giveUp forgets k and lists it as given up on.
func (c *convergence) giveUp(k delivery.Key, msg string, now time.Time) {
	c.mu.Lock()
	n := c.limiter.NumRequeues(k)
	if f := c.objects[k]; f != nil {
		n = max(n, f.count)
	}
	if len(c.gaveUp) == maxGaveUp {
		c.gaveUp = append(c.gaveUp[:0], c.gaveUp[1:]...)
	}
	c.gaveUp = append(c.gaveUp, ObjectFailure{Resource: k.Resource, Namespace: k.Namespace, Name: k.Name,
		Failures: n, LastError: msg, At: now})
	c.mu.Unlock()
	c.forget(k)
}

// report returns the parked objects, sorted, and the given-up ones.
func (c *convergence) report() (parked, gaveUp []ObjectFailure) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for k, f := range c.objects {
		if f.parked {
			parked = append(parked, ObjectFailure{Resource: k.Resource, Namespace: k.Namespace, Name: k.Name,
				Failures: f.count, LastError: f.lastErr, Until: f.until})
		}
	}
	sort.Slice(parked, func(i, j int) bool {
		a, b := parked[i], parked[j]
		if a.Resource != b.Resource {
			return a.Resource < b.Resource
		}
		if a.Namespace != b.Namespace {
			return a.Namespace < b.Namespace
		}
		return a.Name < b.Name
	})
	return parked, append([]ObjectFailure(nil), c.gaveUp...)
}

// retry decides when k is tried again after a RETRY or ERROR answer
// (answer, with the plugin's message msg; what names the call): after
// delay, or never, when delivery.maxRetries says so: k is then given up
// on, counted, listed in the status and logged.
func (c *convergence) retry(k delivery.Key, what, answer, msg string) (delay time.Duration, gaveUp bool) {
	delay, giveUp := c.retryAfter(k)
	if giveUp {
		c.c.retryExhausted.Add(1)
		c.giveUp(k, answer+": "+msg, time.Now())
		c.log.Warn("plugin's handling of an object failed delivery.maxRetries times; gave up on it until it changes",
			"event", what, "answer", answer, "maxRetries", c.maxRetries, "message", msg)
		return 0, true
	}
	c.c.retries.Add(1)
	return delay, false
}

// objectFailed counts a failed call handling the object k (what names
// the call) and reports whether it parked the object, until when, and
// its count of failures. Parking is logged once, with the failure; the
// caller holds the object back until it changes or its backoff ends.
func (c *convergence) objectFailed(k delivery.Key, what, rv, msg string) (parked bool, until time.Time, n int) {
	parked, until, n = c.failed(k, rv, msg, time.Now())
	if parked {
		c.log.Warn("object parked: handling it failed too often; it is not handed to the plugin again until it changes or its backoff ends",
			"event", what, "failures", n, "until", until, "lastError", msg)
	}
	return parked, until, n
}
