package host

import (
	"errors"
	"reflect"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/resourceversion"

	"github.com/informer-host/informer-host/abi"
	"github.com/informer-host/informer-host/event"
	"github.com/informer-host/informer-host/host/internal/delivery"
	"github.com/informer-host/informer-host/host/internal/engine"
	"github.com/informer-host/informer-host/internal/config"
	"github.com/informer-host/informer-host/internal/kubewrite"
	"github.com/informer-host/informer-host/internal/tracing"
)

// One entry's way from the queue into the plugin and back, in the order
// the worker takes it:
//
//	prepare  what to hand, if anything: the binding, the store's state for
//	         a replay entry, the plugin's view (never backwards), this
//	         member's ownership (sharding), the self-write flag, the
//	         envelope, the object's failure state (a parked object is
//	         handed again)
//	call     the plugin's ih_handle, fenced by the generation's stop and
//	         the member's ownership
//	settle   the answer: the view moves on, or the object waits out a
//	         retry, is parked, is given up on; a failed call restarts or
//	         quarantines the instance; the counters
//
// Everything here runs on the generation's worker, and so reads and
// writes the worker's own fields (seen, applied, syncDue) unguarded.

// verdict is what prepare decided for an entry.
type verdict int

const (
	// hand: the plugin is called.
	hand verdict = iota
	// passOver: nothing to hand. A replay entry found the plugin's view
	// and the store agreeing, the object gone, or filtered out; a live
	// event was older than what the plugin has, or of a binding the
	// generation does not have.
	passOver
	// notOwned: the object is another member's (sharding).
	notOwned
	// droppedSelfNoop: a no-op update the plugin's own write caused
	// (dropSelfNoop); its view moves on without a call.
	droppedSelfNoop
)

// handing is what prepare found for an entry to hand, and what the call
// and its settling need of it.
type handing struct {
	ev *event.Event
	// seen is the plugin's view of the object, the zero one if it has none.
	seen seenObject
	// built: prepare built ev from the store (a replay entry), so ev is
	// no event other plugins were handed and the envelope is this
	// plugin's own.
	built bool
	env   *engine.Envelope
	flags uint8  // the header flags of ev for this plugin (self-write)
	rv    string // ev's object's resourceVersion
	start time.Time
	// fenced: the member stopped owning the object while the call was
	// under way, and the call's network waits were canceled (sharding).
	fenced bool
}

// deliver hands d to the plugin once. A RETRY answer, or an ERROR one
// (unless delivery.onError is skip), hands d back to the queue to wait
// out the object's backoff while other objects go on; only an explicit
// delivery.maxRetries gives up on it. A failed call, or too many ERROR
// answers, for one object parks it. On a failure it restarts the
// instance (after a backoff) or quarantines the plugin. It returns the
// instance to use next (nil when quarantined or replaced) and whether d
// goes back to the queue as done (false when the queue was cleared or d
// waits out a retry).
func (g *generation) deliver(inst *engine.Instance, d *delivery.Entry) (*engine.Instance, bool) {
	h, v := g.prepare(d)
	switch v {
	case passOver, notOwned:
		g.passedOver(d, v)
		return inst, true
	case droppedSelfNoop:
		g.byResource[d.Key.Resource].counts.unchanged.Add(1)
		g.record(d.Key, h.ev, h.seen)
		return inst, true
	}
	return g.handOne(inst, d, &h)
}

// handOne calls the plugin with h, prepared for d, and settles its answer.
func (g *generation) handOne(inst *engine.Instance, d *delivery.Entry, h *handing) (*engine.Instance, bool) {
	res, cut, err := g.call(inst, d, h)
	if cut {
		// Stopped, or fenced just before the call: not the plugin's
		// failure, and the plugin was handed nothing.
		if g.stopping() {
			return inst, false
		}
		// Fenced: the object goes back to the cursor, which hands its
		// state under whatever Assignment is current when it comes up.
		// Dropping the entry would lose the change if the object came
		// back to this member before the worker applied the Assignment
		// that took it away (both views own it: it never moved).
		g.queue.AddReplay([]delivery.Key{d.Key}, d.Initial)
		g.initialDone(d)
		return inst, true
	}
	return g.settle(inst, d, h, res, err)
}

