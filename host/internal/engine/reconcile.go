package engine

import (
	"context"
	"errors"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/informer-host/informer-host/abi"
	"github.com/informer-host/informer-host/event"
)

// ControllerCall serves a reconcile call's controller functions
// (reconcile_requeue_after, children_apply, status_apply; ABI.md §18).
// The host gives one per call: it knows the key, the primary and the
// plugin's identity, the engine only the bytes.
type ControllerCall interface {
	// RequeueAfter records the plugin's wish to be called again for this
	// key d after an OK answer; 0 clears it. The last call wins.
	RequeueAfter(d time.Duration)
	// ApplyChildren applies body, the JSON array children_apply was
	// given, as the key's complete set of children. failed is how many
	// children failed; code is 0 or an abi.Err* code; msg goes to
	// result_message.
	ApplyChildren(ctx context.Context, body []byte) (failed int32, code int32, msg string)
	// ApplyStatus applies body, the JSON object status_apply was given,
	// to the primary's status. code is 0 or an abi.Err* code; msg goes
	// to result_message.
	ApplyStatus(ctx context.Context, body []byte) (code int32, msg string)
}

// ReconcileRequest is one ih_reconcile call.
type ReconcileRequest struct {
	// Env is the header and the primary (its event's Object nil: absent);
	// build it with NewReconcileEnvelope.
	Env *Envelope
	// Flags are added to the header's: abi.FlagAbsent, abi.FlagDeleting,
	// abi.FlagInitialList.
	Flags uint8
	// Call serves the controller functions during the call.
	Call ControllerCall
}

// NewReconcileEnvelope builds the envelope of a reconcile call for the key
// namespace/name of res: event type abi.EventReconcile, the resource
// strings of res, the key's namespace and name, and obj's uid and
// resourceVersion (empty when obj is nil: the key is absent).
func NewReconcileEnvelope(res *event.ResourceRef, namespace, name string, obj *unstructured.Unstructured) *Envelope {
	_ = abi.EventReconcile
	return &Envelope{}
}

// Reconcile calls ih_reconcile for req, like HandleWith: a nil error means
// the plugin returned and its verdict is in Result; a *Failure means it
// did not, and the instance is dead.
func (i *Instance) Reconcile(ctx context.Context, req *ReconcileRequest) (Result, error) {
	return Result{}, errors.New("not implemented")
}

// Reconciles reports whether the module exports ih_reconcile.
func (m *Module) Reconciles() bool { return false }
