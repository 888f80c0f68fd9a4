package engine

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync/atomic"
	"time"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/sys"

	"github.com/informer-host/informer-host/abi"
)

// InstanceOptions configure one instance of a module.
type InstanceOptions struct {
	// Config is handed to ih_init (the plugin pulls it with config_read).
	// It is copied.
	Config []byte
	// Logger receives the plugin's stdout and stderr, line by line, and
	// its log import calls. nil selects the engine's logger, with
	// plugin=<name> added; a Logger given here is used as it is (the
	// caller has usually named the plugin already).
	Logger *slog.Logger
	// LogRate limits how fast the plugin may log. The zero value selects
	// the defaults.
	LogRate LogRate

	// Capabilities (ABI.md §16): nil denies the capability, and every
	// call of its functions returns ERR_DENIED.

	// Cache serves cache_get, cache_list and cache_index.
	Cache CacheReader
	// State is the plugin's key-value state (state_*).
	State StateBucket
	// Metrics is the plugin's metrics (metric_*, ABI.md §16.3).
	Metrics MetricSet
	// Writes serves k8s_write (capability "writes", ABI.md §17.1).
	Writes ClusterWriter
	// HTTP serves http_request to the granted upstreams (ABI.md §17.3).
	HTTP HTTPClient
	// Events records event_record's Kubernetes Events (ABI.md §17.2).
	Events EventRecorder
	// OnDenied is called on every call refused with ERR_DENIED, with the
	// capability ("cache") and the function ("cache_get"), on the
	// instance's goroutine during the call; it must be cheap (the host
	// rate-limits its log line and counts). nil: nothing is reported.
	OnDenied func(capability, function string)

	// Determinism, when set, replaces the system clocks and crypto/rand
	// with reproducible ones (replay; see Determinism).
	Determinism *Determinism
}

// Code is the outcome of a successful ih_handle call.
type Code int

const (
	CodeOK    Code = iota // handled
	CodeRetry             // deliver the event again later
	CodeDrop              // do not deliver the event again
	CodeError             // the handler failed (returned 3 or an unknown value); drop and log Message
)

func (c Code) String() string {
	switch c {
	case CodeOK:
		return "ok"
	case CodeRetry:
		return "retry"
	case CodeDrop:
		return "drop"
	}
	return "error"
}

// Result is what ih_handle returned.
type Result struct {
	Code Code
	// Message is what the plugin passed to set_error during the call, if
	// anything.
	Message string
	// Raw is ih_handle's return value.
	Raw int32
}

// Kind classifies a Failure.
type Kind int

const (
	// KindTrap: the plugin trapped (unreachable, out-of-bounds access,
	// stack overflow, division by zero, ...) or exited (a Go plugin's
	// panic or os.Exit calls proc_exit).
	KindTrap Kind = iota + 1
	// KindTimeout: a call ran past its deadline.
	KindTimeout
	// KindMemory: the plugin ran out of memory at its limit.
	KindMemory
	// KindABI: the plugin broke the ABI at run time (for example it exited
	// with code 0 in the middle of a call, so there is no result).
	KindABI
)

func (k Kind) String() string {
	switch k {
	case KindTrap:
		return "trap"
	case KindTimeout:
		return "timeout"
	case KindMemory:
		return "out of memory"
	case KindABI:
		return "ABI violation"
	}
	return "unknown"
}

// Failure is the error of a call that did not complete. The instance is
// dead afterwards: its next calls fail with ErrInstanceDead, and the caller
// should Close it and instantiate afresh.
type Failure struct {
	Plugin string
	Phase  string // "instantiate", "_initialize", "ih_init", "ih_handle", "ih_reconcile", "ih_shutdown"
	Kind   Kind
	Err    error
	// Stack is the wasm stack trace wazero reported, one frame per line
	// (empty for exits and timeouts).
	Stack string
	// Output is the last lines the plugin wrote during the call (a Go
	// plugin's panic message and goroutine dump land here).
	Output string
	// ExitCode is the plugin's exit code when it exited (KindTrap from
	// proc_exit), else 0.
	ExitCode uint32
}

