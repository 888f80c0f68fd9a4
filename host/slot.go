package host

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/informer-host/informer-host/event"
	"github.com/informer-host/informer-host/host/internal/delivery"
	"github.com/informer-host/informer-host/host/internal/engine"
	"github.com/informer-host/informer-host/informer"
	"github.com/informer-host/informer-host/internal/config"
	"github.com/informer-host/informer-host/internal/filter"
	"github.com/informer-host/informer-host/internal/kubewrite"
	"github.com/informer-host/informer-host/internal/shard"
)

// PluginState is where a plugin stands.
type PluginState string

const (
	StateLoading     PluginState = "loading"     // first version compiling or starting
	StateRunning     PluginState = "running"     // an instance handles events
	StateRestarting  PluginState = "restarting"  // the instance failed; a fresh one starts after a backoff
	StateQuarantined PluginState = "quarantined" // failed too often in a row; stays off until its file changes
	StateFailed      PluginState = "failed"      // no version could be loaded; waits for a new file
	StateStopped     PluginState = "stopped"     // removed or host stopped
)

// Counters are a plugin's lifetime counts. They survive restarts and
// reloads.
type Counters struct {
	Delivered      uint64 // ih_handle calls that returned a result
	OK             uint64
	Retries        uint64 // deliveries repeated because the plugin said retry, or error (onError: retry)
	RetryExhausted uint64 // objects given up on after an explicit delivery.maxRetries
	Dropped        uint64 // the plugin said drop
	Errors         uint64 // the plugin said error
	Traps          uint64
	Timeouts       uint64
	MemoryFailures uint64
	ABIFailures    uint64
	Restarts       uint64 // fresh instances after a failure
	Superseded     uint64 // events not delivered: replaced by a cache replay on restart, or older than what the plugin has
	Reloads        uint64 // new versions swapped in
	ReloadFailures uint64 // new versions refused; the old one kept running
}

// counters is Counters with atomic fields, bumped by the worker and read
// by Status.
type counters struct {
	delivered, ok, retries, retryExhausted, dropped, errors    atomic.Uint64
	traps, timeouts, memory, abiFailures, restarts, superseded atomic.Uint64
	reloads, reloadFailures                                    atomic.Uint64
}

func (c *counters) snapshot() Counters {
	return Counters{
		Delivered: c.delivered.Load(), OK: c.ok.Load(), Retries: c.retries.Load(),
		RetryExhausted: c.retryExhausted.Load(), Dropped: c.dropped.Load(), Errors: c.errors.Load(),
		Traps: c.traps.Load(), Timeouts: c.timeouts.Load(), MemoryFailures: c.memory.Load(),
		ABIFailures: c.abiFailures.Load(), Restarts: c.restarts.Load(), Superseded: c.superseded.Load(),
		Reloads: c.reloads.Load(), ReloadFailures: c.reloadFailures.Load(),
	}
}

// PluginSlot is the host's place for one plugin file. It outlives every
// instance and every version of the module: its counters and its identity
// stay while instances are restarted and versions are swapped.
//
// Each loaded version runs as a generation: the compiled module, one
// instance, one delivery.Queue, one informer listener per binding and one
// worker goroutine. At most one generation is current; during a reload the
// new one is registered before the old one is stopped, so every change
// reaches one of them.
//
// Lock order: see the package's doc (doc.go).
type PluginSlot struct {
	name string // file base name, e.g. "pod-logger.wasm"
	h    *Host
	log  *slog.Logger
	c    counters
	obs  slotObservers
	// lastEvent is when the last ih_handle call ended (unix ns; 0: none),
	// for Status. Written by the worker, read by Status.
	lastEvent atomic.Int64

	// mu guards the fields below; it comes after Host.mu and a
	// generation's regsMu, before the queue's lock. Only the current
	// generation changes state, lastErr and failures: a generation's
	// worker checks, under mu, that it is still current before it does,
	// so a version being retired cannot overwrite what its replacement
	// reported.
	mu      sync.Mutex
	state   PluginState
	current *generation
	sha256  string // of the current generation's module
	lastErr string
	// counts holds each binding's filter counters, by resource name.
	counts map[string]*bindingCounts
	// refusedSHA is the content last refused, so the same broken bytes are
	// not compiled (and reported) again on every look at the directory.
	refusedSHA string
	// failures counts the current generation's failures since it was
	// last stable (limits.stablePeriod without a failure), lastFailure
	// when the last one was: as a container's CrashLoopBackOff, the
	// streak is ended by time without failure, not by a success in
	// between, so a plugin that fails on one object among many
	// successes still backs off and is still quarantined.
	failures    int
	lastFailure time.Time
	loadedAt    time.Time // when the current generation was swapped in

	// self records the plugin's successful writes (writes.go), made once
	// by selfOnce; it is safe for concurrent use itself.
	selfOnce sync.Once
	self     *kubewrite.SelfWrites
}

