package replay

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/expfmt"

	"github.com/informer-host/informer-host/host/internal/engine"
	"github.com/informer-host/informer-host/host/internal/stateport"
	"github.com/informer-host/informer-host/internal/pluginmetrics"
	"github.com/informer-host/informer-host/internal/state"
)

// Options configure a replay.
type Options struct {
	// Plugin is the plugin's file name (in the output, and the state
	// bucket's name); Wasm its bytes (read from Plugin when nil).
	Plugin string
	Wasm   []byte
	// Events is the recording to replay.
	Events *Recording
	// Config is handed to ih_init (the plugin's configuration JSON).
	Config []byte
	// State seeds the plugin's state: key -> value.
	State map[string]string
	// Stubs answers capabilities II calls; nil answers none.
	Stubs *Stubs
	// MaxRetries is how often an event answered RETRY is delivered again
	// once the recording has no cache change left that could answer it
	// (at once: the replay's clock does not wait). Before that, a retried
	// event waits, as in the host, while the recording goes on, and is
	// delivered again after each later cache line: the recorded world
	// moving is what a live retry waits for. Negative: 0.
	MaxRetries int
	// CallTimeout bounds each call (zero: 10s). A timeout is a failure
	// like a trap; it depends on the machine, so keep it generous.
	CallTimeout time.Duration
	// MemoryPages caps the plugin's memory (zero: the wasm32 maximum).
	MemoryPages uint32
	// RealClock gives the plugin the system's clocks and crypto/rand
	// instead of the reproducible ones (Start, Seed).
	RealClock bool
	// Start is the plugin's wall clock at its first reading (zero:
	// 2026-01-01T00:00:00Z); every clock reading advances it by 1ms.
	Start time.Time
	// Seed seeds random_get.
	Seed uint64
	// CacheDir keeps compiled machine code across replays, as the
	// daemon's plugins.compilationCache does ("": in memory only). It
	// changes nothing but the time a replay takes.
	CacheDir string
}

// Step is one call into the plugin and what came of it.
type Step struct {
	Seq int `json:"seq"`
	// Line is the events file line (0 for ih_init and ih_shutdown).
	Line int `json:"line,omitempty"`
	// Call: "ih_init", "ih_handle", "ih_reconcile", "ih_synced",
	// "ih_shutdown".
	Call string `json:"call"`
	// Event is "add pods demo/web-1"; for ih_synced the resource.
	Event   string `json:"event,omitempty"`
	Attempt int    `json:"attempt,omitempty"` // 1 for the first delivery
	// Result: ok, retry, drop, error, retry-exhausted, or a failure kind
	// (trap, timeout, out of memory, ABI violation), or refused (ih_init).
	Result   string   `json:"result"`
	Message  string   `json:"message,omitempty"`
	Recorded string   `json:"recorded,omitempty"` // the recording's result
	Logs     []Log    `json:"logs,omitempty"`
	Calls    []Call   `json:"calls,omitempty"`
	Failure  *Failure `json:"failure,omitempty"`
	// Children, Status and RequeueAfterMillis are what an ih_reconcile
	// call gave the host (Line's fields of the same names).
	Children           json.RawMessage `json:"children,omitempty"`
	Status             json.RawMessage `json:"status,omitempty"`
	RequeueAfterMillis int64           `json:"requeueAfterMillis,omitempty"`
	// Differs names what an ih_reconcile call gave the host that the
	// recorded one did not (children set, status, requeue-after): each is
	// a mismatch, as a different result is.
	Differs []string `json:"differs,omitempty"`
}

// Log is one line the plugin logged or wrote.
type Log struct {
	Level   string `json:"level"`
	Message string `json:"message"`
	Attrs   string `json:"attrs,omitempty"`
}

// Failure is a call that did not complete.
type Failure struct {
	Kind     string `json:"kind"`
	Phase    string `json:"phase"`
	Error    string `json:"error"`
	Stack    string `json:"stack,omitempty"`
	Output   string `json:"output,omitempty"`
	ExitCode uint32 `json:"exitCode,omitempty"`
}

