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

	"github.com/informer-host/informer-host/config"
	"github.com/informer-host/informer-host/filter"
	"github.com/informer-host/informer-host/host/internal/engine"
	"github.com/informer-host/informer-host/informer"
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
	Retries        uint64 // deliveries repeated because the plugin said retry
	RetryExhausted uint64 // events dropped after maxRetries retries
	Dropped        uint64 // the plugin said drop
	Errors         uint64 // the plugin said error
	Traps          uint64
	Timeouts       uint64
	MemoryFailures uint64
	ABIFailures    uint64
	Restarts       uint64 // fresh instances after a failure
	Superseded     uint64 // waiting events replaced by a cache replay on restart
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
// instance, one DeliveryQueue, one informer listener per binding and one
// worker goroutine. At most one generation is current; during a reload the
// new one is registered before the old one is stopped, so every change
// reaches one of them.
type PluginSlot struct {
	name string // file base name, e.g. "pod-logger.wasm"
	h    *Host
	log  *slog.Logger
	c    counters
	obs  slotObservers
	// lastEvent is when the last ih_handle call ended (unix ns; 0: none),
	// for Status. Written by the worker, read by Status.
	lastEvent atomic.Int64

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
	failures   int       // consecutive failures of the current generation
	loadedAt   time.Time // when the current generation was swapped in
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
	queue    *DeliveryQueue

	// regsMu guards regs and closed. The worker replaces regs on a
	// restart while Status reads them and Stop or a reload removes them;
	// once closed is set, register adds nothing, so a restart racing a
	// stop cannot bring listeners back.
	regsMu sync.Mutex
	regs   []*informer.Registration
	closed bool

	// failing is set by the worker when a call fails and cleared by its
	// next successful call; the worker's own, unguarded.
	failing bool

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
}

// bindingCounts are the events a binding's filter kept from the plugin,
// by reason. Shared by the generations of a slot, so they survive reloads.
type bindingCounts struct {
	filtered, unchanged, resync, errors, evalErrors atomic.Uint64
}

func (l *bindingListener) OnAdd(res *informer.ResourceRef, obj *unstructured.Unstructured, isInInitialList bool) {
	l.offer(&informer.Event{Type: informer.EventAdd, Resource: res, Object: obj, IsInInitialList: isInInitialList})
}

func (l *bindingListener) OnUpdate(res *informer.ResourceRef, oldObj, newObj *unstructured.Unstructured) {
	l.offer(&informer.Event{Type: informer.EventUpdate, Resource: res, Object: newObj, OldObject: oldObj})
}

func (l *bindingListener) OnDelete(res *informer.ResourceRef, obj *unstructured.Unstructured, finalStateUnknown bool) {
	l.offer(&informer.Event{Type: informer.EventDelete, Resource: res, Object: obj, FinalStateUnknown: finalStateUnknown})
}

// offer filters ev and queues what is left. The filter runs first: it may
// turn an update into an add or a delete (an object starting or stopping
// to match), and the binding's event types apply to what it delivers.
func (l *bindingListener) offer(ev *informer.Event) {
	start := time.Now()
	d := l.filter.Decide(ev)
	now := time.Now() // also the event's arrival in the queue
	l.g.slot.obs.filter.Observe(now.Sub(start).Seconds())
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
		case filter.ReasonError:
			l.counts.errors.Add(1)
		default:
			l.counts.filtered.Add(1)
		}
		return
	}
	ev = d.Event
	switch ev.Type {
	case informer.EventAdd:
		if !l.add {
			return
		}
	case informer.EventUpdate:
		if !l.update {
			return
		}
	case informer.EventDelete:
		if !l.delete {
			return
		}
	}
	l.g.push(ev, now)
}

func (g *generation) push(ev *informer.Event, now time.Time) {
	g.queue.push(ev, g.slot.h.envelopes.get(ev), now)
}

