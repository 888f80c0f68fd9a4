package kit

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"time"

	"github.com/informer-host/informer-host/abi"
)

// hostAPI is the host's import module. On wasip1 it is the real imports
// (imports_wasip1.go); elsewhere a stand-in; tests replace it.
type hostAPI interface {
	headerRead(buf []byte) int32
	objectRead(which int32, buf []byte) int32
	fieldRead(which int32, path string, buf []byte) int64
	configRead(buf []byte) int32
	setError(msg string) int32
	log(level int32, msg string) int32
}

// plugin is the kit's state. A wasm module is one program with one
// instance of this package, and the host calls its exports one at a time,
// so this single, package-level value is the plugin: the ABI's exports are
// package-level functions and can reach nothing else.
type plugin struct {
	host       hostAPI
	onHandle   func(*Event) error
	onInit     func(config []byte) error
	onShutdown func()
	onSynced   func(res Resource)
	config     []byte
	// onReconcile runs the reconciler HandleReconcile registered (nil:
	// none).
	onReconcile func(p *plugin, headerLen int32) int32

	ev     Event  // reused for every event
	hdrBuf []byte // reused header buffer
	valBuf []byte // reused buffer for fields and objects

	// stderr receives the goroutine trace of a panic the kit recovers
	// (nil: none), as Go writes one for a panic nothing recovers; traced
	// holds the sites whose trace it has written (an event the host
	// retries panics again and again, and its message names the site).
	stderr io.Writer
	traced map[string]bool

	lastYield time.Duration // clock reading at the last yield
	lastRead  time.Duration // the last clock reading
	skipReads int           // calls left to end without reading the clock
	// clock is the monotonic clock the yield decision reads; nil is
	// time.Since(epoch) (tests count its reads).
	clock func() time.Duration
	// hosts counts the hosts swapped in by UseNative (native tests), so
	// that metrics are declared again with each.
	hosts int
}

// epoch is the origin of the kit's monotonic clock.
var epoch = time.Now()

// yieldEvery is how often, at most, a call ends by yielding to other
// goroutines. A reactor's goroutines (the garbage collector's background
// workers among them) run only while an export is executing, so the kit
// yields at the end of a call; but a yield costs about 15µs, several times
// a whole event's handling, so it yields at most once per interval of
// handler activity rather than after every event.
const yieldEvery = 10 * time.Millisecond

// Reading the clock is a WASI call (clock_time_get), one of the two or
// three host calls a small handler's event makes: when calls come fast
// (the previous reading is less than readGap old), the kit reads it only
// every readSkip+1 calls. Events that come slowly still read it on every
// call, so a yield is late by at most readSkip calls after a burst.
const (
	readGap  = time.Millisecond
	readSkip = 15
)

// yield runs other goroutines if it has not done so for yieldEvery.
func (p *plugin) yield() {
	if p.skipReads > 0 {
		p.skipReads--
		return
	}
	now := p.now()
	if now-p.lastRead < readGap && now >= p.lastRead {
		p.skipReads = readSkip
	}
	p.lastRead = now
	if now-p.lastYield >= yieldEvery || now < p.lastYield {
		runtime.Gosched()
		p.lastYield = p.now()
		p.lastRead = p.lastYield
	}
}

func (p *plugin) now() time.Duration {
	if p.clock != nil {
		return p.clock()
	}
	return time.Since(epoch)
}

var the = plugin{host: defaultHost(), stderr: os.Stderr}

// maxPanicTrace bounds the goroutine trace a recovered panic writes (the
// host logs each line).
const maxPanicTrace = 16 << 10

// maxTracedSites bounds the panic sites whose trace was written; past it
// they are forgotten, and each is written once more.
const maxTracedSites = 64