// Report is the outcome of a replay.
type Report struct {
	Plugin string `json:"plugin"`
	Steps  []Step `json:"steps"`
	// State is the plugin's state at the end (values that are not UTF-8
	// are "base64:...").
	State map[string]string `json:"state"`
	// Metrics is the plugin's metrics at the end, in Prometheus' text
	// format.
	Metrics string `json:"metrics,omitempty"`
	Counts  Counts `json:"counts"`
	// MissingStubs are the stubs to add for the calls no stub answered,
	// each distinct request once, with a success answer to edit.
	MissingStubs []Stub `json:"missingStubs,omitempty"`
	// UnusedStubs are the stubs no call used: with the stub file a
	// recording wrote, the calls the live run made that the replay did
	// not (a write whose result the recorded cache already held, say).
	UnusedStubs []UnusedStub `json:"unusedStubs,omitempty"`
}

// Counts sum up the steps. UnstubbedCalls and RepeatedCalls are the
// calls the stub file does not hold (Call.Extra), UnusedStubs the stubs
// no call used: together, where the replay's calls part from the
// recorded ones.
type Counts struct {
	Events, OK, Retries, RetryExhausted, Dropped, Errors, Failures, Mismatches int
	UnstubbedCalls, RepeatedCalls, UnusedStubs                                 int
}

// Run replays o.Events into the plugin. The error is for a replay that
// could not run (a module that does not load, ih_init refusing); what the
// plugin did is in the Report.
func Run(ctx context.Context, o Options) (*Report, error) {
	if o.Wasm == nil {
		b, err := os.ReadFile(o.Plugin)
		if err != nil {
			return nil, err
		}
		o.Wasm = b
	}
	name := filepath.Base(o.Plugin)
	if o.CallTimeout <= 0 {
		o.CallTimeout = 10 * time.Second
	}
	r := &runner{o: o, name: name, rep: &Report{Plugin: name, State: map[string]string{}}, calls: &Calls{stubs: o.Stubs}}
	r.logger = slog.New(&captureHandler{r: r})
	defer func() {
		r.rep.MissingStubs = r.calls.toAdd
		r.rep.UnusedStubs = r.calls.unusedStubs()
		r.rep.Counts.UnusedStubs = len(r.rep.UnusedStubs)
	}()
	eng, err := engine.New(ctx, engine.Options{Logger: slog.New(slog.DiscardHandler), CacheDir: o.CacheDir})
	if err != nil {
		return nil, err
	}
	defer eng.Close(context.Background())
	mod, err := eng.Load(ctx, name, o.Wasm, engine.Limits{MemoryPages: o.MemoryPages, CallTimeout: o.CallTimeout})
	if err != nil {
		return nil, err
	}
	defer mod.Close(context.Background())

	store, err := state.Open(ctx, state.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		return nil, err
	}
	defer store.Close(context.Background())
	bucket := store.Bucket(name, state.Quota{})
	for k, v := range o.State {
		if _, err := bucket.Set([]byte(k), []byte(v), -1); err != nil {
			return nil, fmt.Errorf("seed state %q: %w", k, err)
		}
	}
	metrics := pluginmetrics.New(pluginmetrics.Options{})
	mset := metrics.Plugin(name, 0)
	r.cache = newMemCache(o.Events.Head.Cache)
	r.opts = engine.InstanceOptions{Config: o.Config, Logger: r.logger,
		Cache:   recordedCache{r.cache, r.calls},
		State:   recordedState{stateport.New(bucket, r.logger), r.calls},
		Metrics: recordedMetrics{mset.Instance(), r.calls},
	}
	if !o.RealClock {
		r.opts.Determinism = &engine.Determinism{Start: o.Start, Seed: o.Seed}
	}
	stubbed(&r.opts, r.calls)
	r.mod = mod
	if err := r.start(ctx); err != nil {
		return r.rep, err
	}
	r.lastCache = -1
	for i, l := range o.Events.Lines {
		if l.Type == LineCache || l.Type == LineCacheDelete {
			r.lastCache = i
		}
	}
	for i := range o.Events.Lines {
		r.line(ctx, i, &o.Events.Lines[i])
	}
	// Nothing left to change what the waiting retries read: each gets
	// MaxRetries more deliveries, then is given up on.
	for len(r.waiting) > 0 {
		w := r.waiting[0]
		r.waiting = r.waiting[1:]
		r.handle(ctx, w, true)
	}
	if r.inst != nil {
		step := Step{Call: "ih_shutdown", Result: "ok"}
		if err := r.inst.Shutdown(ctx); err != nil {
			r.fail(&step, err)
		}
		r.finish(step)
		_ = r.inst.Close(ctx)
	}
	var keys []string
	bucket.List(nil, nil, 1<<30, func(k string) bool { keys = append(keys, k); return true })
	for _, k := range keys {
		v, _, _ := bucket.Get([]byte(k))
		r.rep.State[k] = printable(v)
	}
	if mset.Series() > 0 {
		r.rep.Metrics = MetricsText(metrics)
	}
	return r.rep, nil
}

