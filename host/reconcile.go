package host

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"

	"github.com/informer-host/informer-host/abi"
	"github.com/informer-host/informer-host/event"
	"github.com/informer-host/informer-host/host/internal/delivery"
	"github.com/informer-host/informer-host/host/internal/engine"
	"github.com/informer-host/informer-host/host/internal/reconcile"
	"github.com/informer-host/informer-host/informer"
	"github.com/informer-host/informer-host/internal/config"
	"github.com/informer-host/informer-host/internal/controllerwrites"
	"github.com/informer-host/informer-host/internal/shard"
	"github.com/informer-host/informer-host/internal/tracing"
)

// The controller loop (ABI.md §18): a controller-mode generation's way
// into its plugin, instead of the event delivery of deliver.go. Its
// listeners map each event to the primary keys it concerns and add them
// to a keyed workqueue (reconcile.Queue: a key queued once, never handed
// twice at once, handed again if it changed meanwhile); the worker takes
// one key at a time, reads the primary from the for binding's store and
// calls ih_reconcile, then settles the answer, in the order:
//
//	key      owned by this member (sharding)? admitted by the filter?
//	         parked? the finalizer added before the first call
//	call     ih_reconcile, fenced by the generation's stop and the
//	         member's ownership, with a controllerCall serving the
//	         plugin's children, status and requeue-after
//	settle   OK: forget the key's backoff, arm (and persist) its requeue
//	         timer, remove the finalizer of a deleting object, prune
//	         the children of an absent one; RETRY/ERROR: the key's
//	         backoff and parking (convergence); a failed call: the
//	         generation's restart or quarantine, which enqueues every key
//
// The retry state and the shard view are the generation's, shared with
// nothing else: one loop runs per generation.

// reconciler is a controller-mode generation's loop.
type reconciler struct {
	g    *generation
	ctl  *config.Controller
	name string // the plugin's name: the metrics' controller label
	// forL is the listener of the primary resource's binding.
	forL    *bindingListener
	queue   *reconcile.Queue
	metrics *reconcile.Metrics

	// mapMu guards mapper and mapErr: listeners of different bindings
	// map events from their own goroutines. The mapper is built once the
	// primary resource's coordinates are known (its informer resolved).
	mapMu  sync.Mutex
	mapper *reconcile.Mapper
	mapErr error

	// initialMu guards initial: the keys whose next reconcile replays
	// the cache after a (re)start, a reload or a handover (header flag
	// initial list).
	initialMu sync.Mutex
	initial   map[reconcile.Request]struct{}

	// writer is the plugin's controller writes, built by the worker once
	// the resources it writes are resolved; the worker's own.
	writer *controllerwrites.Writer
	// missedLooked is set once the worker has queued the primaries
	// deleted while the plugin was away (missedAbsent), and cleared by a
	// restart's replay: once per instance, so that such a key waiting out
	// a backoff is not queued again past it. The worker's own.
	missedLooked bool
}

// wakeRequest is never a key (an object name is never empty): added to
// wake an idle worker, so it applies a new sharding Assignment.
var wakeRequest = reconcile.Request{}

func newReconciler(g *generation, m *reconcile.Metrics) *reconciler {
	d := g.settings.Delivery
	limiter := workqueue.NewTypedItemExponentialFailureRateLimiter[reconcile.Request](d.RetryBackoff.Duration, d.MaxRetryBackoff.Duration)
	r := &reconciler{g: g, ctl: g.settings.Controller, name: g.slot.name, metrics: m,
		queue: reconcile.NewQueue(g.slot.name, limiter, m), initial: map[reconcile.Request]struct{}{}}
	r.forL = g.byResource[r.ctl.For]
	return r
}

// --- listeners

