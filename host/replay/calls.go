package replay

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/informer-host/informer-host/abi"
)

// Call is one host capability call the plugin made while handling an
// event, as the replay's output records it.
type Call struct {
	// Function is the host function ("state_set", "k8s_write", ...).
	Function string `json:"function"`
	// Request is the call's input, as JSON (each capability's adapter
	// chooses the shape; REPLAY.md lists them).
	Request json.RawMessage `json:"request,omitempty"`
	// Response is what the plugin was given, if anything besides the code.
	Response json.RawMessage `json:"response,omitempty"`
	// Code is the function's return code (0 or an ERR_* code).
	Code int32 `json:"code"`
	// Message is what result_message returned after the call.
	Message string `json:"message,omitempty"`
	// Stubbed: the answer came from the stub file; false for capabilities
	// the replay serves itself (cache, state, metrics) and for calls no
	// stub answered.
	Stubbed bool `json:"stubbed,omitempty"`
	// Extra says why a capabilities II call is one the stub file does not
	// hold, the file being the calls a recording made: ExtraUnstubbed or
	// ExtraRepeated; "" for a call a stub was there for.
	Extra string `json:"extra,omitempty"`
}

// The calls a stub file does not hold (Call.Extra).
const (
	// ExtraUnstubbed: no stub answered the call.
	ExtraUnstubbed = "unstubbed"
	// ExtraRepeated: the stub that answered had answered this request
	// already; a recording holds one stub per call, so the live run made
	// this call fewer times.
	ExtraRepeated = "repeated"
)

// UnusedStub is a stub no call used: with a recording's stub file, a call
// the live run made and the replay did not.
type UnusedStub struct {
	// Index is the stub's place in the file's list, from 0.
	Index int `json:"index"`
	Stub
}

// StubFormatVersion is the version of the stub file format.
const StubFormatVersion = 1

// Stub is one answer of a stub file: the function and, optionally, the
// request it answers (absent: every request of the function), and the
// answer.
type Stub struct {
	Function string          `json:"function"`
	Request  json.RawMessage `json:"request,omitempty"`
	Response json.RawMessage `json:"response,omitempty"`
	Code     int32           `json:"code"`
	Message  string          `json:"message,omitempty"`
	// Retry marks a recorded call of a delivery's later attempt, after
	// the plugin answered retry: the replay retries on its own schedule,
	// so it may make such a call fewer times or more (replay --compare
	// does not count them).
	Retry bool `json:"retry,omitempty"`
}

// stubFile is the stub file: {"informerHostStubs": 1, "stubs": [...]}.
type stubFile struct {
	Version int    `json:"informerHostStubs"`
	Stubs   []Stub `json:"stubs"`
}

// Stubs answers the calls of the capabilities the replay cannot serve
// itself (writes, events, HTTP: capabilities II), from a stub file, in the
// spirit of kwctl's --replay-host-capabilities-interactions. A call is
// answered by the first unused stub of its function whose request equals
// its own (as JSON, whatever the key order), else by the last stub that
// matched it (so one stub answers a repeated call every time), else by a
// stub of its function without a request. A call no stub answers gets
// ERR_UNAVAILABLE, with a message that says which stub to add.
type Stubs struct {
	stubs []Stub
	used  []bool
	last  map[string]int // function+request -> index of the last stub used
	// any marks the stubs without a request that answered a call (used
	// marks those with one).
	any []bool
}

// ReadStubs reads a stub file.
func ReadStubs(path string) (*Stubs, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var f stubFile
	if err := strictJSON(b, &f); err != nil {
		if errors.Is(err, errTrailing) {
			return nil, fmt.Errorf("%s: %v, after the stub file's object: a stub file is one {\"informerHostStubs\": %d, \"stubs\": [...]}; put every stub in its list", path, err, StubFormatVersion)
		}
		return nil, fmt.Errorf("%s: %v", path, err)
	}
	if f.Version != StubFormatVersion {
		return nil, fmt.Errorf("%s: want {\"informerHostStubs\": %d, \"stubs\": [...]}, got version %d", path, StubFormatVersion, f.Version)
	}
	s := NewStubs(f.Stubs)
	for i, st := range s.stubs {
		if err := checkStub(st); err != nil {
			return nil, fmt.Errorf("%s: stubs[%d]: %v", path, i, err)
		}
	}
	return s, nil
}