// panicked reports a panic the kit recovered, from the deferred function
// that recovered it: the result message names the value and where it was
// raised (the first frame below the panic that is not the runtime's),
// since the panic ends in an ERROR answer and the message is
// all the host logs of it; and the goroutine's trace goes to stderr,
// bounded, as Go writes one for a panic nothing recovers, once per site.
func (p *plugin) panicked(what string, r any) string {
	msg := fmt.Sprintf("%s: %v", what, r)
	pcs := make([]uintptr, 64)
	frames := runtime.CallersFrames(pcs[:runtime.Callers(2, pcs)])
	// Above runtime.gopanic are this deferred call and the kit's; below
	// it the runtime's own frames of a runtime error (a nil map's, a
	// nil pointer's), then the code that panicked.
	raised, site := false, ""
	for {
		f, more := frames.Next()
		switch {
		case f.Function == "runtime.gopanic":
			raised = true
		case raised && !strings.HasPrefix(f.Function, "runtime.") && !strings.HasPrefix(f.Function, "internal/"):
			site = fmt.Sprintf("%s:%d in %s", f.File, f.Line, f.Function)
			msg += " (" + site + ")"
			more = false
		}
		if !more {
			break
		}
	}
	if p.stderr != nil && !p.traced[site] {
		if p.traced == nil || len(p.traced) >= maxTracedSites {
			p.traced = map[string]bool{}
		}
		p.traced[site] = true
		trace := debug.Stack()
		if len(trace) > maxPanicTrace {
			trace = append(trace[:maxPanicTrace:maxPanicTrace], "\n...\n"...)
		}
		_, _ = fmt.Fprintf(p.stderr, "%s [recovered by the kit]\n\n%s", msg, trace)
	}
	return msg
}

// Handle registers the function called for every event. Call it from an
// init function.
func Handle(f func(ev *Event) error) { the.onHandle = f }

// OnInit registers the function called once per instance, before any
// event, with the plugin's configuration (the bytes the operator gave; the
// host does not interpret them, JSON is customary). Returning an error
// refuses the configuration: the host reports the error and does not start
// the plugin.
func OnInit(f func(config []byte) error) { the.onInit = f }

// OnShutdown registers the function called when the host stops the plugin
// in an orderly way (not after a crash).
func OnShutdown(f func()) { the.onShutdown = f }

// OnSynced registers the function called once per binding when the plugin
// has handled the binding's whole initial list: after the instance starts
// (a load, a reload or a restart after a crash) and after the host
// repaired the plugin from the cache following a buffer overflow. res
// names the binding's resource. A stateful plugin that must not act on a
// partial view (a count, "which objects are missing") waits for it.
// A kit plugin always exports ih_synced (ABI section 5); without OnSynced
// it does nothing.
func OnSynced(f func(res Resource)) { the.onSynced = f }

// Config returns the plugin's configuration, as passed to OnInit.
func Config() []byte { return the.config }

// DecodeConfig decodes the plugin's configuration, JSON, into v with
// encoding/json (an empty configuration leaves v as it is); the error
// says where the JSON is wrong, for OnInit to refuse it with. The Rust
// kit's config_json and the AssemblyScript kit's configJSON are its
// equivalents.
func DecodeConfig(v any) error {
	if len(bytes.TrimSpace(the.config)) == 0 {
		return nil
	}
	if err := json.Unmarshal(the.config, v); err != nil {
		return fmt.Errorf("the configuration is not the JSON the plugin expects: %w", err)
	}
	return nil
}

// resultError carries a handler's verdict.
type resultError struct {
	code int32
	err  error
}

func (r *resultError) Error() string {
	if r.err == nil {
		return ""
	}
	return r.err.Error()
}
func (r *resultError) Unwrap() error { return r.err }

// Retry asks the host to deliver the event again later; err (may be nil)
// explains why and is logged by the host.
func Retry(err error) error { return &resultError{code: abi.ResultRetry, err: err} }

// Drop tells the host the event cannot be handled and must not be
// delivered again; err (may be nil) explains why.
func Drop(err error) error { return &resultError{code: abi.ResultDrop, err: err} }

// EventType is what happened to the object.
type EventType uint8

const (
	Add    EventType = EventType(abi.EventAdd)
	Update EventType = EventType(abi.EventUpdate)
	Delete EventType = EventType(abi.EventDelete)
)

func (t EventType) String() string { return abi.EventTypeName(uint8(t)) }

// Resource names the configured resource an event belongs to.
type Resource struct {
	Name     string // the resource's name in the host's configuration
	Group    string // "" for the core API group
	Version  string
	Resource string // plural, lower case: "pods"
	Kind     string // "Pod"
}

// Event is one notification. It is valid only during the handler call it
// is passed to: do not keep it (keep the values you read from it).
type Event struct {
	p   *plugin
	hdr abi.HeaderView
	res Resource // interned: reused while the resource does not change
	ns  string   // interned likewise
}

// Type returns the event type.
func (e *Event) Type() EventType { return EventType(e.hdr.Type()) }