// offer maps an event of l's binding to the keys it enqueues. It runs
// on client-go's listener goroutine and never blocks.
func (r *reconciler) offer(l *bindingListener, ev *event.Event) {
	start := time.Now()
	defer func() { r.g.slot.obs.filter.Observe(time.Since(start).Seconds()) }()
	initial := ev.IsInInitialList
	ev, ok := l.decide(ev)
	if !ok {
		return
	}
	primary := l == r.forL
	if primary && ev.Type == event.EventUpdate && r.unchanged(ev.OldObject, ev.Object) {
		l.counts.unchanged.Add(1)
		return
	}
	var reqs []reconcile.Request
	if m := r.mapperFor(ev, primary); m != nil {
		mapped, err := m.Map(l.binding, ev)
		if err != nil {
			r.warnLimited("map/"+l.binding, "controller mapping failed", "binding", l.binding, "event", eventString(ev), "err", err)
		}
		reqs = mapped
	} else if primary {
		// Without a mapper the primary's own key is still known.
		reqs = append(reqs, reconcile.Request{Namespace: ev.Object.GetNamespace(), Name: ev.Object.GetName()})
	}
	for _, q := range reqs {
		if q == wakeRequest {
			continue
		}
		if ns := r.g.settings.Namespace; !inReach(ns, q.Namespace) {
			r.warnLimited("confined/"+l.binding, "controller mapping named a primary outside the plugin's namespace; not enqueued",
				"binding", l.binding, "key", q.String(), "namespace", ns)
			continue
		}
		if primary && initial {
			r.markInitial(q)
			r.rearm(q, ev.Object)
		}
		r.queue.Add(q)
	}
}

// unchanged reports whether an update of a primary is none of the
// plugin's business: only the host's own bookkeeping changed (its
// requeue annotation, its finalizer). The mapper decides the rest
// (filter, generationChanged).
func (r *reconciler) unchanged(old, cur *unstructured.Unstructured) bool {
	return old != nil && cur != nil && controllerwrites.OnlyHostMetadataChanged(old, cur, r.name, r.ctl.Finalizer)
}

// mapperFor returns the mapper, building it from the primary's
// coordinates (ev's when it is the primary's event) on first use; nil
// while it cannot be built, the reason logged once.
func (r *reconciler) mapperFor(ev *event.Event, primary bool) *reconcile.Mapper {
	r.mapMu.Lock()
	defer r.mapMu.Unlock()
	if r.mapper != nil || r.mapErr != nil {
		return r.mapper
	}
	var ref *event.ResourceRef
	if primary {
		ref = ev.Resource
	} else if reg := r.forL.registration(); reg != nil {
		ref = reg.Ref()
	}
	if ref == nil {
		return nil // the primary resource is not served yet: no primary to enqueue
	}
	var opts []reconcile.MapperOption
	if !ref.Namespaced {
		opts = append(opts, reconcile.PrimaryClusterScoped())
	}
	m, err := reconcile.NewMapper(r.ctl, ref, opts...)
	if err != nil {
		r.mapErr = err
		r.g.log.Error("controller mapping cannot be built; only the primary's own events enqueue keys", "err", err)
		return nil
	}
	r.mapper = m
	return m
}

func (r *reconciler) warnLimited(key, msg string, attrs ...any) {
	if ok, suppressed := r.g.slot.h.filterErrors.Allow(r.name + "/" + key); ok {
		r.g.log.Warn(msg, append(attrs, "suppressedSinceLast", suppressed)...)
	}
}

func (r *reconciler) markInitial(q reconcile.Request) {
	r.initialMu.Lock()
	r.initial[q] = struct{}{}
	r.initialMu.Unlock()
}

func (r *reconciler) takeInitial(q reconcile.Request) bool {
	r.initialMu.Lock()
	defer r.initialMu.Unlock()
	_, ok := r.initial[q]
	delete(r.initial, q)
	return ok
}

// rearm arms q's requeue timer from the due time persisted on obj: what
// the plugin asked for survives restarts, reloads and handovers.
func (r *reconciler) rearm(q reconcile.Request, obj *unstructured.Unstructured) {
	if obj == nil {
		return
	}
	if due, ok := controllerwrites.RequeueAt(obj, r.name); ok {
		r.queue.AddAfter(q, time.Until(due))
	}
}

// enqueueAll adds every key of the primary's store this member owns, as
// a replay of the cache, with its requeue timer re-armed: a fresh
// instance (a restart) has seen nothing.
func (r *reconciler) enqueueAll() {
	r.missedLooked = false
	reg := r.forL.registration()
	if reg == nil {
		return
	}
	for _, k := range delivery.KeysOf(r.forL.binding, reg.Keys()) {
		if !r.g.shard.owns(k) {
			continue
		}
		q := reconcile.Request{Namespace: k.Namespace, Name: k.Name}
		r.markInitial(q)
		if _, obj, ok := reg.Get(k.StoreKey()); ok {
			r.rearm(q, obj)
		}
		r.queue.Add(q)
	}
}

