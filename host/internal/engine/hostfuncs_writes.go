package engine

import (
	"context"
	"encoding/json"

	"github.com/tetratelabs/wazero/api"

	"github.com/informer-host/informer-host/abi"
)

// WriteRequest is one k8s_write call (ABI.md §17.1). The []byte fields
// alias the plugin's memory: valid only during the call, never kept.
type WriteRequest struct {
	Op          int32 // abi.WriteCreate ... abi.WriteDelete
	Resource    []byte
	Namespace   []byte
	Name        []byte
	Subresource []byte
	Body        []byte
	// UID and ResourceVersion are the optional preconditions; empty =
	// none.
	UID             []byte
	ResourceVersion []byte
	Force           bool // abi.WriteForce
	MustExist       bool // abi.WriteMustExist: an apply that never creates
}

// ClusterWriter serves a plugin's k8s_write calls (capability "writes",
// ABI.md §17.1). The host implements it with client-go (package kubewrite);
// a test or a replay tool may implement it with anything. It is used by
// one instance, on the instance's goroutine, during a call into the
// plugin.
//
// The engine checks the buffers and the calling state, then calls Check,
// then its own argument checks, then Do inside callState.io. So Check
// and Do see only requests whose memory is valid, and Do runs outside
// the plugin's CPU deadline.
type ClusterWriter interface {
	// Check decides, without I/O, whether the grant covers the request
	// (abi.ErrDenied if not: resource, namespace, subresource or the op's
	// verb) and then whether its arguments can work (abi.ErrInvalid: an
	// unknown op, a resource that is neither a configured name nor
	// "group/version/resource", a missing name, a body that is not JSON).
	// 0 lets the request go on. msg explains a non-zero code; it is what
	// result_message returns.
	Check(r *WriteRequest) (code int32, msg string)
	// Do sends the request, bounded by ctx (the export call's: canceled
	// when the host stops the call) and by its own I/O timeout. It returns
	// the object the apiserver answered with (nil for a delete), or a
	// code of ABI.md §10 with the message: abi.ErrRateLimited when the
	// wait for the plugin's token bucket would outlast the I/O timeout
	// (no request is sent; a shorter wait is waited out), abi.ErrCanceled
	// when ctx ended first.
	Do(ctx context.Context, r *WriteRequest) (obj map[string]any, code int32, msg string)
}

// k8s_write(op, res_ptr, res_len, ns_ptr, ns_len, name_ptr, name_len,
// sub_ptr, sub_len, body_ptr, body_len, uid_ptr, uid_len, rv_ptr, rv_len,
// flags i32) -> i32
func k8sWrite(ctx context.Context, mod api.Module, stack []uint64) {
	st := stateOf(ctx)
	var r WriteRequest
	r.Op = i32(stack[0])
	fields := [...]*[]byte{&r.Resource, &r.Namespace, &r.Name, &r.Subresource, &r.Body, &r.UID, &r.ResourceVersion}
	for k, f := range fields {
		b, ok := region(mod, uint32(stack[1+2*k]), i32(stack[2+2*k]))
		if !ok {
			setI32(stack, abi.ErrBounds)
			return
		}
		*f = b
	}
	flags := i32(stack[15])
	r.Force = flags&abi.WriteForce != 0
	r.MustExist = flags&abi.WriteMustExist != 0
	if st == nil {
		setI32(stack, abi.ErrNoEvent)
		return
	}
	fail := func(code int32, msg string) {
		st.setResult(msg)
		setI32(stack, code)
	}
	if st.writes == nil {
		st.setResult("the writes capability is not granted to this plugin (grants.writes in config.yaml)")
		setI32(stack, st.denied(abi.CapabilityWrites, abi.ImportK8sWrite))
		return
	}
	code, msg := st.writes.Check(&r)
	switch {
	case code == abi.ErrDenied:
		st.setResult(msg)
		setI32(stack, st.denied(abi.CapabilityWrites, abi.ImportK8sWrite))
		return
	case code != 0:
		fail(code, msg)
		return
	case flags&^abi.WriteFlagsKnown != 0:
		fail(abi.ErrInvalid, "unknown flag bits in k8s_write's flags")
		return
	case abi.WriteVerb(r.Op) == "":
		fail(abi.ErrInvalid, "unknown k8s_write op")
		return
	case r.Op == abi.WriteDelete && len(r.Body) > 0:
		fail(abi.ErrInvalid, "a delete takes no body")
		return
	case r.Op != abi.WriteDelete && !json.Valid(r.Body):
		fail(abi.ErrInvalid, "the body is not valid JSON")
		return
	case r.Op != abi.WriteDelete && len(st.handles) >= abi.MaxHandles:
		fail(abi.ErrInvalid, "no handle left: 1024 are live in this call")
		return
	}
	var obj map[string]any
	code = st.io(func(ctx context.Context) int32 {
		var c int32
		obj, c, msg = st.writes.Do(ctx, &r)
		return c
	})
	if code != 0 {
		if code == abi.ErrCanceled && msg == "" {
			msg = "the host stopped the call while it waited for the apiserver"
		}
		fail(code, msg)
		return
	}
	st.setResult("")
	if obj == nil {
		setI32(stack, 0)
		return
	}
	st.handles = append(st.handles, obj)
	setI32(stack, abi.FirstHandle+int32(len(st.handles)-1))
}