func (f *Failure) describe() string { return f.Kind.String() + ": " + f.Err.Error() }

func (f *Failure) Error() string {
	return fmt.Sprintf("plugin %q: %s: %s", f.Plugin, f.Phase, f.describe())
}

func (f *Failure) Unwrap() error { return f.Err }

// ErrInstanceDead is returned by calls on an instance after a Failure.
var ErrInstanceDead = errors.New("instance is dead after a failure; close it and instantiate again")

// ErrRefused is wrapped by Instantiate's error when ih_init refused the
// configuration.
var ErrRefused = errors.New("plugin refused its configuration")

// callState is the mutable state of one instance that host functions and
// WASI output see during a call. It is touched only by the goroutine
// calling into the instance (guest host calls run on it), so it needs no
// locking: Instance methods must not be called concurrently.
type callState struct {
	env    *Envelope // the event being handled; nil outside ih_handle
	config []byte
	errMsg []byte
	errSet bool
	logger *slog.Logger
	out    *output
	path   abi.PathScanner
	// scratch formats numbers for field_read without allocating.
	scratch []byte
	// abort is closed when the current call is being killed; a guest
	// sleeping in poll_oneoff wakes on it, and WASI calls over large
	// buffers (random_get, fd_write) stop.
	abort <-chan struct{}

	cache    CacheReader                       // nil: cache reads denied
	state    StateBucket                       // nil: state denied
	metrics  MetricSet                         // nil: metrics denied
	writes   ClusterWriter                     // nil: writes denied
	onDenied func(capability, function string) // may be nil
	http     HTTPClient                        // nil: http denied
	events   EventRecorder                     // nil: events denied
	// httpCall holds the last http_request's response, for
	// http_response_read, until the export call returns.
	httpCall httpCall
	// handles are the objects cache_get returned during the current call,
	// handle FirstHandle+i being handles[i]. Emptied when the call returns
	// (call, callInit), so a handle never outlives its call.
	handles []map[string]any
	// keys is cache_list's reused key buffer.
	keys []string

	// inst is the instance this state belongs to, for io's pause of the
	// call deadline. Set once at instantiation.
	inst *Instance
	// callCtx is the context of the export call running now (Handle,
	// Synced, Shutdown, ih_init), nil between calls: what a capability's
	// network wait is canceled by when the host stops the call.
	callCtx context.Context
	// resultMsg is the message of the last capabilities II call of the
	// current export call (result_message); emptied at every call.
	resultMsg []byte
	// flags are header flags the host adds for this plugin to the shared
	// envelope's (abi.FlagSelfWrite), set by HandleWith for one call.
	flags uint8
	// batch is the batch being handled (ih_handle_batch), see batch.go.
	batch batchState
	// ctl serves the controller functions during an ih_reconcile call
	// (Reconcile); nil otherwise, which is what makes them ERR_NO_EVENT
	// anywhere else.
	ctl ControllerCall
	// hostCalls counts the informer_host_v1 calls of the current export
	// call (countHostCall), against maxHostCalls (Limits.
	// MaxHostCallsPerCall; 0: no cap). Reset at every call.
	hostCalls, maxHostCalls int
}

// aborted reports whether the current call is being killed.
func (st *callState) aborted() bool {
	select {
	case <-st.abort:
		return true
	default:
		return false
	}
}

// hostChunk is how many bytes a WASI call that takes a size handles
// between looks at callState.abort. Host calls run Go code, which the
// runtime can preempt, so only the deadline needs this.
const hostChunk = 64 << 10

// abortCall ends the guest's call from inside a WASI host function, the
// way wazero's proc_exit does: the panic unwinds the host function (Go
// frames only: compiled code has exited to Go to call it), and the call
// returns this exit error, which Instance.failure reports as a timeout
// because the call was killed. Returning an errno instead would let the
// guest go on until its next look at the flag, up to wasmbin.CheckBudget
// iterations later.
func abortCall() {
	panic(sys.NewExitError(sys.ExitCodeDeadlineExceeded))
}