// handover brings the loop over to a new sharding Assignment: the keys
// this member gains are enqueued (their timers re-armed), the ones it
// loses forgotten; a key already queued that it lost is passed over
// when it comes up. As in movedKeys, an Assignment whose validity ran
// out while in force held everything back: every owned key is enqueued.
func (r *reconciler) handover(old, cur *shard.Assignment) {
	reg := r.forL.registration()
	if reg == nil {
		return
	}
	all := old != nil && !old.Valid(time.Now())
	for _, k := range delivery.KeysOf(r.forL.binding, reg.Keys()) {
		was, is := old.OwnsKey(k.Namespace, k.Name), cur.OwnsKey(k.Namespace, k.Name)
		q := reconcile.Request{Namespace: k.Namespace, Name: k.Name}
		switch {
		case is && (!was || all):
			r.markInitial(q)
			if _, obj, ok := reg.Get(k.StoreKey()); ok {
				r.rearm(q, obj)
			}
			r.queue.Add(q)
		case was && !is:
			r.queue.Forget(q)
			r.g.conv.forget(k)
		}
	}
}

// wake makes an idle worker look at the sharding Assignment.
func (r *reconciler) wake() { r.queue.Add(wakeRequest) }

// --- the worker

// run is the worker's loop in controller mode. It returns the instance
// to close (nil when quarantined or replaced) once the generation stops
// or drains.
func (r *reconciler) run(inst *engine.Instance) *engine.Instance {
	g := r.g
	ended := make(chan struct{})
	defer close(ended)
	go func() {
		// Get blocks: stopping or draining shuts the queue down, which
		// ends it. Draining hands no more keys: a reconcile is of the
		// state, which the next version (or instance) replays anyway.
		select {
		case <-g.stopCh:
		case <-g.drainCh:
		case <-ended:
		}
		r.queue.ShutDown()
	}()
	go r.wakeOnSync(ended)
	r.metrics.SetMaxConcurrentReconciles(r.name, 1)
	for {
		g.shard.apply()
		g.answerQueries()
		r.checkSynced()
		q, ok := r.queue.Get()
		if !ok {
			return inst
		}
		if g.stopping() {
			// A shut-down queue still hands what it holds (that is
			// draining); stopped, nothing more is handed.
			r.queue.Done(q)
			return inst
		}
		if q == wakeRequest {
			r.queue.Forget(q)
			r.queue.Done(q)
			continue
		}
		inst = r.reconcileKey(inst, q)
		if inst == nil {
			return nil
		}
	}
}

// wakeOnSync wakes the worker while the generation is not synced and
// every binding's informer is, looking at syncPoll, less and less often
// up to maxSyncPoll, until the worker has found it synced or ended. The
// worker looks between keys only: an informer that reports its initial
// list handed a moment after the worker took the last key of it, or an
// empty list of a resource served only now, queues nothing that would
// bring the worker back out of Get.
func (r *reconciler) wakeOnSync(ended <-chan struct{}) {
	g := r.g
	t := time.NewTimer(syncPoll)
	defer t.Stop()
	for poll := syncPoll; !g.synced.Load(); poll = min(2*poll, maxSyncPoll) {
		select {
		case <-t.C:
		case <-ended:
			return
		}
		if r.informersSynced() {
			r.wake()
		}
		t.Reset(poll)
	}
}

// informersSynced reports whether every binding's informer has synced
// and handed the listener its initial list.
func (r *reconciler) informersSynced() bool {
	for _, l := range r.g.bindings {
		if reg := l.registration(); reg == nil || !reg.HasSynced() {
			return false
		}
	}
	return true
}

// checkSynced reports the generation synced once every binding's
// informer is and the keys its initial list queued have been handed: the
// queue was empty once since.
func (r *reconciler) checkSynced() {
	g := r.g
	if g.synced.Load() || r.queue.Len() > 0 || !r.informersSynced() {
		return
	}
	if r.missedAbsent() {
		return // the keys it queued are handed before the plugin counts as synced
	}
	g.synced.Store(true)
}

// missedAbsent queues, as absent, the primaries the plugin reconciled
// before (in an earlier instance, version or daemon) that the synced
// store lacks or has with another uid: deleted while the plugin was away,
// so no event will ever name them (RATIONALE.md, "Deletes seen after the
// fact"). Only once the store is synced, or a primary not listed yet
// would be taken for deleted. It reports whether it queued any.
func (r *reconciler) missedAbsent() bool {
	reg := r.forL.registration()
	if reg == nil || r.missedLooked {
		return false
	}
	r.missedLooked = true
	queued := false
	for _, k := range r.g.missed.absent(r.forL.binding, reg.Get) {
		if !r.g.shard.owns(k) {
			continue
		}
		q := reconcile.Request{Namespace: k.Namespace, Name: k.Name}
		r.markInitial(q)
		r.queue.Add(q)
		queued = true
	}
	return queued
}