// bindingCounts returns the filter counters of the binding to resource.
func (s *PluginSlot) bindingCounts(resource string) *bindingCounts {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.counts == nil {
		s.counts = map[string]*bindingCounts{}
	}
	c := s.counts[resource]
	if c == nil {
		c = &bindingCounts{}
		s.counts[resource] = c
	}
	return c
}

// generation is one loaded version of a plugin.
type generation struct {
	slot     *PluginSlot
	log      *slog.Logger // the slot's, with this version's sha256 prefix
	module   *engine.Module
	settings config.PluginSettings
	config   []byte
	queue    *delivery.Queue
	// conv is the per-object retry and failure state (converge.go).
	conv *convergence
	// ctl is the controller loop of a controller-mode generation
	// (reconcile.go), nil in event mode; set by newGeneration.
	ctl *reconciler
	// batch, batchEnts, batchHands, batchItems and batchResults are the
	// worker's reused buffers for a batch (deliverBatch), empty between
	// batches.
	batch, batchEnts []*delivery.Entry
	batchHands       []handing
	batchItems       []engine.BatchItem
	batchResults     []engine.Result

	// bindings are the generation's listeners, one per binding, in the
	// configuration's order; byResource indexes them. Both are set by
	// newGeneration and never change.
	bindings   []*bindingListener
	byResource map[string]*bindingListener

	// regsMu guards each binding's reg and closed; it comes after
	// Host.mu, before PluginSlot.mu, and is held while register calls
	// into the pipeline. register sets them, Stop or a reload removes them, the worker and
	// Status read them; once closed is set, register adds nothing.
	regsMu sync.Mutex
	closed bool

	// The worker's own, unguarded:
	//
	// seen holds, per object, the last state the current instance was
	// given (an add or update it answered other than RETRY), and loses the
	// object with its delete. It is the plugin's view of the cache: an
	// overflow repair delivers the difference between it and the store,
	// and a live event older than what the plugin has (an event still in
	// flight when the store was replayed) is not delivered. Bounded by the
	// number of objects the plugin's bindings match; the keys are the
	// Host's, shared by every generation (view.go). An object whose
	// first state reached the plugin only in a call its member fenced is
	// held unsettled (seenObject.unsettled): the plugin may have acted on
	// it, so it is the plugin's for a delete, not for the next state.
	seen *cacheView
	// missed remembers, across restarts, the keys the plugin has, and
	// hands it the deletes it missed (missed.go); nil when it opted out.
	missed *missedDeletes
	// reported holds the bindings whose ih_synced the current instance
	// has had since its initial list (or the last repair) began.
	reported map[string]bool
	// kw is the plugin's writes client (writes.go), built with the first
	// instance and shared by its restarts.
	kw *kubewrite.Writer
	// syncDue says the bindings' sync may have changed (an initial-list
	// entry handled, a replay started, the worker woke idle): housekeeping
	// looks only then, so a live event costs no lookups.
	syncDue bool

	// shard is the worker's view of the host's sharding (shard.go), the
	// worker's own.
	shard *shardView
	// queries are Host.Object's questions about one object, answered by
	// the worker between two calls (answerQueries).
	queries chan objectQuery

	// synced is set by the worker once every binding is reported, and
	// cleared when a restart or repair starts over; Status reads it.
	synced atomic.Bool
	// repairs counts overflow repairs started.
	repairs atomic.Uint64

	stopOnce  sync.Once
	stopCh    chan struct{} // closed to stop the worker after its current event
	drainOnce sync.Once
	drainCh   chan struct{} // closed to let the worker finish the queue, then stop
	abandoned atomic.Bool   // Host.Stop gave up waiting for the worker
	done      chan struct{} // closed when the worker has returned
}

