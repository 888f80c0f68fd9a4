package informer

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"reflect"
	"slices"
	"sort"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/cache"

	"github.com/informer-host/informer-host/event"
	"github.com/informer-host/informer-host/internal/config"
	"github.com/informer-host/informer-host/internal/dynjson"
)

// Options configures a Pipeline.
type Options struct {
	// RESTConfig reaches the apiserver. Required unless both Dynamic and
	// Discovery are given.
	RESTConfig *rest.Config
	// Dynamic and Discovery override the clients built from RESTConfig
	// (unit tests hand in fakes).
	Dynamic   dynamic.Interface
	Discovery discovery.DiscoveryInterface
	// Logger receives the pipeline's own logs. Default: slog.Default().
	Logger *slog.Logger
	// PendingRetryPeriod is how often a resource that discovery does not
	// serve yet (a CRD not installed) is looked up again. Default 5s.
	PendingRetryPeriod time.Duration
	// WatchFailureGrace is how long a resource's list/watch calls may keep
	// failing before Status reports it as WatchFailing (and /readyz as not
	// ready): a watch the apiserver drops and that resumes at once is
	// normal; one failing for longer means a cache going stale. Default 30s.
	WatchFailureGrace time.Duration
	// WatchRetryMax caps the backoff between list/watch attempts that get
	// no answer from the apiserver; it bounds how long after the apiserver
	// is reachable again delivery resumes. Default 2s.
	WatchRetryMax time.Duration
	// Indexers are index functions, by name, beyond the pipeline's own
	// (namespace, OwnerIndex): a resource's informers are built with
	// those its config.Resource.Indexes names, and CacheByIndex reads
	// them. A name with no function here is not an index.
	Indexers cache.Indexers
}

// Phase is where a configured resource stands.
type Phase string

const (
	// PhasePending: discovery does not serve the resource (yet), or could
	// not be asked; it is looked up again every PendingRetryPeriod.
	PhasePending Phase = "Pending"
	// PhaseActive: informers run for it.
	PhaseActive Phase = "Active"
	// PhaseFailed: the resource cannot be watched as configured (for
	// example namespaces named for a cluster-scoped resource). Only a new
	// configuration changes that.
	PhaseFailed Phase = "Failed"
)

// ResourceStatus reports one configured resource.
type ResourceStatus struct {
	Name   string
	Phase  Phase
	Ref    *event.ResourceRef // nil until resolved
	Synced bool               // every informer of the resource has completed its initial list
	Error  string             // why it is not synced, not active or failing, if known
	// Warning is what is wrong with the configured resource though it
	// runs: the apiserver matched it to another name (NotServedError).
	Warning string
	// FailingSince is when the list/watch calls of one of the resource's
	// informers started failing; zero while they succeed.
	FailingSince time.Time
	// WatchFailing: they have been failing for longer than
	// Options.WatchFailureGrace, so the cache may be stale.
	WatchFailing bool
}

// Pipeline runs the shared informers of the configured resources. All
// methods are safe for concurrent use.
type Pipeline struct {
	log         *slog.Logger
	dynamic     dynamic.Interface
	mapper      *restmapper.DeferredDiscoveryRESTMapper
	disco       discovery.CachedDiscoveryInterface // what mapper reads; suggest reads it too
	retryPeriod time.Duration
	grace       time.Duration
	watchOpts   watchOptions
	api         *apiHealth // every request of the clients built here goes through it

	// ctx bounds every informer and the retry loop; Stop cancels it.
	ctx    context.Context
	cancel context.CancelFunc

	applyMu sync.Mutex // serialises Apply: one reconciliation at a time

	// mu guards everything below, and the attachment state of every
	// Registration. It is never held while waiting for a listener or an
	// informer to stop: those waits can be long, and a listener may call
	// back into the pipeline.
	mu        sync.Mutex
	resources map[string]*resourceState
	watches   map[watchKey]*sharedWatch // a watch is in here iff refs > 0
	// regs holds listeners by resource name, apart from resourceState, so
	// that they outlive a restart of their resource and are wired in again
	// when it comes back.
	regs      map[string]map[*Registration]struct{}
	stopped   bool
	retryWG   sync.WaitGroup
	retryOnce sync.Once
}

