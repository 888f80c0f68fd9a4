package engine

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"

	"github.com/informer-host/informer-host/abi"
	"github.com/informer-host/informer-host/host/internal/wasmbin"
)

// Options configure an Engine.
type Options struct {
	// CacheDir holds compiled machine code across restarts of the host
	// (wazero's file cache, keyed by module content, wazero version and
	// CPU). "" keeps compiled code in memory only.
	CacheDir string
	// Logger receives the engine's own messages and, unless an instance
	// names another, plugin output. nil discards them.
	Logger *slog.Logger
	// StartTimeout bounds instantiation: the wasm start function,
	// _initialize and ih_init. Zero selects DefaultStartTimeout.
	StartTimeout time.Duration
}

// DefaultStartTimeout is the bound on instantiation when Options.StartTimeout
// is zero. Go plugins initialise their runtime and every imported package
// in _initialize, which takes milliseconds, not seconds.
const DefaultStartTimeout = 10 * time.Second

// MaxMemoryPages is the wasm32 maximum, 4 GiB; Limits.MemoryPages zero
// selects it.
const MaxMemoryPages = 65536

// Limits confine one plugin.
type Limits struct {
	// MemoryPages caps the plugin's linear memory in 64 KiB pages. Zero
	// means MaxMemoryPages. A module whose declared maximum exceeds it is
	// refused at Load.
	MemoryPages uint32
	// CallTimeout bounds every ih_handle and ih_shutdown call. Zero means no
	// deadline: the module is compiled without termination checks, which
	// makes loops in the plugin run faster (up to 3x) but lets a looping
	// plugin hang its instance forever. Use zero only for trusted plugins.
	CallTimeout time.Duration
	// MaxCallTime bounds the wall time of every call, host calls included.
	// CallTimeout does not count the time a capability waits on the
	// network (callState.io), so without this bound a plugin could loop
	// on short network waits forever. Zero means DefaultMaxCallTimeFactor
	// times CallTimeout, and at least MinDefaultMaxCallTime. It applies
	// only with a CallTimeout: a plugin without a deadline has no checks to
	// be stopped by.
	MaxCallTime time.Duration
	// MaxHostCallsPerCall caps the informer_host_v1 calls one export call
	// may make; the call that would make one more is stopped as a
	// deadline failure. Zero means DefaultMaxHostCallsPerCall. It applies
	// with or without a CallTimeout: the host enforces it in the host
	// function itself.
	MaxHostCallsPerCall int
}

// Defaults of the bounds on a call besides CallTimeout (Limits).
const (
	// DefaultMaxCallTimeFactor: MaxCallTime defaults to this many
	// CallTimeouts, room for network waits (an upstream or the apiserver)
	// that a handler's CPU budget is far shorter than...
	DefaultMaxCallTimeFactor = 10
	// MinDefaultMaxCallTime: ...and to no less than this, six of the
	// default I/O timeouts (10s, writes and upstreams), so that a wait
	// that times out ends with ERR_TIMEOUT to the plugin, as ABI.md §17
	// says, rather than with the call killed around it.
	MinDefaultMaxCallTime = time.Minute
	// DefaultMaxHostCallsPerCall is far above what a handler makes (tens
	// of field reads, a few writes or requests) and low enough that a
	// handler looping on a fast capability ends in seconds.
	DefaultMaxHostCallsPerCall = 100_000
)

