//go:build !wasip1

package kittest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/textproto"
	"net/url"
	"sort"
	"strconv"
	"strings"

	"github.com/informer-host/informer-host/abi"
)

// The capabilities that act outside the host (ABI.md §17): writes,
// Events and HTTP upstreams. Each call is recorded for the test to
// assert on, the way controller-runtime's fake client keeps what it was
// asked; what the cluster or the upstream answers can be programmed.

// WriteRequest is one k8s_write as the plugin made it.
type WriteRequest struct {
	// Op is the operation: "create", "merge-patch", "json-patch",
	// "apply" or "delete" (abi.WriteOpName); "" for an unknown op.
	Op          string
	Resource    string // as the plugin named it: "pods", "v1/configmaps"
	Namespace   string
	Name        string
	Subresource string // "" or "status"
	Body        string // the JSON the plugin sent; "" for a delete
	// UID and ResourceVersion are the preconditions ("" = none).
	UID             string
	ResourceVersion string
	Force           bool // WRITE_FORCE
	MustExist       bool // WRITE_MUST_EXIST
}

// RecordedEvent is one event_record the host accepted.
type RecordedEvent struct {
	Type    string // "Normal" or "Warning"
	Reason  string
	Message string
	// Object is the involved object's key ("namespace/name", or "name"),
	// Kind its kind ("" when the test's JSON has none).
	Object string
	Kind   string
}

// HTTPRequest is one http_request as the plugin made it.
type HTTPRequest struct {
	Upstream string
	Method   string
	Path     string
	// Header holds the plugin's header lines by canonical name.
	Header map[string][]string
	Body   string
}

// HTTPResponse is what an upstream answers, as a test programs it with
// OnHTTP.
type HTTPResponse struct {
	// Status is the HTTP status (100..599); 0 is 200.
	Status int
	Header map[string][]string
	Body   string
	// Code, when negative, is returned instead of a response
	// (abi.ErrTimeout, abi.ErrUnavailable, abi.ErrTooLarge, ...), with
	// Message as the result message.
	Code    int32
	Message string
}

// Writes returns the writes the plugin made, in order, including those
// the host refused.
func (h *Host) Writes() []WriteRequest { return h.writes }

// Events returns the Kubernetes Events the plugin recorded.
func (h *Host) Events() []RecordedEvent { return h.events }

// HTTPRequests returns the requests the plugin sent to upstreams.
func (h *Host) HTTPRequests() []HTTPRequest { return h.requests }

// OnWrite programs the cluster's answer to every later write that passes
// the host's checks: code 0 (or a handle-less success) with body the
// object the apiserver answers with (JSON; ignored for a delete), or a
// negative code (abi.ErrConflict, abi.ErrForbidden, abi.ErrFieldConflict,
// ...) with body the apiserver's message. Without it, ApplyWrite answers.
// A function that handles only some writes calls h.ApplyWrite for the
// others.
func (h *Host) OnWrite(f func(WriteRequest) (code int32, body string)) { h.onWrite = f }

// OnEvent programs the host's answer to every later event_record that
// passes its checks: 0 (queued) or a code, with its result message.
// Without it every Event is queued.
func (h *Host) OnEvent(f func(RecordedEvent) (code int32, message string)) { h.onEvent = f }

// OnHTTP grants the plugin upstream and programs its answers. A request
// to an upstream without a function is ERR_DENIED, as it is for an
// upstream the operator did not grant.
func (h *Host) OnHTTP(upstream string, f func(HTTPRequest) HTTPResponse) {
	if h.upstreams == nil {
		h.upstreams = map[string]func(HTTPRequest) HTTPResponse{}
	}
	h.upstreams[upstream] = f
}

// CacheObject returns the cached object resource namespace/name (JSON),
// as Cache or a write left it, and whether there is one.
func (h *Host) CacheObject(resource, namespace, name string) (string, bool) {
	o, ok := h.cache[cacheResource(resource)][key(namespace, name)]
	return string(o), ok
}

// cacheResource is the cache a write's resource lands in: a
// group/version/resource ("apps/v1/deployments") is its resource
// ("deployments"), as a configured resource's name usually is.
func cacheResource(res string) string {
	if i := strings.LastIndexByte(res, '/'); i >= 0 {
		return res[i+1:]
	}
	return res
}