// Resource returns the resource the event belongs to.
func (e *Event) Resource() Resource {
	// Events of one plugin mostly come from a few resources: compare
	// before converting, so the common case allocates nothing.
	f := func(i int, s *string) {
		if b := e.hdr.Field(i); string(b) != *s {
			*s = string(b)
		}
	}
	f(abi.FieldResourceName, &e.res.Name)
	f(abi.FieldGroup, &e.res.Group)
	f(abi.FieldVersion, &e.res.Version)
	f(abi.FieldResource, &e.res.Resource)
	f(abi.FieldKind, &e.res.Kind)
	return e.res
}

// Namespace returns the object's namespace, "" for cluster-scoped objects.
func (e *Event) Namespace() string {
	if b := e.hdr.Field(abi.FieldNamespace); string(b) != e.ns {
		e.ns = string(b)
	}
	return e.ns
}

// Name returns the object's name.
func (e *Event) Name() string { return string(e.hdr.Field(abi.FieldName)) }

// UID returns the object's metadata.uid.
func (e *Event) UID() string { return string(e.hdr.Field(abi.FieldUID)) }

// ResourceVersion returns the object's metadata.resourceVersion.
func (e *Event) ResourceVersion() string { return string(e.hdr.Field(abi.FieldResourceVersion)) }

// Key returns "namespace/name", or "name" for cluster-scoped objects: the
// informer cache's key.
func (e *Event) Key() string {
	ns, name := e.hdr.Field(abi.FieldNamespace), e.hdr.Field(abi.FieldName)
	if len(ns) == 0 {
		return string(name)
	}
	return string(ns) + "/" + string(name)
}

// IsInInitialList reports an add from the initial list: the object existed
// before the plugin started (also after a restart of the plugin, when the
// host replays its cache).
func (e *Event) IsInInitialList() bool { return e.hdr.Has(abi.FlagInitialList) }

// FinalStateUnknown reports a delete the watch missed; the object is the
// last state the host saw and may be stale.
func (e *Event) FinalStateUnknown() bool { return e.hdr.Has(abi.FlagFinalStateUnknown) }

// HandedOver reports a delete that says the object moved to another
// replica of a sharding group: it left this replica's share, not the
// cluster (ABI.md §4.3).
func (e *Event) HandedOver() bool { return e.hdr.Has(abi.FlagHandedOver) }

// HasOld reports whether the event has an old object (updates).
func (e *Event) HasOld() bool { return e.hdr.Has(abi.FlagHasOldObject) }

// Kind is the JSON type of a field value.
type Kind int32

const (
	String Kind = Kind(abi.KindString)
	Number Kind = Kind(abi.KindNumber)
	Bool   Kind = Kind(abi.KindBool)
	Null   Kind = Kind(abi.KindNull)
	Object Kind = Kind(abi.KindObject)
	Array  Kind = Kind(abi.KindArray)
)

func (k Kind) String() string { return abi.KindName(int32(k)) }

// Value is a field's value: Text is a string's content, or the JSON text of
// any other kind (a number "3", "true", "null", an object or array).
type Value struct {
	Kind Kind
	Text string
}

// ErrNotFound is returned by Field when the path does not resolve.
var ErrNotFound = errors.New("field not found")

// ErrNoObject is returned when the requested object does not exist (the old
// object of an add or a delete).
var ErrNoObject = errors.New("no such object in this event")

// HostError is a host function's error code.
type HostError int32

func (e HostError) Error() string {
	if n := abi.ErrorName(int32(e)); n != "" {
		return "host: " + n
	}
	return "host: error " + strconv.Itoa(int(e))
}

func hostErr(code int32) error {
	switch code {
	case abi.ErrNotFound:
		return ErrNotFound
	case abi.ErrAbsent:
		return ErrNoObject
	}
	return HostError(code)
}

// Get returns the value at path in the object (see Field for the syntax)
// as text, and whether it exists. A string comes back as itself, any other
// value as JSON text.
func (e *Event) Get(path string) (string, bool) {
	v, err := e.Field(path)
	return v.Text, err == nil
}

// GetOld is Get on the old object.
func (e *Event) GetOld(path string) (string, bool) {
	v, err := e.OldField(path)
	return v.Text, err == nil
}

// Field returns the value at path in the object. Paths are dotted keys
// with [n] for array elements and ["..."] for keys with dots:
// status.phase, spec.containers[0].image,
// metadata.labels["app.kubernetes.io/name"] (see abi.JoinPath to build
// one). The host walks the object; nothing else is transferred.
func (e *Event) Field(path string) (Value, error) { return e.p.field(abi.ObjectNew, path) }

// OldField is Field on the old object.
func (e *Event) OldField(path string) (Value, error) { return e.p.field(abi.ObjectOld, path) }