// keyState is what the worker found for a key in the primary's store.
type keyState struct {
	q     reconcile.Request
	k     delivery.Key
	ref   *event.ResourceRef
	obj   *unstructured.Unstructured // nil: absent
	rv    string
	flags uint8
}

func (s *keyState) deleting() bool { return s.flags&abi.FlagDeleting != 0 }

// reconcileKey hands q to the plugin, if it is to be handed, and settles
// the answer. It returns the instance to use next (nil: quarantined or
// replaced).
func (r *reconciler) reconcileKey(inst *engine.Instance, q reconcile.Request) *engine.Instance {
	g := r.g
	defer r.queue.Done(q)
	st, ok := r.lookup(q)
	if !ok {
		return inst
	}
	if until, parked := g.conv.parkedFor(st.k, st.rv, time.Now()); parked {
		r.queue.AddRetryAfter(q, time.Until(until))
		return inst
	}
	g.conv.handing(st.k, st.rv)
	w := r.writes(st.ref)
	if st.obj != nil && !st.deleting() && r.ctl.Finalizer != "" && !slices.Contains(st.obj.GetFinalizers(), r.ctl.Finalizer) {
		// Before the plugin first acts on the object: a delete from now
		// on waits for its cleanup.
		if err := r.ensureFinalizer(w, st); err != nil {
			g.log.Warn("controller cannot add its finalizer; the key waits out a backoff", "key", q.String(), "err", err)
			r.metrics.ObserveReconcile(r.name, reconcile.ResultError, 0)
			r.queue.AddRateLimited(q)
			return inst
		}
	}
	call := &controllerCall{w: w, key: controllerwrites.Key{Namespace: q.Namespace, Name: q.Name}, primary: st.obj}
	env := engine.NewReconcileEnvelope(st.ref, q.Namespace, q.Name, st.obj)
	start := time.Now()
	idle := r.metrics.WorkerActive(r.name)
	ctx := g.shard.callContext(&st.k)
	var tc tracedCall
	if tr := g.slot.h.tracer; tr != nil {
		ctx, tc = startTraced(ctx, tr, start, tracing.Delivery{Plugin: g.slot.name, Resource: st.k.Resource,
			Namespace: q.Namespace, Name: q.Name, ResourceVersion: st.rv, Type: "reconcile"}, abi.ExportReconcile)
	}
	ctl, recorded := recordReconcile(g.slot.h.recording, g.slot.name, st.ref, q.Namespace, q.Name, st.obj, st.flags, call)
	res, err := inst.Reconcile(ctx, &engine.ReconcileRequest{Env: env, Flags: st.flags, Call: ctl})
	g.shard.callEnded()
	if tc.root != nil {
		tc.end(res, err)
	}
	idle()
	if err != nil && !errors.As(err, new(*engine.Failure)) && (g.stopping() || ctx.Err() != nil) {
		// Stopped, or fenced: not the plugin's failure. A fenced key is
		// decided again, under the Assignment then in force.
		recorded(res, err, true)
		if !g.stopping() {
			r.queue.Add(q)
		}
		return inst
	}
	recorded(res, err, false)
	end := time.Now()
	g.slot.obs.handle.Observe(end.Sub(start).Seconds())
	g.slot.lastEvent.Store(end.UnixNano())
	if o := g.slot.h.observe; o != nil {
		obj := st.obj
		if obj == nil { // absent: the test hook still wants the key
			obj = &unstructured.Unstructured{}
			obj.SetNamespace(q.Namespace)
			obj.SetName(q.Name)
		}
		o(g.slot.name, &event.Event{Type: event.EventType(abi.EventReconcile), Resource: st.ref, Object: obj,
			IsInInitialList: st.flags&abi.FlagInitialList != 0}, res, err)
	}
	return r.settle(inst, st, w, call, res, err, end.Sub(start))
}