// fail sets the result message and returns code.
func (h *Host) fail(code int32, format string, args ...any) int32 {
	h.resultMsg = fmt.Sprintf(format, args...)
	return code
}

func (h *Host) K8sWrite(op int32, res, ns, name, sub string, body []byte, uid, rv string, flags int32) int32 {
	h.resultMsg = ""
	r := WriteRequest{Op: abi.WriteOpName(op), Resource: res, Namespace: ns, Name: name, Subresource: sub, Body: string(body),
		UID: uid, ResourceVersion: rv, Force: flags&abi.WriteForce != 0, MustExist: flags&abi.WriteMustExist != 0}
	h.writes = append(h.writes, r)
	if code := h.checkWrite(op, r, flags); code != 0 {
		return code
	}
	answer := h.ApplyWrite
	if h.onWrite != nil {
		answer = h.onWrite
	}
	code, out := answer(r)
	switch {
	case code < 0:
		h.resultMsg = out
		return code
	case op == abi.WriteDelete:
		return 0
	case out == "":
		out = "{}"
	}
	h.handles = append(h.handles, []byte(out))
	return abi.FirstHandle + int32(len(h.handles)-1)
}

// checkWrite refuses what the host refuses before any request (ABI.md
// §17.1, ERR_INVALID), with its reason as the result message.
func (h *Host) checkWrite(op int32, r WriteRequest, flags int32) int32 {
	switch {
	case abi.WriteVerb(op) == "":
		return h.fail(abi.ErrInvalid, "unknown op %d", op)
	case flags&^abi.WriteFlagsKnown != 0:
		return h.fail(abi.ErrInvalid, "unknown flags %#x", flags&^abi.WriteFlagsKnown)
	case flags != 0 && op != abi.WriteApply:
		return h.fail(abi.ErrInvalid, "force and must-exist are flags of an apply, not of a %s", r.Op)
	case r.Name == "" && op != abi.WriteCreate:
		return h.fail(abi.ErrInvalid, "a %s needs the object's name", r.Op)
	case op == abi.WriteDelete && r.Body != "":
		return h.fail(abi.ErrInvalid, "a delete takes no body")
	case op == abi.WriteCreate && (r.UID != "" || r.ResourceVersion != ""):
		return h.fail(abi.ErrInvalid, "a create takes no preconditions")
	case op != abi.WriteDelete && !json.Valid([]byte(r.Body)):
		return h.fail(abi.ErrInvalid, "the body of the %s is not JSON", r.Op)
	}
	if op == abi.WriteApply {
		var tm struct{ APIVersion, Kind string }
		_ = json.Unmarshal([]byte(r.Body), &tm)
		switch {
		case tm.APIVersion == "":
			return h.fail(abi.ErrInvalid, "the applied configuration has no apiVersion")
		case tm.Kind == "":
			return h.fail(abi.ErrInvalid, "the applied configuration has no kind")
		}
	}
	return 0
}