// resourceState is one configured resource. Guarded by Pipeline.mu.
type resourceState struct {
	spec  config.Resource
	phase Phase
	ref   *event.ResourceRef
	err   error
	// warning is what is wrong with the spec though the resource runs
	// (asWritten); set when it becomes active.
	warning error
	watches []*sharedWatch // one per namespace, or one for all; set iff phase is Active
}

// New builds a pipeline. It starts nothing until Apply.
func New(opts Options) (*Pipeline, error) {
	p := &Pipeline{
		log:         opts.Logger,
		dynamic:     opts.Dynamic,
		retryPeriod: opts.PendingRetryPeriod,
		resources:   map[string]*resourceState{},
		watches:     map[watchKey]*sharedWatch{},
		regs:        map[string]map[*Registration]struct{}{},
	}
	if p.log == nil {
		p.log = slog.Default()
	}
	if p.retryPeriod <= 0 {
		p.retryPeriod = 5 * time.Second
	}
	if p.grace = opts.WatchFailureGrace; p.grace <= 0 {
		p.grace = 30 * time.Second
	}
	p.watchOpts = watchOptions{log: p.log, retryMin: 200 * time.Millisecond, retryMax: opts.WatchRetryMax, logEvery: 10 * time.Second,
		indexers: maps.Clone(opts.Indexers)}
	if p.watchOpts.retryMax <= 0 {
		p.watchOpts.retryMax = 2 * time.Second
	}
	p.watchOpts.retryMin = min(p.watchOpts.retryMin, p.watchOpts.retryMax)
	p.api = &apiHealth{log: p.log, logEvery: p.watchOpts.logEvery}
	disco := opts.Discovery
	if p.dynamic == nil || disco == nil {
		if opts.RESTConfig == nil {
			return nil, errors.New("informer: Options needs RESTConfig, or both Dynamic and Discovery")
		}
		cfg := p.api.restConfig(opts.RESTConfig)
		if p.dynamic == nil {
			d, err := dynjson.NewForConfig(cfg)
			if err != nil {
				return nil, fmt.Errorf("informer: dynamic client: %w", err)
			}
			p.dynamic = d
		}
		if disco == nil {
			d, err := discovery.NewDiscoveryClientForConfig(cfg)
			if err != nil {
				return nil, fmt.Errorf("informer: discovery client: %w", err)
			}
			disco = d
		}
	}
	p.disco = memory.NewMemCacheClient(disco)
	p.mapper = restmapper.NewDeferredDiscoveryRESTMapper(p.disco)
	p.ctx, p.cancel = context.WithCancel(context.Background())
	return p, nil
}

// Apply makes the running resources match specs: resources not in specs
// are stopped, new ones started, and changed ones restarted. Unchanged
// resources and their informers are not touched. Listeners of a restarted
// resource stay registered and receive the new informers' contents as
// initial-list adds.
//
// Apply returns once every resource is started or pending; it does not
// wait for caches to sync (see Status and Registration.HasSynced).
func (p *Pipeline) Apply(ctx context.Context, specs []config.Resource) error {
	p.applyMu.Lock()
	defer p.applyMu.Unlock()

	desired := make(map[string]config.Resource, len(specs))
	for _, s := range specs {
		if _, dup := desired[s.Name]; dup {
			return fmt.Errorf("informer: resource %q configured twice", s.Name)
		}
		desired[s.Name] = s
	}

	var released []*sharedWatch
	var detached []detachment
	var added []string
	p.mu.Lock()
	if p.stopped {
		p.mu.Unlock()
		return errors.New("informer: pipeline is stopped")
	}
	for name, st := range p.resources {
		if spec, ok := desired[name]; ok && reflect.DeepEqual(spec, st.spec) {
			continue
		}
		d, r := p.deactivateLocked(st)
		detached, released = append(detached, d...), append(released, r...)
		delete(p.resources, name)
	}
	for name, spec := range desired {
		if _, ok := p.resources[name]; !ok {
			p.resources[name] = &resourceState{spec: spec, phase: PhasePending}
			added = append(added, name)
		}
	}
	p.mu.Unlock()

	finishDetach(detached)
	for _, w := range released {
		w.stop()
	}
	sort.Strings(added)
	for _, name := range added {
		p.activate(ctx, name)
	}
	p.retryOnce.Do(func() {
		p.retryWG.Add(1)
		go p.retryPending()
	})
	return nil
}