// Engine loads and runs plugins. It is safe for concurrent use.
//
// Internally there is one wazero Runtime per class of Limits (memory limit,
// deadline on or off), because wazero sets both per runtime, and one
// compilation cache shared by all of them, so identical bytes are compiled
// once per termination mode however many classes use them.
type Engine struct {
	logger       *slog.Logger
	cache        wazero.CompilationCache
	startTimeout time.Duration
	// validDir records modules wazero validated, across restarts (a
	// directory in Options.CacheDir; "" without one). See validateOriginal.
	validDir string
	// rewriteDir keeps modules rewritten with injected checks, by the
	// original's sha256 (a directory in Options.CacheDir; "" without
	// one). See rewrite.
	rewriteDir string
	wasiSigs   map[string]abi.Signature // read-only after New
	wd         *watchdog
	epoch      time.Time // origin of the monotonic clock instances use for deadlines

	// mode selects how call deadlines are enforced; tests and benchmarks
	// switch it to measure the alternatives. Set before any Instantiate.
	mode deadlineMode
	// wazeroChecks compiles deadline modules with wazero's termination
	// checks instead of injected ones (wasmbin/checks.go); benchmarks set it to
	// compare. modeCtxTimeout implies it. Set before any Load.
	wazeroChecks bool

	mu       sync.Mutex // guards the fields below
	closed   bool
	classes  map[classKey]*class
	compiled map[compileKey]*compiled
	// validator validates modules before checks are injected
	// (validateOriginal); created on first use.
	validator wazero.Runtime
}

type deadlineMode int

const (
	modeWatchdog   deadlineMode = iota // one engine-wide watchdog goroutine (default)
	modeCtxTimeout                     // context.WithTimeout per call (for comparison)
)

// classKey identifies a runtime: the Limits that wazero fixes per runtime.
type classKey struct {
	pages    uint32
	deadline bool
}

type class struct {
	key classKey
	rt  wazero.Runtime
}

// compileKey identifies a compilation: same bytes, same runtime class.
type compileKey struct {
	sum   [sha256.Size]byte
	class classKey
}

// compiled is one compiled module shared by every Module loaded from the
// same bytes with the same class. It is reference counted: the compiled
// code is released when the last Module is closed.
type compiled struct {
	key  compileKey
	done chan struct{} // closed when err, cm, cls and injected are set
	err  error         // a *problemsError or a compile error, without the plugin name
	cm   wazero.CompiledModule
	cls  *class
	// injected: a deadline class module compiled with injected termination
	// checks (wasmbin/checks.go), in a runtime without wazero's; cls is then the
	// runtime of the class without deadline. False for a deadline class
	// means wazero's checks (Engine.wazeroChecks, for comparisons only).
	injected bool
	// stopName and startName are the exports of the injected flag and
	// start function (rewritten).
	stopName, startName string
	refs                int // guarded by Engine.mu
}

// problemsError carries ABI problems until Load names the plugin.
type problemsError struct{ problems []string }

func (p *problemsError) Error() string { return fmt.Sprint(p.problems) }

// errClosed is returned by every method of a closed Engine.
var errClosed = errors.New("engine is closed")

// New returns an Engine. Runtimes are created on first use.
func New(ctx context.Context, opts Options) (*Engine, error) {
	e := &Engine{
		logger:       opts.Logger,
		startTimeout: opts.StartTimeout,
		classes:      map[classKey]*class{},
		compiled:     map[compileKey]*compiled{},
		epoch:        time.Now(),
	}
	if e.logger == nil {
		e.logger = slog.New(slog.DiscardHandler)
	}
	if e.startTimeout <= 0 {
		e.startTimeout = DefaultStartTimeout
	}
	if opts.CacheDir != "" {
		c, err := wazero.NewCompilationCacheWithDir(opts.CacheDir)
		if err != nil {
			return nil, fmt.Errorf("compilation cache %s: %w", opts.CacheDir, err)
		}
		e.cache = c
		e.validDir = filepath.Join(opts.CacheDir, "informer-host-validated-"+wazeroVersion())
		if fp, err := rewriteFingerprint(); err == nil {
			e.rewriteDir = filepath.Join(opts.CacheDir, "informer-host-rewritten-"+fp)
		}
	} else {
		e.cache = wazero.NewCompilationCache()
	}
	sigs, err := wasiSignatures(ctx, e.cache)
	if err != nil {
		_ = e.cache.Close(ctx)
		return nil, err
	}
	e.wasiSigs = sigs
	e.wd = newWatchdog(e.now)
	return e, nil
}

