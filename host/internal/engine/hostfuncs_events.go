package engine

import (
	"context"

	"github.com/tetratelabs/wazero/api"

	"github.com/informer-host/informer-host/abi"
)

// EventRecorder records a plugin's Kubernetes Events (event_record, ABI.md
// §17.2). Recording does not wait on the network: the implementation
// queues the Event (client-go's EventRecorder aggregates, rate-limits and
// sends it in the background), so it is called outside callState.io.
// Called on the instance's goroutine during a call; an implementation
// shared by instances must be safe for concurrent use.
type EventRecorder interface {
	// Record records an Event of type eventType ("Normal" or "Warning")
	// about obj, the object as the informer or the cache holds it (read
	// during the call only, never kept or changed). It returns 0, or
	// abi.ErrInvalid (a reason or message the Events API refuses, an
	// object without kind or name), abi.ErrTooLarge, or abi.ErrDenied
	// (an object beyond the plugin's reach: another namespace than the
	// one it is confined to), with the result message. ctx is the call's:
	// it carries the delivery's trace, and nothing waits on it.
	Record(ctx context.Context, obj map[string]any, eventType, reason, message string) (code int32, msg string)
}

// event_record(which, type, reason_ptr, reason_len, msg_ptr, msg_len i32) -> i32
func eventRecord(ctx context.Context, mod api.Module, stack []uint64) {
	st := stateOf(ctx)
	which, typ := i32(stack[0]), i32(stack[1])
	reason, ok1 := region(mod, uint32(stack[2]), i32(stack[3]))
	msg, ok2 := region(mod, uint32(stack[4]), i32(stack[5]))
	if !ok1 || !ok2 {
		setI32(stack, abi.ErrBounds)
		return
	}
	if st == nil {
		setI32(stack, abi.ErrNoEvent)
		return
	}
	if st.events == nil {
		st.setResult("events is not granted to this plugin (grants.events in config.yaml)")
		setI32(stack, st.denied(abi.CapabilityEvents, abi.ImportEventRecord))
		return
	}
	var eventType string
	switch typ {
	case abi.KubeEventNormal:
		eventType = "Normal"
	case abi.KubeEventWarning:
		eventType = "Warning"
	default:
		st.setResult("type must be 0 (Normal) or 1 (Warning)")
		setI32(stack, abi.ErrInvalid)
		return
	}
	obj, code := st.objectOf(which)
	if code != 0 {
		st.setResult("no object selected by which: " + abi.ErrorName(code))
		setI32(stack, code)
		return
	}
	cctx := st.callCtx
	if cctx == nil {
		cctx = ctx
	}
	code, m := st.events.Record(cctx, obj, eventType, string(reason), string(msg))
	st.setResult(m)
	if code == abi.ErrDenied {
		code = st.denied(abi.CapabilityEvents, abi.ImportEventRecord)
	}
	setI32(stack, code)
}