// bindingListener feeds one binding's events into a generation's queue,
// through the binding's filter. It runs on client-go's listener goroutine
// and never blocks.
type bindingListener struct {
	g                   *generation
	binding             string // the resource name
	add, update, delete bool
	filter              *filter.Filter
	counts              *bindingCounts
	reg                 *informer.Registration // guarded by g.regsMu
}

// bindingCounts are the events a binding's filter kept from the plugin,
// by reason. Shared by the generations of a slot, so they survive reloads.
type bindingCounts struct {
	filtered, unchanged, resync, generation, errors, evalErrors atomic.Uint64
}

// OnAdd queues an add. An add of an initial list is queued as its key
// only: the worker delivers the object's state from the store when it gets
// to it, so an initial list of any size arrives whole however small the
// buffer is.
func (l *bindingListener) OnAdd(res *event.ResourceRef, obj *unstructured.Unstructured, isInInitialList bool) {
	if !objectInReach(l.g.settings.Namespace, obj) {
		return
	}
	if r := l.g.ctl; r != nil {
		r.offer(l, &event.Event{Type: event.EventAdd, Resource: res, Object: obj, IsInInitialList: isInInitialList})
		return
	}
	if isInInitialList {
		l.g.queue.PushAt(&event.Event{Type: event.EventAdd, Resource: res, Object: obj, IsInInitialList: true}, nil, time.Now())
		return
	}
	l.offer(&event.Event{Type: event.EventAdd, Resource: res, Object: obj})
}

func (l *bindingListener) OnUpdate(res *event.ResourceRef, oldObj, newObj *unstructured.Unstructured) {
	if !objectInReach(l.g.settings.Namespace, newObj) {
		return
	}
	l.offer(&event.Event{Type: event.EventUpdate, Resource: res, Object: newObj, OldObject: oldObj})
}

func (l *bindingListener) OnDelete(res *event.ResourceRef, obj *unstructured.Unstructured, finalStateUnknown bool) {
	if !objectInReach(l.g.settings.Namespace, obj) {
		return
	}
	l.offer(&event.Event{Type: event.EventDelete, Resource: res, Object: obj, FinalStateUnknown: finalStateUnknown})
}

// offer filters ev and queues what is left; a controller's listener
// hands it to the controller loop instead.
func (l *bindingListener) offer(ev *event.Event) {
	if r := l.g.ctl; r != nil {
		r.offer(l, ev)
		return
	}
	start := time.Now()
	ev, ok := l.decide(ev)
	now := time.Now() // also the event's arrival in the queue
	l.g.slot.obs.filter.Observe(now.Sub(start).Seconds())
	if ok {
		l.g.push(ev, now)
	}
}