// guestRand is an instance's random_get source: crypto/rand (or src when
// set), read hostChunk bytes at a time, ending the call once it is being
// killed.
type guestRand struct {
	st  *callState
	src io.Reader
}

func (g guestRand) Read(p []byte) (int, error) {
	n := 0
	for n < len(p) {
		if g.st.aborted() {
			abortCall()
		}
		chunk := p[n : n+min(len(p)-n, hostChunk)]
		var m int
		var err error
		if g.src != nil {
			m, err = io.ReadFull(g.src, chunk)
		} else {
			m, err = rand.Read(chunk)
		}
		n += m
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

// instanceCtx is the context every call into an instance runs with. It is
// created once per instance: it carries the callState to host functions
// (Value) and, for instances with a deadline, the channel the watchdog
// closes to kill the running call (Done/Err), which wazero watches.
type instanceCtx struct {
	st     *callState
	done   chan struct{} // nil without a deadline
	killed atomic.Bool
	// why is the limit that stopped the call (a stopReason; 0 while none
	// has). Every stop sets it before killed, and only the first stop
	// sets it, so whoever sees killed finds the reason.
	why atomic.Int32
	// stop is the injected termination flag (wasmbin/checks.go) of an instance
	// compiled with injected checks, else nil. Set once, before the first
	// call that can be killed.
	stop api.MutableGlobal
}

func (c *instanceCtx) Deadline() (time.Time, bool) { return time.Time{}, false }
func (c *instanceCtx) Done() <-chan struct{}       { return c.done }
func (c *instanceCtx) Err() error {
	if c.killed.Load() {
		return context.DeadlineExceeded
	}
	return nil
}
func (c *instanceCtx) Value(k any) any {
	if _, ok := k.(stateKey); ok {
		return c.st
	}
	return nil
}

// stopReason is the limit a call was stopped by (instanceCtx.why).
type stopReason int32

const (
	stopCPU       stopReason = iota + 1 // CallTimeout, or StartTimeout while instantiating
	stopTotal                           // MaxCallTime
	stopHostCalls                       // MaxHostCallsPerCall
)

// kill makes the running call fail with a deadline error, why naming the
// limit. Idempotent: the first reason stays.
// With injected checks, setting the flag makes the guest trap at its next
// exit to Go (within wasmbin.CheckBudget units of work); with wazero's, closing
// done makes wazero close the module. Either way a guest sleeping in
// poll_oneoff, or in a WASI call over a large buffer, ends the call
// (done, callState.abort). Called from the watchdog's goroutine or the
// start timer's while the guest runs on another: see abi/RATIONALE.md,
// Deadlines, for why the flag's Set is safe there.
func (c *instanceCtx) kill(why stopReason) {
	c.why.CompareAndSwap(0, int32(why))
	if c.done != nil && c.killed.CompareAndSwap(false, true) {
		close(c.done)
		if c.stop != nil {
			c.stop.Set(1)
		}
	}
}

// stateCtx adds a callState to another context (instantiation uses it with
// a timeout context).
type stateCtx struct {
	context.Context
	st *callState
}

func (c *stateCtx) Value(k any) any {
	if _, ok := k.(stateKey); ok {
		return c.st
	}
	return c.Context.Value(k)
}

// Instance is one instantiation of a Module, with its own memory. It is not
// safe for concurrent use: the host drives each instance from one goroutine
// at a time (calls may move between goroutines if they are serialised).
type Instance struct {
	e       *Engine
	c       *compiled
	name    string
	limits  Limits
	mod     api.Module
	handle  api.Function
	init    api.Function
	initz   api.Function
	shut    api.Function
	batch   api.Function // ih_handle_batch, nil if not exported
	recon   api.Function // ih_reconcile, nil if not exported
	st      *callState
	ctx     *instanceCtx
	stdout  *lineWriter
	stderr  *lineWriter
	stack   []uint64
	mem     *mappedMemory // mapped linear memory (linearmem.go), nil if none; every call enters and leaves it
	dead    *Failure
	closed  bool
	timeout time.Duration

	// callStart is the watchdog's view of the running call: 0 when idle,
	// the call's start time (engine clock, ns) while a call runs, -1 once
	// the watchdog has killed it. The calling goroutine sets it with Store
	// and clears it with CompareAndSwap; the watchdog kills only with a
	// CompareAndSwap from the start time it read. So a call that returned
	// in time can never be killed late, and a kill is never lost.
	callStart atomic.Int64
	lastStart int64 // makes start times unique per instance; caller goroutine only
	// curStart is the running call's start time as callStart holds it:
	// callState.io moves it forward by the time spent waiting on the
	// network. Caller goroutine only.
	curStart int64

	// maxCallTime is Limits.MaxCallTime in ns (0: none), the bound on a
	// call's wall time, network waits included.
	maxCallTime int64
	// wallStart is the watchdog's view of the running call for
	// maxCallTime, with callStart's protocol: 0 when idle, the call's
	// start time while it runs (the value callStart started from, so
	// unique per instance; callState.io does not move it), callKilled
	// once the watchdog killed the call for its total time.
	wallStart atomic.Int64
	// curWall is the running call's wallStart value: the call's start,
	// or the start of its current event in a batch (nextEvent). Caller
	// goroutine only.
	curWall int64
}

// callStart values besides start times (which are positive).
const (
	callKilled = -1 // the watchdog (or the start timer) killed the call
	callInit   = -2 // instantiating, under the start timer (injected checks)
)

// Instantiate creates an instance: it instantiates the module (running its
// start function), calls _initialize if exported, then ih_init with
// o.Config if exported, all under the engine's StartTimeout (for modules
// with a CallTimeout; see Load for the others). If ih_init refuses, the
// error wraps ErrRefused and carries the plugin's set_error message.
func (m *Module) Instantiate(ctx context.Context, o InstanceOptions) (*Instance, error) {
	if m.closed.Load() {
		return nil, fmt.Errorf("plugin %q: instantiate: module is closed", m.name)
	}
	return m.e.instantiate(ctx, m.c, m.name, m.limits, o, true)
}

func (e *Engine) instantiate(ctx context.Context, c *compiled, name string, limits Limits, o InstanceOptions, runInit bool) (_ *Instance, err error) {
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return nil, fmt.Errorf("plugin %q: instantiate: %w", name, errClosed)
	}
	c.refs++
	e.mu.Unlock()

	logger := o.Logger
	if logger == nil {
		logger = e.logger.With(slog.String("plugin", name))
	}
	out := newOutput(logger, o.LogRate)
	st := &callState{
		config:   append([]byte(nil), o.Config...),
		logger:   logger,
		out:      out,
		scratch:  make([]byte, 0, 32),
		cache:    o.Cache,
		state:    o.State,
		metrics:  o.Metrics,
		writes:   o.Writes,
		onDenied: o.OnDenied,
		http:     o.HTTP,
		events:   o.Events,
	}
	i := &Instance{
		e:       e,
		c:       c,
		name:    name,
		limits:  limits,
		st:      st,
		ctx:     &instanceCtx{st: st},
		stdout:  &lineWriter{out: out, st: st, level: slog.LevelInfo, stream: "stdout"},
		stderr:  &lineWriter{out: out, st: st, level: slog.LevelInfo, stream: "stderr"},
		stack:   make([]uint64, 1),
		timeout: limits.CallTimeout,

		maxCallTime: int64(limits.MaxCallTime),
	}
	st.inst = i
	st.maxHostCalls = limits.MaxHostCallsPerCall
	if c.key.class.deadline {
		i.ctx.done = make(chan struct{})
	}
	defer func() {
		if err != nil {
			i.Close(context.Background())
		}
	}()

	cfg := wazero.NewModuleConfig().
		WithName("").         // anonymous: any number of instances, whatever the name section says
		WithStartFunctions(). // _initialize is called below, where its failure is classified
		WithArgs(name).       // argv[0]; Go packages such as klog read os.Args[0] at init
		WithStdout(i.stdout).
		WithStderr(i.stderr)
	cfg = clocks(cfg, o.Determinism, i.sleep, st)

	initCtx := context.Context(&stateCtx{Context: ctx, st: st})
	if c.key.class.deadline && !c.injected {
		tctx, cancel := context.WithTimeout(ctx, e.startTimeout)
		defer cancel()
		initCtx = &stateCtx{Context: tctx, st: st}
		st.abort = tctx.Done()
	}
	defer func() { st.abort = i.ctx.done }()

	mod, err := func() (mod api.Module, err error) {
		defer func() {
			if r := recover(); r != nil {
				err = fmt.Errorf("internal error: %v", r)
			}
		}()
		allocCtx, alloc := withMappedMemory(initCtx, c.cls)
		defer func() {
			if alloc != nil {
				i.mem = alloc.mem
			}
		}()
		return c.cls.rt.InstantiateModule(allocCtx, c.cm, cfg)
	}()
	if i.mem != nil {
		// The instantiation (start function, _initialize, ih_init) is the
		// memory's first call: it ends when instantiate returns.
		defer i.mem.leave()
	}
	if err != nil {
		return nil, i.failure(ctx, "instantiate", err, false)
	}
	i.mod = mod
	if c.injected {
		// No guest code has run yet: the start function was moved out of
		// InstantiateModule (wasmbin/checks.go). From here on the start timeout is
		// a timer that kills the way the watchdog does, through the flag.
		stop, ok := mod.ExportedGlobal(c.stopName).(api.MutableGlobal)
		if !ok {
			return nil, &Failure{Plugin: name, Phase: "instantiate", Kind: KindTrap, Err: errors.New("internal error: no termination flag")}
		}
		i.ctx.stop = stop
		st.abort = i.ctx.done
		i.callStart.Store(callInit)
		killInit := func() {
			if i.callStart.CompareAndSwap(callInit, callKilled) {
				i.ctx.kill(stopCPU)
			}
		}
		t := time.AfterFunc(e.startTimeout, killInit)
		defer t.Stop()
		// The caller giving up stops the instantiation too, as wazero's
		// checks would (failure reports ctx's error then).
		stopWatch := context.AfterFunc(ctx, killInit)
		defer stopWatch()
		if c.startName != "" {
			fn := mod.ExportedFunction(c.startName)
			if err := i.callInit(initCtx, fn); err != nil {
				return nil, i.failure(ctx, "instantiate", err, false)
			}
		}
		defer func() {
			// Instantiation is over: from now on only calls are killed.
			// If the timer fired meanwhile, the instance is dead (its flag
			// is set) even if every step returned in time.
			if !i.callStart.CompareAndSwap(callInit, 0) && err == nil {
				err = i.failure(ctx, "instantiate", sys.NewExitError(sys.ExitCodeDeadlineExceeded), false)
			}
		}()
	}
	i.handle = mod.ExportedFunction(abi.ExportHandle)
	i.init = mod.ExportedFunction(abi.ExportInit)
	i.initz = mod.ExportedFunction(abi.ExportInitialize)
	i.shut = mod.ExportedFunction(abi.ExportShutdown)
	i.batch = mod.ExportedFunction(abi.ExportHandleBatch)
	i.recon = mod.ExportedFunction(abi.ExportReconcile)
	if i.handle == nil { // checked at Load; belt and braces
		return nil, &Failure{Plugin: name, Phase: "instantiate", Kind: KindABI, Err: errors.New("no ih_handle export")}
	}

	if i.initz != nil {
		if err := i.callInit(initCtx, i.initz); err != nil {
			return nil, i.failure(ctx, abi.ExportInitialize, err, false)
		}
	}
	if runInit && i.init != nil {
		i.stack[0] = uint64(len(st.config))
		if err := i.callInit(initCtx, i.init); err != nil {
			return nil, i.failure(ctx, abi.ExportInit, err, false)
		}
		if rc := int32(uint32(i.stack[0])); rc != abi.InitOK {
			msg := string(st.errMsg)
			if !st.errSet {
				msg = fmt.Sprintf("ih_init returned %d", rc)
			}
			return nil, fmt.Errorf("plugin %q: ih_init: %w: %s", name, ErrRefused, msg)
		}
	}
	if c.key.class.deadline && e.mode == modeWatchdog {
		e.wd.add(i)
	}
	return i, nil
}

// callInit calls an instantiation-time export under ctx (which carries the
// StartTimeout for deadline classes).
func (i *Instance) callInit(ctx context.Context, fn api.Function) (err error) {
	i.st.errMsg, i.st.errSet = i.st.errMsg[:0], false
	i.st.resultMsg = i.st.resultMsg[:0]
	i.st.hostCalls = 0
	i.st.out.resetCall()
	i.st.callCtx = ctx
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("internal error: %v", r)
		}
		i.st.callCtx = nil
		i.st.dropHandles()
		i.stdout.flush()
		i.stderr.flush()
	}()
	return fn.CallWithStack(ctx, i.stack)
}

