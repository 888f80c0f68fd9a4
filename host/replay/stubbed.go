package replay

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/textproto"
	"sort"
	"strings"
	"unicode/utf8"

	"github.com/informer-host/informer-host/abi"
	"github.com/informer-host/informer-host/host/internal/engine"
	"github.com/informer-host/informer-host/internal/kubewrite"
)

// stubbed gives an instance the capabilities the replay cannot serve
// itself (capabilities II: writes, events, HTTP), each through an adapter
// whose methods are calls.Serve("<host function>", <request>) and the
// decoding of the stub's response into what the engine interface
// returns. Every call is recorded into the step's calls, answered or not.
//
// The replay grants every capability II call: grants, upstreams and the
// apiserver's rules are the host's to check, and the stub decides the
// answer (REPLAY.md lists each function's request and answer).
func stubbed(o *engine.InstanceOptions, calls *Calls) {
	o.Writes = stubWrites{calls}
	o.HTTP = stubHTTP{calls}
	o.Events = stubEvents{calls}
}

// writeOps names the k8s_write ops in the recorded requests.
var writeOps = map[int32]string{
	abi.WriteCreate: "create", abi.WriteMergePatch: "merge-patch", abi.WriteJSONPatch: "json-patch",
	abi.WriteApply: "apply", abi.WriteDelete: "delete",
}

// writeRequest is a k8s_write call as the output records it and a stub's
// request matches it.
type writeRequest struct {
	Op              string          `json:"op"`
	Resource        string          `json:"resource"`
	Namespace       string          `json:"namespace,omitempty"`
	Name            string          `json:"name,omitempty"`
	Subresource     string          `json:"subresource,omitempty"`
	Body            json.RawMessage `json:"body,omitempty"`
	UID             string          `json:"uid,omitempty"`
	ResourceVersion string          `json:"resourceVersion,omitempty"`
	Force           bool            `json:"force,omitempty"`
	MustExist       bool            `json:"mustExist,omitempty"`
}

type stubWrites struct{ calls *Calls }

func requestOf(r *engine.WriteRequest) writeRequest {
	req := writeRequest{Op: writeOps[r.Op], Resource: string(r.Resource), Namespace: string(r.Namespace), Name: string(r.Name),
		Subresource: string(r.Subresource), UID: string(r.UID), ResourceVersion: string(r.ResourceVersion), Force: r.Force,
		MustExist: r.MustExist}
	if json.Valid(r.Body) {
		req.Body = json.RawMessage(r.Body)
	}
	return req
}

// checkArgs is the part of the host's check of a write that needs no
// grant: the replay refuses these writes itself, without a stub.
func checkArgs(r *engine.WriteRequest) (int32, string) {
	return kubewrite.CheckArgs(&kubewrite.Request{Op: r.Op, Name: string(r.Name), UID: string(r.UID),
		ResourceVersion: string(r.ResourceVersion), Force: r.Force, MustExist: r.MustExist, Body: r.Body})
}

// Check refuses, as the host does, the arguments that cannot work (a
// missing name, a create with preconditions, ...): the replay has no
// grants to check.
func (s stubWrites) Check(r *engine.WriteRequest) (int32, string) {
	code, msg := checkArgs(r)
	if code != 0 {
		s.calls.refuse(abi.ImportK8sWrite, requestOf(r), code, msg)
	}
	return code, msg
}

// Do answers from the stub: code 0 returns the stub's response (a JSON
// object) or, without one, the request's body when it is an object
// (create, apply, merge patch: close to what the apiserver returns),
// else {}; a delete returns nothing.
func (s stubWrites) Do(_ context.Context, r *engine.WriteRequest) (map[string]any, int32, string) {
	req := requestOf(r) // the body is valid JSON or empty: the engine checked it before Do
	resp, code, msg := s.calls.Serve(abi.ImportK8sWrite, req)
	if code != 0 || r.Op == abi.WriteDelete {
		return nil, code, msg
	}
	if len(resp) == 0 {
		if b := bytes.TrimSpace(req.Body); len(b) == 0 || b[0] != '{' {
			return map[string]any{}, 0, "" // a JSON patch is no object to return
		}
		resp = req.Body
	}
	var obj map[string]any
	if json.Unmarshal(resp, &obj) != nil || obj == nil {
		code, msg := s.calls.amend(abi.ErrUnavailable, "replay: the k8s_write stub's response is not a JSON object (the object the write returns)")
		return nil, code, msg
	}
	return obj, 0, ""
}

// httpRequest is an http_request call as the output records it. The body
// is "body" when it is JSON, else "bodyText" when it is UTF-8, else
// "bodyBase64".
type httpRequest struct {
	Upstream string              `json:"upstream"`
	Method   string              `json:"method"`
	Path     string              `json:"path,omitempty"`
	Header   map[string][]string `json:"header,omitempty"`
	httpBody
}

type httpBody struct {
	Body       json.RawMessage `json:"body,omitempty"`
	BodyText   string          `json:"bodyText,omitempty"`
	BodyBase64 string          `json:"bodyBase64,omitempty"`
}

func bodyOf(b []byte) httpBody {
	switch {
	case len(b) == 0:
		return httpBody{}
	case json.Valid(b):
		return httpBody{Body: append(json.RawMessage(nil), b...)}
	case utf8.Valid(b):
		return httpBody{BodyText: string(b)}
	}
	return httpBody{BodyBase64: base64.StdEncoding.EncodeToString(b)}
}