// now is the engine's monotonic clock, in nanoseconds since New.
func (e *Engine) now() int64 { return int64(time.Since(e.epoch)) }

// wasiSignatures lists the WASI preview1 functions wazero provides.
func wasiSignatures(ctx context.Context, cache wazero.CompilationCache) (map[string]abi.Signature, error) {
	rt := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfig().WithCompilationCache(cache))
	defer rt.Close(ctx)
	cm, err := wasi_snapshot_preview1.NewBuilder(rt).Compile(ctx)
	if err != nil {
		return nil, fmt.Errorf("WASI: %w", err)
	}
	defer cm.Close(ctx)
	sigs := map[string]abi.Signature{}
	for name, def := range cm.ExportedFunctions() {
		var s abi.Signature
		for _, t := range def.ParamTypes() {
			s.Params = append(s.Params, abi.ValType(t))
		}
		for _, t := range def.ResultTypes() {
			s.Results = append(s.Results, abi.ValType(t))
		}
		sigs[name] = s
	}
	return sigs, nil
}

// Close releases every runtime, module and instance, and the compilation
// cache. Instances in use fail their next call.
func (e *Engine) Close(ctx context.Context) error {
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return nil
	}
	e.closed = true
	classes := e.classes
	e.classes = nil
	validator := e.validator
	e.mu.Unlock()

	e.wd.close()
	var errs []error
	for _, c := range classes {
		errs = append(errs, c.rt.Close(ctx))
	}
	if validator != nil {
		errs = append(errs, validator.Close(ctx))
	}
	errs = append(errs, e.cache.Close(ctx))
	return errors.Join(errs...)
}

// class returns the runtime for key, creating it (with WASI and the host
// module instantiated in it) on first use.
func (e *Engine) class(ctx context.Context, key classKey) (*class, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return nil, errClosed
	}
	if c, ok := e.classes[key]; ok {
		return c, nil
	}
	rt := wazero.NewRuntimeWithConfig(ctx, runtimeConfig(e.cache, key))
	if _, err := wasi_snapshot_preview1.Instantiate(ctx, rt); err != nil {
		_ = rt.Close(ctx)
		return nil, fmt.Errorf("instantiate WASI: %w", err)
	}
	if _, err := instantiateHostModule(ctx, rt); err != nil {
		_ = rt.Close(ctx)
		return nil, fmt.Errorf("instantiate %s: %w", abi.ImportModule, err)
	}
	c := &class{key: key, rt: rt}
	e.classes[key] = c
	return c, nil
}

// runtimeConfig is the wazero configuration of the runtime of class key.
// The spec test (spectest_test.go) runs the WebAssembly spec suite in it.
func runtimeConfig(cache wazero.CompilationCache, key classKey) wazero.RuntimeConfig {
	return wazero.NewRuntimeConfig().
		WithCompilationCache(cache).
		WithMemoryLimitPages(key.pages).
		WithCloseOnContextDone(key.deadline)
}