func (p *plugin) field(which int32, path string) (Value, error) {
	if cap(p.valBuf) < 256 {
		p.valBuf = make([]byte, 256)
	}
	for {
		buf := p.valBuf[:cap(p.valBuf)]
		r := p.host.fieldRead(which, path, buf)
		kind, size, code := abi.UnpackField(r)
		if code != 0 {
			return Value{}, hostErr(code)
		}
		if int(size) <= len(buf) {
			return Value{Kind: Kind(kind), Text: string(buf[:size])}, nil
		}
		p.valBuf = make([]byte, size)
	}
}

// ObjectJSON returns the object as JSON (a copy the caller owns).
func (e *Event) ObjectJSON() ([]byte, error) {
	b, err := e.p.object(abi.ObjectNew)
	return bytes.Clone(b), err
}

// OldObjectJSON returns the old object as JSON, or ErrNoObject.
func (e *Event) OldObjectJSON() ([]byte, error) {
	b, err := e.p.object(abi.ObjectOld)
	return bytes.Clone(b), err
}

// Decode decodes the object into v with encoding/json. Define v with just
// the fields you need: decoding is the expensive part.
func (e *Event) Decode(v any) error {
	b, err := e.p.object(abi.ObjectNew)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, v)
}

// DecodeOld decodes the old object into v, or returns ErrNoObject.
func (e *Event) DecodeOld(v any) error {
	b, err := e.p.object(abi.ObjectOld)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, v)
}

// object reads an object into the reused buffer; the result is valid until
// the next read.
func (p *plugin) object(which int32) ([]byte, error) {
	for {
		buf := p.valBuf[:cap(p.valBuf)]
		r := p.host.objectRead(which, buf)
		if r < 0 {
			return nil, hostErr(r)
		}
		if int(r) <= len(buf) {
			return buf[:r], nil
		}
		p.valBuf = make([]byte, r+r/4)
	}
}

// The functions below are the bodies of the ABI exports
// (imports_wasip1.go binds them); they are separate so tests can drive
// them natively.

func (p *plugin) init(configLen int32) (rc int32) {
	defer func() {
		if r := recover(); r != nil {
			p.host.setError(p.panicked("panic in OnInit", r))
			rc = abi.InitRefused
		}
		runtime.Gosched()
	}()
	p.config = make([]byte, configLen)
	if n := p.host.configRead(p.config); n != configLen {
		p.host.setError(fmt.Sprintf("config_read returned %d, want %d", n, configLen))
		return abi.InitRefused
	}
	if p.onHandle == nil && p.onReconcile == nil {
		p.host.setError("no handler registered: call kit.Handle (events) or kit.HandleReconcile (controller mode) from an init function")
		return abi.InitRefused
	}
	if p.onInit != nil {
		if err := p.onInit(p.config); err != nil {
			p.host.setError(err.Error())
			return abi.InitRefused
		}
	}
	return abi.InitOK
}

func (p *plugin) handle(headerLen int32) int32 {
	defer p.yield()
	return p.handleEvent(headerLen)
}

// batchAPI is the host's batch imports (ABI.md §5): on wasip1 the real
// ones, in tests a stand-in.
type batchAPI interface {
	selectEvent(index int32) int32
	result(code int32) int32
}

// handleBatch is ih_handle_batch: the host hands count events already
// waiting in one call, and the handler is called for each in order,
// exactly as ih_handle would call it; the per-call costs (the yield to
// other goroutines, entering the export) are paid once for the batch.
func (p *plugin) handleBatch(b batchAPI, count int32) int32 {
	defer p.yield()
	for i := int32(0); i < count; i++ {
		n := b.selectEvent(i)
		if n < 0 {
			// Not the host's protocol; settle what was settled.
			return i
		}
		if b.result(p.handleEvent(n)) != 0 {
			return i
		}
	}
	return count
}

// handleEvent handles the current event, whose header is headerLen bytes,
// and returns its result code. A panic in the handler is the event's
// ERROR, with the panic's message.
func (p *plugin) handleEvent(headerLen int32) (rc int32) {
	defer func() {
		if r := recover(); r != nil {
			p.host.setError(p.panicked("panic", r))
			rc = abi.ResultError
		}
	}()
	h, err := p.readHeader(headerLen)
	if err != nil {
		p.host.setError(err.Error())
		return abi.ResultError
	}
	p.ev.p, p.ev.hdr = p, h
	if p.onHandle == nil {
		if p.onReconcile != nil {
			p.host.setError("this plugin is a controller (kit.HandleReconcile) and handles no events: give it a controller: block in the configuration")
			return abi.ResultError
		}
		p.host.setError("no handler registered")
		return abi.ResultError
	}
	return p.answer(p.onHandle(&p.ev))
}