// lookup reads q's primary from the store. ok is false when q is not to
// be handed: another member's (sharding), the primary's informer gone or
// not resolved, or an object the controller's filter does not admit.
func (r *reconciler) lookup(q reconcile.Request) (keyState, bool) {
	g := r.g
	st := keyState{q: q, k: delivery.Key{Resource: r.forL.binding, Namespace: q.Namespace, Name: q.Name}}
	if r.takeInitial(q) {
		st.flags |= abi.FlagInitialList
	}
	if !g.shard.owns(st.k) {
		r.queue.Forget(q)
		g.conv.forget(st.k)
		return st, false
	}
	reg := r.forL.registration()
	if reg == nil {
		return st, false
	}
	ref, obj, found := reg.Get(st.k.StoreKey())
	if ref == nil {
		ref = reg.Ref()
	}
	if ref == nil {
		return st, false
	}
	st.ref = ref
	if !found {
		st.flags |= abi.FlagAbsent
		return st, true
	}
	st.obj, st.rv = obj, obj.GetResourceVersion()
	if obj.GetDeletionTimestamp() != nil {
		st.flags |= abi.FlagDeleting
		return st, true // its cleanup is owed whatever the filter says
	}
	if m := r.mapperFor(&event.Event{Resource: ref, Object: obj}, true); m != nil {
		admit, err := m.Admits(obj)
		if err != nil {
			r.warnLimited("filter", "controller filter evaluation failed; the key is reconciled", "key", q.String(), "err", err)
		} else if !admit {
			r.queue.Forget(q)
			g.conv.forget(st.k)
			return st, false
		}
	}
	return st, true
}

func (r *reconciler) ensureFinalizer(w *controllerwrites.Writer, st keyState) error {
	if w == nil {
		return errors.New("the plugin has no writes client (grants.writes with patch on the primary resource)")
	}
	ctx, cancel := r.writeContext()
	defer cancel()
	_, err := w.EnsureFinalizer(ctx, st.obj)
	return err
}

// writeContext is the context of the host's own writes for the plugin,
// outside a call: done when the generation stops.
func (r *reconciler) writeContext() (context.Context, context.CancelFunc) {
	return context.WithCancel(stopContext{r.g.stopCh})
}

// settle acts on the plugin's answer to st's reconcile, or on its failed
// call (err).
func (r *reconciler) settle(inst *engine.Instance, st keyState, w *controllerwrites.Writer, call *controllerCall, res engine.Result, err error, took time.Duration) *engine.Instance {
	g, s := r.g, r.g.slot
	q, k := st.q, st.k
	what := "reconcile " + st.ref.Name + " " + q.String()
	if err != nil {
		r.metrics.ObserveReconcile(r.name, reconcile.ResultError, took)
		var f *engine.Failure
		if errors.As(err, &f) && f.Kind == engine.KindTimeout {
			r.metrics.ObserveTimeout(r.name)
		} else {
			r.metrics.ObservePanic(r.name)
		}
		if parked, until, _ := g.conv.objectFailed(k, what, st.rv, err.Error()); parked {
			r.queue.AddRetryAfter(q, time.Until(until))
		}
		// The restart enqueues every key (replayAll), this one too; a
		// parked one then waits out its backoff (parkedFor).
		return g.failed(inst, what, err)
	}
	s.c.delivered.Add(1)
	answer := ""
	switch res.Code {
	case engine.CodeOK:
		s.c.ok.Add(1)
		g.conv.forget(k)
		r.queue.Forget(q)
		r.settleOK(st, w, call, took)
		return inst
	case engine.CodeDrop:
		s.c.dropped.Add(1)
		g.conv.forget(k)
		r.queue.Forget(q)
		r.metrics.ObserveReconcile(r.name, reconcile.ResultSuccess, took)
		if res.Message != "" {
			r.metrics.ObserveTerminalError(r.name)
			g.log.Debug("plugin dropped a key", "key", what, "message", res.Message)
		}
		return inst
	case engine.CodeRetry:
		r.metrics.ObserveReconcile(r.name, reconcile.ResultRequeue, took)
		answer = "RETRY"
	default: // ERROR, and any code the engine did not know
		s.c.errors.Add(1)
		r.metrics.ObserveReconcile(r.name, reconcile.ResultError, took)
		if g.settings.Delivery.OnError == config.OnErrorSkip {
			g.log.Warn("plugin failed to reconcile a key; skipped (onError: skip)", "key", what, "message", res.Message)
			g.conv.forget(k)
			r.queue.Forget(q)
			return inst
		}
		parked, until, n := g.conv.objectFailed(k, what, st.rv, "ERROR: "+res.Message)
		if n == 1 {
			g.log.Warn("plugin failed to reconcile a key; retrying it with backoff", "key", what, "message", res.Message)
		}
		if parked {
			r.queue.AddRetryAfter(q, time.Until(until))
			return inst
		}
		answer = "ERROR"
	}
	if delay, gaveUp := g.conv.retry(k, what, answer, res.Message); gaveUp {
		r.queue.Forget(q)
	} else {
		r.queue.AddRetryAfter(q, delay)
	}
	return inst
}