// decide runs ev through the binding's filter and event types and returns
// what to deliver, if anything. The filter runs first: it may turn an
// update into an add or a delete (an object starting or stopping to
// match), and the binding's event types apply to what it delivers.
func (l *bindingListener) decide(ev *event.Event) (*event.Event, bool) {
	if l.filter.Trivial(ev.Type) {
		return ev, l.wants(ev.Type)
	}
	// Decide is given a copy: its Decision, which may go to the log
	// below, holds the event, and so would move every listener's event to
	// the heap, the unfiltered ones too.
	c := *ev
	d := l.filter.Decide(&c)
	if d.Err != nil {
		l.counts.evalErrors.Add(1)
		key := l.g.slot.name + "/" + l.binding
		if ok, suppressed := l.g.slot.h.filterErrors.Allow(key); ok {
			l.g.log.Warn("filter evaluation failed", "binding", l.binding, "event", eventString(ev),
				"delivered", d.Deliver, "err", d.Err, "suppressedSinceLast", suppressed)
		}
	}
	if !d.Deliver {
		switch d.Reason {
		case filter.ReasonUnchanged:
			l.counts.unchanged.Add(1)
		case filter.ReasonResync:
			l.counts.resync.Add(1)
		case filter.ReasonGeneration:
			l.counts.generation.Add(1)
		case filter.ReasonError:
			l.counts.errors.Add(1)
		default:
			l.counts.filtered.Add(1)
		}
		return nil, false
	}
	return d.Event, l.wants(d.Event.Type)
}

// wants reports whether the binding takes events of type t.
func (l *bindingListener) wants(t event.EventType) bool {
	switch t {
	case event.EventAdd:
		return l.add
	case event.EventUpdate:
		return l.update
	case event.EventDelete:
		return l.delete
	}
	return false
}

func (g *generation) push(ev *event.Event, now time.Time) {
	g.queue.PushAt(ev, g.slot.h.envelopes.get(ev), now)
}

func newGeneration(slot *PluginSlot, mod *engine.Module, settings config.PluginSettings, configJSON []byte) *generation {
	mode := delivery.Every
	if settings.Delivery.Mode == config.DeliveryLatest {
		mode = delivery.Latest
	}
	var released func()
	if slot.h != nil {
		released = slot.h.memRelease.soon // the process gives the replay's memory back
	}
	g := &generation{
		slot: slot, log: slot.log.With("version", mod.SHA256()[:12]), module: mod, settings: settings, config: configJSON,
		queue:      delivery.New(mode, settings.Delivery.BufferSize, released),
		byResource: map[string]*bindingListener{}, seen: newCacheView(slot.h.viewKeys), reported: map[string]bool{},
		stopCh: make(chan struct{}), drainCh: make(chan struct{}), done: make(chan struct{}),
		queries: make(chan objectQuery, objectQueries),
	}
	g.conv = newConvergence(g.log, &slot.c, settings.Delivery, settings.Limits)
	g.shard = newShardView(&slot.h.shard, g.stopCh, g.done)
	g.shard.confined = settings.Namespace
	g.shard.moved = func(old, cur *shard.Assignment) {
		g.queue.AddReplay(movedKeys(g.bindings, g.seen, old, cur), true)
	}
	for _, b := range settings.Bindings {
		l := &bindingListener{g: g, binding: b.Resource, counts: slot.bindingCounts(b.Resource),
			add: b.Wants(config.EventAdd), update: b.Wants(config.EventUpdate), delete: b.Wants(config.EventDelete)}
		g.bindings = append(g.bindings, l)
		g.byResource[b.Resource] = l
	}
	g.missed = newMissedDeletes(slot, settings)
	if settings.Controller != nil && g.byResource[settings.Controller.For] != nil {
		g.ctl = newReconciler(g, slot.h.reconcileMetrics)
		g.shard.moved = g.ctl.handover
	}
	return g
}

// instantiate starts a fresh instance of the generation's module: start
// functions, _initialize and ih_init with the plugin's config.
func (g *generation) instantiate(ctx context.Context) (*engine.Instance, error) {
	h := g.slot.h
	o := engine.InstanceOptions{Config: g.config, Logger: g.log, LogRate: h.logRate,
		Cache:    newCacheReader(h.pipeline, g.settings.Grants, g.settings.Namespace),
		State:    h.stateFor(g.slot.name, g.settings, g.log),
		Metrics:  g.metricSet(),
		Writes:   g.writer(),
		HTTP:     g.httpClient(),
		Events:   g.eventRecorder(),
		OnDenied: h.onDenied(g.slot.name, g.log),
	}
	if h.recording != nil {
		h.recording.capabilities(g.slot.name, &o)
	}
	inst, err := g.module.Instantiate(ctx, o)
	g.unrecorded(true) // ih_init's writes
	return inst, err
}

