package kit

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/informer-host/informer-host/abi"
)

// Reconciler is a controller-mode plugin (ABI.md §18): the host hands it
// one key of its primary resource (controller.for) at a time, with the
// object from the cache, and it makes the world match that object. It is
// controller-runtime's reconcile.Reconciler, and level-triggered the same
// way: it is told which key to look at, never what changed.
type Reconciler interface {
	Reconcile(ctx context.Context, req Request) (Result, error)
}

// ReconcileFunc is a function that is a Reconciler.
type ReconcileFunc func(ctx context.Context, req Request) (Result, error)

// Reconcile calls f.
func (f ReconcileFunc) Reconcile(ctx context.Context, req Request) (Result, error) {
	return f(ctx, req)
}

// Request is one key to reconcile.
type Request struct {
	Namespace string // "" for a cluster-scoped primary
	Name      string
	// Object is the primary as the host's cache holds it, readable field
	// by field or decoded whole; nil when the key has no object (deleted,
	// or filtered out): clean up what the key left behind, if anything.
	Object *Cached
	// Deleting reports metadata.deletionTimestamp set: the object is
	// going, and with controller.finalizer it stays until this call
	// answers nil (the host then removes the finalizer).
	Deleting bool
	// Initial reports a reconcile caused by a (re)start, reload or
	// handover replaying every key, not by a change.
	Initial bool
}

// Key is "namespace/name", or "name" for a cluster-scoped primary.
func (r Request) Key() string { return objectName(r.Namespace, r.Name) }

// Decode decodes the primary into v with encoding/json, or returns
// ErrNoObject when the key has none.
func (r Request) Decode(v any) error {
	if r.Object == nil {
		return ErrNoObject
	}
	return r.Object.Decode(v)
}

// Result is what a reconcile leaves for the host to do once it returns.
type Result struct {
	// RequeueAfter reconciles the key again after this long, even if
	// nothing changes (a schedule, a poll); 0 means no timer. The host
	// persists the timer on the object, so it survives restarts, reloads
	// and handovers. Kept only when the call succeeds.
	RequeueAfter time.Duration
	// Children is the complete set of children the key wants (nil: leave
	// the children as they are; empty: none). The host applies each and
	// deletes the ones it applied for this key before that are not in the
	// set. Applied only when Reconcile returns a nil error: a failed
	// reconcile's set may be partial, and pruning by it would delete.
	Children *Children
	// Status is the status fields and conditions this plugin owns (nil:
	// none), applied to the primary's status subresource; applied whatever
	// the error, so a failure can be reported as a condition.
	Status *Status
}

// HandleReconcile registers r as the plugin's reconciler: the host calls
// it through ih_reconcile when the plugin's configuration has a
// controller: block. Call it from an init function. A plugin may register
// an event handler (Handle) as well; without one, ih_handle answers
// ERROR, as only a misconfigured host would call it.
func HandleReconcile(r Reconciler) {
	// Bound here, not in the export, so that a plugin without a
	// reconciler does not import children_apply and status_apply (the
	// linker keeps only what is reachable): it then requests no writes
	// capability and loads on hosts older than v1.5.
	the.onReconcile = func(p *plugin, headerLen int32) int32 { return p.runReconcile(r, headerLen) }
}

// reconcileKey is the context key of the reconcile call in progress, for
// the calls a reconciler makes during it (Children.Apply).
type reconcileKey struct{}

type reconcileCall struct {
	p   *plugin
	req Request
}

// controllerAPI is the controller-mode imports (ABI.md §18) and
// result_message; the host implements it on wasip1, tests with a fake.
type controllerAPI interface {
	requeueAfter(millis int64) int32
	childrenApply(body []byte) int32
	statusApply(body []byte) int32
	resultMessage(buf []byte) int32
}

func (p *plugin) controller() controllerAPI {
	if a, ok := p.host.(controllerAPI); ok {
		return a
	}
	return noController{}
}

// noController stands in where there is no host: there is no reconcile.
type noController struct{}

func (noController) requeueAfter(int64) int32   { return abi.ErrNoEvent }
func (noController) childrenApply([]byte) int32 { return abi.ErrNoEvent }
func (noController) statusApply([]byte) int32   { return abi.ErrNoEvent }
func (noController) resultMessage([]byte) int32 { return 0 }

// reconcile is ih_reconcile.
func (p *plugin) reconcile(headerLen int32) int32 {
	defer p.yield()
	if p.onReconcile == nil {
		p.host.setError("no reconciler registered: call kit.HandleReconcile from an init function")
		return abi.ResultError
	}
	return p.onReconcile(p, headerLen)
}