// Stop stops every informer and waits until all listeners have returned.
// The pipeline cannot be started again.
func (p *Pipeline) Stop() {
	p.mu.Lock()
	p.stopped = true
	watches := make([]*sharedWatch, 0, len(p.watches))
	for _, w := range p.watches {
		watches = append(watches, w)
	}
	p.mu.Unlock()
	p.cancel()
	for _, w := range watches {
		<-w.done
	}
	p.retryWG.Wait()
}

// AddListener registers l on the configured resource name. When the
// resource is active, l is added to each of its informers as a listener
// of its own; an informer that already runs replays its cache to l as
// initial-list adds, exactly as client-go does for late handlers. When the
// resource is pending, l is wired in once it starts.
//
// l must not call Registration.Remove from inside its own callbacks.
func (p *Pipeline) AddListener(name string, l Listener) (*Registration, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stopped {
		return nil, errors.New("informer: pipeline is stopped")
	}
	st, ok := p.resources[name]
	if !ok {
		return nil, fmt.Errorf("informer: resource %q is not configured", name)
	}
	reg := &Registration{p: p, resource: name, listener: l, removedCh: make(chan struct{})}
	if p.regs[name] == nil {
		p.regs[name] = map[*Registration]struct{}{}
	}
	p.regs[name][reg] = struct{}{}
	if st.phase == PhaseActive {
		if err := p.attachLocked(reg, st); err != nil {
			delete(p.regs[name], reg)
			return nil, err
		}
	}
	return reg, nil
}