// register adds one informer listener per binding. Listeners on a running
// informer first receive its cache as initial-list adds, which the queue
// keeps as keys (see OnAdd).
func (g *generation) register() error {
	g.regsMu.Lock()
	defer g.regsMu.Unlock()
	if g.closed {
		return fmt.Errorf("plugin %q: version is being stopped", g.slot.name)
	}
	fail := func(err error) error {
		for _, l := range g.bindings {
			if l.reg != nil {
				l.reg.Remove()
				l.reg = nil
			}
		}
		return err
	}
	for i, b := range g.settings.Bindings {
		l := g.bindings[i]
		f, err := g.slot.h.filters.Compile(b.FilterSpec())
		if err != nil {
			return fail(fmt.Errorf("plugin %q: binding to %q: filter: %w", g.slot.name, b.Resource, err))
		}
		l.filter = f
		reg, err := g.slot.h.pipeline.AddListener(b.Resource, l)
		if err != nil {
			return fail(fmt.Errorf("plugin %q: bind to resource %q: %w", g.slot.name, b.Resource, err))
		}
		l.reg = reg
	}
	return nil
}

// unregister removes the generation's listeners and returns once none of
// them is inside a callback any more.
func (g *generation) unregister() {
	g.regsMu.Lock()
	var regs []*informer.Registration
	for _, l := range g.bindings {
		if l.reg != nil {
			regs = append(regs, l.reg)
			l.reg = nil
		}
	}
	g.regsMu.Unlock()
	for _, r := range regs {
		r.Remove()
	}
}

// close unregisters the generation's listeners for good.
func (g *generation) close() {
	g.regsMu.Lock()
	g.closed = true
	g.regsMu.Unlock()
	g.unregister()
}

// registration returns l's registration, nil once removed.
func (l *bindingListener) registration() *informer.Registration {
	l.g.regsMu.Lock()
	defer l.g.regsMu.Unlock()
	return l.reg
}

// stop ends the worker after the event it is handling; waiting events are
// discarded (the generation that replaces this one replays the cache).
func (g *generation) stop() {
	g.stopOnce.Do(func() { close(g.stopCh) })
	<-g.done
}

// run is the generation's worker: the only goroutine that calls into its
// instance. It returns when stopped, when drained, when the plugin is
// quarantined, or when it failed after being replaced.
func (g *generation) run(inst *engine.Instance) {
	defer close(g.done)
	// The view's keys are shared with the other generations: let go of
	// them (view.go).
	defer g.seen.clear()
	// Objects still waiting out a retry are given up explicitly, not
	// silently abandoned.
	defer g.giveUpWaiting("the version stopped")
	defer func() {
		if inst != nil {
			ctx, cancel := context.WithTimeout(context.Background(), shutdownCallTimeout)
			if err := inst.Shutdown(ctx); err != nil {
				g.log.Warn("plugin shutdown failed", "err", err)
			}
			cancel()
			_ = inst.Close(context.Background())
		}
	}()
	if g.ctl != nil {
		inst = g.ctl.run(inst)
		return
	}
	draining := false
	poll := syncPoll
	g.syncDue = true
	var prev *delivery.Entry // handled; goes back to the queue with the next take
	for {
		if !draining {
			if inst = g.housekeeping(inst); inst == nil {
				return
			}
		}
		d, wait, ok := g.queue.Next(prev)
		prev = nil
		if !ok {
			if draining {
				// What waits now waits out a retry: given up on (logged
				// by giveUpWaiting) rather than holding the stop up for
				// as long as its backoff.
				return
			}
			if !draining && !g.synced.Load() && wait == 0 {
				// A binding's informer may report its initial list
				// handed over a moment after the worker handled it, or
				// only once its resource is served at all: look again,
				// less and less often while nothing happens.
				wait = poll
				poll = min(2*poll, maxSyncPoll)
			}
			if !g.idle(wait, &draining) {
				return
			}
			g.syncDue = true
			continue
		}
		poll = syncPoll
		select {
		case <-g.stopCh:
			return
		default:
		}
		if draining && d.Replay {
			// Draining delivers what is queued; the listeners are gone,
			// and the replay owes the plugin no change.
			prev = d
			continue
		}
		if !draining && g.batching(inst) {
			// Whatever else is ready now goes with d in one call (ABI.md
			// §5, ih_handle_batch); a lone event goes alone.
			if batch := g.queue.More(append(g.batch[:0], d), engine.MaxBatch); len(batch) > 1 {
				inst = g.deliverBatch(inst, batch)
				clear(batch)
				g.batch = batch[:0]
				if inst == nil {
					return
				}
				continue
			} else {
				batch[0] = nil // the queue's entries are not to be held
				g.batch = batch[:0]
			}
		}
		var keep bool
		inst, keep = g.deliver(inst, d)
		if keep {
			prev = d // deliver keeps no reference to d
		}
		if inst == nil {
			return // quarantined, or failed after being replaced
		}
	}
}