// batching reports whether the worker may hand inst several waiting
// events in one ih_handle_batch call (ABI.md §5). Not under sharding: the
// fence that cancels a call's network waits when this member loses the
// call's object is one object per call.
func (g *generation) batching(inst *engine.Instance) bool {
	return !g.shard.sharded() && inst.CanBatch()
}

// deliverBatch hands the entries of batch (taken by Queue.More, at most
// one per object) to the plugin: each is prepared as deliver prepares
// one; those to hand, if two or more, go in one ih_handle_batch call, and
// each is settled on its own, in order, as if it had been handed alone.
// Every entry is handed back to the queue (Done) or kept by it (a retry,
// a restart's clear). It returns the instance to use next.
//
// A failed call fails the event being handled: the ones the plugin
// settled before it are settled first, then that event is settled as a
// failed ih_handle call would be (the object's failure, the restart),
// and the entries after it go with the queue the restart clears (the
// fresh instance's replay of the cache hands their objects). Entries the
// plugin returned without settling are handed again at once, each alone.
func (g *generation) deliverBatch(inst *engine.Instance, batch []*delivery.Entry) *engine.Instance {
	ents, hs := g.batchEnts[:0], g.batchHands[:0]
	for _, d := range batch {
		h, v := g.prepare(d)
		switch v {
		case passOver, notOwned:
			g.passedOver(d, v)
			g.queue.Done(d)
			continue
		case droppedSelfNoop:
			g.byResource[d.Key.Resource].counts.unchanged.Add(1)
			g.record(d.Key, h.ev, h.seen)
			g.queue.Done(d)
			continue
		}
		ents, hs = append(ents, d), append(hs, h)
	}
	defer func() {
		clear(ents)
		clear(hs)
		g.batchEnts, g.batchHands = ents[:0], hs[:0]
	}()
	if len(ents) < 2 {
		for k, d := range ents {
			var keep bool
			if inst, keep = g.handOne(inst, d, &hs[k]); keep {
				g.queue.Done(d)
			}
			if inst == nil {
				return nil
			}
		}
		return inst
	}
	items := g.batchItems[:0]
	for k := range hs {
		items = append(items, engine.BatchItem{Env: hs[k].env, Flags: hs[k].flags})
	}
	g.batchItems = items
	ctx := g.shard.callContext(nil)
	var tb tracedBatch
	if tr := g.slot.h.tracer; tr != nil {
		ctx, tb = startTracedBatch(ctx, tr, g.slot.name, ents, hs)
	}
	results, err := inst.HandleBatch(ctx, items, g.batchResults)
	g.shard.callEnded()
	if tb.call != nil {
		tb.end(results, err)
	}
	clear(items)
	var failure *engine.Failure
	if err != nil && !errors.As(err, &failure) && (g.stopping() || ctx.Err() != nil) {
		// Stopped just before the call: nothing was handled.
		g.unrecorded(false)
		if !g.stopping() {
			for _, d := range ents {
				g.queue.Done(d)
			}
		}
		return inst
	}
	for k, res := range results {
		g.handled(&hs[k], res, nil)
		var keep bool
		if inst, keep = g.settle(inst, ents[k], &hs[k], res, nil); keep {
			g.queue.Done(ents[k])
		}
	}
	g.batchResults = results[:0]
	m := len(results)
	if err != nil {
		if m < len(ents) {
			for _, d := range ents[m+1:] {
				d.DropBehind() // the restart clears the queue, and these with it
			}
			g.handled(&hs[m], engine.Result{}, err)
			inst, _ = g.settle(inst, ents[m], &hs[m], engine.Result{}, err)
			return inst
		}
		return g.failed(inst, engine.BatchExport, err)
	}
	for k := m; k < len(ents); k++ {
		// Not handled: handed again, alone, before anything else.
		var keep bool
		if inst, keep = g.handOne(inst, ents[k], &hs[k]); keep {
			g.queue.Done(ents[k])
		}
		if inst == nil {
			for _, d := range ents[k+1:] {
				d.DropBehind()
			}
			return nil
		}
	}
	return inst
}