// Load validates wasm against ABI v1 and compiles it. name (the file name)
// appears in every error, as in `plugin "x.wasm": ...`. A module that is not
// an ABI v1 plugin yields a *LoadError listing every problem.
//
// Loads of identical bytes with the same class of limits share one
// compilation, also when they run concurrently; the compiled code lives
// until the last Module using it is closed. Unless CallTimeout is set, Load
// also runs the module's start functions once under StartTimeout, in a
// termination-checked compilation, so that a start function that never
// returns is refused here rather than hanging Instantiate later.
func (e *Engine) Load(ctx context.Context, name string, wasm []byte, limits Limits) (*Module, error) {
	pages := limits.MemoryPages
	if pages == 0 {
		pages = MaxMemoryPages
	}
	if pages > MaxMemoryPages {
		return nil, fmt.Errorf("plugin %q: memory limit %d pages exceeds the wasm32 maximum of %d", name, pages, MaxMemoryPages)
	}
	if limits.CallTimeout < 0 {
		return nil, fmt.Errorf("plugin %q: negative call timeout %v", name, limits.CallTimeout)
	}
	if limits.MaxCallTime < 0 || limits.MaxHostCallsPerCall < 0 {
		return nil, fmt.Errorf("plugin %q: negative call bound (max call time %v, max host calls per call %d)", name, limits.MaxCallTime, limits.MaxHostCallsPerCall)
	}
	switch {
	case limits.CallTimeout == 0:
		limits.MaxCallTime = 0 // nothing can stop the call
	case limits.MaxCallTime == 0:
		limits.MaxCallTime = max(DefaultMaxCallTimeFactor*limits.CallTimeout, MinDefaultMaxCallTime)
	}
	if limits.MaxHostCallsPerCall == 0 {
		limits.MaxHostCallsPerCall = DefaultMaxHostCallsPerCall
	}
	key := compileKey{sum: sha256.Sum256(wasm), class: classKey{pages: pages, deadline: limits.CallTimeout > 0}}
	c, err := e.acquire(ctx, name, key, wasm)
	if err != nil {
		var pe *problemsError
		if errors.As(err, &pe) {
			return nil, &LoadError{Plugin: name, Problems: pe.problems}
		}
		return nil, fmt.Errorf("plugin %q: %w", name, err)
	}
	limits.MemoryPages = pages
	return &Module{e: e, c: c, name: name, limits: limits}, nil
}

// acquire returns the compilation for key, compiling it if no Load has,
// and waiting for a Load that is compiling it.
func (e *Engine) acquire(ctx context.Context, name string, key compileKey, wasm []byte) (*compiled, error) {
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return nil, errClosed
	}
	if c, ok := e.compiled[key]; ok {
		c.refs++
		e.mu.Unlock()
		select {
		case <-c.done:
		case <-ctx.Done():
			e.release(c)
			return nil, ctx.Err()
		}
		if c.err != nil {
			return nil, c.err
		}
		return c, nil
	}
	c := &compiled{key: key, done: make(chan struct{}), refs: 1}
	e.compiled[key] = c
	e.mu.Unlock()

	c.err = e.compile(ctx, name, c, wasm)
	if c.err != nil {
		e.mu.Lock()
		if e.compiled[key] == c {
			delete(e.compiled, key) // a later Load tries again
		}
		e.mu.Unlock()
	}
	close(c.done)
	if c.err != nil {
		return nil, c.err
	}
	return c, nil
}

// release drops a reference to c, closing its code with the last one.
func (e *Engine) release(c *compiled) {
	e.mu.Lock()
	c.refs--
	last := c.refs == 0 && e.compiled[c.key] == c
	if last {
		delete(e.compiled, c.key)
	}
	e.mu.Unlock()
	if last {
		<-c.done
		if c.cm != nil {
			_ = c.cm.Close(context.Background())
		}
	}
}

func (e *Engine) compile(ctx context.Context, name string, c *compiled, wasm []byte) (err error) {
	defer func() {
		if r := recover(); r != nil { // wazero must not take the host down
			err = fmt.Errorf("compile: internal error: %v", r)
		}
	}()
	info, err := wasmbin.Decode(wasm)
	if err != nil {
		return &problemsError{problems: []string{err.Error()}}
	}
	problems, warnings := checkABI(info, e.wasiSigs)
	if len(problems) > 0 {
		return &problemsError{problems: problems}
	}
	for _, w := range warnings {
		e.logger.Warn(w, slog.String("plugin", name))
	}
	if c.key.class.deadline && !e.wazeroChecks && e.mode != modeCtxTimeout {
		// No fallback to wazero's own checks: they sit at loop headers
		// only, so they stop neither recursion nor bulk instructions.
		return e.compileInjected(ctx, name, c, wasm)
	}
	cls, err := e.class(ctx, c.key.class)
	if err != nil {
		return err
	}
	start := time.Now()
	cm, err := cls.rt.CompileModule(ctx, wasmbin.MergeData(wasm))
	if err != nil {
		return fmt.Errorf("compile: %w", err)
	}
	e.logger.Debug("compiled plugin", slog.String("plugin", name), slog.Duration("took", time.Since(start)),
		slog.Bool("deadline", c.key.class.deadline), slog.Int("bytes", len(wasm)))
	c.cm, c.cls = cm, cls
	if !c.key.class.deadline {
		if err := e.probe(ctx, name, c.key, wasm); err != nil {
			_ = cm.Close(ctx)
			c.cm = nil
			return err
		}
	}
	return nil
}