// Status reports every configured resource, sorted by name.
func (p *Pipeline) Status() []ResourceStatus {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]ResourceStatus, 0, len(p.resources))
	now := time.Now()
	// The apiserver unreachable fails every active resource, whether or
	// not its own calls have returned yet (transport.go).
	apiErr, apiSince := p.api.state(now)
	for name, st := range p.resources {
		s := ResourceStatus{Name: name, Phase: st.phase, Ref: st.ref}
		if st.err != nil {
			s.Error = st.err.Error()
		}
		if st.warning != nil {
			s.Warning = st.warning.Error()
		}
		if st.phase == PhaseActive {
			s.Synced = true
			for _, w := range st.watches {
				if !w.informer.HasSynced() {
					s.Synced = false
				}
				err, since := w.health()
				if err != nil && s.Error == "" {
					s.Error = watchDescription(w.key) + ": " + err.Error()
				}
				if !since.IsZero() && (s.FailingSince.IsZero() || since.Before(s.FailingSince)) {
					s.FailingSince = since
				}
			}
			if !apiSince.IsZero() {
				if s.FailingSince.IsZero() || apiSince.Before(s.FailingSince) {
					s.FailingSince = apiSince
				}
				if s.Error == "" {
					s.Error = "apiserver unreachable: " + apiErr.Error()
				}
			}
			s.WatchFailing = !s.FailingSince.IsZero() && now.Sub(s.FailingSince) >= p.grace
		}
		out = append(out, s)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Ref returns the resolved coordinates of a configured resource, or false
// while it is not active.
func (p *Pipeline) Ref(name string) (*event.ResourceRef, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	st, ok := p.resources[name]
	if !ok || st.phase != PhaseActive {
		return nil, false
	}
	return st.ref, true
}

func watchDescription(k watchKey) string {
	if k.namespace == "" {
		return gvrString(k.gvr)
	}
	return gvrString(k.gvr) + " in namespace " + k.namespace
}

// activate resolves a pending resource through discovery and, when that
// works, starts (or joins) its informers and wires in its listeners.
func (p *Pipeline) activate(ctx context.Context, name string) {
	p.mu.Lock()
	st, ok := p.resources[name]
	if !ok || st.phase != PhasePending {
		p.mu.Unlock()
		return
	}
	spec := st.spec
	p.mu.Unlock()

	// Discovery is a network call: made without the lock, then checked
	// against what happened meanwhile.
	ref, namespaced, err := p.resolve(ctx, spec)

	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stopped || p.resources[name] != st || st.phase != PhasePending {
		return
	}
	if err != nil {
		if st.err == nil || st.err.Error() != err.Error() {
			p.log.Warn("resource is pending: not served by the apiserver yet; retrying", "resource", name, "err", err)
		}
		st.err = err
		return
	}
	if !namespaced && len(spec.Namespaces) > 0 {
		st.phase = PhaseFailed
		st.err = fmt.Errorf("%s is cluster-scoped, but namespaces are configured", gvrString(ref.GroupVersionResource()))
		p.log.Error("resource cannot be watched", "resource", name, "err", st.err)
		return
	}
	namespaces := spec.Namespaces
	if len(namespaces) == 0 {
		namespaces = []string{""}
	}
	var start []*sharedWatch
	for _, ns := range namespaces {
		key := watchKey{
			gvr:                ref.GroupVersionResource(),
			namespace:          ns,
			labelSelector:      spec.LabelSelector,
			fieldSelector:      spec.FieldSelector,
			stripManagedFields: spec.StripsManagedFields(),
			resync:             spec.ResyncPeriod.Duration,
			ownerIndex:         slices.Contains(spec.Indexes, config.IndexOwner),
			extraIndexes:       p.watchOpts.extraIndexes(spec.Indexes),
		}
		w := p.watches[key]
		if w == nil {
			w = newSharedWatch(p.dynamic, key, p.watchOpts)
			p.watches[key] = w
			start = append(start, w)
		}
		w.refs++
		st.watches = append(st.watches, w)
	}
	st.ref, st.phase, st.err = ref, PhaseActive, nil
	if w := asWritten(spec, ref); w != nil {
		st.warning = w
		p.log.Warn("resource is watched as the apiserver matched it, not as configured", "resource", name, "err", w)
	}
	for reg := range p.regs[name] {
		if err := p.attachLocked(reg, st); err != nil {
			p.log.Error("cannot add listener", "resource", name, "err", err)
		}
	}
	// Started after the listeners are attached, so those see the initial
	// list as it arrives rather than as a replay.
	for _, w := range start {
		w.run(p.ctx)
	}
	p.log.Info("resource started", "resource", name, "gvr", gvrString(ref.GroupVersionResource()), "kind", ref.Kind, "namespaces", spec.Namespaces)
}

// Resolve looks spec up through discovery as Apply does, and starts
// nothing: the resource's coordinates, or why it cannot be watched; a
// resource the apiserver does not serve is a *NotServedError, with the
// nearest ones it does. For checking a config against a cluster.
//
// A spec the RESTMapper matches only loosely (a singular resource name, a
// group left empty) resolves, and is watched, but also comes back with a
// *NotServedError saying what it matched.
func (p *Pipeline) Resolve(ctx context.Context, spec config.Resource) (*event.ResourceRef, error) {
	ref, _, err := p.resolve(ctx, spec)
	if err != nil {
		return nil, err
	}
	if w := asWritten(spec, ref); w != nil {
		return ref, w
	}
	return ref, nil
}

// resolve maps a configured resource to its API coordinates through
// discovery. A resource not served comes back as a *NotServedError.
func (p *Pipeline) resolve(ctx context.Context, spec config.Resource) (*event.ResourceRef, bool, error) {
	var mapping *meta.RESTMapping
	var err error
	if spec.Kind != "" {
		mapping, err = p.mapper.RESTMappingWithContext(ctx, schema.GroupKind{Group: spec.Group, Kind: spec.Kind}, spec.Version)
	} else {
		gvr := schema.GroupVersionResource{Group: spec.Group, Version: spec.Version, Resource: spec.Resource}
		var gvk schema.GroupVersionKind
		gvk, err = p.mapper.KindForWithContext(ctx, gvr)
		if err == nil {
			mapping, err = p.mapper.RESTMappingWithContext(ctx, gvk.GroupKind(), gvk.Version)
		}
	}
	if meta.IsNoMatchError(err) {
		return nil, false, &NotServedError{Spec: spec, Suggestions: suggest(p.disco, spec), Err: err}
	}
	if err != nil {
		return nil, false, err
	}
	ref := &event.ResourceRef{
		Name:     spec.Name,
		Group:    mapping.Resource.Group,
		Version:  mapping.Resource.Version,
		Resource: mapping.Resource.Resource,
		Kind:     mapping.GroupVersionKind.Kind,
		// Known here, from discovery: what a listener would otherwise
		// guess from the objects' keys.
		Namespaced: mapping.Scope.Name() == meta.RESTScopeNameNamespace,
	}
	return ref, ref.Namespaced, nil
}

// retryPending looks pending resources up again until the pipeline stops.
func (p *Pipeline) retryPending() {
	defer p.retryWG.Done()
	t := time.NewTicker(p.retryPeriod)
	defer t.Stop()
	for {
		select {
		case <-p.ctx.Done():
			return
		case <-t.C:
		}
		var pending []string
		p.mu.Lock()
		for name, st := range p.resources {
			if st.phase == PhasePending {
				pending = append(pending, name)
			}
		}
		p.mu.Unlock()
		if len(pending) == 0 {
			continue
		}
		// Forget what discovery said: the CRD may have appeared since.
		p.mapper.ResetWithContext(p.ctx)
		sort.Strings(pending)
		for _, name := range pending {
			p.activate(p.ctx, name)
		}
	}
}

// deactivateLocked detaches the resource's listeners and releases its
// watches. The caller finishes the detachments and stops the released
// watches after unlocking.
func (p *Pipeline) deactivateLocked(st *resourceState) ([]detachment, []*sharedWatch) {
	var detached []detachment
	for reg := range p.regs[st.spec.Name] {
		if d, ok := reg.detachLocked(); ok {
			detached = append(detached, d)
		}
	}
	var released []*sharedWatch
	for _, w := range st.watches {
		w.refs--
		if w.refs == 0 {
			delete(p.watches, w.key)
			released = append(released, w)
		}
	}
	st.watches, st.phase = nil, PhasePending
	return detached, released
}

func (p *Pipeline) attachLocked(reg *Registration, st *resourceState) error {
	h := handlerAdapter{res: st.ref, l: reg.listener}
	resync := st.spec.ResyncPeriod.Duration
	for _, w := range st.watches {
		handle, err := w.informer.AddEventHandlerWithOptions(h, cache.HandlerOptions{ResyncPeriod: &resync})
		if err != nil {
			return fmt.Errorf("informer: resource %q: add listener: %w", st.spec.Name, err)
		}
		reg.attached = append(reg.attached, attachment{w: w, h: handle})
	}
	return nil
}

// restConfig is the configuration of the pipeline's own clients (its
// informers' lists and watches, discovery): c's, instrumented by h.
func (h *apiHealth) restConfig(c *rest.Config) *rest.Config {
	cfg := rest.CopyConfig(c)
	h.instrument(cfg)
	// No gzip on the informers' responses. The apiserver compresses a
	// watch-list stream (the reflector's default since client-go 1.35;
	// WatchListCompression, on by default since 1.37) flush by flush, that is event by event, for the stream's whole
	// life: each event arrives as a gzip member of its own, and the
	// client pays a gzip header and a fresh inflate state per event.
	// With 1 KiB ConfigMaps that was 0.45 s of the daemon's 7 s of CPU
	// over 15,000 events (6%, bench/NOTES.md, case 3), and whether a
	// process got it at all depended on whether its first watch was a
	// watch-list, which is why CPU per event moved between runs. The
	// events are small and the apiserver usually near; the bytes saved
	// cost the apiserver the deflate of every event as well.
	cfg.DisableCompression = true
	return cfg
}