type runner struct {
	o      Options
	name   string
	rep    *Report
	calls  *Calls
	logger *slog.Logger
	logs   []Log
	cache  *memCache
	opts   engine.InstanceOptions
	mod    *engine.Module
	inst   *engine.Instance
	// lastCache is the index of the recording's last cache line: an event
	// retried after it waits for nothing (-1: there is none).
	lastCache int
	// waiting holds the events answered RETRY that wait for the next
	// cache line, in the order they were first delivered; a later event
	// of the same object supersedes its entry, as in the host's queue.
	waiting []*pending
}

// pending is one event's delivery, over its attempts.
type pending struct {
	l       *Line
	key     string // resource and object: what a later event supersedes
	env     *engine.Envelope
	desc    string
	attempt int // deliveries so far
	final   int // deliveries after the recording's last cache line
}

// start instantiates the plugin (again, after a failure: the state and
// metrics carry over, as in the host).
func (r *runner) start(ctx context.Context) error {
	inst, err := r.mod.Instantiate(ctx, r.opts)
	if err != nil {
		step := Step{Call: "ih_init", Result: "refused", Message: err.Error()}
		if !errors.Is(err, engine.ErrRefused) {
			r.fail(&step, err)
		}
		r.finish(step)
		return err
	}
	r.inst = inst
	if logs, calls := r.take(); len(logs)+len(calls) > 0 {
		r.countExtra(calls)
		r.rep.Steps = append(r.rep.Steps, Step{Seq: len(r.rep.Steps) + 1, Call: "ih_init", Result: "ok", Logs: logs, Calls: calls})
	}
	return nil
}

func (r *runner) take() ([]Log, []Call) {
	logs := r.logs
	r.logs = nil
	return logs, r.calls.take()
}

func (r *runner) finish(s Step) {
	s.Seq = len(r.rep.Steps) + 1
	s.Logs, s.Calls = r.take()
	if s.Recorded != "" && s.Recorded != s.Result || len(s.Differs) > 0 {
		r.rep.Counts.Mismatches++
	}
	r.countExtra(s.Calls)
	r.rep.Steps = append(r.rep.Steps, s)
}

func (r *runner) countExtra(calls []Call) {
	for _, c := range calls {
		switch c.Extra {
		case ExtraUnstubbed:
			r.rep.Counts.UnstubbedCalls++
		case ExtraRepeated:
			r.rep.Counts.RepeatedCalls++
		}
	}
}

func (r *runner) fail(s *Step, err error) {
	var f *engine.Failure
	if !errors.As(err, &f) {
		s.Result, s.Message = "error", err.Error()
		return
	}
	s.Result = f.Kind.String()
	s.Failure = &Failure{Kind: f.Kind.String(), Phase: f.Phase, Error: f.Err.Error(), Stack: f.Stack, Output: f.Output, ExitCode: f.ExitCode}
	r.rep.Counts.Failures++
}

// line replays line i of the recording.
func (r *runner) line(ctx context.Context, i int, l *Line) {
	rec := r.o.Events
	switch l.Type {
	case LineCache, LineCacheDelete:
		r.cache.apply(l)
		// The world a waiting retry reads has moved: try each again.
		waiting := r.waiting
		r.waiting = nil
		for _, w := range waiting {
			r.handle(ctx, w, false)
		}
		return
	}
	if r.inst == nil && r.start(ctx) != nil {
		return
	}
	if l.Type == LineSynced {
		step := Step{Line: l.line, Call: "ih_synced", Event: l.Resource, Result: "ok", Recorded: l.Result}
		called, err := r.inst.Synced(ctx, rec.Ref(l))
		if !called {
			return
		}
		if err != nil {
			r.fail(&step, err)
			r.dead()
		}
		r.finish(step)
		return
	}
	if l.Type == LineReconcile {
		r.reconcile(ctx, l)
		return
	}
	ev := rec.Event(l)
	w := &pending{l: l, key: l.Resource + " " + ev.Key(), env: engine.NewEnvelope(ev), desc: ev.Type.String() + " " + l.Resource + " " + ev.Key()}
	r.waiting = slices.DeleteFunc(r.waiting, func(o *pending) bool { return o.key == w.key })
	r.rep.Counts.Events++
	r.handle(ctx, w, i > r.lastCache)
}