// --- prepare

// prepare decides what d hands the plugin, and readies the call.
func (g *generation) prepare(d *delivery.Entry) (handing, verdict) {
	ev, seen, built, v := g.eventFor(d)
	h := handing{ev: ev, seen: seen, built: built}
	if v != hand {
		return h, v
	}
	g.shard.delivering(g.slot.name, ev)
	h.env = d.Env
	if built || h.env == nil {
		// Plugins replaying one store at once share its envelopes.
		h.env = g.slot.h.envelopes.get(ev)
	}
	h.start = time.Now()
	if d.Attempts == 0 {
		g.slot.obs.wait.Observe(h.start.Sub(d.Enqueued).Seconds())
	}
	// Only a live change can be the plugin's own write: an event built
	// from the store (an initial list, a replay, a repair, a handover)
	// is the state, whoever wrote it last.
	flags, drop := g.selfFlags(ev, !built && !d.Replay && !d.FromStore)
	if drop {
		return h, droppedSelfNoop
	}
	h.flags = flags | g.missed.flags(ev, seen)
	h.rv = rvOf(h.env, ev.Object)
	g.conv.handing(d.Key, h.rv)
	return h, hand
}

// eventFor returns the event to deliver for d, or the verdict that there
// is none. A replay entry becomes the difference between what the plugin
// has seen of the object and the store's current state, through the
// binding's filter (built is then set). A live event is checked against
// what the plugin has seen: one that would take it back to an older
// state (still in flight when the store was replayed) is not delivered,
// an update of an object it has not seen arrives as an add, and a delete
// of one it does not have is not delivered (for bindings that take adds:
// the others keep no view to check against). An unsettled object
// (seenObject.unsettled) is the plugin's for a delete and not for the
// rest: its next state arrives as an add.
func (g *generation) eventFor(d *delivery.Entry) (ev *event.Event, seen seenObject, built bool, v verdict) {
	l := g.byResource[d.Key.Resource]
	if l == nil {
		return nil, seen, false, passOver
	}
	seen = g.seen.get(d.Key)
	have, settled := seen.has(), seen.settled()
	if d.Replay {
		reg := l.registration()
		if reg == nil {
			return nil, seen, false, passOver
		}
		ref, obj, found := reg.Get(d.Key.StoreKey())
		found, handed := g.shard.handedOver(d.Key, found)
		if e, s, ok := g.missed.replayed(g, d.Key, ref, obj, found, handed, seen); ok {
			return e, s, true, hand
		}
		var e event.Event
		switch {
		case found && !settled:
			e = event.Event{Type: event.EventAdd, Resource: ref, Object: obj, IsInInitialList: d.Initial}
		case found:
			if delivery.ResourceVersion(obj) == seen.rv() {
				return nil, seen, false, passOver
			}
			e = event.Event{Type: event.EventUpdate, Resource: ref, Object: obj, OldObject: seen.obj}
		case have:
			e = event.Event{Type: event.EventDelete, Resource: seen.res, Object: seen.obj, FinalStateUnknown: !handed, HandedOver: handed}
		default:
			return nil, seen, false, passOver
		}
		if e.Resource == nil {
			return nil, seen, false, passOver
		}
		out, ok := l.decide(&e)
		if !ok {
			return out, seen, true, passOver
		}
		return out, seen, true, hand
	}
	ev = &d.Event
	if g.shard.foreign(ev, d.Key, have) {
		return nil, seen, false, notOwned
	}
	switch ev.Type {
	case event.EventAdd:
		if settled && older(ev.Object, rvOf(d.Env, ev.Object), seen) {
			return nil, seen, false, passOver
		}
	case event.EventUpdate:
		switch {
		case ev.OldObject != nil && delivery.ResourceVersion(ev.OldObject) == delivery.ResourceVersion(ev.Object):
			// A resync the binding asked for: same version on purpose.
		case !settled && l.add:
			// Sharded, the object entered this member's view from the
			// cache (it moved here), as an initial list's objects do.
			return &event.Event{Type: event.EventAdd, Resource: ev.Resource, Object: ev.Object,
				IsInInitialList: g.shard.applied != nil}, seen, true, hand
		case settled && older(ev.Object, rvOf(d.Env, ev.Object), seen):
			return nil, seen, false, passOver
		}
	case event.EventDelete:
		if l.add && (!have || seen.obj.GetUID() != ev.Object.GetUID()) {
			return nil, seen, false, passOver
		}
	}
	return ev, seen, false, hand
}