// idle waits for the queue's next token, at most wait (0: no bound). It
// returns false when the generation is stopped and sets *draining when it
// is told to drain.
func (g *generation) idle(wait time.Duration, draining *bool) bool {
	var timer <-chan time.Time
	if wait > 0 {
		t := time.NewTimer(wait)
		defer t.Stop()
		timer = t.C
	}
	drain := g.drainCh
	if *draining {
		drain = nil // closed: it would wake the worker at once, every time
	}
	select {
	case <-g.queue.Ready():
	case <-timer:
	case <-drain:
		*draining = true
	case <-g.stopCh:
		return false
	}
	return true
}

// An idle worker whose bindings are not all synced looks again after
// syncPoll, doubling up to maxSyncPoll while nothing arrives.
const (
	syncPoll    = 10 * time.Millisecond
	maxSyncPoll = time.Second
)

// housekeeping starts and ends overflow repairs and calls ih_synced for
// bindings whose initial list the plugin has handled. It returns the
// instance to use next, nil when the plugin is quarantined.
func (g *generation) housekeeping(inst *engine.Instance) *engine.Instance {
	q := g.queue
	g.shard.apply()
	g.answerQueries()
	g.missed.check(g)
	start, end := q.RepairStep()
	if start {
		g.repair()
	}
	if end {
		g.log.Info("plugin repaired from the cache after its buffer overflowed")
		clear(g.reported)
		g.synced.Store(false)
		g.syncDue = true
	}
	if g.synced.Load() || !g.syncDue {
		return inst
	}
	g.syncDue = false
	all := true
	for _, l := range g.bindings {
		if g.reported[l.binding] {
			continue
		}
		reg := l.registration()
		if reg == nil || q.InitialLeft(l.binding) > 0 || !reg.HasSynced() {
			all = false
			continue
		}
		ref := reg.Ref()
		if ref == nil {
			all = false
			continue
		}
		// The generation's stop cancels a write waiting in ih_synced too.
		called, err := inst.Synced(g.shard.callContext(nil), ref)
		g.shard.callEnded()
		if called && g.slot.h.observe != nil {
			g.slot.h.observe(g.slot.name, &event.Event{Resource: ref}, engine.Result{}, err)
		}
		if called && g.slot.h.recording != nil {
			g.slot.h.recording.handled(g.slot.name, &event.Event{Resource: ref}, 0, engine.Result{}, err)
		}
		if err != nil {
			var f *engine.Failure
			if errors.As(err, &f) {
				return g.failed(inst, "synced "+l.binding, err)
			}
			g.log.Warn("ih_synced not called", "binding", l.binding, "err", err)
		}
		g.reported[l.binding] = true
	}
	if all {
		g.synced.Store(true)
		if g.seen.len() > delivery.ReplayKeep && g.slot.h != nil {
			g.slot.h.memRelease.soon() // a large initial list is over: give its garbage back
		}
	}
	return inst
}