// settleOK does what an OK answer leaves to the host: the requeue timer
// (armed and persisted on the primary), the finalizer of a deleting
// primary removed, the children of an absent one pruned. A write that
// fails has the key wait out a backoff and reconciled again.
func (r *reconciler) settleOK(st keyState, w *controllerwrites.Writer, call *controllerCall, took time.Duration) {
	g, q := r.g, st.q
	result := reconcile.ResultSuccess
	var due time.Time
	if call.requeue > 0 {
		due = time.Now().Add(call.requeue)
		r.queue.AddAfter(q, call.requeue)
		result = reconcile.ResultRequeueAfter
	}
	r.metrics.ObserveReconcile(r.name, result, took)
	// What the plugin has reconciled is what a later start compares the
	// store with: an absent key answered OK is forgotten.
	g.missed.reconciled(st.k, st.obj)
	if w == nil {
		return
	}
	ctx, cancel := r.writeContext()
	defer cancel()
	var err error
	switch {
	case st.obj == nil:
		if len(r.ctl.Owns) > 0 {
			var failed []controllerwrites.ChildFailure
			if failed, err = w.PruneAll(ctx, call.key); err == nil && len(failed) > 0 {
				err = fmt.Errorf("%s", childFailures(failed))
			}
		}
		if err == nil && r.ctl.Finalizer != "" {
			err = r.releaseLeft(ctx, w, st)
		}
	case st.deleting() && r.ctl.Finalizer != "" && slices.Contains(st.obj.GetFinalizers(), r.ctl.Finalizer):
		err = w.RemoveFinalizer(ctx, st.obj)
	case !st.deleting():
		// Written only when it changes: an OK without requeue-after
		// clears what an earlier answer asked for.
		if old, had := controllerwrites.RequeueAt(st.obj, r.name); requeueChanged(old, had, due) {
			err = w.PersistRequeue(ctx, st.obj, due)
		}
	}
	if err != nil {
		g.log.Warn("controller's write after the plugin's answer failed; the key waits out a backoff", "key", q.String(), "err", err)
		r.queue.AddRateLimited(q)
	}
}

// releaseLeft takes the managed finalizer off a primary absent from the
// cache that still exists: it left the controller's view (the resource's
// label or field selector no longer admits it), so no reconcile will see
// it again and its delete would hang on the finalizer for ever. Its
// children were just pruned, the cleanup an absent key gets. A primary
// that is gone costs one read answered NotFound.
func (r *reconciler) releaseLeft(ctx context.Context, w *controllerwrites.Writer, st keyState) error {
	live, err := r.g.kw.Dynamic().Resource(st.ref.GroupVersionResource()).Namespace(st.q.Namespace).Get(ctx, st.q.Name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return nil
	case err != nil:
		return fmt.Errorf("read %s %s, absent from the cache, to release its finalizer: %w", st.ref.Name, st.q.String(), err)
	}
	return w.RemoveFinalizer(ctx, live)
}

// requeueChanged reports whether the persisted due time (old, had) must
// be written to become due (zero: none). The annotation holds seconds.
func requeueChanged(old time.Time, had bool, due time.Time) bool {
	switch {
	case due.IsZero():
		return had
	case !had:
		return true
	}
	return old.Sub(due).Abs() >= time.Second
}

// writes returns the plugin's controller writes, nil without a writes
// client or while a resource it writes is not resolved.
func (r *reconciler) writes(primary *event.ResourceRef) *controllerwrites.Writer {
	g := r.g
	if r.writer != nil || g.kw == nil {
		return r.writer
	}
	p := g.slot.h.pipeline
	describe := func(ref *event.ResourceRef) controllerwrites.Resource {
		return controllerwrites.Resource{Name: ref.Name, GVR: ref.GroupVersionResource(), Kind: ref.Kind, Namespaced: ref.Namespaced}
	}
	o := controllerwrites.Options{Plugin: g.slot.name, Writes: g.kw, Client: g.kw.Dynamic(), Finalizer: r.ctl.Finalizer,
		Primary: describe(primary), Owned: ownedLister{p: p, plugin: g.slot.name}}
	for _, name := range r.ctl.Owns {
		ref, ok := p.Ref(name)
		if !ok {
			return nil
		}
		o.Owns = append(o.Owns, describe(ref))
	}
	r.writer = controllerwrites.New(o)
	return r.writer
}

