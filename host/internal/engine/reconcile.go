package engine

import (
	"context"
	"errors"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/informer-host/informer-host/abi"
	"github.com/informer-host/informer-host/event"
)

// ControllerCall serves a reconcile call's controller functions
// (reconcile_requeue_after, children_apply, status_apply; ABI.md §18).
// The host gives one per call: it knows the key, the primary and the
// plugin's identity, the engine only the bytes. Its methods run on the
// instance's goroutine, during the call.
//
// The engine checks the buffers, the call's state and the writes grant
// first, and that a body is a JSON array (children) or object (status),
// and for status that the primary is present; the methods see only calls
// that passed. ApplyChildren and ApplyStatus run inside the engine's
// network wait (callState.io), outside the plugin's CPU deadline, exactly
// as k8s_write's request does.
type ControllerCall interface {
	// RequeueAfter records the plugin's wish to be called again for this
	// key d after an OK answer; 0 clears it. The last call wins. d is
	// within 0 and abi.MaxRequeueAfterMillis.
	RequeueAfter(d time.Duration)
	// ApplyChildren applies body, the JSON array children_apply was
	// given, as the key's complete set of children, bounded by ctx (the
	// export call's: canceled when the host stops the call, ErrCanceled)
	// and its own I/O timeout. failed is how many children failed; code
	// is 0 or an abi.Err* code (then failed is ignored); msg goes to
	// result_message, one line per failed child. body aliases the
	// plugin's memory: valid only during the call, never kept.
	ApplyChildren(ctx context.Context, body []byte) (failed int32, code int32, msg string)
	// ApplyStatus applies body, the JSON object status_apply was given,
	// to the primary's status, bounded as ApplyChildren is. code is 0 or
	// an abi.Err* code; msg goes to result_message. body aliases the
	// plugin's memory as ApplyChildren's does.
	ApplyStatus(ctx context.Context, body []byte) (code int32, msg string)
}

// ReconcileRequest is one ih_reconcile call.
type ReconcileRequest struct {
	// Env is the header and the primary (its event's Object nil: absent);
	// build it with NewReconcileEnvelope.
	Env *Envelope
	// Flags are added to the header's for this call: abi.FlagInitialList
	// on a (re)start or reload replay. abi.FlagAbsent and abi.FlagDeleting
	// may be given too, but NewReconcileEnvelope already sets them from
	// the object, so the header and object_read always agree.
	Flags uint8
	// Call serves the controller functions during the call. Required.
	Call ControllerCall
}

// NewReconcileEnvelope builds the envelope of a reconcile call for the key
// namespace/name of res (ABI.md §18.2): event type abi.EventReconcile, the
// resource strings of res, the key's namespace and name, and obj's uid and
// resourceVersion. obj nil (or empty) is an absent key: uid and
// resourceVersion are empty and the header has abi.FlagAbsent. An obj
// whose metadata.deletionTimestamp is set gives abi.FlagDeleting.
//
// Like NewEnvelope's, the envelope is safe for concurrent use, and obj
// must stay unchanged while it is in use. Its Event has Type
// abi.EventReconcile and Object obj.
func NewReconcileEnvelope(res *event.ResourceRef, namespace, name string, obj *unstructured.Unstructured) *Envelope {
	e := &Envelope{namespace: namespace, name: name}
	e.event = event.Event{Type: event.EventType(abi.EventReconcile), Resource: res, Object: obj}
	h := abi.Header{Type: abi.EventReconcile}
	setResource(&h, res)
	h.Fields[abi.FieldNamespace], h.Fields[abi.FieldName] = namespace, name
	if obj == nil || obj.Object == nil {
		h.Flags |= abi.FlagAbsent
	} else {
		md, _ := obj.Object["metadata"].(map[string]any)
		e.rv, _ = md["resourceVersion"].(string)
		h.Fields[abi.FieldResourceVersion] = e.rv
		h.Fields[abi.FieldUID], _ = md["uid"].(string)
		if ts, ok := md["deletionTimestamp"]; ok && ts != nil && ts != "" {
			h.Flags |= abi.FlagDeleting
		}
	}
	e.setHeader(&h)
	return e
}

// errNoReconcile is Reconcile's error for a module without ih_reconcile.
var errNoReconcile = errors.New("does not export " + abi.ExportReconcile +
	"; a plugin configured as a controller must (ABI.md §18; the kits export it for a registered reconciler)")

// Reconcile calls ih_reconcile(header_len) for req, as HandleWith calls
// ih_handle: a nil error means the plugin returned and its verdict is in
// Result (CodeOK: reconciled; CodeRetry, CodeError: back off; CodeDrop:
// forget the key's backoff); a *Failure (trap, timeout, out of memory)
// means it did not, and the instance is dead. Other errors (ctx done,
// instance closed or dead, no ih_reconcile, an incomplete request) leave
// the instance as it was.
//
// During the call object_read(0) and field_read(0, …) read the primary,
// every capability works as during ih_handle, and the controller
// functions reach req.Call. ctx does not bound the plugin's CPU; its end
// cancels a network wait (ERR_CANCELED).
func (i *Instance) Reconcile(ctx context.Context, req *ReconcileRequest) (Result, error) {
	if err := i.usable(); err != nil {
		return Result{}, err
	}
	if i.recon == nil {
		return Result{}, fmt.Errorf("plugin %q: %w", i.name, errNoReconcile)
	}
	if req == nil || req.Env == nil || req.Call == nil {
		return Result{}, fmt.Errorf("plugin %q: %s: the request needs an Env and a Call", i.name, abi.ExportReconcile)
	}
	if err := ctx.Err(); err != nil {
		return Result{}, err
	}
	i.st.ctl = req.Call
	defer func() { i.st.ctl = nil }()
	return i.callEvent(ctx, i.recon, abi.ExportReconcile, req.Env, req.Flags)
}

// Reconciles reports whether the module exports ih_reconcile, which a
// plugin configured as a controller must.
func (m *Module) Reconciles() bool {
	_, ok := m.c.cm.ExportedFunctions()[abi.ExportReconcile]
	return ok
}
