package kit

import (
	"strconv"
	"strings"

	"github.com/informer-host/informer-host/abi"
)

// outboundAPI is the imports of Events and HTTP upstreams (ABI.md §17.2,
// §17.3) and result_message; separate from hostAPI so a host stand-in
// without them need not implement them.
type outboundAPI interface {
	eventRecord(which, typ int32, reason, msg string) int32
	httpRequest(upstream, method, path string, header, body []byte) int32
	httpResponseRead(part int32, buf []byte) int32
	resultMessage(buf []byte) int32
}

func (p *plugin) outbound() outboundAPI {
	if a, ok := p.host.(outboundAPI); ok {
		return a
	}
	return noOutbound{}
}

// ErrTooLarge is the code of a request or response over the operator's
// limit (ABI.md §17); the other codes of the functions that act outside
// the host are beside the writes (writes.go).
var ErrTooLarge error = HostError(abi.ErrTooLarge)

// CallError is the error of a capabilities II call (a write, an Event,
// an HTTP request): which function it was, what it was called on, its
// code, and the message the host gave with it (result_message), so that
// the text alone tells a user what failed and why:
//
//	k8s_write apply configmaps demo/x: ERR_RATE_LIMITED: would wait 12s for the plugin's API budget
//
// A cache read, state call or metric update that is denied, over the
// quota or invalid is one too, without a message (the host sets none for
// them): "cache_get secrets shop/token: ERR_DENIED". Their expected
// outcomes (a miss, a missing key, a conflict, a dropped update) are the
// bare sentinels instead, which cost nothing.
//
// errors.Is matches it against ErrDenied, ErrTimeout and the other codes.
type CallError struct {
	// Func is the host function: "k8s_write", "event_record",
	// "http_request", "http_response_read"; "cache_get", "state_set",
	// "metric_declare" and the other cache, state and metrics functions.
	Func string
	// Call is what the function was called on, as the error shows it: a
	// write's op, resource and namespace/name ("apply pods shop/web"), an
	// Event's type, reason and object, a request's upstream, method and
	// path ("chat POST /crashloop"); a cache read's resource and
	// namespace/name, selector or index ("pods in shop -l app=web"); a
	// state key, quoted; a metric's name.
	Call    string
	Code    int32
	Message string
}

func (e *CallError) Error() string {
	var b strings.Builder
	b.WriteString(e.Func)
	if e.Call != "" {
		if b.Len() > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(e.Call)
	}
	if b.Len() > 0 {
		b.WriteString(": ")
	}
	b.WriteString(codeName(e.Code))
	if e.Message != "" {
		b.WriteString(": ")
		b.WriteString(e.Message)
	}
	return b.String()
}

// codeName is a code's ABI name, ERR_DENIED, or its number when it has
// none.
func codeName(code int32) string {
	if n := abi.ErrorName(code); n != "" {
		return n
	}
	return "error " + strconv.Itoa(int(code))
}

// Unwrap lets errors.Is match the code's sentinel (ErrConflict,
// ErrNoObject, ErrTimeout, ...).
func (e *CallError) Unwrap() error { return hostErr(e.Code) }

// callError returns the CallError of a call of fn on call that returned
// code, with the result message.
func (p *plugin) callError(fn, call string, code int32) error {
	return &CallError{Func: fn, Call: call, Code: code, Message: p.resultMessage(p.outbound())}
}

// Kubernetes Event types, for RecordEvent.
const (
	Normal  = abi.KubeEventNormal
	Warning = abi.KubeEventWarning
)

// RecordEvent records a Kubernetes Event about the event's object (the
// new state; the last known state on delete), of type Normal or Warning,
// attributed to the plugin (reportingController informer-host/<plugin>).
// reason is a CamelCase word ("TooLarge"), message at most 1 KiB. The
// host sends it in the background, aggregating repeats, so nil means it
// was queued. Needs grants.events; otherwise ErrDenied.
func (e *Event) RecordEvent(typ int32, reason, message string) error {
	return e.p.recordEvent(abi.ObjectNew, typ, reason, message)
}

// RecordEvent records a Kubernetes Event about the cached object, like
// Event.RecordEvent.
func (o Cached) RecordEvent(typ int32, reason, message string) error {
	return o.p.recordEvent(o.h, typ, reason, message)
}