// older reports whether a, at resourceVersion rv, is an earlier version
// of the object than the one the plugin has, b. It
// says false when it cannot tell (resourceVersions that are not integers)
// and for the same version: a repeat of the state the plugin has is
// delivered (as client-go repeats one on a relist), only a step back is
// not.
func older(a *unstructured.Unstructured, rv string, b seenObject) bool {
	if a == b.obj {
		return false
	}
	brv := b.rv()
	if rv == brv {
		return false
	}
	c, err := resourceversion.CompareResourceVersion(rv, brv)
	return err == nil && c < 0
}

// rvOf is o's resourceVersion, read from env when env was built from o:
// the envelope looked it up once for every plugin.
func rvOf(env *engine.Envelope, o *unstructured.Unstructured) string {
	if env != nil && env.Event().Object == o {
		return env.ResourceVersion()
	}
	return delivery.ResourceVersion(o)
}

// selfFlags returns the header flags of ev for this plugin alone
// (abi.FlagSelfWrite when ev is a live change to a state the plugin's own
// write returned), and whether the binding drops it as a no-op
// self-update. live is false for an event the host built from the store
// (an initial list, a restart's or a repair's replay, a handover): it
// says what the object is, not what the plugin just did, and a new
// version or a fresh instance that skipped it would never look at the
// object.
func (g *generation) selfFlags(ev *event.Event, live bool) (flags uint8, drop bool) {
	if !live || g.kw == nil || ev.Resource == nil || ev.Object == nil || ev.Type == event.EventDelete {
		return 0, false
	}
	o := ev.Object
	key := kubewrite.ObjectKey(ev.Resource.Group, ev.Resource.Resource, o.GetNamespace(), o.GetName())
	if !g.slot.selfWrites().Match(key, o.GetResourceVersion()) {
		return 0, false
	}
	if ev.Type == event.EventUpdate && ev.OldObject != nil && g.dropsSelfNoop(ev.Resource.Name) && selfNoop(ev.OldObject, o) {
		return abi.FlagSelfWrite, true
	}
	return abi.FlagSelfWrite, false
}

func (g *generation) dropsSelfNoop(resource string) bool {
	for _, b := range g.settings.Bindings {
		if b.Resource == resource {
			return b.DropSelfNoop
		}
	}
	return false
}

// selfNoop reports whether old and new differ in nothing a plugin sees
// but metadata.resourceVersion and metadata.managedFields: the write
// changed only bookkeeping (an apply that took over fields with the
// values they had). Called only for self-writes, so the copies are rare.
func selfNoop(old, cur *unstructured.Unstructured) bool {
	strip := func(u *unstructured.Unstructured) map[string]any {
		c := u.DeepCopy()
		unstructured.RemoveNestedField(c.Object, "metadata", "resourceVersion")
		unstructured.RemoveNestedField(c.Object, "metadata", "managedFields")
		return c.Object
	}
	return reflect.DeepEqual(strip(old), strip(cur))
}