// ApplyWrite is the default answer to a write: it applies it to the fake
// cache, as the apiserver would to the cluster, so that a later
// cache_get sees it (as controller-runtime's fake client does). A create
// of an existing object is ERR_EXISTS; a patch, a must-exist apply or a
// delete of a missing one ERR_ABSENT; a precondition the object does not
// meet ERR_CONFLICT; a JSON patch that does not apply ERR_UNPROCESSABLE.
// Each change gives the object a new metadata.resourceVersion, and a
// created one a metadata.uid. An apply merges the applied configuration
// into the object (a JSON merge patch: no field ownership), and a write
// to a subresource changes the object itself.
func (h *Host) ApplyWrite(r WriteRequest) (code int32, body string) {
	res := cacheResource(r.Resource)
	if h.cache[res] == nil {
		h.cache[res] = map[string][]byte{}
	}
	objs := h.cache[res]
	var patch any
	if r.Body != "" {
		if err := unmarshal([]byte(r.Body), &patch); err != nil {
			return abi.ErrInvalid, "the body is not JSON: " + err.Error()
		}
	}
	name := r.Name
	if name == "" {
		name = metaString(patch, "name")
	}
	k := key(r.Namespace, name)
	cur, exists := objs[k]
	var obj any
	if exists {
		if err := unmarshal(cur, &obj); err != nil {
			return abi.ErrInternal, "kittest: the cached object " + k + " is not JSON: " + err.Error()
		}
		m := metadata(obj)
		if r.UID != "" && m["uid"] != r.UID {
			return abi.ErrConflict, fmt.Sprintf("Precondition failed: UID in precondition: %s, UID in object meta: %v", r.UID, m["uid"])
		}
		if r.ResourceVersion != "" && m["resourceVersion"] != r.ResourceVersion {
			return abi.ErrConflict, fmt.Sprintf("the object has been modified (resourceVersion %v, precondition %s)", m["resourceVersion"], r.ResourceVersion)
		}
	}
	notFound := fmt.Sprintf("%s %q not found", res, name)
	switch r.Op {
	case "create":
		if exists {
			return abi.ErrExists, fmt.Sprintf("%s %q already exists", res, name)
		}
		if r.Name != "" && metaString(patch, "name") != "" && metaString(patch, "name") != r.Name {
			return abi.ErrInvalid, fmt.Sprintf("the body names %q, the write %q", metaString(patch, "name"), r.Name)
		}
		if name == "" {
			return abi.ErrUnprocessable, "name or generateName is required"
		}
		obj = h.created(patch, r.Namespace, name)
	case "apply":
		switch {
		case !exists && r.MustExist:
			return abi.ErrAbsent, notFound
		case !exists && r.UID != "":
			return abi.ErrConflict, "Precondition failed: UID in precondition: " + r.UID + ", the object does not exist"
		case !exists:
			obj = h.created(patch, r.Namespace, name)
		default:
			obj = mergePatch(obj, patch)
		}
	case "merge-patch":
		if !exists {
			return abi.ErrAbsent, notFound
		}
		obj = mergePatch(obj, patch)
	case "json-patch":
		if !exists {
			return abi.ErrAbsent, notFound
		}
		var err error
		if obj, err = jsonPatch(obj, patch); err != nil {
			return abi.ErrUnprocessable, "the JSON patch does not apply: " + err.Error()
		}
	case "delete":
		if !exists {
			return abi.ErrAbsent, notFound
		}
		delete(objs, k)
		return 0, ""
	}
	h.rv++
	m := metadata(obj)
	if m == nil {
		return abi.ErrUnprocessable, "the object is not a JSON object"
	}
	m["resourceVersion"] = strconv.FormatInt(h.rv, 10)
	out, err := json.Marshal(obj)
	if err != nil {
		return abi.ErrInternal, "kittest: " + err.Error()
	}
	objs[k] = out
	return 0, string(out)
}

// created is a new object from a create's or an apply's body, with its
// namespace, name and a uid.
func (h *Host) created(body any, ns, name string) any {
	obj, ok := body.(map[string]any)
	if !ok {
		return body
	}
	m, _ := obj["metadata"].(map[string]any)
	if m == nil {
		m = map[string]any{}
		obj["metadata"] = m
	}
	m["name"] = name
	if ns != "" {
		m["namespace"] = ns
	}
	if _, ok := m["uid"]; !ok {
		h.uids++
		m["uid"] = fmt.Sprintf("kittest-uid-%d", h.uids)
	}
	return obj
}

func metadata(obj any) map[string]any {
	o, _ := obj.(map[string]any)
	if o == nil {
		return nil
	}
	m, _ := o["metadata"].(map[string]any)
	if m == nil {
		m = map[string]any{}
		o["metadata"] = m
	}
	return m
}

func metaString(obj any, field string) string {
	o, _ := obj.(map[string]any)
	m, _ := o["metadata"].(map[string]any)
	s, _ := m[field].(string)
	return s
}

// unmarshal decodes JSON keeping numbers as written.
func unmarshal(b []byte, v *any) error {
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	return d.Decode(v)
}

// mergePatch applies a JSON merge patch (RFC 7386) to target.
func mergePatch(target, patch any) any {
	p, ok := patch.(map[string]any)
	if !ok {
		return patch
	}
	t, ok := target.(map[string]any)
	if !ok {
		t = map[string]any{}
	}
	for k, v := range p {
		if v == nil {
			delete(t, k)
		} else {
			t[k] = mergePatch(t[k], v)
		}
	}
	return t
}