func newGeneration(slot *PluginSlot, mod *engine.Module, settings config.PluginSettings, configJSON []byte) *generation {
	mode := DeliverEvery
	if settings.Delivery.Mode == config.DeliveryLatest {
		mode = DeliverLatest
	}
	return &generation{
		slot: slot, log: slot.log.With("version", mod.SHA256()[:12]), module: mod, settings: settings, config: configJSON,
		queue:  NewDeliveryQueue(mode, settings.Delivery.BufferSize),
		stopCh: make(chan struct{}), drainCh: make(chan struct{}), done: make(chan struct{}),
	}
}

// instantiate starts a fresh instance of the generation's module: start
// functions, _initialize and ih_init with the plugin's config.
func (g *generation) instantiate(ctx context.Context) (*engine.Instance, error) {
	return g.module.Instantiate(ctx, engine.InstanceOptions{Config: g.config, Logger: g.log, LogRate: g.slot.h.logRate})
}

// register adds one informer listener per binding. Listeners on a running
// informer first receive its cache as initial-list adds.
func (g *generation) register() error {
	g.regsMu.Lock()
	defer g.regsMu.Unlock()
	if g.closed {
		return fmt.Errorf("plugin %q: version is being stopped", g.slot.name)
	}
	for _, b := range g.settings.Bindings {
		f, err := g.slot.h.filters.Compile(b.FilterSpec())
		if err != nil {
			for _, r := range g.regs {
				r.Remove()
			}
			g.regs = nil
			return fmt.Errorf("plugin %q: binding to %q: filter: %w", g.slot.name, b.Resource, err)
		}
		l := &bindingListener{g: g, binding: b.Resource, filter: f, counts: g.slot.bindingCounts(b.Resource),
			add: b.Wants(config.EventAdd), update: b.Wants(config.EventUpdate), delete: b.Wants(config.EventDelete)}
		reg, err := g.slot.h.pipeline.AddListener(b.Resource, l)
		if err != nil {
			for _, r := range g.regs {
				r.Remove()
			}
			g.regs = nil
			return fmt.Errorf("plugin %q: bind to resource %q: %w", g.slot.name, b.Resource, err)
		}
		g.regs = append(g.regs, reg)
	}
	return nil
}