// runReconcile reads the key, calls r and settles its result; a panic in
// r is the call's ERROR, with the panic's message.
func (p *plugin) runReconcile(r Reconciler, headerLen int32) (rc int32) {
	defer func() {
		if v := recover(); v != nil {
			p.host.setError(p.panicked("panic in Reconcile", v))
			rc = abi.ResultError
		}
	}()
	h, err := p.readHeader(headerLen)
	if err != nil {
		p.host.setError(err.Error())
		return abi.ResultError
	}
	if h.Type() != abi.EventReconcile {
		p.host.setError(fmt.Sprintf("ih_reconcile called with a %s header, want reconcile", abi.EventTypeName(h.Type())))
		return abi.ResultError
	}
	req := Request{
		Namespace: string(h.Field(abi.FieldNamespace)),
		Name:      string(h.Field(abi.FieldName)),
		Deleting:  h.Has(abi.FlagDeleting),
		Initial:   h.Has(abi.FlagInitialList),
	}
	if !h.Has(abi.FlagAbsent) {
		req.Object = &Cached{p: p, h: abi.ObjectNew}
	}
	ctx := context.WithValue(context.Background(), reconcileKey{}, &reconcileCall{p: p, req: req})
	res, err := r.Reconcile(ctx, req)
	return p.answer(p.settle(req, res, err))
}

// settle applies what the result asks of the host: the children (on
// success), the status (always) and the requeue timer (on success). The
// error it returns is the call's answer.
func (p *plugin) settle(req Request, res Result, err error) error {
	if err == nil && res.Children != nil && !res.Children.applied {
		err = res.Children.apply(p, req)
	}
	if res.Status != nil {
		if serr := res.Status.apply(p, req); serr != nil {
			err = errors.Join(err, serr)
		}
	}
	if err != nil {
		return err
	}
	switch {
	case res.RequeueAfter < 0:
		return fmt.Errorf("Result.RequeueAfter is negative (%s): give 0 for no timer", res.RequeueAfter)
	case res.RequeueAfter > 0 && res.RequeueAfter < time.Millisecond:
		res.RequeueAfter = time.Millisecond
	}
	// Called with 0 too: a result without a timer clears the one an
	// earlier reconcile of the key set.
	if code := p.controller().requeueAfter(res.RequeueAfter.Milliseconds()); code < 0 {
		return &CallError{Func: abi.ImportReconcileRequeueAfter, Call: req.Key() + " after " + res.RequeueAfter.String(), Code: code}
	}
	return nil
}

// answer is the result code of err: OK, RETRY or DROP as Retry and Drop
// ask, ERROR otherwise, with err's text as the message.
func (p *plugin) answer(err error) int32 {
	if err == nil {
		return abi.ResultOK
	}
	code := abi.ResultError
	var re *resultError
	if errors.As(err, &re) {
		code = re.code
	}
	if msg := err.Error(); msg != "" {
		p.host.setError(msg)
	}
	return code
}

// ChildFailure is one child the host could not apply or prune.
type ChildFailure struct {
	Kind      string
	Namespace string
	Name      string
	Message   string // the host's reason: the apiserver's message or the host's own
}

func (f ChildFailure) String() string {
	return f.Kind + " " + f.Namespace + "/" + f.Name + ": " + f.Message
}

// ChildrenError is children_apply's report of the children that failed
// (applies and prunes); the others were applied. A reconcile whose Result
// children fail answers ERROR with it (the host backs the key off and
// tries again); a reconciler that wants to react itself applies the set
// with Children.Apply and checks errors.As(err, &*ChildrenError).
type ChildrenError struct {
	Primary  string         // the key the children belong to
	Failures []ChildFailure // one per failed child, as the host reported it
}

func (e *ChildrenError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "children_apply %s: %d children failed", e.Primary, len(e.Failures))
	for _, f := range e.Failures {
		b.WriteString("\n")
		b.WriteString(f.String())
	}
	return b.String()
}

// parseFailures reads result_message's lines "<kind> <ns>/<name>:
// <error>"; a line of another form is kept whole as the message.
func parseFailures(msg string, n int32) []ChildFailure {
	var out []ChildFailure
	for _, line := range strings.Split(strings.TrimSpace(msg), "\n") {
		if line == "" {
			continue
		}
		var f ChildFailure
		head, reason, ok := strings.Cut(line, ": ")
		kind, key, ok2 := strings.Cut(head, " ")
		if ok && ok2 && strings.Contains(key, "/") {
			f.Kind, f.Message = kind, reason
			f.Namespace, f.Name, _ = strings.Cut(key, "/")
		} else {
			f.Message = line
		}
		out = append(out, f)
	}
	// The count is the host's; lines may have been cut short.
	for int32(len(out)) < n {
		out = append(out, ChildFailure{Message: "failed (the host's message named fewer children)"})
	}
	return out
}

// Now is the current time as the plugin should see it: the wall clock
// in the host, the fake clock under kittest's controller loop (so that a
// schedule's logic is tested without waiting). Use it instead of
// time.Now in a reconciler that computes with time.
func Now() time.Time {
	if c, ok := the.host.(interface{ now() time.Time }); ok {
		return c.now()
	}
	return time.Now()
}
