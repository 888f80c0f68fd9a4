package host

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"reflect"
	"runtime"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/client-go/rest"

	"github.com/informer-host/informer-host/abi"
	"github.com/informer-host/informer-host/event"
	"github.com/informer-host/informer-host/host/internal/delivery"
	"github.com/informer-host/informer-host/host/internal/engine"
	"github.com/informer-host/informer-host/host/internal/reconcile"
	"github.com/informer-host/informer-host/informer"
	"github.com/informer-host/informer-host/internal/config"
	"github.com/informer-host/informer-host/internal/filter"
	"github.com/informer-host/informer-host/internal/kubewrite"
	"github.com/informer-host/informer-host/internal/pluginmetrics"
	"github.com/informer-host/informer-host/internal/seenkeys"
	"github.com/informer-host/informer-host/internal/state"
	"github.com/informer-host/informer-host/internal/tracing"
)

// Options configure a Host.
type Options struct {
	// Pipeline delivers the informer events plugins bind to. Required.
	Pipeline *informer.Pipeline
	// Config names the plugin directory and each plugin's settings.
	// Required.
	Config *config.Config
	// Logger receives the host's logs and the plugins' output. Default:
	// slog.Default().
	Logger *slog.Logger
	// CacheDir overrides the config's compilation cache directory ("" =
	// the config's, "-" = no on-disk cache).
	CacheDir string
	// CompileChild is an informer-host binary (the daemon's own) whose
	// hidden `compile` command compiles a reloaded plugin's new version
	// into the on-disk compilation cache at a lower CPU priority, before
	// the host loads it warm (childcompile.go). "" or no on-disk cache:
	// reloads compile in process.
	CompileChild string
	// StartTimeout bounds a plugin's start: start function, _initialize
	// and ih_init. Zero selects the engine's default (10s).
	StartTimeout time.Duration
	// RESTConfig reaches the apiserver for what plugins do there
	// themselves: their Kubernetes Events (grants.events). nil: Events are
	// logged, not recorded.
	RESTConfig *rest.Config
	// Standby starts the host as a warm standby: every plugin it loads is
	// read, validated and compiled, but none is instantiated and nothing
	// is delivered until Activate (see standby.go).
	Standby bool
	// Writes performs plugins' Kubernetes writes (k8s_write, ABI.md
	// §17.1). nil: a plugin granted writes gets ERR_DENIED.
	Writes *kubewrite.Client
	// SeenKeys keeps, per plugin, the keys of the objects it was handed
	// (missed.go); the daemon gives one writing ConfigMaps in its
	// namespace. nil: the state file when plugins.state.path is set,
	// else memory. The host closes it on Stop.
	SeenKeys *seenkeys.Store
	// Tracer traces deliveries and reconciles (internal/tracing). nil:
	// tracing off, and a call pays one nil check.
	Tracer *tracing.Tracer

	// observe, when set, is told of every call into a plugin's ih_handle
	// and its outcome, and of every ih_synced call (an event with only a
	// Resource). Tests use it to see exactly what each plugin got.
	observe func(plugin string, ev *event.Event, res engine.Result, err error)
	// recording, when set, records each plugin's calls (NewRecording).
	recording recordingHooks
	// logRate overrides the engine's limit on plugin output (tests).
	logRate engine.LogRate
}