// ownedLister serves the controller writes the children the host applied
// for the plugin, from the owned resources' informer caches: by the
// controller owner index (Indexers), so a reconcile costs its own
// primary's children, not every child of the plugin; by the host's
// bookkeeping label where the informers lack the index (a pipeline built
// without Indexers), which the writes filter by owner themselves.
type ownedLister struct {
	p      *informer.Pipeline
	plugin string
}

func (l ownedLister) ListOwned(resource, owner string) []*unstructured.Unstructured {
	var out []*unstructured.Unstructured
	add := func(u *unstructured.Unstructured) { out = append(out, u) }
	err := l.p.CacheByIndex(resource, config.IndexControllerOwner, owner, add)
	if err == nil {
		return out
	}
	out = out[:0]
	sel := labels.SelectorFromSet(labels.Set{controllerwrites.LabelPlugin: controllerwrites.PluginLabel(l.plugin)})
	l.p.CacheList(resource, "", sel, add)
	return out
}

// Indexers are the index functions the host's controllers read the owned
// resources' caches by: a pipeline the host runs controllers on is built
// with them (informer.Options.Indexers), which config.Resource.Indexes
// then asks for on every resource a controller owns.
func Indexers() cache.Indexers {
	return cache.Indexers{config.IndexControllerOwner: controllerwrites.OwnerIndexFunc}
}

// controllerCall serves one reconcile call's controller functions.
type controllerCall struct {
	w       *controllerwrites.Writer
	key     controllerwrites.Key
	primary *unstructured.Unstructured // nil: absent
	requeue time.Duration
}

var _ engine.ControllerCall = (*controllerCall)(nil)

func (c *controllerCall) RequeueAfter(d time.Duration) { c.requeue = d }

func (c *controllerCall) ApplyChildren(ctx context.Context, body []byte) (failed int32, code int32, msg string) {
	if c.w == nil {
		return 0, abi.ErrDenied, "the plugin has no writes client: children need grants.writes with apply and delete on the owned resources"
	}
	fs, err := c.w.ApplyChildren(ctx, c.key, c.primary, body)
	if err != nil {
		return 0, controllerwrites.Code(err), err.Error()
	}
	return int32(len(fs)), 0, childFailures(fs)
}

func (c *controllerCall) ApplyStatus(ctx context.Context, body []byte) (code int32, msg string) {
	switch {
	case c.primary == nil:
		return abi.ErrAbsent, "the primary is absent: it has no status to write"
	case c.w == nil:
		return abi.ErrDenied, "the plugin has no writes client: status needs grants.writes with apply on the primary resource's status subresource"
	}
	if err := c.w.ApplyStatus(ctx, c.primary, body); err != nil {
		return controllerwrites.Code(err), err.Error()
	}
	return 0, ""
}

// childFailures is result_message's form of failed children: one line
// each, "<kind> <ns>/<name>: <error>".
func childFailures(fs []controllerwrites.ChildFailure) string {
	lines := make([]string, 0, len(fs))
	for _, f := range fs {
		lines = append(lines, fmt.Sprintf("%s %s: %v", f.Kind, cache.NewObjectName(f.Namespace, f.Name), f.Err))
	}
	return strings.Join(lines, "\n")
}

// --- status

// ControllerStatus reports a controller-mode plugin's loop
// (/debug/plugins).
type ControllerStatus struct {
	For   string
	Depth int
	// NextRequeue are the soonest requeue-after timers the plugin asked
	// for (re-armed from the primary's annotation included), at most 32.
	NextRequeue []RequeueDue
	// Retrying are the soonest keys waiting out a backoff (a retry, a
	// failed host write, a parked key), at most 32, with when each is
	// handed again.
	Retrying []RequeueDue
	// Parked counts the keys parked (PluginStatus.Parked lists them).
	Parked int
	// Finalizer is the managed finalizer ("" for none); FinalizerStuck
	// counts the cached objects being deleted that wait on it while the
	// plugin is not running (quarantined: README, "Managed finalizers").
	Finalizer      string
	FinalizerStuck int
}

// RequeueDue is a key's requeue-after timer, or the end of its backoff.
type RequeueDue struct {
	Namespace, Name string
	At              time.Time
}

// maxNextRequeue bounds ControllerStatus.NextRequeue and Retrying.
const maxNextRequeue = 32

func (r *reconciler) status(state PluginState, parked int) *ControllerStatus {
	st := &ControllerStatus{For: r.ctl.For, Depth: r.queue.Len(), Parked: parked, Finalizer: r.ctl.Finalizer}
	if state == StateQuarantined {
		st.FinalizerStuck = stuckOn(r.g.slot.h.pipeline, r.ctl)
	}
	st.NextRequeue = requeueDues(r.queue.Due(maxNextRequeue))
	st.Retrying = requeueDues(r.queue.Retrying(maxNextRequeue))
	return st
}

