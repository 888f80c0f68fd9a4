package delivery

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/informer-host/informer-host/event"
)

var testRes = &event.ResourceRef{Name: "cms", Version: "v1", Resource: "configmaps", Kind: "ConfigMap"}

func obj(name, uid, rv string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{}}
	u.SetNamespace("ns")
	u.SetName(name)
	u.SetUID(types.UID(uid))
	u.SetResourceVersion(rv)
	return u
}

func add(name, rv string) *event.Event {
	return &event.Event{Type: event.EventAdd, Resource: testRes, Object: obj(name, "u-"+name, rv)}
}

func update(name, oldRV, newRV string) *event.Event {
	return &event.Event{Type: event.EventUpdate, Resource: testRes, Object: obj(name, "u-"+name, newRV), OldObject: obj(name, "u-"+name, oldRV)}
}

func del(name, rv string) *event.Event {
	return &event.Event{Type: event.EventDelete, Resource: testRes, Object: obj(name, "u-"+name, rv)}
}

// describe renders an entry as "type name old->new".
func describe(d *Entry) string {
	if d.Replay {
		s := "replay " + d.Key.Name
		if d.Initial {
			s += " initial"
		}
		return s
	}
	s := fmt.Sprintf("%s %s %s", d.Event.Type, d.Event.Object.GetName(), d.Event.Object.GetResourceVersion())
	if d.Event.OldObject != nil {
		s = fmt.Sprintf("%s %s %s->%s", d.Event.Type, d.Event.Object.GetName(), d.Event.OldObject.GetResourceVersion(), d.Event.Object.GetResourceVersion())
	}
	if d.Event.IsInInitialList {
		s += " initial"
	}
	return s
}

func drain(q *Queue) []string {
	var out []string
	for {
		d, ok := q.take()
		if !ok {
			return out
		}
		out = append(out, describe(d))
	}
}

func TestDeliveryQueueEveryKeepsOrderAndDropsOldestPastCap(t *testing.T) {
	q := New(Every, 3, nil)
	for _, ev := range []*event.Event{add("a", "1"), update("a", "1", "2"), add("b", "3"), del("a", "4"), add("c", "5")} {
		q.Push(ev, nil)
	}
	got := strings.Join(drain(q), "; ")
	if want := "add b 3; delete a 4; add c 5"; got != want {
		t.Errorf("every, cap 3:\n got %s\nwant %s", got, want)
	}
	if st := q.Stats(); st.Dropped != 2 || st.Depth != 0 {
		t.Errorf("stats %+v; want 2 dropped, none waiting", st)
	}
}

// Capacity is the bound Depth-Retrying is held to, so a dashboard's
// "buffer near full" divides the right two numbers: a full buffer shows
// them equal, and the next event is a drop.
func TestDeliveryQueueStatsCapacityIsTheDropPoint(t *testing.T) {
	q := New(Every, 3, nil)
	for _, ev := range []*event.Event{add("a", "1"), add("b", "2"), add("c", "3")} {
		q.Push(ev, nil)
	}
	if st := q.Stats(); st.Capacity != 3 || st.Depth-st.Retrying != st.Capacity || st.Dropped != 0 {
		t.Fatalf("full, nothing dropped yet: stats %+v", st)
	}
	q.Push(add("d", "4"), nil)
	if st := q.Stats(); st.Depth-st.Retrying != st.Capacity || st.Dropped != 1 {
		t.Errorf("one past full: stats %+v; want depth at capacity and 1 dropped", st)
	}
}