// Host runs the plugins of one directory: one PluginSlot per *.wasm file.
// It is a prometheus.Collector of the plugins' metrics.
type Host struct {
	log      *slog.Logger
	dir      string // the plugin directory, fixed for the host's life
	metrics  *metrics
	pipeline *informer.Pipeline
	engine   *engine.Engine
	// child compiles reloads' new versions out of process; nil: in
	// process (Options.CompileChild).
	child     *childCompiler
	observe   func(plugin string, ev *event.Event, res engine.Result, err error)
	recording recordingHooks
	logRate   engine.LogRate
	envelopes *envelopeCache
	writes    *kubewrite.Client // nil: no writes
	tracer    *tracing.Tracer   // nil: tracing off
	// viewKeys interns the keys of the plugins' views of the cache,
	// shared by every generation (view.go).
	viewKeys *viewKeys

	// reconcileMetrics are the controller-mode plugins' loops' metrics,
	// under controller-runtime's names (reconcile.go).
	reconcileMetrics *reconcile.Metrics

	// pluginMetrics holds the metrics plugins declare (metric_*); a
	// plugin's outlive its instances and go when its file is removed.
	pluginMetrics *pluginmetrics.Registry

	// filters compiles each distinct expression once, so plugins whose
	// bindings share one evaluate it once per event.
	filters      *filter.Cache
	filterErrors *filter.ErrorLimiter
	// overflowWarnings limits the warning a plugin's buffer overflow
	// logs to one a minute per plugin.
	overflowWarnings *filter.ErrorLimiter
	// denials limits the log line of a refused capability call to one a
	// minute per plugin and reason (capability and function).
	denials *filter.ErrorLimiter
	// state holds every plugin's key-value state, by file name; it
	// outlives instances and versions (see package state).
	state *state.Store
	// seen holds, per plugin, the keys it was handed and still has, so
	// the deletes it missed while away reach it late (missed.go).
	seen *seenkeys.Store
	// outbound serves the plugins' http_* and event_* calls
	// (outbound.go): the config's upstreams and the Event recorders.
	outbound *outbound
	// memRelease gives freed memory back to the OS after large replays
	// (memrelease.go).
	memRelease memReleaser

	// mu guards cfg, slots, loadMu, retiring, standby and held. It comes
	// after a file's load lock and unmatchedMu, before any generation's
	// regsMu and any PluginSlot.mu (the lock order is in doc.go).
	mu    sync.Mutex
	cfg   *config.Config
	slots map[string]*PluginSlot
	// loadMu serialises loads of one file: a reload that arrives while
	// the previous one compiles waits, rather than racing it to the swap.
	// An entry lives while someone holds or waits for it (see lockFile),
	// so names that come and go leave nothing behind.
	loadMu map[string]*fileLock
	// retiring holds the generations being stopped after a reload or an
	// unload, each with a channel closed once it is stopped and its module
	// closed. A retirement waits for the call in progress, which under
	// callTimeout: 0s may never end, so nothing that must go on (the next
	// load of the file, the directory watch) waits for one; Stop does,
	// within its deadline, and does not close the engine under one that is
	// still inside a call.
	retiring map[*generation]chan struct{}
	// orphans are the managed finalizers controllers left behind with
	// onRemove: keep while their plugins stayed (finalizers.go).
	orphans *orphanedFinalizers
	// standby is set until Activate; while it is, held keeps each file's
	// compiled module, by file name, instead of a generation. Both
	// guarded by mu.
	standby bool
	held    map[string]*heldModule
	// paths holds, by plugin name, the module file of a plugin loaded
	// from outside the directory (LoadModule), for a reload with new
	// settings. Guarded by mu.
	paths map[string]string

	// shard is the sharding Assignment plugins are fed by (shard.go).
	shard shardState

	// unmatchedLook is what warnUnmatched last looked at (the directory's
	// *.wasm names and the modules entries), so that it warns only when
	// that changes. unmatchedMu is held for a whole look: looks run on the
	// directory watch's goroutine, in LoadDir and in ApplyConfig. Never
	// taken with mu held.
	unmatchedMu   sync.Mutex
	unmatchedLook string
}

// fileLock is one file's load lock; refs (guarded by Host.mu) counts the
// holder and the waiters.
type fileLock struct {
	mu   sync.Mutex
	refs int
}