// jsonPatch applies a JSON patch (RFC 6902) to doc.
func jsonPatch(doc, patch any) (any, error) {
	ops, ok := patch.([]any)
	if !ok {
		return nil, fmt.Errorf("a JSON patch is an array of operations")
	}
	for i, o := range ops {
		op, _ := o.(map[string]any)
		name, _ := op["op"].(string)
		path, _ := op["path"].(string)
		from, _ := op["from"].(string)
		value, hasValue := op["value"]
		var err error
		switch name {
		case "add", "replace", "test":
			if !hasValue {
				return nil, fmt.Errorf("operation %d (%s %s) has no value", i, name, path)
			}
		case "remove", "move", "copy":
		default:
			return nil, fmt.Errorf("operation %d: unknown op %q", i, name)
		}
		switch name {
		case "add":
			doc, err = pointerSet(doc, path, value, true)
		case "replace":
			if _, err = pointerGet(doc, path); err == nil {
				doc, err = pointerSet(doc, path, value, false)
			}
		case "remove":
			doc, _, err = pointerRemove(doc, path)
		case "test":
			var got any
			if got, err = pointerGet(doc, path); err == nil {
				a, _ := json.Marshal(got)
				b, _ := json.Marshal(value)
				if !bytes.Equal(a, b) {
					err = fmt.Errorf("%s is %s, not %s", path, a, b)
				}
			}
		case "move":
			var v any
			if doc, v, err = pointerRemove(doc, from); err == nil {
				doc, err = pointerSet(doc, path, v, true)
			}
		case "copy":
			var v any
			if v, err = pointerGet(doc, from); err == nil {
				var c any
				b, _ := json.Marshal(v)
				_ = unmarshal(b, &c)
				doc, err = pointerSet(doc, path, c, true)
			}
		}
		if err != nil {
			return nil, fmt.Errorf("operation %d (%s %s): %w", i, name, path, err)
		}
	}
	return doc, nil
}

// pointer splits a JSON pointer (RFC 6901) into its unescaped tokens.
func pointer(p string) ([]string, error) {
	if p == "" {
		return nil, nil
	}
	if p[0] != '/' {
		return nil, fmt.Errorf("path %q does not start with /", p)
	}
	toks := strings.Split(p[1:], "/")
	for i, t := range toks {
		toks[i] = strings.ReplaceAll(strings.ReplaceAll(t, "~1", "/"), "~0", "~")
	}
	return toks, nil
}

func arrayIndex(tok string, n int, appending bool) (int, error) {
	if appending && tok == "-" {
		return n, nil
	}
	i, err := strconv.Atoi(tok)
	limit := n
	if appending {
		limit++
	}
	if err != nil || i < 0 || i >= limit || (len(tok) > 1 && tok[0] == '0') {
		return 0, fmt.Errorf("no array index %q", tok)
	}
	return i, nil
}

func pointerGet(doc any, path string) (any, error) {
	toks, err := pointer(path)
	if err != nil {
		return nil, err
	}
	cur := doc
	for _, t := range toks {
		switch c := cur.(type) {
		case map[string]any:
			v, ok := c[t]
			if !ok {
				return nil, fmt.Errorf("no member %q", t)
			}
			cur = v
		case []any:
			i, err := arrayIndex(t, len(c), false)
			if err != nil {
				return nil, err
			}
			cur = c[i]
		default:
			return nil, fmt.Errorf("%q is inside a scalar", t)
		}
	}
	return cur, nil
}