func (p *plugin) recordEvent(which, typ int32, reason, message string) error {
	code := p.outbound().eventRecord(which, typ, reason, message)
	if code == 0 {
		return nil
	}
	// The message is read first: the object's fields below are read with
	// field_read, which leaves result_message alone, but reading it first
	// keeps that an assumption of no one.
	msg := p.resultMessage(p.outbound())
	call := eventTypeName(typ) + " " + reason
	if k := p.objectKey(which); k != "" {
		call += " about " + k
	}
	return &CallError{Func: abi.ImportEventRecord, Call: call, Code: code, Message: msg}
}

// eventTypeName is how the Events API names an event_record type.
func eventTypeName(typ int32) string {
	switch typ {
	case Normal:
		return "Normal"
	case Warning:
		return "Warning"
	}
	return "type " + strconv.Itoa(int(typ))
}

// objectKey is the namespace/name of the object which selects, for an
// error's text, or "" when it cannot be read.
func (p *plugin) objectKey(which int32) string {
	name, err := p.field(which, "metadata.name")
	if err != nil {
		return ""
	}
	ns, _ := p.field(which, "metadata.namespace")
	if ns.Text == "" {
		return name.Text
	}
	return ns.Text + "/" + name.Text
}

// Upstream is an HTTP upstream the operator named in config.yaml
// (top-level upstreams) and granted the plugin (grants.http).
type Upstream struct {
	p    *plugin
	name string
}

// HTTP returns the upstream called name.
func HTTP(name string) Upstream { return Upstream{p: &the, name: name} }

// Response is an upstream's answer.
type Response struct {
	// Status is the HTTP status, 5xx included: an answer is not an error.
	Status int
	// Header holds the response headers by canonical name.
	Header map[string][]string
	Body   []byte
}

// Post sends body with the Content-Type contentType to path under the
// upstream's URL.
func (u Upstream) Post(path, contentType string, body []byte) (*Response, error) {
	var h []string
	if contentType != "" {
		h = []string{"Content-Type", contentType}
	}
	return u.Do("POST", path, body, h...)
}

// Get requests path under the upstream's URL.
func (u Upstream) Get(path string) (*Response, error) { return u.Do("GET", path, nil) }

// Do sends a request with method (one the upstream allows) to path (""
// or starting with "/" or "?"; it cannot leave the upstream's URL) with
// header given as name, value pairs. The error is a *CallError: ErrDenied,
// ErrTimeout, ErrTooLarge, ErrUnavailable (no answer), ErrRateLimited
// (the plugin's concurrency bound: return Retry), ErrCanceled (the host
// is stopping the call: return), or ERR_INVALID for a path or header the
// host refused.
func (u Upstream) Do(method, path string, body []byte, header ...string) (*Response, error) {
	var hb strings.Builder
	for i := 0; i+1 < len(header); i += 2 {
		hb.WriteString(header[i])
		hb.WriteString(": ")
		hb.WriteString(header[i+1])
		hb.WriteByte('\n')
	}
	a := u.p.outbound()
	status := a.httpRequest(u.name, method, path, []byte(hb.String()), body)
	call := u.name + " " + method + " " + path
	if status < 0 {
		return nil, u.p.callError(abi.ImportHTTPRequest, call, status)
	}
	r := &Response{Status: int(status), Header: map[string][]string{}}
	var code int32
	if r.Body, code = readPart(a, abi.HTTPBody); code < 0 {
		return nil, u.p.callError(abi.ImportHTTPResponseRead, "body of "+call, code)
	}
	hdr, code := readPart(a, abi.HTTPHeader)
	if code < 0 {
		return nil, u.p.callError(abi.ImportHTTPResponseRead, "header of "+call, code)
	}
	for line := range strings.SplitSeq(string(hdr), "\n") {
		if k, v, ok := strings.Cut(line, ": "); ok {
			r.Header[k] = append(r.Header[k], v)
		}
	}
	return r, nil
}

// readPart reads one part of the last response with the size protocol;
// a negative code is the host's error.
func readPart(a outboundAPI, part int32) ([]byte, int32) {
	buf := make([]byte, 1024)
	for {
		n := a.httpResponseRead(part, buf)
		if n < 0 {
			return nil, n
		}
		if int(n) <= len(buf) {
			return buf[:n], 0
		}
		buf = make([]byte, n)
	}
}

// noOutbound stands in off wasip1 (and under a host without the
// functions): denied.
type noOutbound struct{}

func (noOutbound) eventRecord(int32, int32, string, string) int32           { return abi.ErrDenied }
func (noOutbound) httpRequest(string, string, string, []byte, []byte) int32 { return abi.ErrDenied }
func (noOutbound) httpResponseRead(int32, []byte) int32                     { return abi.ErrAbsent }
func (noOutbound) resultMessage([]byte) int32                               { return 0 }
