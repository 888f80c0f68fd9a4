package engine

import (
	"context"

	"github.com/tetratelabs/wazero/api"

	"github.com/informer-host/informer-host/abi"
)

// HTTPRequest is one http_request call (ABI.md §17.3). Header and Body
// alias the plugin's memory: valid only during HTTPClient.Do, which must
// copy what it keeps (a transport may read a body after the round trip).
type HTTPRequest struct {
	// Upstream is the name of an upstream in config.yaml; Method an HTTP
	// method; Path the path (and query) under the upstream's base URL.
	Upstream, Method, Path string
	// Header is "Name: value" lines separated by '\n'; empty = none.
	Header []byte
	Body   []byte
}

// HTTPResponse is what http_response_read serves: the response of the
// last http_request of the current export call. Do appends to Header[:0]
// and Body[:0], so the buffers are reused from call to call.
type HTTPResponse struct {
	// Header is "Name: value\n" lines, canonical names, sorted.
	Header []byte
	Body   []byte
}

// HTTPClient serves a plugin's http_* calls: requests to the upstreams the
// operator named and granted it. The engine checks the plugin's pointers
// and calls Do on the instance's goroutine inside callState.io, so ctx is
// canceled when the host stops the call; Do applies the upstream's own
// timeout. An implementation shared by instances must be safe for
// concurrent use.
//
// Do returns the response's HTTP status (100-599) with resp filled in, or
// an abi error code and resp untouched: ErrDenied (upstream or method not
// granted, checked before anything else), ErrInvalid (path escaping the
// base, malformed header lines), ErrTooLarge, ErrTimeout, ErrUnavailable,
// ErrRateLimited (the plugin's concurrency bound), ErrCanceled. msg is the
// result message (result_message): empty on success, never a secret.
type HTTPClient interface {
	Do(ctx context.Context, req *HTTPRequest, resp *HTTPResponse) (code int32, msg string)
}

// httpCall is the per-instance state of the http_* functions.
type httpCall struct {
	resp HTTPResponse
	// have is set while resp holds the response of an http_request of
	// the current export call; endCall clears it.
	have bool
}

// endCall forgets the call's response, so it never reaches the next
// event. The buffers are kept for reuse, trimmed when a large body left
// them big.
func (h *httpCall) endCall() {
	h.have = false
	if cap(h.resp.Body) > 1<<20 {
		h.resp.Body = nil
	}
	h.resp.Body, h.resp.Header = h.resp.Body[:0], h.resp.Header[:0]
}

// http_request(up_ptr, up_len, method_ptr, method_len, path_ptr, path_len,
// headers_ptr, headers_len, body_ptr, body_len i32) -> i32
func httpRequest(ctx context.Context, mod api.Module, stack []uint64) {
	st := stateOf(ctx)
	var in [5][]byte
	for k := range in {
		b, ok := region(mod, uint32(stack[2*k]), i32(stack[2*k+1]))
		if !ok {
			setI32(stack, abi.ErrBounds)
			return
		}
		in[k] = b
	}
	if st == nil {
		setI32(stack, abi.ErrNoEvent)
		return
	}
	st.httpCall.have = false
	if st.http == nil {
		st.setResult("http is not granted to this plugin (grants.http in config.yaml)")
		setI32(stack, st.denied(abi.CapabilityHTTP, abi.ImportHTTPRequest))
		return
	}
	req := HTTPRequest{Upstream: string(in[0]), Method: string(in[1]), Path: string(in[2]), Header: in[3], Body: in[4]}
	var msg string
	code := st.io(func(ctx context.Context) int32 {
		var c int32
		c, msg = st.http.Do(ctx, &req, &st.httpCall.resp)
		return c
	})
	if code == abi.ErrDenied {
		st.denied(abi.CapabilityHTTP, abi.ImportHTTPRequest)
	}
	if code == abi.ErrCanceled && msg == "" {
		msg = "the host stopped the call (shutdown or reload)"
	}
	st.httpCall.have = code > 0
	st.setResult(msg)
	setI32(stack, code)
}

// http_response_read(which_part, ptr, len i32) -> i32
func httpResponseRead(ctx context.Context, mod api.Module, stack []uint64) {
	st := stateOf(ctx)
	part, ptr, n := i32(stack[0]), uint32(stack[1]), i32(stack[2])
	if _, ok := region(mod, ptr, n); !ok {
		setI32(stack, abi.ErrBounds)
		return
	}
	if st == nil {
		setI32(stack, abi.ErrNoEvent)
		return
	}
	if st.http == nil {
		setI32(stack, st.denied(abi.CapabilityHTTP, abi.ImportHTTPResponseRead))
		return
	}
	var data []byte
	switch part {
	case abi.HTTPBody:
		data = st.httpCall.resp.Body
	case abi.HTTPHeader:
		data = st.httpCall.resp.Header
	default:
		setI32(stack, abi.ErrInvalid)
		return
	}
	if !st.httpCall.have {
		setI32(stack, abi.ErrAbsent)
		return
	}
	setI32(stack, copyOut(mod, ptr, n, data))
}

// outboundFuncs are the host functions of this file and of
// hostfuncs_events.go, for instantiateHostModule.
func outboundFuncs() map[string]api.GoModuleFunc {
	return map[string]api.GoModuleFunc{
		abi.ImportHTTPRequest:      httpRequest,
		abi.ImportHTTPResponseRead: httpResponseRead,
		abi.ImportEventRecord:      eventRecord,
	}
}
