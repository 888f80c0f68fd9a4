package filter

import (
	"fmt"
	"strings"

	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/interpreter"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/informer-host/informer-host/event"
)

// Reason says why Decide dropped or rewrote an event.
type Reason string

const (
	// ReasonNone: the event is delivered as it came.
	ReasonNone Reason = ""
	// ReasonFiltered: the expression did not match.
	ReasonFiltered Reason = "filtered"
	// ReasonUnchanged: an update left every `changed` field as it was.
	ReasonUnchanged Reason = "unchanged"
	// ReasonResync: an update with the same resourceVersion on both sides
	// (informer resync or relist), and the binding does not want them.
	ReasonResync Reason = "resync"
	// ReasonGeneration: an update left metadata.generation as it was
	// (and did not start a deletion), with generationChanged.
	ReasonGeneration Reason = "generation"
	// ReasonError: evaluation failed and onError is closed.
	ReasonError Reason = "error"
	// ReasonStartedMatching: an update whose new object matches and whose
	// old object did not, delivered as an add of the new object.
	ReasonStartedMatching Reason = "started-matching"
	// ReasonStoppedMatching: an update whose old object matched and whose
	// new object does not, delivered as a delete of the old object.
	ReasonStoppedMatching Reason = "stopped-matching"
)

// Decision is what to do with one event for one binding.
type Decision struct {
	// Deliver says whether to put Event in the plugin's queue.
	Deliver bool
	// Event is what to deliver: the event Decide was given, or, for
	// ReasonStartedMatching and ReasonStoppedMatching, a new event of
	// another type. Nil when Deliver is false.
	Event *event.Event
	// Reason says why the event was dropped or rewritten.
	Reason Reason
	// Err is set when an evaluation failed, whether or not the event is
	// delivered (onError decides). It is the caller's to log, rate
	// limited (see ErrorLimiter): one bad expression fails on every event.
	Err error
}

// Filter decides which events one binding delivers to its plugin. It is
// immutable and safe for concurrent use.
type Filter struct {
	spec    Spec
	prog    *program // nil without an expression
	changed []fieldPath
	closed  bool
	memo    *memo
}

// Spec returns the Spec f was compiled from, with OnError defaulted.
func (f *Filter) Spec() Spec {
	s := f.spec
	s.Changed = append([]string(nil), s.Changed...)
	return s
}

// StatePredicate reports whether f's expression reads only object and
// resource, so that an update's old and new objects can each be judged on
// their own and membership transitions become adds and deletes. It is
// true without an expression.
func (f *Filter) StatePredicate() bool { return f.prog == nil || f.prog.statePredicate }

// Trivial reports whether Decide delivers every event of type t as it is,
// without looking at it: an add or a delete, with no expression. A
// caller may then skip Decide (and keep its event off the heap).
func (f *Filter) Trivial(t event.EventType) bool { return f.prog == nil && t != event.EventUpdate }

// Decide says what to deliver for ev. It never modifies ev or its objects,
// and may be called concurrently, with the same or different events.
func (f *Filter) Decide(ev *event.Event) Decision {
	if ev.Type == event.EventUpdate {
		return f.decideUpdate(ev)
	}
	if f.prog == nil {
		return Decision{Deliver: true, Event: ev}
	}
	var r evalResult
	if f.prog.statePredicate {
		r = f.evalState(ev.Resource, ev.Object)
	} else {
		r = f.evalEvent(ev)
	}
	if f.matches(r) {
		return Decision{Deliver: true, Event: ev, Err: r.err}
	}
	return f.drop(r)
}

