package reconcile

import (
	"testing"
	"time"

	"go.uber.org/goleak"
	"k8s.io/client-go/util/workqueue"
	clocktesting "k8s.io/utils/clock/testing"
)

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func newTestQueue(t *testing.T, opts ...QueueOption) *Queue {
	t.Helper()
	q := NewQueue("test", nil, nil, opts...)
	t.Cleanup(q.ShutDown)
	return q
}

// eventually polls cond until it holds, failing the test after a generous
// deadline; step, when set, runs between polls (advancing a fake clock).
func eventually(t *testing.T, what string, cond func() bool, step func()) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		if step != nil {
			step()
		}
		time.Sleep(time.Millisecond)
	}
}

// advance sets fc to at and waits until the queue holds want keys. The
// queue's timer loop arms its timer asynchronously, possibly relative to a
// clock reading taken just before a step, so the clock creeps on by a
// millisecond per poll until the timer fires.
func advance(t *testing.T, fc *clocktesting.FakeClock, q *Queue, at time.Time, want int) {
	t.Helper()
	fc.SetTime(at)
	eventually(t, "the queue to hold the keys due", func() bool { return q.Len() == want },
		func() { fc.Step(time.Millisecond) })
}

// settle waits until the queue's timer loop has taken in every AddAfter
// made so far: client-go hands timers to that loop through a channel, and
// one it reads only after the clock moved past its time is queued at once
// rather than compared with the key's armed timer. A marker sent last
// arrives last.
func settle(t *testing.T, fc *clocktesting.FakeClock, q *Queue) {
	t.Helper()
	marker := Request{Namespace: "\x00settle", Name: "marker"}
	before := q.Len()
	q.AddAfter(marker, time.Nanosecond)
	advance(t, fc, q, fc.Now().Add(time.Nanosecond), before+1)
	for range before + 1 {
		r := mustGet(t, q)
		q.Done(r)
		if r != marker {
			q.Add(r) // put back what was queued before
		}
	}
}

func mustGet(t *testing.T, q *Queue) Request {
	t.Helper()
	r, ok := q.Get()
	if !ok {
		t.Fatal("Get: queue shut down")
	}
	return r
}

func TestQueueAddsAKeyOnce(t *testing.T) {
	q := newTestQueue(t)
	a := Request{Namespace: "ns", Name: "a"}
	for range 3 {
		q.Add(a)
	}
	q.Add(Request{Name: "b"})
	if got := q.Len(); got != 2 {
		t.Fatalf("Len after adding a three times and b once = %d, want 2", got)
	}
	if got := mustGet(t, q); got != a {
		t.Fatalf("first Get = %v, want %v (first added first)", got, a)
	}
}

func TestQueueKeyAddedWhileProcessingIsHandedOutOnceMoreAfterDone(t *testing.T) {
	q := newTestQueue(t)
	a := Request{Namespace: "ns", Name: "a"}
	q.Add(a)
	got := mustGet(t, q)
	q.Add(a)
	q.Add(a)
	// Not available to a second worker while the first holds it.
	if n := q.Len(); n != 0 {
		t.Fatalf("Len while a is processed and added again = %d, want 0", n)
	}
	q.Done(got)
	if n := q.Len(); n != 1 {
		t.Fatalf("Len after Done of a key added meanwhile = %d, want 1 (once, however often it was added)", n)
	}
	q.Done(mustGet(t, q))
	if n := q.Len(); n != 0 {
		t.Fatalf("Len after the second round = %d, want 0", n)
	}
}

func TestQueueAddAfterKeepsTheSoonestTimer(t *testing.T) {
	fc := clocktesting.NewFakeClock(t0)
	q := newTestQueue(t, WithClock(fc))
	r := Request{Namespace: "ns", Name: "r"}

	q.AddAfter(r, 10*time.Second)
	q.AddAfter(r, time.Hour) // later: the 10s timer stands
	if due := q.Due(0); len(due) != 1 || due[0].At != t0.Add(10*time.Second) {
		t.Fatalf("Due after 10s then 1h = %v, want r at +10s", due)
	}
	q.AddAfter(r, 5*time.Second) // sooner: replaces it
	if due := q.Due(0); len(due) != 1 || due[0].At != t0.Add(5*time.Second) {
		t.Fatalf("Due after 10s, 1h, 5s = %v, want r at +5s", due)
	}
	settle(t, fc, q)
	if n := q.Len(); n != 0 {
		t.Fatalf("Len before any timer is due = %d, want 0", n)
	}

	advance(t, fc, q, t0.Add(5*time.Second), 1)
	q.Done(mustGet(t, q))
	if due := q.Due(0); len(due) != 0 {
		t.Fatalf("Due after r was handed out at its time = %v, want none", due)
	}

	// A sentinel due after every timer r ever had: when it arrives, a
	// timer of r still armed would have fired with it.
	s := Request{Namespace: "ns", Name: "sentinel"}
	sentinelAt := fc.Now().Add(2 * time.Hour)
	q.AddAfter(s, 2*time.Hour)
	settle(t, fc, q)
	advance(t, fc, q, sentinelAt, 1)
	if got := mustGet(t, q); got != s {
		t.Fatalf("after 2h the queue handed out %v, want only the sentinel: r's replaced timers must not fire", got)
	}
}