// checkStub refuses a stub no call could use: a function the replay
// serves itself or that does not exist, or a code the function cannot
// return.
func checkStub(st Stub) error {
	answer, ok := stubAnswers[st.Function]
	switch {
	case st.Function == "":
		return errors.New("no function")
	case !ok:
		return fmt.Errorf("function %q cannot be stubbed: the stubbed functions are %s, %s, %s, %s and %s (abi/REPLAY.md)",
			st.Function, abi.ImportK8sWrite, abi.ImportHTTPRequest, abi.ImportEventRecord, abi.ImportChildrenApply, abi.ImportStatusApply)
	case st.Function == abi.ImportHTTPRequest && st.Code >= 0 && (st.Code < 100 || st.Code > 599):
		return fmt.Errorf("%s: code %d: want the HTTP status (100-599) or an ERR_* code, as in {%s}", st.Function, st.Code, answer)
	case st.Function != abi.ImportHTTPRequest && st.Function != abi.ImportChildrenApply && st.Code > 0:
		return fmt.Errorf("%s: code %d: want 0 or an ERR_* code, as in {%s}", st.Function, st.Code, answer)
	}
	return nil
}

// NewStubs returns Stubs answering from stubs (nil: none).
func NewStubs(stubs []Stub) *Stubs {
	s := &Stubs{stubs: stubs, used: make([]bool, len(stubs)), any: make([]bool, len(stubs)), last: map[string]int{}}
	for i := range s.stubs {
		s.stubs[i].Request = canonical(s.stubs[i].Request)
	}
	return s
}

// canonical re-encodes JSON with sorted keys, so equal requests compare
// equal as bytes; invalid JSON is kept as it is.
func canonical(b json.RawMessage) json.RawMessage {
	if len(b) == 0 {
		return nil
	}
	var v any
	if json.Unmarshal(b, &v) != nil {
		return b
	}
	out, _ := json.Marshal(v)
	return out
}

// answer finds the stub for function and request (canonical JSON), and
// says whether it is one whose request answered a call already.
func (s *Stubs) answer(function string, request json.RawMessage) (st Stub, ok, repeated bool) {
	k := function + "\x00" + string(request)
	for i, st := range s.stubs {
		if !s.used[i] && st.Function == function && st.Request != nil && bytes.Equal(st.Request, request) {
			s.used[i] = true
			s.last[k] = i
			return st, true, false
		}
	}
	if i, ok := s.last[k]; ok {
		return s.stubs[i], true, true
	}
	for i, st := range s.stubs {
		if st.Function == function && st.Request == nil {
			s.any[i] = true
			return st, true, false
		}
	}
	return Stub{}, false, false
}

// unused returns the stubs no call used, in file order.
func (s *Stubs) unused() []UnusedStub {
	var out []UnusedStub
	for i, st := range s.stubs {
		if !s.used[i] && !s.any[i] {
			out = append(out, UnusedStub{Index: i, Stub: st})
		}
	}
	return out
}

// Calls records one event's host calls and answers the stubbed ones. The
// replay hands it to every capability adapter; only the replay's
// goroutine uses it.
type Calls struct {
	stubs *Stubs
	cur   []Call
	// toAdd are the stubs no call found, once per function and request,
	// in the order first asked for.
	toAdd []Stub
	asked map[string]bool
	// handles counts the cache_get handles of the current export call,
	// which the engine numbers from abi.FirstHandle.
	handles int
}

// missing notes the stub a call found none for and returns the call's
// result message. The stub itself is printed once, at the end
// (Report.MissingStubs): a retried event asks for it again and again.
func (c *Calls) missing(function string, req json.RawMessage) string {
	k := function + "\x00" + string(req)
	if !c.asked[k] {
		if c.asked == nil {
			c.asked = map[string]bool{}
		}
		c.asked[k] = true
		st := Stub{Function: function, Request: req}
		if function == abi.ImportHTTPRequest {
			st.Code = 200
		}
		c.toAdd = append(c.toAdd, st)
	}
	return fmt.Sprintf("replay: no stub answers this %s call; add the one the replay prints under \"stubs to add\" to the stub file (--stubs)", function)
}

// handle is what cache_get returns to the plugin for a lookup's outcome,
// in the engine's order (ABI.md section 16): denied, no handle left,
// the lookup's code, else the call's next handle.
func (c *Calls) handle(obj map[string]any, code int32) int32 {
	switch {
	case code == abi.ErrDenied:
		return code
	case c.handles >= abi.MaxHandles:
		return abi.ErrInvalid
	case code != 0:
		return code
	case obj == nil:
		return abi.ErrAbsent
	}
	c.handles++
	return abi.FirstHandle + int32(c.handles-1)
}

// Record appends a call the replay served itself.
func (c *Calls) Record(function string, request any, response any, code int32) {
	c.cur = append(c.cur, Call{Function: function, Request: marshal(request), Response: marshal(response), Code: code})
}