// New creates a host and its WebAssembly engine. It loads nothing; see
// LoadDir and Load.
func New(ctx context.Context, opts Options) (*Host, error) {
	if opts.Pipeline == nil || opts.Config == nil {
		return nil, errors.New("host: Options needs Pipeline and Config")
	}
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	eng, cacheDir, err := newEngine(ctx, opts.Config, opts.CacheDir, opts.StartTimeout, log)
	if err != nil {
		return nil, err
	}
	var child *childCompiler
	if opts.CompileChild != "" && cacheDir != "" {
		child = &childCompiler{exe: opts.CompileChild, cacheDir: cacheDir}
	}
	filters, err := filter.NewCache(filter.Options{})
	if err != nil {
		return nil, fmt.Errorf("host: filters: %w", err)
	}
	h := &Host{
		filters: filters, filterErrors: filter.NewErrorLimiter(time.Minute), overflowWarnings: filter.NewErrorLimiter(time.Minute),
		denials: filter.NewErrorLimiter(time.Minute),
		log:     log, dir: opts.Config.PluginDir(), metrics: newMetrics(), pipeline: opts.Pipeline, engine: eng, envelopes: newEnvelopeCache(), viewKeys: newViewKeys(),
		observe: opts.observe, recording: opts.recording, logRate: opts.logRate,
		cfg: opts.Config, slots: map[string]*PluginSlot{}, loadMu: map[string]*fileLock{},
		retiring: map[*generation]chan struct{}{}, standby: opts.Standby, held: map[string]*heldModule{}, paths: map[string]string{},
		pluginMetrics: pluginmetrics.New(pluginmetrics.Options{}), reconcileMetrics: reconcile.NewMetrics(),
		writes: opts.Writes, orphans: newOrphanedFinalizers(), tracer: opts.Tracer, child: child,
	}
	if h.outbound, err = newOutbound(opts, log); err != nil {
		_ = eng.Close(context.Background())
		return nil, fmt.Errorf("host: %w", err)
	}
	if h.state, err = openState(ctx, opts.Config, h); err != nil {
		_ = eng.Close(context.Background())
		return nil, fmt.Errorf("host: plugin state: %w", err)
	}
	h.seen = newSeenKeys(h, opts.SeenKeys)
	return h, nil
}

func newEngine(ctx context.Context, cfg *config.Config, cacheDir string, startTimeout time.Duration, log *slog.Logger) (*engine.Engine, string, error) {
	switch cacheDir {
	case "":
		dir, err := cfg.CompilationCacheDir()
		if err != nil {
			log.Warn("no on-disk compilation cache; every start compiles every plugin", "err", err)
		}
		cacheDir = dir
	case "-":
		cacheDir = ""
	}
	eng, err := engine.New(ctx, engine.Options{CacheDir: cacheDir, Logger: log, StartTimeout: startTimeout})
	if err != nil {
		return nil, "", fmt.Errorf("host: start the WebAssembly engine: %w", err)
	}
	return eng, cacheDir, nil
}

// LoadDir loads every *.wasm file in the plugin directory, compiling up to
// one module per CPU at once. A module that fails to load is reported (in
// the log and in Status) and skipped; the others load. The error joins
// every failure.
func (h *Host) LoadDir(ctx context.Context) error {
	dir := h.dir
	names, err := wasmNames(dir)
	if err != nil {
		return fmt.Errorf("host: plugin directory: %w", err)
	}
	h.warnUnmatched()
	cfg := h.config()
	files := make([]string, 0, len(names))
	for _, n := range names {
		if !cfg.IsSourced(n) { // its source loads it (LoadModule); warnUnmatched says the file is ignored
			files = append(files, filepath.Join(dir, n))
		}
	}
	return perCPU(files, func(f string) error { return h.Load(ctx, f) })
}