// --- call

// call hands h to the plugin. cut reports a call the generation's stop,
// or the member's loss of the object, cut short before the plugin could
// act: not the plugin's failure, and nothing to settle.
func (g *generation) call(inst *engine.Instance, d *delivery.Entry, h *handing) (res engine.Result, cut bool, err error) {
	ctx := g.shard.callContext(&d.Key)
	var tc tracedCall
	if tr := g.slot.h.tracer; tr != nil {
		ctx, tc = startTraced(ctx, tr, d.Enqueued, tracing.Delivery{Plugin: g.slot.name, Resource: d.Key.Resource,
			Namespace: d.Key.Namespace, Name: d.Key.Name, ResourceVersion: h.rv, Type: h.ev.Type.String()}, abi.ExportHandle)
	}
	res, err = inst.HandleWith(ctx, h.env, h.flags)
	g.shard.callEnded()
	if tc.root != nil {
		tc.end(res, err)
	}
	if err != nil && (g.stopping() || ctx.Err() != nil) && !errors.As(err, new(*engine.Failure)) {
		g.unrecorded(false)
		return res, true, err
	}
	// A fence cancels the context for good: canceled now and not
	// stopping, the member lost the object during the call.
	h.fenced = ctx.Err() != nil && !g.stopping()
	g.handled(h, res, err)
	return res, false, err
}

// handled records the plugin's answer to h (or its failed call, err):
// the timing, the test hook, the recording.
func (g *generation) handled(h *handing, res engine.Result, err error) {
	s := g.slot
	end := time.Now() // one clock read for both
	s.obs.handle.Observe(end.Sub(h.start).Seconds())
	s.lastEvent.Store(end.UnixNano())
	if s.h.observe != nil {
		s.h.observe(s.name, h.env.Event(), res, err)
	}
	if s.h.recording != nil {
		s.h.recording.handled(s.name, h.env.Event(), h.flags, res, err)
	}
}

// unrecorded tells the recording of a call it is not told of otherwise
// (replayed: ih_init, which the replay makes too), whose writes then
// precede the next recorded event.
func (g *generation) unrecorded(replayed bool) {
	if s := g.slot; s.h.recording != nil {
		s.h.recording.unrecorded(s.name, replayed)
	}
}

// stopping reports whether the generation has been told to stop.
func (g *generation) stopping() bool {
	select {
	case <-g.stopCh:
		return true
	default:
		return false
	}
}

// --- settle

// holdUnsettled notes, for a call its member's loss of the object fenced
// and the plugin answered RETRY or ERROR, that the plugin may hold the
// state h handed although it did not take it: its request may have
// landed before the cancel. Without this the host would count the
// object as never handed (the answer was not OK), and the replay that
// follows the move would pass it over instead of handing the plugin the
// handed-over delete that tells it to let go: two members' plugins would
// hold the object for good. A state the plugin took stays its view: the
// handed-over delete carries that one.
func (g *generation) holdUnsettled(k delivery.Key, h *handing) {
	ev := h.ev
	if ev.Type == event.EventDelete || h.seen.settled() {
		return
	}
	g.seen.setUnsettled(k, ev.Resource, ev.Object, h.seen)
}

// passedOver settles an entry prepare handed nothing for. A failure or
// park the object had is moot when the store has nothing to hand for it
// (gone, filtered out, another member's), and would otherwise stay
// listed for good (a binding without deletes never sees it go). A live
// event passed over (older than what the plugin has) says nothing of the
// object's state.
func (g *generation) passedOver(d *delivery.Entry, v verdict) {
	if d.Replay || d.FromStore {
		g.conv.forget(d.Key)
	}
	if d.Initial {
		g.queue.InitialDone(d.Key.Resource)
		g.syncDue = true
	}
	if !d.Replay && v != notOwned {
		g.slot.c.superseded.Add(1)
	}
}

