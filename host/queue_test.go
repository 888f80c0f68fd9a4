package host

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
func describe(d *delivery) string {
	if d.replay {
		s := "replay " + d.key.name
		if d.initial {
			s += " initial"
		}
		return s
	}
	s := fmt.Sprintf("%s %s %s", d.ev.Type, d.ev.Object.GetName(), d.ev.Object.GetResourceVersion())
	if d.ev.OldObject != nil {
		s = fmt.Sprintf("%s %s %s->%s", d.ev.Type, d.ev.Object.GetName(), d.ev.OldObject.GetResourceVersion(), d.ev.Object.GetResourceVersion())
	}
	if d.ev.IsInInitialList {
		s += " initial"
	}
	return s
}

func drain(q *DeliveryQueue) []string {
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
	q := NewDeliveryQueue(DeliverEvery, 3)
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
			q := NewDeliveryQueue(DeliverLatest, 100)
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
	q := NewDeliveryQueue(DeliverLatest, 1000)
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
	q := NewDeliveryQueue(DeliverEvery, 10)
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
	for _, mode := range []DeliveryMode{DeliverEvery, DeliverLatest} {
		q := NewDeliveryQueue(mode, 10)
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
	for _, mode := range []DeliveryMode{DeliverEvery, DeliverLatest} {
		q := NewDeliveryQueue(mode, 10)
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
			if !d.replay || !d.initial {
				t.Fatalf("mode %d: %s is not an initial replay entry", mode, describe(d))
			}
			if left := q.InitialLeft("cms"); left != 2000-n {
				t.Fatalf("mode %d: %d initial keys left before the plugin handled entry %d, want %d", mode, left, n, 2000-n)
			}
			q.InitialDone(d.key.resource)
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
	q := NewDeliveryQueue(DeliverEvery, 10)
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
	q := NewDeliveryQueue(DeliverEvery, 2)
	for _, ev := range []*event.Event{add("a", "1"), add("b", "2"), add("c", "3")} {
		q.Push(ev, nil)
	}
	if st := q.Stats(); !st.Degraded || st.Dropped != 1 {
		t.Fatalf("stats %+v; want degraded, 1 dropped", st)
	}
	if start, _ := q.repairStep(); start {
		t.Fatal("repair started with live events waiting")
	}
	drain(q)
	if start, _ := q.repairStep(); !start {
		t.Fatal("repair did not start once caught up")
	}
	q.AddReplay([]objectKey{{resource: "cms", namespace: "ns", name: "a"}}, false)
	if _, end := q.repairStep(); end {
		t.Fatal("repair ended with keys in the cursor")
	}
	if got := strings.Join(drain(q), "; "); got != "replay a" {
		t.Errorf("repair: %s", got)
	}
	if _, end := q.repairStep(); !end || q.Stats().Degraded {
		t.Errorf("repair did not end: %+v", q.Stats())
	}
}

// A retried entry waits out its backoff while other objects go on. In mode
// every the object's later events wait behind it, in order; in mode latest
// a newer event merges into it.
func TestDeliveryQueueRetryIsPerObject(t *testing.T) {
	now := time.Unix(1000, 0)
	tests := []struct {
		mode  DeliveryMode
		after []*event.Event // pushed while a's first event waits
		want  string
	}{
		{DeliverEvery, []*event.Event{update("a", "1", "2"), add("b", "3"), update("a", "2", "4"), add("c", "5")},
			"add b 3; add c 5 | add a 1; update a 1->2; update a 2->4"},
		{DeliverLatest, []*event.Event{update("a", "1", "2"), add("b", "3"), update("a", "2", "4"), add("c", "5")},
			"add b 3; add c 5 | add a 4"},
	}
	for _, tc := range tests {
		q := NewDeliveryQueue(tc.mode, 100)
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
		_, wait, ok := q.next(nil)
		if ok || wait != time.Second {
			t.Errorf("mode %d: nothing should be ready until the retry is due (wait %v, ok %v)", tc.mode, wait, ok)
		}
		now = now.Add(time.Second)
		var after []string
		var prev *delivery
		for {
			d, _, ok := q.next(prev)
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
	q := NewDeliveryQueue(DeliverEvery, 100)
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
		if _, wait, ok := q.next(nil); ok || wait != time.Second {
			t.Fatalf("step %d: ok %v, wait %v; want nothing ready for 1s", i, ok, wait)
		}
		now = now.Add(time.Second)
		d, ok := q.take()
		if !ok {
			t.Fatalf("step %d: nothing due", i)
		}
		got = append(got, d.key.name)
	}
	if s := strings.Join(got, " "); s != "b d a c" {
		t.Errorf("retries left in order %s, want b d a c", s)
	}
}

// The worker never takes a plugin back to an older state of an object:
// live events are checked against what the plugin was last given.
func TestPrepareNeverGoesBackwards(t *testing.T) {
	k := objectKey{resource: "cms", namespace: "ns", name: "a"}
	recreated := add("a", "9")
	recreated.Object.SetUID("u-other")
	tests := []struct {
		name string
		seen string // resourceVersion the plugin has; "" if it has nothing
		ev   *event.Event
		want string // what is delivered, "" for nothing
	}{
		{"newer add", "5", add("a", "6"), "add a 6"},
		{"repeat of the state it has", "5", add("a", "5"), "add a 5"},
		{"older add", "5", add("a", "4"), ""},
		{"older update", "5", update("a", "3", "4"), ""},
		{"resync", "5", update("a", "5", "5"), "update a 5->5"},
		{"update of an object it lacks", "", update("a", "3", "4"), "add a 4"},
		{"delete of an object it lacks", "", del("a", "4"), ""},
		{"add of the object recreated", "5", recreated, "add a 9"},
		{"delete", "5", del("a", "5"), "delete a 5"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			g := &generation{seen: map[objectKey]*seenObject{}}
			l := &bindingListener{g: g, binding: "cms", add: true, update: true, delete: true}
			g.byResource = map[string]*bindingListener{"cms": l}
			if tc.seen != "" {
				g.seen[k] = &seenObject{res: testRes, obj: obj("a", "u-a", tc.seen), rv: tc.seen}
			}
			ev, _, _, v := g.eventFor(&delivery{ev: *tc.ev, key: k})
			got := ""
			if v == hand {
				got = describe(&delivery{ev: *ev})
			}
			if got != tc.want {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
	// A delete of an older incarnation than the one the plugin has.
	g := &generation{seen: map[objectKey]*seenObject{k: {res: testRes, obj: recreated.Object, rv: "9"}}}
	g.byResource = map[string]*bindingListener{"cms": {g: g, binding: "cms", add: true, delete: true}}
	if _, _, _, v := g.eventFor(&delivery{ev: *del("a", "5"), key: k}); v == hand {
		t.Error("a delete of the object's previous incarnation was delivered")
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
	for _, mode := range []DeliveryMode{DeliverEvery, DeliverLatest} {
		for _, tc := range []struct {
			name  string
			after []*event.Event // pushed once the key is in the cursor
		}{
			{"live update absorbed by the cursor", []*event.Event{update("a", "1", "2")}},
			{"handed over: no live event", nil},
		} {
			t.Run(fmt.Sprintf("mode %d/%s", mode, tc.name), func(t *testing.T) {
				now := time.Unix(1000, 0)
				q := NewDeliveryQueue(mode, 100)
				q.now = func() time.Time { return now }
				q.Push(add("a", "1"), nil)
				d, _ := q.take()
				q.Retry(d, now.Add(time.Second))
				q.AddReplay([]objectKey{d.key, {resource: "cms", namespace: "ns", name: "b"}}, false)
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
	for _, mode := range []DeliveryMode{DeliverEvery, DeliverLatest} {
		now := time.Unix(1000, 0)
		q := NewDeliveryQueue(mode, 100)
		q.now = func() time.Time { return now }
		q.Push(add("a", "1"), nil)
		d, _ := q.take()
		q.Retry(d, now.Add(time.Second))
		q.AddReplay([]objectKey{d.key}, false)
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
	q := NewDeliveryQueue(DeliverEvery, 100)
	q.now = func() time.Time { return now }
	q.Push(add("a", "1"), nil)
	q.Push(add("b", "1"), nil)
	d, _ := q.take()
	q.Retry(d, now.Add(time.Minute)) // a backs off
	q.Defer(objectKey{resource: "cms", namespace: "ns", name: "p"}, now.Add(time.Hour), true)
	if n := q.Restart(); n != 1 {
		t.Errorf("Restart dropped %d live events, want 1 (add b)", n)
	}
	keys := keysOf("cms", []string{"ns/a", "ns/b", "ns/p"})
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