// repair starts bringing the plugin back to the cache's state after its
// buffer overflowed: every key of the store and every key the plugin has
// seen go to the replay cursor, which delivers the difference.
func (g *generation) repair() {
	s := g.slot
	g.repairs.Add(1)
	var keys []delivery.Key
	for _, l := range g.bindings {
		if reg := l.registration(); reg != nil {
			keys = append(keys, delivery.KeysOf(l.binding, reg.Keys())...)
		}
	}
	keys = keysInReach(g.settings.Namespace, g.seen.appendKeys(keys))
	st := g.queue.Stats()
	if ok, suppressed := s.h.overflowWarnings.Allow(s.name); ok {
		g.log.Warn("plugin's buffer overflowed: events were dropped; repairing the plugin from the cache",
			"bufferSize", g.settings.Delivery.BufferSize, "droppedTotal", st.Dropped, "keys", len(keys),
			"suppressedSinceLast", suppressed)
	}
	g.queue.AddReplay(keys, false)
}

// shutdownCallTimeout bounds ih_shutdown when the plugin has no deadline
// of its own; the engine's CallTimeout applies within it.
const shutdownCallTimeout = 5 * time.Second

// failed handles a call that did not complete: the instance is discarded
// and a fresh one started after a backoff, whose replay of the cache
// hands the object again unless deliver parked it, or the plugin is
// quarantined after too many failures without a stable period. what
// names the call (the event).
func (g *generation) failed(inst *engine.Instance, what string, err error) *engine.Instance {
	s := g.slot
	_ = inst.Close(context.Background())
	var f *engine.Failure
	attrs := []any{"event", what, "err", err}
	if errors.As(err, &f) {
		switch f.Kind {
		case engine.KindTimeout:
			s.c.timeouts.Add(1)
		case engine.KindMemory:
			s.c.memory.Add(1)
		case engine.KindABI:
			s.c.abiFailures.Add(1)
		default:
			s.c.traps.Add(1)
		}
		attrs = append(attrs, "kind", f.Kind.String())
		if f.Stack != "" {
			attrs = append(attrs, "wasmStack", f.Stack)
		}
		if f.Output != "" {
			attrs = append(attrs, "output", f.Output)
		}
	} else {
		s.c.traps.Add(1)
	}
	g.log.Error("plugin failed; event skipped, instance discarded", attrs...)
	return g.restart(err)
}

// restart starts a fresh instance after the backoff the failure count
// calls for, or quarantines the plugin. A fresh instance has no state, so
// it gets the cache again: the events still waiting, which the replay
// supersedes, are discarded, and every key of the informers' stores goes
// to the replay cursor as an initial list, but for the objects waiting
// out a retry or parked, which are handed from the store when due. The
// listeners stay registered: registering them anew would have client-go
// replay the cache under the informer's lock, stalling every other
// listener of it.
//
// A generation that is no longer current (a reload replaced it while its
// call was failing) changes nothing of the slot and ends: its
// replacement has the events.
func (g *generation) restart(cause error) *engine.Instance {
	s := g.slot
	for {
		s.mu.Lock()
		if s.current != g {
			s.mu.Unlock()
			g.log.Info("replaced version failed; not restarted", "err", cause)
			return nil
		}
		n, quarantine := s.failedLocked(g.settings.Limits, time.Now())
		s.lastErr = cause.Error()
		if quarantine {
			s.state = StateQuarantined
			s.mu.Unlock()
			g.log.Error("plugin quarantined: it failed maxConsecutiveFailures times without a stable period in between; it stays off until its file changes",
				"failures", n, "stablePeriod", g.settings.Limits.StablePeriod.Duration, "lastError", cause.Error())
			if g.ctl != nil && g.ctl.ctl.Finalizer != "" {
				g.log.Warn("quarantined controller keeps its finalizer: objects being deleted wait for it until it comes back "+
					"(informer_host_controller_finalizer_stuck; `informer-host finalizers release` frees them by hand)",
					"finalizer", g.ctl.ctl.Finalizer)
			}
			g.synced.Store(false)
			g.unregister()
			g.giveUpWaiting("quarantined")
			return nil
		}
		s.state = StateRestarting
		s.mu.Unlock()
		g.synced.Store(false)
		delay := restartDelay(g.settings.Limits, n)
		g.log.Info("restarting plugin", "after", delay, "failures", n)
		if !g.sleep(delay) {
			return nil
		}
		inst, err := g.instantiate(context.Background())
		if err != nil {
			g.log.Error("plugin restart failed", "err", err)
			cause = err
			continue
		}
		g.replayAll()
		s.c.restarts.Add(1)
		s.mu.Lock()
		if s.current == g {
			s.state = StateRunning
		}
		s.mu.Unlock()
		return inst
	}
}