// readHeader reads the current call's header, headerLen bytes, into the
// reused buffer.
func (p *plugin) readHeader(headerLen int32) (abi.HeaderView, error) {
	if cap(p.hdrBuf) < int(headerLen) {
		p.hdrBuf = make([]byte, headerLen, headerLen+headerLen/2)
	}
	buf := p.hdrBuf[:headerLen]
	if n := p.host.headerRead(buf); n != headerLen {
		return abi.HeaderView{}, fmt.Errorf("header_read returned %d, want %d", n, headerLen)
	}
	return abi.ParseHeader(buf)
}

func (p *plugin) synced(headerLen int32) {
	defer func() {
		if r := recover(); r != nil {
			p.host.log(abi.LogError, p.panicked("panic in OnSynced", r))
		}
		p.yield()
	}()
	if p.onSynced == nil {
		return
	}
	buf := make([]byte, headerLen)
	if n := p.host.headerRead(buf); n != headerLen {
		p.host.log(abi.LogError, fmt.Sprintf("ih_synced: header_read returned %d, want %d", n, headerLen))
		return
	}
	h, err := abi.ParseHeader(buf)
	if err != nil {
		p.host.log(abi.LogError, "ih_synced: "+err.Error())
		return
	}
	p.onSynced((&Event{p: p, hdr: h}).Resource())
}

func (p *plugin) shutdown() {
	defer func() {
		if r := recover(); r != nil {
			p.host.log(abi.LogError, fmt.Sprintf("panic in OnShutdown: %v", r))
		}
	}()
	if p.onShutdown != nil {
		p.onShutdown()
	}
}

// Logging. Lines go to the host's log with the plugin's name; the host
// rate limits them.

// Debugf logs at debug level.
func Debugf(format string, args ...any) { the.host.log(abi.LogDebug, fmt.Sprintf(format, args...)) }

// Infof logs at info level.
func Infof(format string, args ...any) { the.host.log(abi.LogInfo, fmt.Sprintf(format, args...)) }

// Warnf logs at warn level.
func Warnf(format string, args ...any) { the.host.log(abi.LogWarn, fmt.Sprintf(format, args...)) }

// Errorf logs at error level.
func Errorf(format string, args ...any) { the.host.log(abi.LogError, fmt.Sprintf(format, args...)) }

// Log is a structured logger writing through the host: the message and
// then key=value pairs, at the record's level.
//
//	kit.Log.Info("pod moved", "pod", ev.Key(), "from", old, "to", phase)
var Log = slog.New(logHandler{})

type logHandler struct {
	attrs []slog.Attr
	group string
}

func (h logHandler) Enabled(context.Context, slog.Level) bool { return true }

func (h logHandler) Handle(_ context.Context, r slog.Record) error {
	var b strings.Builder
	b.WriteString(r.Message)
	write := func(a slog.Attr) bool {
		appendAttr(&b, h.group, a)
		return true
	}
	for _, a := range h.attrs {
		write(a)
	}
	r.Attrs(write)
	level := abi.LogInfo
	switch {
	case r.Level >= slog.LevelError:
		level = abi.LogError
	case r.Level >= slog.LevelWarn:
		level = abi.LogWarn
	case r.Level < slog.LevelInfo:
		level = abi.LogDebug
	}
	the.host.log(level, b.String())
	return nil
}

func appendAttr(b *strings.Builder, group string, a slog.Attr) {
	a.Value = a.Value.Resolve()
	if a.Equal(slog.Attr{}) {
		return
	}
	key := a.Key
	if group != "" {
		key = group + "." + key
	}
	if a.Value.Kind() == slog.KindGroup {
		for _, g := range a.Value.Group() {
			appendAttr(b, key, g)
		}
		return
	}
	b.WriteByte(' ')
	b.WriteString(key)
	b.WriteByte('=')
	v := a.Value.String()
	if v == "" || strings.ContainsAny(v, " \t\n\"=") {
		v = strconv.Quote(v)
	}
	b.WriteString(v)
}

func (h logHandler) WithAttrs(as []slog.Attr) slog.Handler {
	n := h
	n.attrs = append(append([]slog.Attr(nil), h.attrs...), as...)
	return n
}

func (h logHandler) WithGroup(name string) slog.Handler {
	n := h
	if n.group != "" {
		name = n.group + "." + name
	}
	n.group = name
	return n
}