// handle delivers w until it is settled or, answered RETRY while cache
// lines are still to come (final false), waits for the next one.
func (r *runner) handle(ctx context.Context, w *pending, final bool) {
	if r.inst == nil && r.start(ctx) != nil {
		return
	}
	for {
		w.attempt++
		step := Step{Line: w.l.line, Call: "ih_handle", Event: w.desc, Attempt: w.attempt}
		if w.attempt == 1 {
			step.Recorded = w.l.Result
		}
		res, err := r.inst.HandleWith(ctx, w.env, w.l.PluginFlags())
		if err != nil {
			r.failedCall(step, err)
			return
		}
		r.answered(&step, res)
		switch res.Code {
		case engine.CodeRetry:
			if !final {
				r.rep.Counts.Retries++
				r.finish(step)
				r.waiting = append(r.waiting, w)
				return
			}
			if w.final < max(r.o.MaxRetries, 0) {
				w.final++
				r.rep.Counts.Retries++
				r.finish(step)
				continue
			}
			step.Result = "retry-exhausted"
			r.rep.Counts.RetryExhausted++
		}
		r.finish(step)
		return
	}
}

// answered puts the plugin's answer into its step and counts an OK,
// DROP or ERROR (a RETRY's count is the caller's: it depends on what
// comes of it).
func (r *runner) answered(step *Step, res engine.Result) {
	step.Result, step.Message = res.Code.String(), res.Message
	switch res.Code {
	case engine.CodeOK:
		r.rep.Counts.OK++
	case engine.CodeDrop:
		r.rep.Counts.Dropped++
	case engine.CodeError:
		r.rep.Counts.Errors++
	}
}

// failedCall settles a call that did not complete: its step says how,
// and the instance is discarded.
func (r *runner) failedCall(step Step, err error) {
	r.fail(&step, err)
	r.finish(step)
	r.dead()
}

// dead discards a failed instance; the next line starts a fresh one.
func (r *runner) dead() {
	_ = r.inst.Close(context.Background())
	r.inst = nil
}

func printable(v []byte) string {
	if utf8.Valid(v) {
		return string(v)
	}
	return "base64:" + b64(v)
}

// MetricsText is the text exposition of the metrics reg collects (the
// form of Report.Metrics), for comparisons with a live host's.
func MetricsText(reg prometheus.Collector) string {
	pr := prometheus.NewPedanticRegistry()
	if err := pr.Register(reg); err != nil {
		return "# " + err.Error()
	}
	mfs, err := pr.Gather()
	if err != nil {
		return "# " + err.Error()
	}
	var b strings.Builder
	for _, mf := range mfs {
		_, _ = expfmt.MetricFamilyToText(&b, mf)
	}
	return b.String()
}

// captureHandler collects the plugin's log lines for the current step,
// without timestamps, so output is reproducible.
type captureHandler struct {
	r     *runner
	attrs []slog.Attr
}

func (h *captureHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h *captureHandler) Handle(_ context.Context, rec slog.Record) error {
	var b strings.Builder
	add := func(a slog.Attr) bool {
		if a.Key == "stream" {
			return true
		}
		if b.Len() > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(a.Key + "=" + a.Value.String())
		return true
	}
	for _, a := range h.attrs {
		add(a)
	}
	rec.Attrs(add)
	h.r.logs = append(h.r.logs, Log{Level: rec.Level.String(), Message: rec.Message, Attrs: b.String()})
	return nil
}
func (h *captureHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return &captureHandler{r: h.r, attrs: append(append([]slog.Attr(nil), h.attrs...), as...)}
}
func (h *captureHandler) WithGroup(string) slog.Handler { return h }