// Serve answers a call of a capability the replay does not serve itself
// from the stubs, records it, and returns the stub's response (nil for
// none), code and result message. A capabilities II adapter is this call
// and the decoding of the response into what its engine interface
// returns.
func (c *Calls) Serve(function string, request any) (response json.RawMessage, code int32, message string) {
	req := canonical(marshal(request))
	var st Stub
	var ok, repeated bool
	if c.stubs != nil {
		st, ok, repeated = c.stubs.answer(function, req)
	}
	call := Call{Function: function, Request: req, Stubbed: ok}
	switch {
	case !ok:
		st = Stub{Function: function, Code: abi.ErrUnavailable, Message: c.missing(function, req)}
		call.Extra = ExtraUnstubbed
	case repeated:
		call.Extra = ExtraRepeated
	}
	call.Response, call.Code, call.Message = st.Response, st.Code, st.Message
	c.cur = append(c.cur, call)
	return st.Response, st.Code, st.Message
}

// unusedStubs returns the stubs no call used (nil without a stub file).
func (c *Calls) unusedStubs() []UnusedStub {
	if c.stubs == nil {
		return nil
	}
	return c.stubs.unused()
}

// stubAnswers shows, in the error about a stub a function cannot use,
// the answer a stub of the function gives (REPLAY.md).
var stubAnswers = map[string]string{
	abi.ImportK8sWrite:    `"code": 0, "response": {the object the write returns}`,
	abi.ImportHTTPRequest: `"code": 200, "response": {"header": {"Content-Type": "..."}, "body": ...}`,
	abi.ImportEventRecord: `"code": 0`,
	// children_apply's code is its result: how many children failed.
	abi.ImportChildrenApply: `"code": 0`,
	abi.ImportStatusApply:   `"code": 0`,
}

// take returns the calls recorded since the last take, at the end of an
// export call (which ends its handles).
func (c *Calls) take() []Call {
	out := c.cur
	c.cur = nil
	c.handles = 0
	return out
}

func marshal(v any) json.RawMessage {
	switch v := v.(type) {
	case nil:
		return nil
	case json.RawMessage:
		return v
	}
	b, err := json.Marshal(v)
	if err != nil {
		b, _ = json.Marshal(fmt.Sprint(v))
	}
	return b
}

// refuse records a call the replay refused itself, with the code and
// message the host would give, without asking the stubs.
func (c *Calls) refuse(function string, request any, code int32, msg string) {
	c.cur = append(c.cur, Call{Function: function, Request: canonical(marshal(request)), Code: code, Message: msg})
}

// amend replaces the code and message of the last call served, for an
// adapter that finds the stub's answer unusable, and returns them.
func (c *Calls) amend(code int32, msg string) (int32, string) {
	if n := len(c.cur); n > 0 {
		c.cur[n-1].Code, c.cur[n-1].Message = code, msg
	}
	return code, msg
}

// Describe names a capabilities II call by its request, for a person:
// "k8s_write apply configmaps demo/copy", "http_request POST hook /path",
// "event_record Warning TooBig ConfigMap demo/big".
func Describe(function string, request json.RawMessage) string {
	var r struct {
		Op, Resource, Namespace, Name, Subresource string
		Upstream, Method, Path                     string
		Type, Reason                               string
		Object                                     objectRef
		Body                                       json.RawMessage
	}
	if json.Unmarshal(request, &r) != nil || len(request) == 0 {
		return function
	}
	name := func(ns, n string) string {
		if ns == "" {
			return n
		}
		return ns + "/" + n
	}
	parts := []string{function}
	switch function {
	case abi.ImportK8sWrite:
		if r.Name == "" {
			// A create may name its object in the body only.
			var body struct {
				Metadata struct{ Name, GenerateName string }
			}
			_ = json.Unmarshal(r.Body, &body)
			r.Name = cmp.Or(body.Metadata.Name, body.Metadata.GenerateName)
		}
		parts = append(parts, r.Op, r.Resource, name(r.Namespace, r.Name))
		if r.Subresource != "" {
			parts = append(parts, r.Subresource)
		}
	case abi.ImportHTTPRequest:
		parts = append(parts, r.Method, r.Upstream, r.Path)
	case abi.ImportEventRecord:
		parts = append(parts, r.Type, r.Reason, r.Object.Kind, name(r.Object.Namespace, r.Object.Name))
	case abi.ImportChildrenApply, abi.ImportStatusApply:
		parts = append(parts, r.Resource, name(r.Namespace, r.Name))
		if function == abi.ImportChildrenApply {
			parts = append(parts, describeChildren(r.Body))
		}
	}
	return strings.Join(slices.DeleteFunc(parts, func(s string) bool { return s == "" }), " ")
}