// bytes is the body a stub's response gives: "body" as its JSON text (a
// JSON string is the string itself), or bodyText, or bodyBase64.
func (h httpBody) bytes() ([]byte, error) {
	switch {
	case h.BodyBase64 != "":
		return base64.StdEncoding.DecodeString(h.BodyBase64)
	case h.BodyText != "":
		return []byte(h.BodyText), nil
	case len(h.Body) > 0 && h.Body[0] == '"':
		var s string
		err := json.Unmarshal(h.Body, &s)
		return []byte(s), err
	}
	return h.Body, nil
}

// httpResponse is an http_request stub's response; its code is the HTTP
// status (100-599) or an ERR_* code.
type httpResponse struct {
	// Header: name -> a value or a list of values.
	Header map[string]json.RawMessage `json:"header,omitempty"`
	httpBody
}

type stubHTTP struct{ calls *Calls }

// httpRequestOf is r as the output records it.
func httpRequestOf(r *engine.HTTPRequest) httpRequest {
	return httpRequest{Upstream: r.Upstream, Method: r.Method, Path: r.Path, Header: headerMap(r.Header), httpBody: bodyOf(r.Body)}
}

// headerMap parses the host's "Name: value\n" header lines into canonical
// name -> values, nil for none.
func headerMap(lines []byte) map[string][]string {
	var h map[string][]string
	for line := range strings.SplitSeq(string(lines), "\n") {
		if k, v, ok := strings.Cut(strings.TrimSuffix(line, "\r"), ":"); ok {
			if h == nil {
				h = map[string][]string{}
			}
			k = textproto.CanonicalMIMEHeaderKey(strings.TrimSpace(k))
			h[k] = append(h[k], strings.TrimSpace(v))
		}
	}
	return h
}

func (s stubHTTP) Do(_ context.Context, r *engine.HTTPRequest, resp *engine.HTTPResponse) (int32, string) {
	raw, code, msg := s.calls.Serve(abi.ImportHTTPRequest, httpRequestOf(r))
	switch {
	case code < 0:
		return code, msg
	case code < 100 || code > 599:
		return s.calls.amend(abi.ErrUnavailable, fmt.Sprintf("replay: the http_request stub's code %d is neither an HTTP status (100-599) nor an ERR_* code", code))
	}
	var hr httpResponse
	if len(raw) > 0 {
		if err := strictJSON(raw, &hr); err != nil {
			return s.calls.amend(abi.ErrUnavailable, fmt.Sprintf("replay: the http_request stub's response: %v (want {\"header\": {...}, \"body\" | \"bodyText\" | \"bodyBase64\": ...})", err))
		}
	}
	body, err := hr.bytes()
	if err != nil {
		return s.calls.amend(abi.ErrUnavailable, fmt.Sprintf("replay: the http_request stub's body: %v", err))
	}
	header, err := headerLines(hr.Header)
	if err != nil {
		return s.calls.amend(abi.ErrUnavailable, "replay: the http_request stub's header: "+err.Error())
	}
	resp.Body = append(resp.Body[:0], body...)
	resp.Header = append(resp.Header[:0], header...)
	return code, msg
}

// headerLines renders a stub's header as the host does: "Name: value\n"
// lines, canonical names sorted, the values of a name in their order.
func headerLines(h map[string]json.RawMessage) ([]byte, error) {
	names := make([]string, 0, len(h))
	vals := map[string][]string{}
	for k, raw := range h {
		var vs []string
		var one string
		if json.Unmarshal(raw, &one) == nil {
			vs = []string{one}
		} else if err := json.Unmarshal(raw, &vs); err != nil {
			return nil, fmt.Errorf("%s: want a string or a list of strings", k)
		}
		c := textproto.CanonicalMIMEHeaderKey(k)
		if _, ok := vals[c]; !ok {
			names = append(names, c)
		}
		vals[c] = append(vals[c], vs...)
	}
	sort.Strings(names)
	var b []byte
	for _, k := range names {
		for _, v := range vals[k] {
			b = append(append(append(append(b, k...), ": "...), v...), '\n')
		}
	}
	return b, nil
}

// eventRequest is an event_record call as the output records it: the
// Event's object by reference, and the Event.
type eventRequest struct {
	Object  objectRef `json:"object"`
	Type    string    `json:"type"`
	Reason  string    `json:"reason"`
	Message string    `json:"message,omitempty"`
}

type objectRef struct {
	APIVersion string `json:"apiVersion,omitempty"`
	Kind       string `json:"kind,omitempty"`
	Namespace  string `json:"namespace,omitempty"`
	Name       string `json:"name,omitempty"`
}

type stubEvents struct{ calls *Calls }

// eventRequestOf is an event_record call as the output records it.
func eventRequestOf(obj map[string]any, eventType, reason, message string) eventRequest {
	str := func(m map[string]any, k string) string { v, _ := m[k].(string); return v }
	meta, _ := obj["metadata"].(map[string]any)
	return eventRequest{Type: eventType, Reason: reason, Message: message,
		Object: objectRef{APIVersion: str(obj, "apiVersion"), Kind: str(obj, "kind"), Namespace: str(meta, "namespace"), Name: str(meta, "name")}}
}

func (s stubEvents) Record(_ context.Context, obj map[string]any, eventType, reason, message string) (int32, string) {
	_, code, msg := s.calls.Serve(abi.ImportEventRecord, eventRequestOf(obj, eventType, reason, message))
	return code, msg
}