func requeueDues(ds []reconcile.Due) []RequeueDue {
	var out []RequeueDue
	for _, d := range ds {
		out = append(out, RequeueDue{Namespace: d.Namespace, Name: d.Name, At: d.At})
	}
	return out
}

// stuckOn counts the cached objects of c's primary resource that are
// being deleted and wait on c's finalizer.
func stuckOn(p *informer.Pipeline, c *config.Controller) int {
	if c == nil || c.Finalizer == "" {
		return 0
	}
	n := 0
	p.CacheList(c.For, "", nil, func(u *unstructured.Unstructured) {
		if u.GetDeletionTimestamp() != nil && slices.Contains(u.GetFinalizers(), c.Finalizer) {
			n++
		}
	})
	return n
}

var descFinalizerStuck = prometheus.NewDesc("informer_host_controller_finalizer_stuck",
	"Cached objects being deleted that wait on a controller plugin's managed finalizer while the plugin is not running "+
		"(quarantined, or removed with onRemove: keep and still named in the config).", []string{"plugin", "finalizer"}, nil)

// collectStuckFinalizers reports informer_host_controller_finalizer_stuck
// for every controller plugin with a finalizer: those with a slot from
// their status (0 while running), and modules entries the host has no
// plugin for (removed files) from the caches.
func collectStuckFinalizers(h *Host, st []PluginStatus, ch chan<- prometheus.Metric) {
	have := make(map[string]bool, len(st))
	emitted := map[orphanKey]bool{}
	for _, s := range st {
		have[s.File] = true
		if c := s.Controller; c != nil && c.Finalizer != "" {
			emitted[orphanKey{s.File, c.Finalizer}] = true
			ch <- prometheus.MustNewConstMetric(descFinalizerStuck, prometheus.GaugeValue, float64(c.FinalizerStuck), s.File, c.Finalizer)
		}
	}
	cfg := h.config()
	for _, m := range cfg.Plugins.Modules {
		if have[m.File] {
			continue
		}
		if c := cfg.SettingsFor(m.File).Controller; c != nil && c.Finalizer != "" {
			emitted[orphanKey{m.File, c.Finalizer}] = true
			ch <- prometheus.MustNewConstMetric(descFinalizerStuck, prometheus.GaugeValue, float64(stuckOn(h.pipeline, c)), m.File, c.Finalizer)
		}
	}
	// The finalizers controllers left behind while their plugins stayed
	// (finalizers.go).
	h.orphans.collect(h, emitted, ch)
}

// finalizerRelease returns what releases the managed finalizer of the
// plugin of file name when its controller goes (why: how, for the log)
// with onRemove: release (nil otherwise): its finalizer taken off every
// object of its primary resource, as the plugin's identity. Taken before
// the plugin is unloaded or reloaded, while its generation and writes
// client are there.
func finalizerRelease(h *Host, name, why string) func(ctx context.Context) {
	h.mu.Lock()
	slot := h.slots[name]
	h.mu.Unlock()
	if slot == nil {
		return nil
	}
	slot.mu.Lock()
	g := slot.current
	slot.mu.Unlock()
	if g == nil || g.ctl == nil || g.kw == nil || g.ctl.ctl.Finalizer == "" || g.ctl.ctl.OnRemove != config.OnRemoveRelease {
		return nil
	}
	c, dyn, log := g.ctl.ctl, g.kw.Dynamic(), g.log
	ref, ok := h.pipeline.Ref(c.For)
	if !ok {
		return nil
	}
	var namespaces []string
	for _, r := range h.config().Resources {
		if r.Name == c.For {
			namespaces = r.Namespaces
		}
	}
	if ns := g.settings.Namespace; ns != "" {
		namespaces = []string{ns}
	}
	return func(ctx context.Context) {
		n, err := controllerwrites.Release(ctx, dyn, ref.GroupVersionResource(), c.Finalizer, false, namespaces...)
		if err != nil {
			log.Error(why+" with onRemove: release, but its finalizer could not be released from every object; "+
				"run `informer-host finalizers release` for the rest", "finalizer", c.Finalizer, "released", n, "err", err)
			return
		}
		log.Info(why+" with onRemove: release; its finalizer was released", "finalizer", c.Finalizer, "objects", n)
	}
}