func TestDeliveryQueueLatestCoalesces(t *testing.T) {
	initial := add("a", "1")
	initial.IsInInitialList = true
	tests := []struct {
		name   string
		events []*event.Event
		want   string
	}{
		{"initial add then updates: the replay cursor's key, which absorbs them", []*event.Event{initial, update("a", "1", "2"), update("a", "2", "3")}, "replay a initial"},
		{"add then delete: nothing", []*event.Event{add("a", "1"), update("a", "1", "2"), del("a", "2")}, ""},
		{"updates: first old to newest new", []*event.Event{update("a", "1", "2"), update("a", "2", "3"), update("a", "3", "4")}, "update a 1->4"},
		{"update then delete: delete", []*event.Event{update("a", "1", "2"), del("a", "2")}, "delete a 2"},
		{"delete then add: update from the deleted to the recreated", []*event.Event{del("a", "2"), add("a", "5")}, "update a 2->5"},
		{"objects keep their first position", []*event.Event{add("a", "1"), add("b", "2"), update("a", "1", "3"), add("c", "4"), update("b", "2", "5")},
			"add a 3; add b 5; add c 4"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			q := New(Latest, 100, nil)
			for _, ev := range tc.events {
				q.Push(ev, nil)
			}
			if got := strings.Join(drain(q), "; "); got != tc.want {
				t.Errorf("got  %s\nwant %s", got, tc.want)
			}
		})
	}
}

func TestDeliveryQueueLatestNeverHoldsMoreThanDistinctObjects(t *testing.T) {
	q := New(Latest, 1000, nil)
	for i := 0; i < 10_000; i++ {
		name := fmt.Sprintf("o%d", i%7)
		switch i % 3 {
		case 0:
			q.Push(update(name, fmt.Sprint(i), fmt.Sprint(i+1)), nil)
		case 1:
			q.Push(del(name, fmt.Sprint(i)), nil)
		case 2:
			q.Push(add(name, fmt.Sprint(i)), nil)
		}
		if st := q.Stats(); st.Depth > 7 {
			t.Fatalf("after %d events: %d entries waiting for 7 objects", i+1, st.Depth)
		}
	}
	// Cancelled pairs must not pile up in the ring either.
	q.mu.Lock()
	size := q.size
	q.mu.Unlock()
	if size > 64 {
		t.Errorf("ring holds %d entries (dead included) for 7 objects", size)
	}
}