func (f *Filter) decideUpdate(ev *event.Event) Decision {
	oldObj, newObj := ev.OldObject, ev.Object
	if !f.spec.Resyncs && isResync(oldObj, newObj) {
		return Decision{Reason: ReasonResync}
	}
	if f.spec.GenerationChanged && sameGeneration(oldObj, newObj) {
		// Before the expression, and whatever it says: the option drops
		// such an update, a start or stop of matching included (an object
		// whose labels start matching arrives with its next change of
		// generation); and the comparison costs next to nothing.
		return Decision{Reason: ReasonGeneration}
	}
	if f.prog == nil || oldObj == nil || !f.prog.statePredicate {
		// No transitions: the update is delivered if it passes every
		// rule. `changed` goes first because it is much cheaper.
		if !f.changedBetween(oldObj, newObj) {
			return Decision{Reason: ReasonUnchanged}
		}
		if f.prog == nil {
			return Decision{Deliver: true, Event: ev}
		}
		var r evalResult
		if f.prog.statePredicate {
			r = f.evalState(ev.Resource, newObj)
		} else {
			r = f.evalEvent(ev)
		}
		if f.matches(r) {
			return Decision{Deliver: true, Event: ev, Err: r.err}
		}
		return f.drop(r)
	}

	// The old object's verdict is usually memoized already: it was the
	// new object of this object's previous event.
	ro := f.evalState(ev.Resource, oldObj)
	rn := f.evalState(ev.Resource, newObj)
	err := rn.err
	if err == nil {
		err = ro.err
	}
	oldMatch, newMatch := f.matches(ro), f.matches(rn)
	switch {
	case oldMatch && newMatch:
		if !f.changedBetween(oldObj, newObj) {
			return Decision{Reason: ReasonUnchanged, Err: err}
		}
		return Decision{Deliver: true, Event: ev, Err: err}
	case oldMatch:
		// The plugin has the old object; tell it the object is gone
		// from its view, showing the state it knew.
		return Decision{Deliver: true, Reason: ReasonStoppedMatching, Err: err,
			Event: &event.Event{Type: event.EventDelete, Resource: ev.Resource, Object: oldObj}}
	case newMatch:
		// The plugin has never seen the object (or saw it leave).
		return Decision{Deliver: true, Reason: ReasonStartedMatching, Err: err,
			Event: &event.Event{Type: event.EventAdd, Resource: ev.Resource, Object: newObj}}
	}
	d := f.drop(rn)
	d.Err = err
	return d
}

// matches turns an evaluation result into a verdict: an error counts as a
// match when onError is open and as no match when it is closed. Treating
// it as a verdict (rather than as "deliver whatever came") keeps the
// plugin's view consistent across transitions: with onError open, an
// object whose evaluation failed was delivered, so when it later stops
// matching the plugin gets a delete.
func (f *Filter) matches(r evalResult) bool {
	if r.err != nil {
		return !f.closed
	}
	return r.match
}

func (f *Filter) drop(r evalResult) Decision {
	if r.err != nil {
		return Decision{Reason: ReasonError, Err: r.err}
	}
	return Decision{Reason: ReasonFiltered}
}

// changedBetween reports whether the update passes the `changed` rule.
func (f *Filter) changedBetween(oldObj, newObj *unstructured.Unstructured) bool {
	if len(f.changed) == 0 || oldObj == nil || newObj == nil {
		return true
	}
	for i := range f.changed {
		if f.changed[i].differs(oldObj.Object, newObj.Object) {
			return true
		}
	}
	return false
}

// isResync reports whether an update is a no-op: the same object, or two
// copies with the same resourceVersion. client-go sends those on resync
// (the cached object against itself) and on relist (a fresh copy of an
// object that did not change).
func isResync(oldObj, newObj *unstructured.Unstructured) bool {
	if oldObj == newObj {
		return true
	}
	if oldObj == nil || newObj == nil {
		return false
	}
	rv := resourceVersion(newObj)
	return rv != "" && rv == resourceVersion(oldObj)
}

// resourceVersion reads metadata.resourceVersion without the allocations
// of unstructured's Nested* helpers.
func resourceVersion(u *unstructured.Unstructured) string {
	md, _ := u.Object["metadata"].(map[string]any)
	rv, _ := md["resourceVersion"].(string)
	return rv
}