// sleep implements WASI's nanosleep (poll_oneoff on a clock) for the guest:
// a real sleep that ends the call when it is killed, so a plugin sleeping
// past its deadline does not hold the host goroutine.
func (i *Instance) sleep(ns int64) {
	if ns <= 0 {
		return
	}
	t := time.NewTimer(time.Duration(ns))
	defer t.Stop()
	select {
	case <-t.C:
	case <-i.st.abort:
		abortCall()
	}
}

// Name returns the plugin's name.
func (i *Instance) Name() string { return i.name }

func (i *Instance) usable() error {
	if i.closed {
		return fmt.Errorf("plugin %q: instance is closed", i.name)
	}
	if i.dead != nil {
		return fmt.Errorf("plugin %q: %w (%s)", i.name, ErrInstanceDead, i.dead.describe())
	}
	return nil
}

// Handle delivers one event. A nil error means the plugin returned; its
// verdict is in Result. A *Failure means it did not, and the instance is
// dead. Other errors (ctx done, instance closed or dead) leave the
// instance as it was.
//
// ctx is checked before the call; during the call only CallTimeout bounds
// it, so a call is never abandoned halfway because a caller gave up.
func (i *Instance) Handle(ctx context.Context, ev *Envelope) (Result, error) {
	return i.HandleWith(ctx, ev, 0)
}