// settle acts on the plugin's answer to h, or on its failed call (err).
// A RETRY or an ERROR answer hands d back to the queue to wait out its
// object's backoff, unless the object was given up on.
func (g *generation) settle(inst *engine.Instance, d *delivery.Entry, h *handing, res engine.Result, err error) (*engine.Instance, bool) {
	s := g.slot
	ev := h.ev
	if err != nil {
		d.DropBehind() // the restart clears the queue, and these with it
		if parked, until, _ := g.conv.objectFailed(d.Key, eventString(ev), h.rv, err.Error()); parked {
			g.queue.Defer(d.Key, until, true)
		}
		return g.failed(inst, eventString(ev), err), false
	}
	s.c.delivered.Add(1)
	if h.fenced && (res.Code == engine.CodeRetry || res.Code == engine.CodeError) {
		g.holdUnsettled(d.Key, h)
	}
	answer := ""
	switch res.Code {
	case engine.CodeOK:
		s.c.ok.Add(1)
	case engine.CodeDrop:
		s.c.dropped.Add(1)
		g.log.Debug("plugin dropped an event", "event", eventString(ev), "message", res.Message)
	case engine.CodeError:
		s.c.errors.Add(1)
		if g.settings.Delivery.OnError == config.OnErrorSkip {
			g.log.Warn("plugin failed to handle an event; skipped (onError: skip)", "event", eventString(ev), "message", res.Message)
			break
		}
		parked, until, n := g.conv.objectFailed(d.Key, eventString(ev), h.rv, "ERROR: "+res.Message)
		if n == 1 {
			g.log.Warn("plugin failed to handle an event; retrying it with backoff", "event", eventString(ev), "message", res.Message)
		} else {
			g.log.Debug("plugin's handling of an object failed again", "event", eventString(ev), "failures", n, "message", res.Message)
		}
		if parked {
			g.queue.Defer(d.Key, until, true)
			g.initialDone(d)
			return inst, true // the queue holds the parked object
		}
		answer = "ERROR"
	case engine.CodeRetry:
		answer = "RETRY"
	}
	if answer == "" {
		g.conv.forget(d.Key)
		g.record(d.Key, ev, h.seen)
		g.initialDone(d)
		return inst, true
	}
	delay, gaveUp := g.conv.retry(d.Key, eventString(ev), answer, res.Message)
	if gaveUp {
		g.record(d.Key, ev, h.seen)
		g.initialDone(d)
		return inst, true
	}
	d.Attempts++
	if h.built || d.Replay {
		// What waits is the event the plugin was given.
		d.Event, d.Replay, d.FromStore = *h.ev, false, true
	}
	d.Env = h.env
	// The plugin has been handed the initial list's object: its binding's
	// sync waits for no retry, which may take long.
	g.initialDone(d)
	g.queue.Retry(d, time.Now().Add(delay))
	return inst, false
}

// initialDone records that d, if part of an initial list, was handed.
func (g *generation) initialDone(d *delivery.Entry) {
	if d.Initial {
		g.queue.InitialDone(d.Key.Resource)
		d.Initial = false
		g.syncDue = true
	}
}

// record notes ev as the plugin's view of its object; seen is the
// object's entry (view.go), the zero one if it has none.
func (g *generation) record(k delivery.Key, ev *event.Event, seen seenObject) {
	g.missed.settled(g, k, ev, seen)
	switch {
	case ev.Type == event.EventDelete:
		if seen.has() {
			g.seen.delete(k, seen)
		}
	default:
		if seen.obj != ev.Object || seen.unsettled {
			g.seen.set(k, ev.Resource, ev.Object, seen)
		}
	}
}
