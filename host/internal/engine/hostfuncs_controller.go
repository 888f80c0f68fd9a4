package engine

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/tetratelabs/wazero/api"

	"github.com/informer-host/informer-host/abi"
)

// The controller functions (ABI.md §18.4). They work only during
// ih_reconcile (callState.ctl), and hand what they were given to the
// request's ControllerCall: the host decides what a child or a status
// means, the engine only that the bytes are the plugin's, in bounds and of
// the right JSON shape. Their checks come in k8s_write's order: bounds,
// no reconcile call, no writes grant, invalid arguments, then the work.

// reconcile_requeue_after(millis i64) -> i32
func reconcileRequeueAfter(ctx context.Context, _ api.Module, stack []uint64) {
	st := stateOf(ctx)
	millis := int64(stack[0])
	if st == nil || st.ctl == nil {
		setI32(stack, abi.ErrNoEvent)
		return
	}
	if millis < 0 || millis > abi.MaxRequeueAfterMillis {
		st.setResult(fmt.Sprintf("reconcile_requeue_after takes 0 (clear) to %d milliseconds (366 days), not %d",
			abi.MaxRequeueAfterMillis, millis))
		setI32(stack, abi.ErrInvalid)
		return
	}
	st.setResult("")
	st.ctl.RequeueAfter(time.Duration(millis) * time.Millisecond)
	setI32(stack, 0)
}

// children_apply(ptr, len i32) -> i32
func childrenApply(ctx context.Context, mod api.Module, stack []uint64) {
	st, body, ok := stateOf(ctx).controllerArgs(mod, stack, abi.ImportChildrenApply, '[',
		"children_apply takes a JSON array of objects, the key's complete set of children ([] for none)")
	if !ok {
		return
	}
	var failed int32
	var msg string
	code := st.io(func(ctx context.Context) int32 {
		var c int32
		failed, c, msg = st.ctl.ApplyChildren(ctx, body)
		return c
	})
	if code == 0 && failed < 0 {
		code, msg = abi.ErrInternal, fmt.Sprintf("the host reported %d failed children", failed)
	}
	if st.controllerOutcome(stack, abi.ImportChildrenApply, code, msg) {
		setI32(stack, failed)
	}
}

// status_apply(ptr, len i32) -> i32
func statusApply(ctx context.Context, mod api.Module, stack []uint64) {
	st, body, ok := stateOf(ctx).controllerArgs(mod, stack, abi.ImportStatusApply, '{',
		`status_apply takes a JSON object, the status fields this plugin owns (e.g. {"conditions":[…]})`)
	if !ok {
		return
	}
	if st.env == nil || st.env.object(abi.ObjectNew) == nil {
		st.setResult("the primary is absent: there is no status to apply")
		setI32(stack, abi.ErrAbsent)
		return
	}
	var msg string
	code := st.io(func(ctx context.Context) int32 {
		var c int32
		c, msg = st.ctl.ApplyStatus(ctx, body)
		return c
	})
	if st.controllerOutcome(stack, abi.ImportStatusApply, code, msg) {
		setI32(stack, 0)
	}
}

// controllerArgs checks the (ptr, len) of children_apply or status_apply
// (fn) in the documented order (st may be nil: ERR_NO_EVENT) and returns the body, which must be JSON
// opening with open ('[' or '{'); refusal is the message of an ERR_INVALID.
// On false the call's result is already in stack.
func (st *callState) controllerArgs(mod api.Module, stack []uint64, fn string, open byte, refusal string) (*callState, []byte, bool) {
	body, ok := region(mod, uint32(stack[0]), i32(stack[1]))
	switch {
	case !ok:
		setI32(stack, abi.ErrBounds)
	case st == nil || st.ctl == nil:
		setI32(stack, abi.ErrNoEvent)
	case st.writes == nil:
		st.setResult(fn + " needs the writes capability: grant it the primary's and its children's resources (grants.writes in config.yaml)")
		setI32(stack, st.denied(abi.CapabilityWrites, fn))
	case !jsonOpening(body, open):
		st.setResult(refusal)
		setI32(stack, abi.ErrInvalid)
	default:
		return st, body, true
	}
	return st, nil, false
}

// jsonOpening reports whether b is valid JSON whose value opens with open.
func jsonOpening(b []byte, open byte) bool {
	t := bytes.TrimLeft(b, " \t\r\n")
	return len(t) > 0 && t[0] == open && json.Valid(t)
}

// controllerOutcome settles a controller function's call with the host's
// code and message, as k8s_write does: msg goes to result_message either
// way, ERR_DENIED is reported (OnDenied), and a code the ABI does not
// define is the host's bug, ERR_INTERNAL. It reports whether the code was
// 0, leaving the success value to the caller.
func (st *callState) controllerOutcome(stack []uint64, fn string, code int32, msg string) bool {
	switch {
	case code == 0:
		st.setResult(msg)
		return true
	case code == abi.ErrCanceled && msg == "":
		msg = "the host stopped the call while it waited for the apiserver"
	case code > 0 || abi.ErrorName(code) == "":
		msg = fmt.Sprintf("internal error: the host answered %s with code %d: %s", fn, code, msg)
		code = abi.ErrInternal
	}
	st.setResult(msg)
	if code == abi.ErrDenied {
		code = st.denied(abi.CapabilityWrites, fn)
	}
	setI32(stack, code)
	return false
}