// HandleWith is Handle with header flags this plugin alone sees added to
// the envelope's (abi.FlagSelfWrite): the envelope is shared by every
// plugin, these flags are not. ctx is the call's context: it does not
// bound the plugin's CPU, but its end cancels a capability's network
// wait (ERR_CANCELED).
func (i *Instance) HandleWith(ctx context.Context, ev *Envelope, flags uint8) (Result, error) {
	if err := i.usable(); err != nil {
		return Result{}, err
	}
	if err := ctx.Err(); err != nil {
		return Result{}, err
	}
	return i.callEvent(ctx, i.handle, abi.ExportHandle, ev, flags)
}

// callEvent calls fn, an export taking header_len and returning a result
// code (ih_handle, ih_reconcile), with ev current and flags added to its
// header for this call.
func (i *Instance) callEvent(ctx context.Context, fn api.Function, export string, ev *Envelope, flags uint8) (Result, error) {
	i.st.env, i.st.callCtx, i.st.flags = ev, ctx, flags
	i.stack[0] = uint64(len(ev.header))
	err := i.call(fn)
	i.st.env, i.st.callCtx, i.st.flags = nil, nil, 0
	if err != nil {
		return Result{}, i.failure(ctx, export, err, true)
	}
	return i.st.result(int32(uint32(i.stack[0])), export), nil
}