func TestQueueDueListsTheSoonestN(t *testing.T) {
	fc := clocktesting.NewFakeClock(t0)
	q := newTestQueue(t, WithClock(fc))
	for i, d := range []time.Duration{30 * time.Second, 10 * time.Second, 20 * time.Second, time.Minute} {
		q.AddAfter(Request{Namespace: "ns", Name: string(rune('a' + i))}, d)
	}
	q.AddAfter(Request{Name: "now"}, 0) // no timer: queued at once
	want := []Due{
		{Request{Namespace: "ns", Name: "b"}, t0.Add(10 * time.Second)},
		{Request{Namespace: "ns", Name: "c"}, t0.Add(20 * time.Second)},
	}
	got := q.Due(2)
	if len(got) != len(want) {
		t.Fatalf("Due(2) = %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("Due(2) = %v, want %v", got, want)
		}
	}
	if n := len(q.Due(0)); n != 4 {
		t.Fatalf("len(Due(0)) = %d, want the 4 armed timers", n)
	}

	// b fires; handing it out clears its entry, the others stay.
	q.Done(mustGet(t, q)) // "now"
	settle(t, fc, q)
	advance(t, fc, q, t0.Add(10*time.Second), 1)
	if got := mustGet(t, q); got.Name != "b" {
		t.Fatalf("Get at +10s = %v, want b", got)
	}
	if due := q.Due(0); len(due) != 3 || due[0].Name != "c" {
		t.Fatalf("Due after b was handed out = %v, want c, a, d", due)
	}
	q.ShutDown()
	if due := q.Due(0); len(due) != 0 {
		t.Fatalf("Due after ShutDown = %v, want none: the timers are gone", due)
	}
}

func TestQueueRateLimitedBackoffAndForget(t *testing.T) {
	fc := clocktesting.NewFakeClock(t0)
	limiter := workqueue.NewTypedItemExponentialFailureRateLimiter[Request](time.Second, time.Minute)
	q := NewQueue("test", limiter, nil, WithClock(fc))
	t.Cleanup(q.ShutDown)
	r := Request{Namespace: "ns", Name: "r"}

	q.AddRateLimited(r) // 1s
	q.AddRateLimited(r) // 2s; the 1s timer stands
	if n := q.NumRequeues(r); n != 2 {
		t.Fatalf("NumRequeues after two failures = %d, want 2", n)
	}
	if due := q.Due(0); len(due) != 0 {
		t.Fatalf("Due = %v, want none: backoff delays are not requeue-after timers", due)
	}
	if got := q.Retrying(0); len(got) != 1 || got[0].Request != r || got[0].At != t0.Add(time.Second) {
		t.Fatalf("Retrying = %v, want r at +1s", got)
	}
	settle(t, fc, q)
	advance(t, fc, q, t0.Add(time.Second), 1)
	q.Done(mustGet(t, q))
	q.Forget(r)
	if n := q.NumRequeues(r); n != 0 {
		t.Fatalf("NumRequeues after Forget = %d, want 0", n)
	}
}

// A key waiting out a backoff is listed by Retrying, not by Due; a key
// has one timer, so a sooner backoff takes the place of a requeue-after
// timer and the other way round.
func TestQueueRetryingIsApartFromDue(t *testing.T) {
	fc := clocktesting.NewFakeClock(t0)
	q := newTestQueue(t, WithClock(fc))
	a, b := Request{Namespace: "ns", Name: "a"}, Request{Namespace: "ns", Name: "b"}
	q.AddAfter(a, time.Minute)
	q.AddRetryAfter(b, time.Hour)
	if due := q.Due(0); len(due) != 1 || due[0].Request != a {
		t.Fatalf("Due = %v, want only a", due)
	}
	if got := q.Retrying(0); len(got) != 1 || got[0].Request != b || got[0].At != t0.Add(time.Hour) {
		t.Fatalf("Retrying = %v, want only b at +1h", got)
	}
	q.AddRetryAfter(a, time.Second) // sooner: a now waits out a backoff
	q.AddAfter(b, time.Second)      // sooner: b now waits on a requeue-after
	if due := q.Due(0); len(due) != 1 || due[0].Request != b {
		t.Fatalf("Due after the swap = %v, want only b", due)
	}
	if got := q.Retrying(0); len(got) != 1 || got[0].Request != a {
		t.Fatalf("Retrying after the swap = %v, want only a", got)
	}
	settle(t, fc, q)
	advance(t, fc, q, t0.Add(time.Second), 2)
	q.Done(mustGet(t, q))
	q.Done(mustGet(t, q))
	if due, got := q.Due(0), q.Retrying(0); len(due)+len(got) != 0 {
		t.Fatalf("after both were handed out: Due %v, Retrying %v, want none", due, got)
	}
}

func TestQueueShutDownEndsGetAndGoroutines(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	m := NewMetrics() // with metrics, the queue runs one more goroutine
	q := NewQueue("test", nil, m)
	q.AddAfter(Request{Name: "later"}, time.Hour)
	got := make(chan bool)
	go func() {
		_, ok := q.Get()
		got <- ok
	}()
	q.ShutDown()
	if ok := <-got; ok {
		t.Fatal("a Get blocked on an empty queue returned a key after ShutDown, want false")
	}
	if _, ok := q.Get(); ok {
		t.Fatal("Get after ShutDown returned a key, want false")
	}
	q.AddAfter(Request{Name: "x"}, time.Second) // must neither block nor arm
	if due := q.Due(0); len(due) != 0 {
		t.Fatalf("Due after ShutDown = %v, want none", due)
	}
}