// compileInjected compiles wasm with injected termination checks in the
// runtime of its memory limit without deadline (see wasmbin/checks.go).
//
// The original is validated by wazero first (validateOriginal): the
// rewriter adds globals, a type and functions, so an invalid module could
// become valid, and its out-of-range indexes would then reach the checks'
// own state. Such a module gets the error it would get without rewriting.
func (e *Engine) compileInjected(ctx context.Context, name string, c *compiled, wasm []byte) error {
	start := time.Now()
	// The validation runs before the compilation, not beside it: wazero's
	// interpreter keeps the lowered code of the whole module until the
	// result is closed (about 80 MiB for a 3.8 MB Go plugin), and beside
	// the compiler's own working set that was most of a cold load's or a
	// reload's peak RSS. In sequence the two peaks do not add up; the
	// load takes the validation's time longer (a tenth of the compile's).
	if verr := e.validateOriginal(ctx, c.key.sum, wasm); verr != nil {
		return fmt.Errorf("compile: %w", verr)
	}
	rw, err := e.rewrite(c.key.sum, wasm)
	injected := time.Since(start)
	var cls *class
	var cm wazero.CompiledModule
	if err == nil {
		cls, err = e.class(ctx, classKey{pages: c.key.class.pages})
	}
	if err == nil {
		cm, err = cls.rt.CompileModule(ctx, rw.Wasm)
		if err != nil {
			err = fmt.Errorf("%w: the rewritten module does not compile: %v", wasmbin.ErrUninstrumentable, err)
		}
	}
	if err != nil {
		if errors.Is(err, wasmbin.ErrUninstrumentable) {
			// A valid module the rewriter does not understand: a gap in
			// wasmbin's decoder, not the plugin's fault.
			return fmt.Errorf("compile: %w (the host cannot bound this module's calls; please report it, "+
				"or run the plugin trusted, without a call deadline)", err)
		}
		return err
	}
	e.logger.Debug("compiled plugin", slog.String("plugin", name), slog.Duration("took", time.Since(start)),
		slog.Duration("inject", injected), slog.Int("loops", rw.Loops), slog.Bool("deadline", true), slog.Int("bytes", len(wasm)))
	c.cm, c.cls, c.injected, c.stopName, c.startName = cm, cls, true, rw.Stop, rw.Start
	return nil
}

// validateOriginal runs wazero's decoder and validator over wasm, in an
// interpreter runtime: its compilation is a fraction of the compiler's
// (pod-logger, 2.9 MB: about 110 ms against 1.1 s) and its result is
// discarded. The memory limit is checked by the real compilation, whose
// memory section is the original's.
//
// With a CacheDir, a module that passed is recorded there by its sha256,
// and not validated again: a load from the warm cache would otherwise
// take twice as long. The directory is as trusted as the compiled machine
// code next to it, which the host runs; it is named after wazero's
// version, whose validator decided.
func (e *Engine) validateOriginal(ctx context.Context, sum [sha256.Size]byte, wasm []byte) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("internal error: %v", r)
		}
	}()
	var mark string
	if e.validDir != "" {
		mark = filepath.Join(e.validDir, hex.EncodeToString(sum[:]))
		if _, err := os.Stat(mark); err == nil {
			return nil
		}
	}
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return errClosed
	}
	if e.validator == nil {
		e.validator = wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfigInterpreter())
	}
	rt := e.validator
	e.mu.Unlock()
	cm, err := rt.CompileModule(ctx, wasm)
	if err != nil {
		return err
	}
	if mark != "" {
		// Best effort: without the record the next load validates again.
		if os.MkdirAll(e.validDir, 0o755) == nil {
			_ = os.WriteFile(mark, nil, 0o644)
		}
	}
	err = cm.Close(ctx)
	// The lowered code just released is most of the heap, and the pacer
	// set the next collection at twice that: the compile that follows
	// would pile its own working set on top before anything is collected
	// (case 9's reload: 145 MB of Go heap with 82 MB of it this garbage).
	// One collection now, once per module the cache has not seen, lets
	// the compile start from the heap the daemon had before.
	runtime.GC()
	return err
}