func TestDeliveryQueuePopWaitsAndStopsWithContext(t *testing.T) {
	q := New(Every, 10, nil)
	got := make(chan string)
	go func() {
		d, ok := q.pop(context.Background())
		if ok {
			got <- describe(d)
		}
	}()
	q.Push(add("a", "1"), nil)
	if s := <-got; s != "add a 1" {
		t.Errorf("pop = %q", s)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, ok := q.pop(ctx); ok {
		t.Error("pop on an empty queue with a cancelled context returned an entry")
	}
}

func TestDeliveryQueueClear(t *testing.T) {
	for _, mode := range []Mode{Every, Latest} {
		q := New(mode, 10, nil)
		q.Push(add("a", "1"), nil)
		q.Push(add("b", "1"), nil)
		if n := q.Clear(); n != 2 {
			t.Errorf("mode %d: Clear = %d, want 2", mode, n)
		}
		q.Push(update("a", "1", "2"), nil)
		if got := strings.Join(drain(q), "; "); got != "update a 1->2" {
			t.Errorf("mode %d: after Clear: %s", mode, got)
		}
	}
}

func initialAdd(name, rv string) *event.Event {
	ev := add(name, rv)
	ev.IsInInitialList = true
	return ev
}

// An initial list larger than the buffer arrives whole: as keys in the
// replay cursor, never dropped, and the binding counts as synced only
// once every key is done.
func TestDeliveryQueueInitialListIsNotCutByTheCap(t *testing.T) {
	for _, mode := range []Mode{Every, Latest} {
		q := New(mode, 10, nil)
		for i := range 2000 {
			q.Push(initialAdd(fmt.Sprintf("o%d", i), "1"), nil)
		}
		if st := q.Stats(); st.Dropped != 0 || st.Replay != 2000 || st.Degraded {
			t.Fatalf("mode %d: stats %+v; want 2000 keys in the cursor, none dropped", mode, st)
		}
		n := 0
		for {
			d, ok := q.take()
			if !ok {
				break
			}
			if !d.Replay || !d.Initial {
				t.Fatalf("mode %d: %s is not an initial replay entry", mode, describe(d))
			}
			if left := q.InitialLeft("cms"); left != 2000-n {
				t.Fatalf("mode %d: %d initial keys left before the plugin handled entry %d, want %d", mode, left, n, 2000-n)
			}
			q.InitialDone(d.Key.Resource)
			n++
		}
		if n != 2000 || q.InitialLeft("cms") != 0 {
			t.Errorf("mode %d: %d replay entries, %d left", mode, n, q.InitialLeft("cms"))
		}
	}
}

// Live events and the cursor: an add or update of a key in the cursor is
// absorbed (the cursor delivers the store's current state), a delete takes
// the key out (and counts as done for the sync) and is delivered; live
// events and the cursor alternate.
func TestDeliveryQueueLiveEventsAndTheReplayCursor(t *testing.T) {
	q := New(Every, 10, nil)
	for _, ev := range []*event.Event{initialAdd("a", "1"), initialAdd("b", "1"), initialAdd("c", "1"),
		update("a", "1", "2"), del("b", "1"), add("x", "3"), add("y", "4")} {
		q.Push(ev, nil)
	}
	if left := q.InitialLeft("cms"); left != 2 {
		t.Errorf("initial keys left: %d, want 2 (b was deleted)", left)
	}
	got := strings.Join(drain(q), "; ")
	if want := "delete b 1; replay a initial; add x 3; replay c initial; add y 4"; got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
}

// A buffer overflow marks the queue degraded; the repair starts only once
// the live events are delivered, and ends when the cursor is empty.
func TestDeliveryQueueOverflowStartsARepairOnceCaughtUp(t *testing.T) {
	q := New(Every, 2, nil)
	for _, ev := range []*event.Event{add("a", "1"), add("b", "2"), add("c", "3")} {
		q.Push(ev, nil)
	}
	if st := q.Stats(); !st.Degraded || st.Dropped != 1 {
		t.Fatalf("stats %+v; want degraded, 1 dropped", st)
	}
	if start, _ := q.RepairStep(); start {
		t.Fatal("repair started with live events waiting")
	}
	drain(q)
	if start, _ := q.RepairStep(); !start {
		t.Fatal("repair did not start once caught up")
	}
	q.AddReplay([]Key{{Resource: "cms", Namespace: "ns", Name: "a"}}, false)
	if _, end := q.RepairStep(); end {
		t.Fatal("repair ended with keys in the cursor")
	}
	if got := strings.Join(drain(q), "; "); got != "replay a" {
		t.Errorf("repair: %s", got)
	}
	if _, end := q.RepairStep(); !end || q.Stats().Degraded {
		t.Errorf("repair did not end: %+v", q.Stats())
	}
}

// A retried entry waits out its backoff while other objects go on. In mode
// every the object's later events wait behind it, in order; in mode latest
// a newer event merges into it.
func TestDeliveryQueueRetryIsPerObject(t *testing.T) {
	now := time.Unix(1000, 0)
	tests := []struct {
		mode  Mode
		after []*event.Event // pushed while a's first event waits
		want  string
	}{
		{Every, []*event.Event{update("a", "1", "2"), add("b", "3"), update("a", "2", "4"), add("c", "5")},
			"add b 3; add c 5 | add a 1; update a 1->2; update a 2->4"},
		{Latest, []*event.Event{update("a", "1", "2"), add("b", "3"), update("a", "2", "4"), add("c", "5")},
			"add b 3; add c 5 | add a 4"},
	}
	for _, tc := range tests {
		q := New(tc.mode, 100, nil)
		q.now = func() time.Time { return now }
		q.Push(add("a", "1"), nil)
		d, _ := q.take()
		if describe(d) != "add a 1" {
			t.Fatalf("mode %d: first take %s", tc.mode, describe(d))
		}
		q.Retry(d, now.Add(time.Second))
		for _, ev := range tc.after {
			q.Push(ev, nil)
		}
		before := drain(q)
		_, wait, ok := q.Next(nil)
		if ok || wait != time.Second {
			t.Errorf("mode %d: nothing should be ready until the retry is due (wait %v, ok %v)", tc.mode, wait, ok)
		}
		now = now.Add(time.Second)
		var after []string
		var prev *Entry
		for {
			d, _, ok := q.Next(prev)
			if !ok {
				break
			}
			after = append(after, describe(d))
			prev = d
		}
		if got := strings.Join(before, "; ") + " | " + strings.Join(after, "; "); got != tc.want {
			t.Errorf("mode %d:\n got %s\nwant %s", tc.mode, got, tc.want)
		}
		if st := q.Stats(); st.Depth != 0 || st.Retrying != 0 {
			t.Errorf("mode %d: left %+v", tc.mode, st)
		}
	}
}

// Retries leave in the order they are due, whatever the order they were
// handed back in, and none before it is due.
func TestDeliveryQueueRetriesLeaveWhenDue(t *testing.T) {
	now := time.Unix(1000, 0)
	q := New(Every, 100, nil)
	q.now = func() time.Time { return now }
	for _, name := range []string{"a", "b", "c", "d"} {
		q.Push(add(name, "1"), nil)
	}
	for _, due := range []int{3, 1, 4, 2} { // a due at +3s, b at +1s, ...
		d, _ := q.take()
		q.Retry(d, now.Add(time.Duration(due)*time.Second))
	}
	var got []string
	for i := 0; i < 4; i++ {
		if _, wait, ok := q.Next(nil); ok || wait != time.Second {
			t.Fatalf("step %d: ok %v, wait %v; want nothing ready for 1s", i, ok, wait)
		}
		now = now.Add(time.Second)
		d, ok := q.take()
		if !ok {
			t.Fatalf("step %d: nothing due", i)
		}
		got = append(got, d.Key.Name)
	}
	if s := strings.Join(got, " "); s != "b d a c" {
		t.Errorf("retries left in order %s, want b d a c", s)
	}
}

// An object both waiting out a retry and in the replay cursor (an
// overflow repair or a sharding change put it there) ends with the
// plugin at the store's current state: the cursor absorbs the live
// update, so the retry, when due, must not hand the older retried event
// but bring the object to the store's state. The same holds for an
// object handed over to another member: the store no longer has it for
// this member, and only an entry that reads the store delivers the
// handed-over delete.
func TestDeliveryQueueRetryInTheCursorReadsTheStore(t *testing.T) {
	for _, mode := range []Mode{Every, Latest} {
		for _, tc := range []struct {
			name  string
			after []*event.Event // pushed once the key is in the cursor
		}{
			{"live update absorbed by the cursor", []*event.Event{update("a", "1", "2")}},
			{"handed over: no live event", nil},
		} {
			t.Run(fmt.Sprintf("mode %d/%s", mode, tc.name), func(t *testing.T) {
				now := time.Unix(1000, 0)
				q := New(mode, 100, nil)
				q.now = func() time.Time { return now }
				q.Push(add("a", "1"), nil)
				d, _ := q.take()
				q.Retry(d, now.Add(time.Second))
				q.AddReplay([]Key{d.Key, {Resource: "cms", Namespace: "ns", Name: "b"}}, false)
				for _, ev := range tc.after {
					q.Push(ev, nil)
				}
				before := strings.Join(drain(q), "; ")
				now = now.Add(time.Second)
				after := strings.Join(drain(q), "; ")
				if before != "replay b" || after != "replay a" {
					t.Errorf("before the retry is due %q, after %q; want %q, then %q (the store's state, not the retried add a 1)",
						before, after, "replay b", "replay a")
				}
			})
		}
	}
}

// A live delete of an object whose retry stands for it (it was in the
// cursor) is delivered: the store no longer has the object.
func TestDeliveryQueueDeleteOfAnObjectRetriedFromTheStore(t *testing.T) {
	for _, mode := range []Mode{Every, Latest} {
		now := time.Unix(1000, 0)
		q := New(mode, 100, nil)
		q.now = func() time.Time { return now }
		q.Push(add("a", "1"), nil)
		d, _ := q.take()
		q.Retry(d, now.Add(time.Second))
		q.AddReplay([]Key{d.Key}, false)
		drain(q) // passes a over: its retry now reads the store
		q.Push(update("a", "1", "2"), nil)
		q.Push(del("a", "3"), nil)
		now = now.Add(time.Second)
		if got := strings.Join(drain(q), "; "); got != "delete a 3" {
			t.Errorf("mode %d: got %q, want the delete", mode, got)
		}
	}
}

// A restart keeps the objects waiting out a retry (or parked) out of
// its replay until they are due, and a parked object changing is due at
// once.
func TestDeliveryQueueRestartSkipsDeferredObjects(t *testing.T) {
	now := time.Unix(1000, 0)
	q := New(Every, 100, nil)
	q.now = func() time.Time { return now }
	q.Push(add("a", "1"), nil)
	q.Push(add("b", "1"), nil)
	d, _ := q.take()
	q.Retry(d, now.Add(time.Minute)) // a backs off
	q.Defer(Key{Resource: "cms", Namespace: "ns", Name: "p"}, now.Add(time.Hour), true)
	if n := q.Restart(); n != 1 {
		t.Errorf("Restart dropped %d live events, want 1 (add b)", n)
	}
	keys := KeysOf("cms", []string{"ns/a", "ns/b", "ns/p"})
	q.AddReplay(keys, true)
	if got := strings.Join(drain(q), "; "); got != "replay b initial" {
		t.Errorf("replay after the restart: %q, want only b", got)
	}
	if left := q.InitialLeft("cms"); left != 1 {
		t.Errorf("initial left %d, want 1: deferred objects hold no sync up", left)
	}
	q.Push(update("p", "1", "2"), nil) // the parked object changes
	select {
	case <-q.ready: // the consumer, asleep until a's retry, is woken
	default:
		t.Error("a parked object's change did not wake the consumer")
	}
	if got := strings.Join(drain(q), "; "); got != "replay p" {
		t.Errorf("after the parked object changed: %q, want it handed from the store", got)
	}
	now = now.Add(time.Minute)
	if got := strings.Join(drain(q), "; "); got != "replay a" {
		t.Errorf("once a's backoff ended: %q", got)
	}
}

// More takes what is ready now, in Next's order, never two entries of one
// object: it stops before the first object already in the batch, which
// stays first in the queue. An object retried out of a batch keeps its
// later events behind it.
func TestDeliveryQueueMoreTakesOnePerObject(t *testing.T) {
	q := New(Every, 100, nil)
	q.Push(add("a", "1"), nil)
	q.Push(add("b", "1"), nil)
	q.Push(update("a", "1", "2"), nil)
	q.Push(add("c", "1"), nil)
	d, _, ok := q.Next(nil)
	if !ok {
		t.Fatal("nothing to take")
	}
	batch := q.More([]*Entry{d}, 64)
	var got []string
	for _, e := range batch {
		got = append(got, describe(e))
	}
	if s := strings.Join(got, ", "); s != "add a 1, add b 1" {
		t.Fatalf("first batch: %s", s)
	}
	// a's add is retried; b is done.
	q.Retry(batch[0], time.Now().Add(time.Hour))
	q.Done(batch[1])
	d, _, ok = q.Next(nil)
	if !ok || describe(d) != "add c 1" {
		t.Fatalf("after the retry: %v %v, want c (a's update waits behind its retry)", ok, d)
	}
	if more := q.More([]*Entry{d}, 64); len(more) != 1 {
		t.Fatalf("More took %d entries, want only c: a's update waits behind a's retry", len(more))
	}
	if st := q.Stats(); st.Retrying != 1 || st.Depth != 2 {
		t.Errorf("stats %+v, want a retrying with its update behind it", st)
	}
	// More caps the batch and leaves the rest.
	q2 := New(Every, 100, nil)
	for i := range 5 {
		q2.Push(add(fmt.Sprint("o", i), "1"), nil)
	}
	d, _, _ = q2.Next(nil)
	if n := len(q2.More([]*Entry{d}, 3)); n != 3 {
		t.Fatalf("More took %d, want the cap 3", n)
	}
	if st := q2.Stats(); st.Depth != 2 {
		t.Errorf("%d left, want 2", st.Depth)
	}
}