// pointerSet sets (or, with insert, adds: into an array it inserts) the
// value at path and returns the new document.
func pointerSet(doc any, path string, value any, insert bool) (any, error) {
	toks, err := pointer(path)
	if err != nil {
		return nil, err
	}
	if len(toks) == 0 {
		return value, nil
	}
	parent, err := pointerGet(doc, "/"+strings.Join(escape(toks[:len(toks)-1]), "/"))
	if len(toks) == 1 {
		parent, err = doc, nil
	}
	if err != nil {
		return nil, err
	}
	last := toks[len(toks)-1]
	switch p := parent.(type) {
	case map[string]any:
		p[last] = value
		return doc, nil
	case []any:
		i, err := arrayIndex(last, len(p), insert)
		if err != nil {
			return nil, err
		}
		if insert {
			p = append(p[:i], append([]any{value}, p[i:]...)...)
		} else {
			p[i] = value
		}
		return replaceAt(doc, toks[:len(toks)-1], p), nil
	}
	return nil, fmt.Errorf("%q is inside a scalar", last)
}

func pointerRemove(doc any, path string) (any, any, error) {
	toks, err := pointer(path)
	if err != nil || len(toks) == 0 {
		return nil, nil, fmt.Errorf("cannot remove %q", path)
	}
	parent := doc
	if len(toks) > 1 {
		if parent, err = pointerGet(doc, "/"+strings.Join(escape(toks[:len(toks)-1]), "/")); err != nil {
			return nil, nil, err
		}
	}
	last := toks[len(toks)-1]
	switch p := parent.(type) {
	case map[string]any:
		v, ok := p[last]
		if !ok {
			return nil, nil, fmt.Errorf("no member %q", last)
		}
		delete(p, last)
		return doc, v, nil
	case []any:
		i, err := arrayIndex(last, len(p), false)
		if err != nil {
			return nil, nil, err
		}
		v := p[i]
		return replaceAt(doc, toks[:len(toks)-1], append(p[:i:i], p[i+1:]...)), v, nil
	}
	return nil, nil, fmt.Errorf("%q is inside a scalar", last)
}

// replaceAt puts arr at the tokens' place in doc: an array that grew or
// shrank is a new slice its parent must hold.
func replaceAt(doc any, toks []string, arr []any) any {
	if len(toks) == 0 {
		return arr
	}
	parent, _ := pointerGet(doc, "/"+strings.Join(escape(toks[:len(toks)-1]), "/"))
	if len(toks) == 1 {
		parent = doc
	}
	last := toks[len(toks)-1]
	switch p := parent.(type) {
	case map[string]any:
		p[last] = arr
	case []any:
		i, _ := strconv.Atoi(last)
		p[i] = arr
	}
	return doc
}

func escape(toks []string) []string {
	out := make([]string, len(toks))
	for i, t := range toks {
		out[i] = strings.ReplaceAll(strings.ReplaceAll(t, "~", "~0"), "/", "~1")
	}
	return out
}

func (h *Host) EventRecord(which, typ int32, reason, msg string) int32 {
	h.resultMsg = ""
	if typ != abi.KubeEventNormal && typ != abi.KubeEventWarning {
		return h.fail(abi.ErrInvalid, "event type %d is neither 0 (Normal) nor 1 (Warning)", typ)
	}
	o, code := h.pick(which)
	if code != 0 {
		return h.fail(code, "event_record: no object for which %d", which)
	}
	if !validReason(reason) {
		return h.fail(abi.ErrInvalid, "reason %q is not 1 to %d letters, digits and _-.:", reason, abi.MaxEventReason)
	}
	if len(msg) > abi.MaxEventMessage {
		return h.fail(abi.ErrTooLarge, "the message is %d bytes, over %d", len(msg), abi.MaxEventMessage)
	}
	var m struct {
		Kind     string
		Metadata struct{ Namespace, Name string }
	}
	_ = json.Unmarshal(o, &m)
	if m.Metadata.Name == "" {
		return h.fail(abi.ErrInvalid, "the involved object has no name")
	}
	e := RecordedEvent{Type: "Normal", Reason: reason, Message: msg, Object: key(m.Metadata.Namespace, m.Metadata.Name), Kind: m.Kind}
	if typ == abi.KubeEventWarning {
		e.Type = "Warning"
	}
	if h.onEvent != nil {
		if code, message := h.onEvent(e); code != 0 {
			return h.fail(code, "%s", message)
		}
	}
	h.events = append(h.events, e)
	return 0
}

func validReason(r string) bool {
	if r == "" || len(r) > abi.MaxEventReason {
		return false
	}
	for _, c := range r {
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', strings.ContainsRune("_-.:", c):
		default:
			return false
		}
	}
	return true
}