// call runs fn with the instance's deadline. The results are in i.stack.
func (i *Instance) call(fn api.Function) (err error) {
	if i.mem != nil && !i.mem.enter() {
		return errMemoryReleased
	}
	i.st.errMsg, i.st.errSet = i.st.errMsg[:0], false
	i.st.resultMsg = i.st.resultMsg[:0]
	i.st.hostCalls = 0
	i.st.out.resetCall()
	defer func() {
		if r := recover(); r != nil { // wazero recovers guest panics itself; this guards the host side
			err = fmt.Errorf("internal error: %v", r)
		}
		if i.mem != nil {
			i.mem.leave()
		}
		i.st.dropHandles()
		i.stdout.flush()
		i.stderr.flush()
	}()
	if i.timeout <= 0 {
		return fn.CallWithStack(i.ctx, i.stack)
	}
	if i.e.mode == modeCtxTimeout {
		ctx, cancel := context.WithTimeout(context.Background(), i.timeout)
		sc := &stateCtx{Context: ctx, st: i.st}
		i.st.abort = ctx.Done()
		err = fn.CallWithStack(sc, i.stack)
		cancel()
		return err
	}
	start := i.e.now()
	if start <= i.lastStart {
		start = i.lastStart + 1
	}
	i.lastStart, i.curStart, i.curWall = start, start, start
	i.wallStart.Store(start)
	i.callStart.Store(start)
	err = fn.CallWithStack(i.ctx, i.stack)
	cpuOK := i.callStart.CompareAndSwap(i.curStart, 0)
	if wallOK := i.wallStart.CompareAndSwap(i.curWall, 0); !cpuOK || !wallOK {
		// The watchdog killed this call. It may have returned normally an
		// instant later, but its module is closed: it is a timeout.
		if err == nil {
			err = sys.NewExitError(sys.ExitCodeDeadlineExceeded)
		}
	}
	return err
}