// failedLocked counts a failure of the current generation at now and
// returns the failures of the streak, and whether they quarantine the
// plugin. The streak ends only after l.StablePeriod without a failure,
// never with a success: a plugin failing on some objects among many
// successes keeps its restart delay growing and is quarantined by its
// failure rate. Called with s.mu held.
func (s *PluginSlot) failedLocked(l config.Limits, now time.Time) (n int, quarantine bool) {
	if stable := l.StablePeriod.Duration; stable > 0 && !s.lastFailure.IsZero() && now.Sub(s.lastFailure) >= stable {
		s.failures = 0
	}
	s.failures++
	s.lastFailure = now
	return s.failures, s.failures >= l.MaxConsecutiveFailures
}

// replayAll starts the plugin's view over: the queue is cleared, and every
// key in the bindings' stores goes to the replay cursor as an initial
// list, but for objects waiting out a retry or parked, which are handed
// from the store when due.
func (g *generation) replayAll() {
	superseded := g.queue.Restart()
	g.slot.c.superseded.Add(uint64(superseded))
	g.seen.clear()
	g.missed.arm(g.settings.Bindings)
	clear(g.reported)
	g.synced.Store(false)
	g.syncDue = true
	if g.ctl != nil {
		g.ctl.enqueueAll()
		return
	}
	for _, l := range g.bindings {
		if reg := l.registration(); reg != nil {
			g.queue.AddReplay(keysInReach(g.settings.Namespace, delivery.KeysOf(l.binding, reg.Keys())), true)
		}
	}
}

// giveUpWaiting empties the queue of a generation that delivers no more
// (quarantined, stopped) and logs how many objects waiting out a retry
// or parked it gives up on. On a reload they are not lost: they are in
// the informers' stores, so in the new version's initial list.
func (g *generation) giveUpWaiting(why string) {
	st := g.queue.Stats()
	g.queue.Clear()
	if st.Retrying > 0 {
		g.log.Info("gave up on objects waiting out a retry or parked", "objects", st.Retrying, "because", why)
	}
}

// restartDelay is restartBackoff doubled for every failure after the
// first, capped at maxRestartBackoff.
func restartDelay(l config.Limits, failures int) time.Duration {
	d := l.RestartBackoff.Duration
	for i := 1; i < failures && d < l.MaxRestartBackoff.Duration; i++ {
		d *= 2
	}
	return min(d, l.MaxRestartBackoff.Duration)
}

// sleep waits d, or returns false at once if the generation is stopped.
func (g *generation) sleep(d time.Duration) bool {
	if d <= 0 {
		return true
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-g.stopCh:
		return false
	}
}

func eventString(ev *event.Event) string {
	return ev.Type.String() + " " + ev.Resource.Name + " " + ev.Key()
}