// evalState evaluates a state predicate on one object, once per object
// state for all filters sharing the program.
func (f *Filter) evalState(res *event.ResourceRef, obj *unstructured.Unstructured) evalResult {
	id, ok := identify(obj)
	if !ok {
		return f.prog.eval(event.EventAdd, res, obj, nil)
	}
	key := memoKey{prog: f.prog.id, res: res, obj: id}
	e := f.memo.entry(&key)
	e.once.Do(func() {
		e.res = f.prog.eval(event.EventAdd, res, obj, nil)
	})
	return e.res
}

// evalEvent evaluates an event predicate on a whole event, once per
// notification for all filters sharing the program.
func (f *Filter) evalEvent(ev *event.Event) evalResult {
	id, ok := identify(ev.Object)
	oldID, oldOK := identify(ev.OldObject)
	if !ok || !oldOK {
		return f.prog.eval(ev.Type, ev.Resource, ev.Object, ev.OldObject)
	}
	key := memoKey{prog: f.prog.id, res: ev.Resource, typ: ev.Type, obj: id, old: oldID}
	e := f.memo.entry(&key)
	e.once.Do(func() {
		e.res = f.prog.eval(ev.Type, ev.Resource, ev.Object, ev.OldObject)
	})
	return e.res
}

// eval runs the program once. Objects are handed to CEL as the
// map[string]any they already are: CEL's attribute resolution walks native
// maps directly and wraps only the values it returns, so nothing is copied.
func (p *program) eval(typ event.EventType, res *event.ResourceRef, obj, old *unstructured.Unstructured) evalResult {
	p.evals.Add(1)
	a, _ := p.activations.Get().(*activation)
	if a == nil {
		a = new(activation)
	}
	*a = activation{typ: typ, res: res, object: obj, oldObject: old}
	out, _, err := p.prg.Eval(a)
	*a = activation{} // do not pin objects from the pool
	p.activations.Put(a)
	if err != nil {
		return evalResult{err: p.evalError(err)}
	}
	b, ok := out.(types.Bool)
	if !ok {
		// Unreachable: Compile only accepts expressions of type bool.
		return evalResult{err: fmt.Errorf("filter %s: evaluated to %s, not bool", p.quoted(), out.Type().TypeName())}
	}
	return evalResult{match: bool(b)}
}

func (p *program) evalError(err error) error {
	msg := err.Error()
	if strings.HasPrefix(msg, "no such key") {
		return fmt.Errorf("filter %s: %w (guard fields that may be absent with has(), e.g. has(object.status) && has(object.status.phase), or use object.?status.?phase.orValue(\"\"))", p.quoted(), err)
	}
	return fmt.Errorf("filter %s: %w", p.quoted(), err)
}

// quoted returns the expression for messages, shortened if long.
func (p *program) quoted() string {
	s := p.text
	if len(s) > 80 {
		s = s[:77] + "..."
	}
	return fmt.Sprintf("%q", s)
}

// activation binds the expression's variables for one evaluation.
type activation struct {
	typ       event.EventType
	res       *event.ResourceRef
	object    *unstructured.Unstructured
	oldObject *unstructured.Unstructured
}

func (a *activation) ResolveName(name string) (any, bool) {
	switch name {
	case varObject:
		return objectValue(a.object), true
	case varOldObject:
		return objectValue(a.oldObject), true
	case varType:
		return a.typ.String(), true
	case varResource:
		// Built on demand: few expressions read it.
		r := a.res
		if r == nil {
			return map[string]string{}, true
		}
		return map[string]string{
			"name": r.Name, "group": r.Group, "version": r.Version,
			"resource": r.Resource, "kind": r.Kind,
		}, true
	}
	return nil, false
}

func (a *activation) Parent() interpreter.Activation { return nil }

func objectValue(u *unstructured.Unstructured) any {
	if u == nil || u.Object == nil {
		return types.NullValue
	}
	return u.Object
}

// sameGeneration reports whether an update left metadata.generation as it
// was and did not set metadata.deletionTimestamp.
func sameGeneration(oldObj, newObj *unstructured.Unstructured) bool {
	return oldObj != nil && newObj != nil && oldObj.GetGeneration() == newObj.GetGeneration() &&
		(oldObj.GetDeletionTimestamp() != nil || newObj.GetDeletionTimestamp() == nil)
}