// Validated reports whether the on-disk cache records wasm as validated:
// a load on this cache (this process's or another's) compiled it, so its
// compiled code is most likely there too. False without a CacheDir.
func (e *Engine) Validated(wasm []byte) bool {
	if e.validDir == "" {
		return false
	}
	sum := sha256.Sum256(wasm)
	_, err := os.Stat(filepath.Join(e.validDir, hex.EncodeToString(sum[:])))
	return err == nil
}

// wazeroVersion is the version of wazero the host is built with, found as
// wazero finds it for its own compilation cache (internal/version): in the
// build information, which test binaries lack.
func wazeroVersion() string {
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, d := range bi.Deps {
			if d.Path == "github.com/tetratelabs/wazero" {
				if d.Replace != nil {
					d = d.Replace
				}
				return d.Version
			}
		}
	}
	return "unknown"
}

// probe runs the start functions of a module that will run without
// deadlines once, in a termination-checked compilation and under
// StartTimeout, so a start function that never returns is refused at Load.
// Start functions see no configuration and no event, so their behaviour
// here is the behaviour every instance will see.
func (e *Engine) probe(ctx context.Context, name string, key compileKey, wasm []byte) error {
	key.class.deadline = true
	c, err := e.acquire(ctx, name, key, wasm)
	if err != nil {
		return err
	}
	defer e.release(c)
	inst, err := e.instantiate(ctx, c, name, Limits{MemoryPages: key.class.pages}, InstanceOptions{
		Logger: slog.New(slog.DiscardHandler),
	}, false)
	if err != nil {
		return fmt.Errorf("start functions (run once at load, with a %v limit): %w", e.startTimeout, unwrapPlugin(err))
	}
	return inst.Close(ctx)
}

// unwrapPlugin strips the `plugin "x": ` prefix a Failure adds, for errors
// that are wrapped again with it.
func unwrapPlugin(err error) error {
	var f *Failure
	if errors.As(err, &f) {
		return &phaseError{f}
	}
	return err
}

type phaseError struct{ f *Failure }

func (p *phaseError) Error() string { return p.f.Phase + ": " + p.f.describe() }
func (p *phaseError) Unwrap() error { return p.f }

// Module is a compiled plugin, ready to instantiate any number of times.
// It is safe for concurrent use.
type Module struct {
	e      *Engine
	c      *compiled
	name   string
	limits Limits
	closed atomic.Bool
}

// Name returns the name the module was loaded under.
func (m *Module) Name() string { return m.name }

// SHA256 returns the hex SHA-256 of the module's bytes.
func (m *Module) SHA256() string { return hex.EncodeToString(m.c.key.sum[:]) }

// ABIVersion returns the ABI version the module speaks.
func (m *Module) ABIVersion() int { return abi.Version }

// Limits returns the module's limits, with defaults filled in.
func (m *Module) Limits() Limits { return m.limits }

// Close releases the module. Instances already created keep working until
// they are closed.
func (m *Module) Close(context.Context) error {
	if m.closed.CompareAndSwap(false, true) {
		m.e.release(m.c)
	}
	return nil
}