// unregister removes the generation's listeners and returns once none of
// them is inside a callback any more.
func (g *generation) unregister() {
	g.regsMu.Lock()
	regs := g.regs
	g.regs = nil
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

// synced reports whether every listener has received its initial list.
func (g *generation) synced() bool {
	g.regsMu.Lock()
	defer g.regsMu.Unlock()
	for _, r := range g.regs {
		if !r.HasSynced() {
			return false
		}
	}
	return true
}

// stop ends the worker after the event it is handling; waiting events are
// discarded (the generation that replaces this one replays the cache).
func (g *generation) stop() {
	g.stopOnce.Do(func() { close(g.stopCh) })
	<-g.done
}

// run is the generation's worker: the only goroutine that calls into its
// instance. It returns when stopped, when drained, or when the plugin is
// quarantined.
func (g *generation) run(inst *engine.Instance) {
	defer close(g.done)
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
	draining := false
	var prev *delivery // handled; goes back to the queue with the next take
	for {
		d, ok := g.queue.takeAfter(prev)
		prev = nil
		if !ok {
			if draining {
				return
			}
			select {
			case <-g.queue.ready:
			case <-g.drainCh:
				draining = true
			case <-g.stopCh:
				return
			}
			continue
		}
		select {
		case <-g.stopCh:
			return
		default:
		}
		inst = g.deliver(inst, d)
		prev = d // deliver keeps no reference to d
		if inst == nil {
			return // quarantined
		}
	}
}

// shutdownCallTimeout bounds ih_shutdown when the plugin has no deadline
// of its own; the engine's CallTimeout applies within it.
const shutdownCallTimeout = 5 * time.Second

// deliver hands d to the plugin, retrying as the plugin asks. On a
// failure it restarts the instance (after a backoff) or quarantines the
// plugin; it returns the instance to use next, or nil when quarantined.
func (g *generation) deliver(inst *engine.Instance, d *delivery) *engine.Instance {
	s := g.slot
	env := d.env
	if env == nil {
		env = engine.NewEnvelope(&d.ev)
	}
	backoff := g.settings.Delivery.RetryBackoff.Duration
	start := time.Now()
	s.obs.wait.Observe(start.Sub(d.enqueued).Seconds())
	for attempt := 0; ; attempt++ {
		if attempt > 0 {
			start = time.Now()
		}
		res, err := inst.Handle(context.Background(), env)
		s.obs.handle.Observe(since(start))
		s.lastEvent.Store(time.Now().UnixNano())
		if s.h.observe != nil {
			s.h.observe(s.name, env.Event(), res, err)
		}
		if err != nil {
			g.failing = true
			return g.failed(inst, d, err)
		}
		s.c.delivered.Add(1)
		if g.failing {
			// The first success after failures ends the streak. Only this
			// worker counts failures (restart, called from failed), so the
			// slot's lock is taken only when there is a streak to end.
			s.mu.Lock()
			s.failures = 0
			s.mu.Unlock()
			g.failing = false
		}
		switch res.Code {
		case engine.CodeOK:
			s.c.ok.Add(1)
			return inst
		case engine.CodeDrop:
			s.c.dropped.Add(1)
			g.log.Debug("plugin dropped an event", "event", eventString(&d.ev), "message", res.Message)
			return inst
		case engine.CodeError:
			s.c.errors.Add(1)
			g.log.Warn("plugin failed to handle an event; skipped", "event", eventString(&d.ev), "message", res.Message)
			return inst
		case engine.CodeRetry:
			if attempt >= g.settings.Delivery.MaxRetries {
				s.c.retryExhausted.Add(1)
				g.log.Warn("plugin asked to retry an event too often; dropped", "event", eventString(&d.ev),
					"retries", attempt, "message", res.Message)
				return inst
			}
			s.c.retries.Add(1)
			if !g.sleep(backoff) {
				return inst
			}
			backoff *= 2
		}
	}
}

// failed handles a call that did not complete: the event is skipped, as
// client-go skips an event whose handler panics, the instance is discarded
// and a fresh one started after a backoff, or the plugin is quarantined
// after too many failures in a row.
func (g *generation) failed(inst *engine.Instance, d *delivery, err error) *engine.Instance {
	s := g.slot
	_ = inst.Close(context.Background())
	var f *engine.Failure
	attrs := []any{"event", eventString(&d.ev), "err", err}
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
// it gets the cache again: the generation's listeners are registered anew
// (client-go replays the cache to them as initial-list adds) and the
// events still waiting, which the replay supersedes, are discarded.
func (g *generation) restart(cause error) *engine.Instance {
	s := g.slot
	for {
		s.mu.Lock()
		s.failures++
		n := s.failures
		s.lastErr = cause.Error()
		if n >= g.settings.Limits.MaxConsecutiveFailures {
			s.state = StateQuarantined
			s.mu.Unlock()
			g.log.Error("plugin quarantined after failing too often in a row; it stays off until its file changes",
				"failures", n, "lastError", cause.Error())
			g.unregister()
			g.queue.Clear()
			return nil
		}
		s.state = StateRestarting
		s.mu.Unlock()
		delay := restartDelay(g.settings.Limits, n)
		g.log.Info("restarting plugin", "after", delay, "failures", n)
		if !g.sleep(delay) {
			return nil
		}
		g.unregister()
		superseded := g.queue.Clear()
		s.c.superseded.Add(uint64(superseded))
		inst, err := g.instantiate(context.Background())
		if err != nil {
			g.log.Error("plugin restart failed", "err", err)
			cause = err
			continue
		}
		if err := g.register(); err != nil {
			_ = inst.Close(context.Background())
			cause = err
			continue
		}
		s.c.restarts.Add(1)
		s.mu.Lock()
		s.state = StateRunning
		s.mu.Unlock()
		return inst
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

func eventString(ev *informer.Event) string {
	return ev.Type.String() + " " + ev.Resource.Name + " " + ev.Key()
}