// countHostCall counts one informer_host_v1 call of the running export
// call and stops the call, as a deadline failure, at once when it is one
// more than Limits.MaxHostCallsPerCall. Called by every host function of
// the module before anything else (instantiateHostModule), on the
// instance's goroutine.
func (st *callState) countHostCall() {
	st.hostCalls++
	if st.maxHostCalls > 0 && st.hostCalls > st.maxHostCalls && st.inst != nil {
		st.inst.ctx.kill(stopHostCalls)
		abortCall()
	}
}

// Shutdown calls ih_shutdown, if the plugin exports it, under CallTimeout.
// It does not close the instance.
func (i *Instance) Shutdown(ctx context.Context) error {
	if err := i.usable(); err != nil {
		return err
	}
	if i.shut == nil {
		return nil
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	i.st.callCtx = ctx
	defer func() { i.st.callCtx = nil }()
	if err := i.call(i.shut); err != nil {
		return i.failure(ctx, abi.ExportShutdown, err, true)
	}
	return nil
}

// Close releases the instance. It is idempotent.
func (i *Instance) Close(ctx context.Context) error {
	if i.closed {
		return nil
	}
	i.closed = true
	i.e.wd.remove(i)
	i.stdout.flush()
	i.stderr.flush()
	var err error
	if i.mod != nil {
		func() {
			defer func() {
				if r := recover(); r != nil {
					err = fmt.Errorf("plugin %q: close: internal error: %v", i.name, r)
				}
			}()
			err = i.mod.Close(ctx)
		}()
	}
	i.e.release(i.c)
	return err
}

// failure classifies err from a call in phase, marks the instance dead and
// returns the Failure. ctx is the caller's, to tell a cancelled
// instantiation from a timeout.
func (i *Instance) failure(ctx context.Context, phase string, err error, running bool) error {
	f := &Failure{Plugin: i.name, Phase: phase, Kind: KindTrap, Err: err}
	var exit *sys.ExitError
	switch {
	case i.ctx.killed.Load() && !running && ctx.Err() != nil:
		// (Injected checks only) the caller gave up on the instantiation.
		return fmt.Errorf("plugin %q: %s: %w", i.name, phase, ctx.Err())
	case i.ctx.killed.Load():
		// The watchdog killed a call, a host function stopped it at the
		// host call cap, or (injected checks only) the start timer killed
		// the instantiation.
		f.Kind = KindTimeout
		f.Err = i.stopError(running)
	case errors.As(err, &exit):
		switch code := exit.ExitCode(); code {
		case sys.ExitCodeDeadlineExceeded:
			f.Kind = KindTimeout
			f.Err = i.stopError(running)
		case sys.ExitCodeContextCanceled:
			if ctx.Err() != nil {
				return fmt.Errorf("plugin %q: %s: %w", i.name, phase, ctx.Err())
			}
			f.Kind = KindTimeout
			f.Err = errors.New("call canceled")
		case 0:
			f.Kind = KindABI
			f.Err = errors.New("exited with code 0 during the call (proc_exit), so it returned no result")
		default:
			f.ExitCode = code
			f.Err = fmt.Errorf("exited with code %d", code)
		}
	default:
		msg := err.Error()
		if k := strings.Index(msg, "\nwasm stack trace:\n"); k >= 0 {
			f.Stack = strings.TrimSpace(msg[k+len("\nwasm stack trace:\n"):])
			msg = msg[:k]
		}
		f.Err = errors.New(strings.TrimPrefix(msg, "wasm error: "))
	}
	f.Output = i.st.out.takeTail()
	if f.Kind == KindTrap && (i.st.out.oom || i.memoryFull()) {
		f.Kind = KindMemory
	}
	if f.Kind == KindMemory {
		f.Err = fmt.Errorf("%w (memory %d of %d pages)", f.Err, i.memoryPages(), i.limits.MemoryPages)
	}
	if running {
		i.dead = f
	}
	return f
}

// The limits that stop a call (ABI.md §12). A KindTimeout Failure's Err
// wraps one of them (errors.Is), with the limit's value in its message.
var (
	// ErrCallTimeout: the call's CPU time, network waits excluded, passed
	// Limits.CallTimeout (or the instantiation passed the start timeout).
	ErrCallTimeout = errors.New("call exceeded its deadline")
	// ErrMaxCallTime: the call's wall time, host calls included, passed
	// Limits.MaxCallTime.
	ErrMaxCallTime = errors.New("call exceeded its total time limit")
	// ErrMaxHostCalls: the call made more host calls than
	// Limits.MaxHostCallsPerCall.
	ErrMaxHostCalls = errors.New("call made too many host calls")
)

// stopError is the error of a stopped call: its own message, one of the
// limit errors above underneath.
type stopError struct {
	msg   string
	limit error
}

func (e *stopError) Error() string { return e.msg }
func (e *stopError) Unwrap() error { return e.limit }

// stopError says which limit stopped the call, and its value. running
// tells a call from an instantiation.
func (i *Instance) stopError(running bool) error {
	switch stopReason(i.ctx.why.Load()) {
	case stopTotal:
		return &stopError{fmt.Sprintf("call exceeded its %v total time limit (limits.maxCallTime, host calls included)", time.Duration(i.maxCallTime)), ErrMaxCallTime}
	case stopHostCalls:
		return &stopError{fmt.Sprintf("call made more than %d host calls (limits.maxHostCallsPerCall)", i.st.maxHostCalls), ErrMaxHostCalls}
	}
	limit := i.timeout
	if !running {
		limit = i.e.startTimeout
	}
	return &stopError{fmt.Sprintf("call exceeded its %v limit", limit), ErrCallTimeout}
}

func (i *Instance) memoryPages() uint32 {
	if i.mod == nil || i.mod.Memory() == nil {
		return 0
	}
	return i.mod.Memory().Size() / 65536
}

// memoryFull reports whether the instance's memory is within a quarter of
// its limit. wazero offers no hook on a failed memory.grow, so this is a
// heuristic: allocators grow in steps (Go's runtime by 4 MiB arenas or
// more), so the failing grow usually leaves memory short of the limit, and
// a trap in that state is most likely the allocator giving up.
func (i *Instance) memoryFull() bool {
	if i.mod == nil {
		return false
	}
	return uint64(i.memoryPages())*4 >= uint64(i.limits.MemoryPages)*3
}
