package replay

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"io"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/informer-host/informer-host/abi"
	"github.com/informer-host/informer-host/host/internal/engine"
)

// Cassette keeps what a live plugin's capabilities II calls (writes,
// Events, HTTP) were answered, as the stubs a replay of its recording
// answers them with: each call one stub, its request exactly as the
// replay records the same call, in the order the calls were made. The
// replay takes the first unused stub whose request equals a call's, so a
// call repeated (a write retried after a conflict) gets each recorded
// answer in turn. It is safe for concurrent use: a reload's old and new
// versions may call at once.
type Cassette struct {
	mu    sync.Mutex
	stubs []Stub
	open  int // the first stub of the call not yet settled
}

// Settle ends the plugin's current call for the stubs: its stubs are
// kept when the replay makes the call (an event the recording wrote,
// ih_init), marked Retry when it is a later attempt of a delivery the
// recording wrote once, and dropped when the replay does not make it (an
// event the recording leaves out, a call the stop cut): an unused stub
// is a divergence to replay --compare. Calls of instances running at
// once (a reload's old and new versions) are settled together.
func (c *Cassette) Settle(keep, retry bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case !keep:
		c.stubs = c.stubs[:c.open]
	case retry:
		for i := c.open; i < len(c.stubs); i++ {
			c.stubs[i].Retry = true
		}
	}
	c.open = len(c.stubs)
}

// Wrap makes o's capabilities II record into c what they answer. A
// capability o denies (nil) stays denied: its calls never reach a stub
// in the replay either (they are ERR_DENIED live, and the replay grants
// them, so a recording of a plugin denied a capability needs that
// plugin's own stubs).
func (c *Cassette) Wrap(o *engine.InstanceOptions) {
	if o.Writes != nil {
		o.Writes = cassetteWrites{next: o.Writes, c: c}
	}
	if o.HTTP != nil {
		o.HTTP = cassetteHTTP{next: o.HTTP, c: c}
	}
	if o.Events != nil {
		o.Events = cassetteEvents{next: o.Events, c: c}
	}
}

func (c *Cassette) add(function string, request any, response any, code int32, msg string) {
	st := Stub{Function: function, Request: canonical(marshal(request)), Response: marshal(response), Code: code, Message: msg}
	c.mu.Lock()
	c.stubs = append(c.stubs, st)
	c.mu.Unlock()
}

// Stubs returns the stubs recorded so far, in call order.
func (c *Cassette) Stubs() []Stub {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]Stub(nil), c.stubs...)
}

// WriteStubs writes stubs as a stub file (abi/REPLAY.md), indented, one
// stub's fields together, so that a person can read and edit it.
func WriteStubs(w io.Writer, stubs []Stub) error {
	if stubs == nil {
		stubs = []Stub{}
	}
	b, err := json.MarshalIndent(stubFile{Version: StubFormatVersion, Stubs: stubs}, "", "  ")
	if err != nil {
		return err
	}
	_, err = w.Write(append(b, '\n'))
	return err
}

type cassetteWrites struct {
	next engine.ClusterWriter
	c    *Cassette
}

// Check records a refusal the replay cannot make itself (a grant's:
// ERR_DENIED), as the stub that answers the same write with it there.
func (w cassetteWrites) Check(r *engine.WriteRequest) (int32, string) {
	code, msg := w.next.Check(r)
	if code != 0 {
		if own, _ := checkArgs(r); own == 0 {
			w.c.add(abi.ImportK8sWrite, requestOf(r), nil, code, msg)
		}
	}
	return code, msg
}

func (w cassetteWrites) Do(ctx context.Context, r *engine.WriteRequest) (map[string]any, int32, string) {
	obj, code, msg := w.next.Do(ctx, r)
	var resp any
	if code == 0 && obj != nil && r.Op != abi.WriteDelete {
		resp = obj
	}
	w.c.add(abi.ImportK8sWrite, requestOf(r), resp, code, msg)
	return obj, code, msg
}

type cassetteHTTP struct {
	next engine.HTTPClient
	c    *Cassette
}

func (h cassetteHTTP) Do(ctx context.Context, r *engine.HTTPRequest, resp *engine.HTTPResponse) (int32, string) {
	// The request first: the client may reuse r's buffers for resp.
	req := httpRequestOf(r)
	code, msg := h.next.Do(ctx, r, resp)
	var answer any
	if code >= 100 {
		hr := httpResponse{httpBody: exactBody(resp.Body)}
		for k, vs := range headerMap(resp.Header) {
			if hr.Header == nil {
				hr.Header = map[string]json.RawMessage{}
			}
			hr.Header[k] = marshal(vs)
		}
		if hr.Header != nil || len(resp.Body) > 0 {
			answer = hr
		}
	}
	h.c.add(abi.ImportHTTPRequest, req, answer, code, msg)
	return code, msg
}

// exactBody is b as a stub's response gives it back byte for byte: UTF-8
// as "bodyText", the rest as "bodyBase64". Never "body": the stub file is
// indented, and a JSON body in it would come back indented too.
func exactBody(b []byte) httpBody {
	switch {
	case len(b) == 0:
		return httpBody{}
	case utf8.Valid(b):
		return httpBody{BodyText: string(b)}
	}
	return httpBody{BodyBase64: base64.StdEncoding.EncodeToString(b)}
}

type cassetteEvents struct {
	next engine.EventRecorder
	c    *Cassette
}

func (e cassetteEvents) Record(ctx context.Context, obj map[string]any, eventType, reason, message string) (int32, string) {
	code, msg := e.next.Record(ctx, obj, eventType, reason, message)
	e.c.add(abi.ImportEventRecord, eventRequestOf(obj, eventType, reason, message), nil, code, msg)
	return code, msg
}

// CassetteController is a live reconcile call's controller functions,
// recorded: what its children_apply and status_apply were answered goes
// into the cassette as stubs (request as the replay records the same
// call), and what the call gave the host is kept for its reconcile line
// (Given).
type CassetteController struct {
	next engine.ControllerCall
	c    *Cassette
	key  controllerRequest
	given
}

// Controller wraps next, the ControllerCall of one reconcile call of the
// key namespace/name of resource (its config name).
func (c *Cassette) Controller(resource, namespace, name string, next engine.ControllerCall) *CassetteController {
	return &CassetteController{next: next, c: c, key: controllerRequest{Resource: resource, Namespace: namespace, Name: name}}
}

// Given returns what the call gave the host: the bodies of its last
// children_apply and status_apply (nil: none made) and its requeue-after.
func (w *CassetteController) Given() (children, status []byte, requeue time.Duration) {
	return w.children, w.status, w.requeue
}

func (w *CassetteController) RequeueAfter(d time.Duration) {
	w.after(d)
	w.next.RequeueAfter(d)
}

func (w *CassetteController) ApplyChildren(ctx context.Context, body []byte) (failed int32, code int32, msg string) {
	w.child(body)
	failed, code, msg = w.next.ApplyChildren(ctx, body)
	r := w.key
	r.Body = json.RawMessage(body)
	answer := code
	if code == 0 {
		answer = failed
	}
	w.c.add(abi.ImportChildrenApply, r, nil, answer, msg)
	return failed, code, msg
}

func (w *CassetteController) ApplyStatus(ctx context.Context, body []byte) (int32, string) {
	w.state(body)
	code, msg := w.next.ApplyStatus(ctx, body)
	r := w.key
	r.Body = json.RawMessage(body)
	w.c.add(abi.ImportStatusApply, r, nil, code, msg)
	return code, msg
}