// hostHeaders are the headers the host sets; a plugin's is ERR_INVALID.
var hostHeaders = map[string]bool{"Host": true, "Content-Length": true, "Connection": true, "Keep-Alive": true,
	"Proxy-Connection": true, "Te": true, "Trailer": true, "Transfer-Encoding": true, "Upgrade": true}

func (h *Host) HTTPRequest(upstream, method, path string, header, body []byte) int32 {
	h.resultMsg, h.response = "", nil
	r := HTTPRequest{Upstream: upstream, Method: method, Path: path, Header: map[string][]string{}, Body: string(body)}
	for _, line := range strings.Split(string(header), "\n") {
		if line == "" {
			continue
		}
		name, value, ok := strings.Cut(line, ":")
		if !ok || name == "" || strings.ContainsAny(name, " \t") {
			return h.fail(abi.ErrInvalid, "header line %q is not Name: value", line)
		}
		name = textproto.CanonicalMIMEHeaderKey(name)
		if hostHeaders[name] {
			return h.fail(abi.ErrInvalid, "header %s is the host's", name)
		}
		r.Header[name] = append(r.Header[name], strings.TrimSpace(value))
	}
	answer, ok := h.upstreams[upstream]
	if !ok {
		return h.fail(abi.ErrDenied, "upstream %q is not granted (kittest: program it with OnHTTP)", upstream)
	}
	if reason := badPath(path); reason != "" {
		return h.fail(abi.ErrInvalid, "path %q %s", path, reason)
	}
	h.requests = append(h.requests, r)
	resp := answer(r)
	if resp.Code < 0 {
		return h.fail(resp.Code, "%s", resp.Message)
	}
	if resp.Status == 0 {
		resp.Status = 200
	}
	if resp.Status < 100 || resp.Status > 599 {
		h.t.Fatalf("kittest: OnHTTP(%q) answered status %d, not 100..599", upstream, resp.Status)
	}
	h.response = &resp
	return int32(resp.Status)
}

// badPath is why the host refuses a path that could leave the
// upstream's base ("" when it does not): it must be empty or start with
// / or ?, without . or .. segments (also escaped), //, a backslash, a
// space, a control character or #.
func badPath(p string) string {
	if p == "" {
		return ""
	}
	if p[0] != '/' && p[0] != '?' {
		return "does not start with / or ?"
	}
	if strings.ContainsAny(p, "\\ #") || strings.IndexFunc(p, func(r rune) bool { return r < 0x20 || r == 0x7f }) >= 0 {
		return "has a backslash, space, control character or #"
	}
	pathPart, _, _ := strings.Cut(p, "?")
	if strings.Contains(pathPart, "//") {
		return "has //"
	}
	for s := pathPart; ; {
		for _, seg := range strings.Split(s, "/") {
			seg, _, _ = strings.Cut(seg, ";")
			if seg == "." || seg == ".." {
				return "has a . or .. segment"
			}
		}
		u, err := url.PathUnescape(s)
		if err != nil || u == s {
			break
		}
		if strings.Contains(u, "\\") {
			return "has an escaped backslash"
		}
		s = u
	}
	return ""
}

func (h *Host) HTTPResponseRead(part int32, buf []byte) int32 {
	switch {
	case part != abi.HTTPBody && part != abi.HTTPHeader:
		return abi.ErrInvalid
	case h.response == nil:
		return abi.ErrAbsent
	case part == abi.HTTPBody:
		return copySized(buf, []byte(h.response.Body))
	}
	var names []string
	byName := map[string][]string{}
	for k, vs := range h.response.Header {
		k = textproto.CanonicalMIMEHeaderKey(k)
		if _, ok := byName[k]; !ok {
			names = append(names, k)
		}
		byName[k] = append(byName[k], vs...)
	}
	sort.Strings(names)
	var b strings.Builder
	for _, k := range names {
		for _, v := range byName[k] {
			b.WriteString(k + ": " + v + "\n")
		}
	}
	return copySized(buf, []byte(b.String()))
}

func (h *Host) ResultMessage(buf []byte) int32 { return copySized(buf, []byte(h.resultMsg)) }