// perCPU calls f for every item, up to one call per CPU at once, and
// joins their errors.
func perCPU(items []string, f func(string) error) error {
	errs := make([]error, len(items))
	sem := make(chan struct{}, runtime.NumCPU())
	var wg sync.WaitGroup
	for i, it := range items {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			errs[i] = f(it)
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// Load loads the module at path, or swaps in a new version of it. The new
// version is compiled, instantiated and initialised while the old one (if
// any) keeps serving; if any of that fails, the old version keeps running
// and the error says what is wrong. On success the new version's listeners
// are registered, which replays the informer cache to it as initial-list
// adds, and only then is the old version stopped, after the event it is
// handling; Load does not wait for that. An unchanged file (same sha256)
// is not loaded again. Only a regular file (or a link to one) of at most
// plugins.maxModuleSize bytes is read; anything else is refused, and
// reported once, not on every look.
func (h *Host) Load(ctx context.Context, path string) error {
	return h.load(ctx, filepath.Base(path), path, false)
}

// LoadModule is Load for a module kept outside the plugin directory (a
// plugin source's cached blob, internal/pluginsource): the module at path
// is loaded, or swapped in, as the plugin called name, a plugins.modules
// file name. The same rules hold: an unchanged sha256 is not loaded again,
// and a version that fails leaves the running one running. A config
// reload that changes the plugin's settings reloads it from path.
func (h *Host) LoadModule(ctx context.Context, name, path string) error {
	if name == "" || filepath.Base(name) != name || filepath.Ext(name) != ".wasm" {
		return fmt.Errorf("host: plugin name %q must be a plain file name ending in .wasm", name)
	}
	return h.load(ctx, name, path, false)
}

// load is Load of the module at path as plugin name; force loads even
// unchanged bytes (new settings).
func (h *Host) load(ctx context.Context, name, path string, force bool) error {
	defer h.lockFile(name)()
	h.mu.Lock()
	if path == filepath.Join(h.dir, name) {
		delete(h.paths, name)
	} else {
		h.paths[name] = path
	}
	h.mu.Unlock()

	slot := h.slot(name)
	wasm, err := readModule(path, h.config().ModuleSizeLimit())
	if err != nil {
		err = fmt.Errorf("plugin %q: read: %w", name, err)
		// The refusal stands for the file as it is: reported once, and
		// again only when it changes.
		key := "unreadable: " + err.Error()
		slot.mu.Lock()
		again := slot.refusedSHA == key
		slot.mu.Unlock()
		if again && !force {
			return err
		}
		return slot.loadFailed(err, key)
	}
	sum := sha256.Sum256(wasm)
	sha := hex.EncodeToString(sum[:])
	held := h.holds(name, sha) // before slot.mu: lock order
	slot.mu.Lock()
	// Same bytes as the running (or quarantined) version, or as a version
	// that was refused: loading them again cannot end differently.
	unchanged := slot.sha256 == sha && (slot.current != nil || held)
	// A new version of a running plugin: its bytes have no compiled code
	// yet (the same bytes with new settings do, and so do a rollback's,
	// which Validated tells below: a child would only add its start).
	reload := slot.current != nil && slot.sha256 != sha
	refused := slot.refusedSHA == sha
	refusal := slot.lastErr
	// The running version's bytes put back over a refused version: the
	// refusal is about a file that is no longer there.
	stale := unchanged && slot.refusedSHA != ""
	if stale {
		slot.refusedSHA, slot.lastErr = "", ""
	}
	slot.mu.Unlock()
	if stale {
		slot.log.Info("the running version's file is back; the refusal of the other version no longer applies", "sha256", sha[:12])
	}
	if unchanged && !force {
		return nil
	}
	if refused && !force {
		return errors.New(refusal)
	}

	cfg := h.config()
	settings := cfg.SettingsFor(name)
	configJSON, err := cfg.ConfigJSON(name)
	if err != nil {
		return slot.loadFailed(fmt.Errorf("plugin %q: %w", name, err), sha)
	}
	start := time.Now()
	if reload && h.child != nil && !h.engine.Validated(wasm) {
		// The running version keeps delivering while its successor
		// compiles: the child's lower priority and its own heap keep the
		// compile off the daemon's latency and peak memory.
		compileInChild(ctx, h.child, slot.log, wasm, engineLimits(settings.Limits))
	}
	mod, err := h.engine.Load(ctx, name, wasm, engineLimits(settings.Limits))
	if err != nil {
		return slot.loadFailed(err, sha)
	}
	if h.holdBack(slot, &heldModule{mod: mod, settings: settings, configJSON: configJSON, sha: sha}) {
		return nil
	}
	return h.start(ctx, slot, mod, settings, configJSON, sha, start)
}

// start instantiates and registers a compiled version of slot's plugin,
// and swaps it in for the running one. start is when its load began.
func (h *Host) start(ctx context.Context, slot *PluginSlot, mod *engine.Module, settings config.PluginSettings, configJSON []byte, sha string, start time.Time) error {
	name := slot.name
	compiled := time.Since(start)
	warnUngranted(slot.log, mod.Requested(), settings.Grants)
	if settings.Controller != nil && !mod.Reconciles() {
		_ = mod.Close(context.Background())
		return slot.loadFailed(fmt.Errorf("plugin %q: its config has a controller: block, but the module does not export %s; "+
			"build it as a controller (a kit's reconciler) or remove controller: to run it on events", name, abi.ExportReconcile), sha)
	}
	g := newGeneration(slot, mod, settings, configJSON)
	inst, err := g.instantiate(ctx)
	if err != nil {
		_ = mod.Close(context.Background())
		return slot.loadFailed(err, sha)
	}
	if err := g.register(); err != nil {
		_ = inst.Close(context.Background())
		_ = mod.Close(context.Background())
		return slot.loadFailed(err, sha)
	}

	// g is current before its worker starts, so its first failure (only
	// the current generation may change the slot's state) is its own.
	slot.mu.Lock()
	old, oldSHA := slot.current, slot.sha256
	slot.current, slot.sha256, slot.state, slot.lastErr, slot.failures, slot.lastFailure = g, sha, StateRunning, "", 0, time.Time{}
	slot.refusedSHA, slot.loadedAt = "", time.Now()
	slot.mu.Unlock()
	go g.run(inst)
	if old != nil {
		slot.c.reloads.Add(1)
		h.forgetBindings(name, old.settings, settings)
		h.retire(old)
	}
	attrs := []any{"sha256", sha[:12], "compile", compiled.Round(time.Millisecond),
		"total", time.Since(start).Round(time.Millisecond), "bindings", bindingNames(settings)}
	if old == nil {
		slot.log.Info("plugin loaded", attrs...)
	} else {
		slot.log.Info("plugin reloaded", append(attrs, "previous", oldSHA[:min(12, len(oldSHA))])...)
	}
	return nil
}

// retire stops a generation: its listeners go first (so it receives
// nothing more), then its worker after its current event, then its module.
// On a reload the replacement is registered before this is called.
func (g *generation) retire() {
	g.close()
	g.stopOnce.Do(func() { close(g.stopCh) })
	<-g.done
	_ = g.module.Close(context.Background())
}

// retire stops g in the background, tracked in h.retiring.
func (h *Host) retire(g *generation) <-chan struct{} {
	done := make(chan struct{})
	h.mu.Lock()
	h.retiring[g] = done
	h.mu.Unlock()
	go func() {
		g.retire()
		h.mu.Lock()
		delete(h.retiring, g)
		h.mu.Unlock()
		close(done)
	}()
	return done
}

// Unload stops and removes the plugin of file name (a base name): its
// listeners are removed, its worker stops after its current event, its
// shutdown export is called. It returns when all of that is done.
func (h *Host) Unload(name string) {
	h.unload(context.Background(), name)
}

// unload is Unload, waiting for the plugin to stop only until ctx ends:
// a plugin inside a call without a deadline may never stop. It goes on
// stopping in the background (Stop knows of it).
func (h *Host) unload(ctx context.Context, name string) {
	unlock := h.lockFile(name)
	h.mu.Lock()
	slot := h.slots[name]
	delete(h.slots, name)
	held := h.held[name]
	delete(h.held, name)
	delete(h.paths, name)
	h.mu.Unlock()
	if held != nil {
		_ = held.mod.Close(context.Background())
	}
	if slot == nil {
		unlock()
		return
	}
	slot.mu.Lock()
	g := slot.current
	slot.current, slot.state = nil, StateStopped
	slot.mu.Unlock()
	// The slot is gone: a new file of this name makes a new one, and need
	// not wait for this one to stop.
	unlock()
	h.filterErrors.ForgetPrefix(name + "/")
	h.denials.ForgetPrefix(name + "\x00")
	if g != nil {
		select {
		case <-h.retire(g):
		case <-ctx.Done():
			slot.log.Warn("plugin still stopping (inside a call); removed, it stops in the background")
			h.metrics.forget(name)
			h.pluginMetrics.Forget(name)
			h.reconcileMetrics.Forget(name)
			h.outbound.forget(name)
			return
		}
	}
	h.metrics.forget(name)
	h.pluginMetrics.Forget(name)
	h.reconcileMetrics.Forget(name)
	h.outbound.forget(name)
	slot.log.Info("plugin unloaded")
}

// forgetBindings drops the filter error limits of the bindings a reload
// removed.
func (h *Host) forgetBindings(name string, old, cur config.PluginSettings) {
	keep := map[string]bool{}
	for _, b := range cur.Bindings {
		keep[b.Resource] = true
	}
	for _, b := range old.Bindings {
		if !keep[b.Resource] {
			h.filterErrors.Forget(name + "/" + b.Resource)
		}
	}
}

// Stop unloads every plugin. Each drains its queue first, for as long as
// ctx allows; then it is stopped after its current event. A plugin still
// busy when ctx ends is abandoned (Stop returns without it).
func (h *Host) Stop(ctx context.Context) { h.stop(ctx, true) }

// Halt is Stop without the drain: every plugin stops after the event it is
// handling, and the events waiting for it are dropped. For a replica that
// lost its leader lease: another replica delivers them already, and
// controller-runtime, too, stops at once rather than gracefully then.
// ctx bounds the wait for a plugin still inside a call.
func (h *Host) Halt(ctx context.Context) { h.stop(ctx, false) }

func (h *Host) stop(ctx context.Context, drain bool) {
	h.mu.Lock()
	for name, m := range h.held {
		_ = m.mod.Close(context.Background())
		delete(h.held, name)
	}
	slots := make([]*PluginSlot, 0, len(h.slots))
	for _, s := range h.slots {
		slots = append(slots, s)
	}
	h.mu.Unlock()
	var wg sync.WaitGroup
	var stuck atomic.Bool
	for _, s := range slots {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.mu.Lock()
			g := s.current
			s.mu.Unlock()
			if g == nil {
				return
			}
			if g.abandoned.Load() {
				return // an earlier Stop gave up on it already
			}
			// No new events; then let the worker finish what is queued,
			// or stop it after its current event.
			g.close()
			if drain {
				g.drainOnce.Do(func() { close(g.drainCh) })
			} else {
				g.stopOnce.Do(func() { close(g.stopCh) })
			}
			select {
			case <-g.done:
				h.Unload(s.name)
			case <-ctx.Done():
				// The worker may be inside a long call (a plugin without a
				// deadline may never return): tell it to stop after that
				// call, and do not wait for it. The process is exiting.
				s.log.Warn("plugin did not drain its queue before the shutdown deadline; abandoning it",
					"waiting", g.queue.Stats().Depth)
				g.stopOnce.Do(func() { close(g.stopCh) })
				g.abandoned.Store(true)
				stuck.Store(true)
			}
		}()
	}
	wg.Wait()
	// Versions replaced or removed earlier and still stopping.
	h.mu.Lock()
	retiring := make([]chan struct{}, 0, len(h.retiring))
	for _, done := range h.retiring {
		retiring = append(retiring, done)
	}
	h.mu.Unlock()
	for _, done := range retiring {
		select {
		case <-done:
		case <-ctx.Done():
			stuck.Store(true)
		}
	}
	if len(retiring) > 0 && stuck.Load() {
		h.log.Warn("replaced or removed plugin versions did not stop before the shutdown deadline; abandoning them")
	}
	closeSeenKeys(h)
	h.closeState(context.Background())
	h.outbound.close()
	if !stuck.Load() {
		// Closing the engine under a worker still inside a call is not
		// safe; an abandoned worker dies with the process instead.
		_ = h.engine.Close(context.Background())
	}
}

// ApplyConfig switches to a new configuration. Every loaded plugin whose
// effective settings changed (bindings, delivery, limits, config value), or
// that is bound to a resource whose watch changed, is reloaded, through the same swap as a new file: the running
// version keeps running if the new settings cannot be applied. Plugins
// whose settings did not change are not touched. The plugin directory is
// taken from the configuration the host started with.
func (h *Host) ApplyConfig(ctx context.Context, cfg *config.Config) error {
	if err := h.outbound.update(cfg); err != nil {
		return fmt.Errorf("host: %w", err)
	}
	h.mu.Lock()
	old := h.cfg
	h.cfg = cfg
	names := make([]string, 0, len(h.slots))
	for name := range h.slots {
		names = append(names, name)
	}
	h.mu.Unlock()
	sort.Strings(names)
	// A resource whose watch changed (selectors, namespaces, ...) may have
	// dropped objects its plugins still hold: they are reloaded too, so
	// they start again from the new watch's contents.
	changedWatch := map[string]bool{}
	for _, r := range cfg.Resources {
		if o, ok := old.Resource(r.Name); ok && !reflect.DeepEqual(*o, r) {
			changedWatch[r.Name] = true
		}
	}
	var errs []error
	for _, name := range names {
		oldJSON, _ := old.ConfigJSON(name)
		newJSON, _ := cfg.ConfigJSON(name)
		settings := cfg.SettingsFor(name)
		watchChanged := false
		for _, b := range settings.Bindings {
			watchChanged = watchChanged || changedWatch[b.Resource]
		}
		// verify is the plugin source's business (it is checked before
		// the bytes get here), not the running plugin's.
		was := old.SettingsFor(name)
		was.Verify, settings.Verify = nil, nil
		if reflect.DeepEqual(was, settings) && bytes.Equal(oldJSON, newJSON) && !watchChanged {
			continue
		}
		h.mu.Lock()
		path, ok := h.paths[name]
		h.mu.Unlock()
		if !ok {
			path = filepath.Join(h.dir, name)
		}
		h.log.Info("plugin settings or watched resources changed; reloading", "plugin", name)
		handoff := handoffFor(h, name, was, settings)
		err := h.load(ctx, name, path, true)
		errs = append(errs, err)
		if err == nil {
			h.orphans.adopted(name, settings)
			if handoff != nil {
				handoff.settle(ctx)
			}
		}
	}
	h.warnUnmatched()
	return errors.Join(errs...)
}

func (h *Host) config() *config.Config {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.cfg
}

// lockFile takes the load lock of file name and returns its release.
func (h *Host) lockFile(name string) (unlock func()) {
	h.mu.Lock()
	l := h.loadMu[name]
	if l == nil {
		l = &fileLock{}
		h.loadMu[name] = l
	}
	l.refs++
	h.mu.Unlock()
	l.mu.Lock()
	return func() {
		l.mu.Unlock()
		h.mu.Lock()
		if l.refs--; l.refs == 0 {
			delete(h.loadMu, name)
		}
		h.mu.Unlock()
	}
}

// slot returns the slot for name, creating it in StateLoading.
func (h *Host) slot(name string) *PluginSlot {
	h.mu.Lock()
	defer h.mu.Unlock()
	s := h.slots[name]
	if s == nil {
		s = &PluginSlot{name: name, h: h, log: h.log.With("plugin", name), state: StateLoading, obs: h.metrics.forSlot(name)}
		h.slots[name] = s
	}
	return s
}

// loadFailed records a version that could not be loaded (sha "" when its
// bytes could not even be read). A running version keeps running.
func (s *PluginSlot) loadFailed(err error, sha string) error {
	s.h.mu.Lock()
	held := s.h.held[s.name] != nil
	s.h.mu.Unlock()
	s.mu.Lock()
	s.lastErr = err.Error()
	s.refusedSHA = sha
	// A standby's held version counts as running: it starts on Activate.
	running := s.current != nil || held
	if !running {
		s.state = StateFailed
	}
	s.mu.Unlock()
	s.c.reloadFailures.Add(1)
	if running {
		s.log.Error("new version refused; the running version keeps running", "err", err)
	} else {
		s.log.Error("plugin not loaded", "err", err)
	}
	return err
}

// QueueStats is a snapshot of a plugin's delivery queue's counters.
type QueueStats = delivery.Stats

// PluginStatus reports one plugin: the facts, which the daemon's server
// presents (/debug/plugins, readiness) and the metrics count.
type PluginStatus struct {
	File       string
	SHA256     string
	ABIVersion int
	State      PluginState
	Bindings   []string
	// Synced: the plugin has handled the initial list of every binding
	// (the last one returned from its call), since its instance started
	// or its last overflow repair.
	Synced bool
	// Degraded: the plugin's buffer overflowed, so its view of the cache
	// may be wrong, until the repair from the cache that follows is done.
	Degraded bool
	// Repairs counts the overflow repairs of the current version.
	Repairs  uint64
	Queue    QueueStats
	Counters Counters
	// Filtered counts, per binding (resource name), the events its filter
	// kept from the plugin.
	Filtered map[string]FilterCounts
	// Requested are the capabilities the running version imports
	// functions of (ABI.md §16); Granted those config.yaml grants it. A
	// requested capability that is not granted is refused call by call
	// with ERR_DENIED.
	Requested []string
	Granted   []string
	LastError string
	// Failures counts the running version's failures since it was last
	// stable (limits.stablePeriod without one); maxConsecutiveFailures
	// of them quarantine it.
	Failures int
	// Parked lists the objects not handed to the plugin until they
	// change or their backoff ends (limits.parkAfter failures each);
	// GaveUp the objects given up on last (delivery.maxRetries
	// exhausted), at most 32. Both are the running version's.
	Parked []ObjectFailure
	GaveUp []ObjectFailure
	// LoadedAt is when the running version was loaded; LastEventAt when it
	// (or a version before it) last returned from ih_handle.
	LoadedAt    time.Time
	LastEventAt time.Time
	// Controller reports a controller-mode plugin's loop, nil in event
	// mode.
	Controller *ControllerStatus
}

// FilterCounts are the events one binding's filter kept from its plugin.
type FilterCounts struct {
	Filtered   uint64 // the expression was false
	Unchanged  uint64 // an update changed none of the changed fields
	Resync     uint64 // an update that changed nothing
	Generation uint64 // an update that left metadata.generation as it was (generationChanged)
	Error      uint64 // evaluation failed and onFilterError is closed
	EvalErrors uint64 // evaluations that failed, delivered or not
}

// Status reports every plugin, sorted by file name.
func (h *Host) Status() []PluginStatus {
	h.mu.Lock()
	slots := make([]*PluginSlot, 0, len(h.slots))
	for _, s := range h.slots {
		slots = append(slots, s)
	}
	held := make(map[string]config.PluginSettings, len(h.held))
	for name, m := range h.held {
		held[name] = m.settings
	}
	h.mu.Unlock()
	out := make([]PluginStatus, 0, len(slots))
	for _, s := range slots {
		s.mu.Lock()
		st := PluginStatus{File: s.name, SHA256: s.sha256, State: s.state, LastError: s.lastErr, Failures: s.failures, Counters: s.c.snapshot()}
		for res, c := range s.counts {
			if st.Filtered == nil {
				st.Filtered = map[string]FilterCounts{}
			}
			st.Filtered[res] = FilterCounts{Filtered: c.filtered.Load(), Unchanged: c.unchanged.Load(),
				Resync: c.resync.Load(), Generation: c.generation.Load(), Error: c.errors.Load(), EvalErrors: c.evalErrors.Load()}
		}
		st.LoadedAt = s.loadedAt
		if ns := s.lastEvent.Load(); ns != 0 {
			st.LastEventAt = time.Unix(0, ns)
		}
		g := s.current
		s.mu.Unlock()
		// The generation is read without the slot's lock (lock order at
		// PluginSlot).
		if g != nil {
			st.ABIVersion = g.module.ABIVersion()
			st.Bindings = bindingNames(g.settings)
			st.Queue = g.queue.Stats()
			st.Synced = st.State == StateRunning && g.synced.Load()
			st.Degraded = st.Queue.Degraded
			st.Repairs = g.repairs.Load()
			st.Parked, st.GaveUp = g.conv.report()
			if g.ctl != nil {
				st.Controller = g.ctl.status(st.State, len(st.Parked))
			}
			st.Requested, st.Granted = g.module.Requested(), g.settings.Grants.Granted()
		} else if settings, ok := held[s.name]; ok {
			st.Bindings = bindingNames(settings)
			st.Granted = settings.Grants.Granted()
		}
		out = append(out, st)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].File < out[j].File })
	return out
}

func bindingNames(s config.PluginSettings) []string {
	out := make([]string, 0, len(s.Bindings))
	for _, b := range s.Bindings {
		out = append(out, b.Resource)
	}
	return out
}
