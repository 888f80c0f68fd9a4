package filter

import (
	"errors"
	"fmt"
	"reflect"
	"runtime"
	"strings"
	"sync"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/informer-host/informer-host/event"
)

var podsRef = &event.ResourceRef{Name: "pods", Version: "v1", Resource: "pods", Kind: "Pod"}

// obj returns a copy of the test pod with rv as its resourceVersion and
// the edits applied: "a.b.c=value" sets a string, "a.b.c=" with an int
// value is not needed here; "-a.b.c" deletes.
func obj(t testing.TB, rv string, edits ...string) *unstructured.Unstructured {
	t.Helper()
	u := loadPod(t)
	u.SetResourceVersion(rv)
	for _, e := range edits {
		if strings.HasPrefix(e, "-") {
			unstructured.RemoveNestedField(u.Object, strings.Split(e[1:], ".")...)
			continue
		}
		path, val, ok := strings.Cut(e, "=")
		if !ok {
			t.Fatalf("bad edit %q", e)
		}
		if err := unstructured.SetNestedField(u.Object, val, strings.Split(path, ".")...); err != nil {
			t.Fatal(err)
		}
	}
	return u
}

// gen sets o's metadata.generation.
func gen(o *unstructured.Unstructured, g int64) *unstructured.Unstructured {
	o.SetGeneration(g)
	return o
}

// deleting sets o's metadata.deletionTimestamp.
func deleting(o *unstructured.Unstructured) *unstructured.Unstructured {
	now := metav1.Now()
	o.SetDeletionTimestamp(&now)
	return o
}

func add(o *unstructured.Unstructured) *event.Event {
	return &event.Event{Type: event.EventAdd, Resource: podsRef, Object: o}
}

func del(o *unstructured.Unstructured) *event.Event {
	return &event.Event{Type: event.EventDelete, Resource: podsRef, Object: o}
}

func upd(old, new *unstructured.Unstructured) *event.Event {
	return &event.Event{Type: event.EventUpdate, Resource: podsRef, Object: new, OldObject: old}
}

// want is the expected outcome of one Decide call.
type want struct {
	deliver bool
	typ     event.EventType // of the delivered event; 0: same as the input
	object  string          // "old" or "new": which object the delivered event carries; "": as input
	reason  Reason
	err     string // substring of Decision.Err; "" means no error
}

func checkDecision(t *testing.T, ev *event.Event, d Decision, w want) {
	t.Helper()
	if d.Deliver != w.deliver || d.Reason != w.reason {
		t.Fatalf("got deliver=%v reason=%q err=%v, want deliver=%v reason=%q", d.Deliver, d.Reason, d.Err, w.deliver, w.reason)
	}
	switch {
	case w.err == "" && d.Err != nil:
		t.Fatalf("unexpected error: %v", d.Err)
	case w.err != "" && (d.Err == nil || !strings.Contains(d.Err.Error(), w.err)):
		t.Fatalf("error %v, want one containing %q", d.Err, w.err)
	}
	if !d.Deliver {
		if d.Event != nil {
			t.Fatalf("dropped decision carries event %+v", d.Event)
		}
		return
	}
	if w.typ == 0 {
		if d.Event != ev {
			t.Fatalf("delivered %+v, want the input event itself", d.Event)
		}
		return
	}
	if d.Event == ev {
		t.Fatal("rewritten event is the input event")
	}
	if d.Event.Type != w.typ || d.Event.Resource != ev.Resource || d.Event.OldObject != nil ||
		d.Event.IsInInitialList || d.Event.FinalStateUnknown {
		t.Fatalf("rewritten event %+v, want type %v", d.Event, w.typ)
	}
	wantObj := ev.Object
	if w.object == "old" {
		wantObj = ev.OldObject
	}
	if d.Event.Object != wantObj {
		t.Fatalf("rewritten event carries the %s object", map[bool]string{true: "new", false: "old"}[d.Event.Object == ev.Object])
	}
}

func TestDecide(t *testing.T) {
	const (
		web     = `object.metadata.labels["tier"] == "web"`
		failed  = `object.status.phase == "Failed"`
		running = `object.status.phase == "Running"`
	)
	type tc struct {
		name string
		spec Spec
		opts Options
		ev   func(t testing.TB) *event.Event
		want want
	}
	tests := []tc{
		// Expression on adds and deletes.
		{"label add match", Spec{Expression: web},
			Options{}, func(t testing.TB) *event.Event { return add(obj(t, "1")) },
			want{deliver: true}},
		{"label add no match", Spec{Expression: web},
			Options{}, func(t testing.TB) *event.Event { return add(obj(t, "1", "metadata.labels.tier=api")) },
			want{reason: ReasonFiltered}},
		{"label delete match", Spec{Expression: web},
			Options{}, func(t testing.TB) *event.Event { return del(obj(t, "1")) },
			want{deliver: true}},
		{"label delete no match", Spec{Expression: web},
			Options{}, func(t testing.TB) *event.Event { return del(obj(t, "1", "-metadata.labels.tier")) },
			// labels["tier"] on a map without the key is an error, open.
			want{deliver: true, err: "no such key"}},
		{"label delete no match closed", Spec{Expression: web, OnError: OnErrorClosed},
			Options{}, func(t testing.TB) *event.Event { return del(obj(t, "1", "-metadata.labels.tier")) },
			want{reason: ReasonError, err: "no such key"}},
		{"phase add match", Spec{Expression: running},
			Options{}, func(t testing.TB) *event.Event { return add(obj(t, "1")) },
			want{deliver: true}},
		{"phase add no match", Spec{Expression: failed},
			Options{}, func(t testing.TB) *event.Event { return add(obj(t, "1")) },
			want{reason: ReasonFiltered}},
		{"has guard", Spec{Expression: `has(object.status) && has(object.status.phase) && object.status.phase == "Failed"`, OnError: OnErrorClosed},
			Options{}, func(t testing.TB) *event.Event { return add(obj(t, "1", "-status")) },
			want{reason: ReasonFiltered}},
		{"optional guard", Spec{Expression: `object.?status.?phase.orValue("") == "Failed"`, OnError: OnErrorClosed},
			Options{}, func(t testing.TB) *event.Event { return add(obj(t, "1", "-status")) },
			want{reason: ReasonFiltered}},
		{"optional index guard", Spec{Expression: `object.?metadata.?labels[?"tier"].orValue("") == "web"`, OnError: OnErrorClosed},
			Options{}, func(t testing.TB) *event.Event { return add(obj(t, "1", "-metadata.labels")) },
			want{reason: ReasonFiltered}},
		{"int comparison", Spec{Expression: `has(object.spec.terminationGracePeriodSeconds) && object.spec.terminationGracePeriodSeconds > 3`},
			Options{}, func(t testing.TB) *event.Event { return add(obj(t, "1")) },
			want{deliver: true}},
		{"cross-type numeric comparison", Spec{Expression: `object.spec.terminationGracePeriodSeconds > 29.5`},
			Options{}, func(t testing.TB) *event.Event { return add(obj(t, "1")) },
			want{deliver: true}},
		{"resource variable", Spec{Expression: `resource.kind == "Pod" && resource.name == "pods" && resource.group == ""`},
			Options{}, func(t testing.TB) *event.Event { return add(obj(t, "1")) },
			want{deliver: true}},
		{"type variable", Spec{Expression: `type == "delete"`},
			Options{}, func(t testing.TB) *event.Event { return add(obj(t, "1")) },
			want{reason: ReasonFiltered}},
		{"oldObject is null on adds", Spec{Expression: `oldObject == null`},
			Options{}, func(t testing.TB) *event.Event { return add(obj(t, "1")) },
			want{deliver: true}},

		// onError.
		{"missing key open", Spec{Expression: failed},
			Options{}, func(t testing.TB) *event.Event { return add(obj(t, "1", "-status")) },
			want{deliver: true, err: "no such key: status"}},
		{"missing key closed", Spec{Expression: failed, OnError: OnErrorClosed},
			Options{}, func(t testing.TB) *event.Event { return add(obj(t, "1", "-status")) },
			want{reason: ReasonError, err: "no such key: status"}},
		{"cost overrun open", Spec{Expression: `object.spec.items.exists(i, i == -1)`},
			Options{CostLimit: 100}, func(t testing.TB) *event.Event { return add(withItems(t, 10000)) },
			want{deliver: true, err: "cost limit exceeded"}},
		{"cost overrun closed", Spec{Expression: `object.spec.items.exists(i, i == -1)`, OnError: OnErrorClosed},
			Options{CostLimit: 100}, func(t testing.TB) *event.Event { return add(withItems(t, 10000)) },
			want{reason: ReasonError, err: "cost limit exceeded"}},
		{"cost within limit", Spec{Expression: `object.spec.items.exists(i, i == -1)`},
			Options{}, func(t testing.TB) *event.Event { return add(withItems(t, 10000)) },
			want{reason: ReasonFiltered}},
		// The default limit stops a runaway near 0.1 s (BenchmarkRunawayStopped):
		// this one, of some 300,000 units, the old limit of 1,000,000 let run to its end.
		{"runaway stopped by the default limit", Spec{Expression: runaway},
			Options{}, func(t testing.TB) *event.Event { return add(configMapWithKeys(300, "1")) },
			want{deliver: true, err: "cost limit exceeded"}},
		{"a loop over 1,000 keys within the default limit", Spec{Expression: `object.data.all(k, k.startsWith("key-"))`},
			Options{}, func(t testing.TB) *event.Event { return add(configMapWithKeys(1000, "1")) },
			want{deliver: true}},

		// changed.
		{"changed phase", Spec{Changed: []string{"status.phase"}},
			Options{}, func(t testing.TB) *event.Event { return upd(obj(t, "1"), obj(t, "2", "status.phase=Succeeded")) },
			want{deliver: true}},
		{"changed label only", Spec{Changed: []string{"status.phase"}},
			Options{}, func(t testing.TB) *event.Event { return upd(obj(t, "1"), obj(t, "2", "metadata.labels.x=y")) },
			want{reason: ReasonUnchanged}},
		{"changed absent to present", Spec{Changed: []string{"status.phase"}},
			Options{}, func(t testing.TB) *event.Event { return upd(obj(t, "1", "-status.phase"), obj(t, "2")) },
			want{deliver: true}},
		{"changed present to absent", Spec{Changed: []string{"status.phase"}},
			Options{}, func(t testing.TB) *event.Event { return upd(obj(t, "1"), obj(t, "2", "-status")) },
			want{deliver: true}},
		{"changed absent on both sides", Spec{Changed: []string{"status.reason"}},
			Options{}, func(t testing.TB) *event.Event { return upd(obj(t, "1"), obj(t, "2", "status.phase=Failed")) },
			want{reason: ReasonUnchanged}},
		{"changed second path", Spec{Changed: []string{"status.phase", `metadata.labels["app.kubernetes.io/name"]`}},
			Options{}, func(t testing.TB) *event.Event {
				o := obj(t, "2")
				o.GetLabels()
				l := o.GetLabels()
				l["app.kubernetes.io/name"] = "shop"
				o.SetLabels(l)
				return upd(obj(t, "1"), o)
			},
			want{deliver: true}},
		{"changed subtree", Spec{Changed: []string{"spec.containers"}},
			Options{}, func(t testing.TB) *event.Event {
				o := obj(t, "2")
				cs, _, _ := unstructured.NestedSlice(o.Object, "spec", "containers")
				cs[0].(map[string]any)["image"] = "web:2"
				_ = unstructured.SetNestedSlice(o.Object, cs, "spec", "containers")
				return upd(obj(t, "1"), o)
			},
			want{deliver: true}},
		{"changed list index", Spec{Changed: []string{"spec.containers[0].image"}},
			Options{}, func(t testing.TB) *event.Event { return upd(obj(t, "1"), obj(t, "2", "status.phase=Failed")) },
			want{reason: ReasonUnchanged}},
		{"changed does not affect adds", Spec{Changed: []string{"status.phase"}},
			Options{}, func(t testing.TB) *event.Event { return add(obj(t, "1")) },
			want{deliver: true}},

		// Resyncs.
		{"resync dropped", Spec{},
			Options{}, func(t testing.TB) *event.Event { return upd(obj(t, "7"), obj(t, "7")) },
			want{reason: ReasonResync}},
		{"resync same pointer dropped", Spec{},
			Options{}, func(t testing.TB) *event.Event { o := obj(t, "7"); return upd(o, o) },
			want{reason: ReasonResync}},
		{"resync delivered when asked", Spec{Resyncs: true},
			Options{}, func(t testing.TB) *event.Event { return upd(obj(t, "7"), obj(t, "7")) },
			want{deliver: true}},
		{"resync asked but filtered", Spec{Resyncs: true, Expression: failed},
			Options{}, func(t testing.TB) *event.Event { return upd(obj(t, "7"), obj(t, "7")) },
			want{reason: ReasonFiltered}},
		{"resync asked but unchanged", Spec{Resyncs: true, Changed: []string{"status"}},
			Options{}, func(t testing.TB) *event.Event { return upd(obj(t, "7"), obj(t, "7")) },
			want{reason: ReasonUnchanged}},
		{"real update delivered", Spec{},
			Options{}, func(t testing.TB) *event.Event { return upd(obj(t, "7"), obj(t, "8")) },
			want{deliver: true}},

		// Transitions.
		{"both match", Spec{Expression: web},
			Options{}, func(t testing.TB) *event.Event { return upd(obj(t, "1"), obj(t, "2", "status.phase=Failed")) },
			want{deliver: true}},
		{"stops matching", Spec{Expression: web},
			Options{}, func(t testing.TB) *event.Event { return upd(obj(t, "1"), obj(t, "2", "metadata.labels.tier=api")) },
			want{deliver: true, typ: event.EventDelete, object: "old", reason: ReasonStoppedMatching}},
		{"starts matching", Spec{Expression: web},
			Options{}, func(t testing.TB) *event.Event { return upd(obj(t, "1", "metadata.labels.tier=api"), obj(t, "2")) },
			want{deliver: true, typ: event.EventAdd, object: "new", reason: ReasonStartedMatching}},
		{"neither matches", Spec{Expression: web},
			Options{}, func(t testing.TB) *event.Event {
				return upd(obj(t, "1", "metadata.labels.tier=api"), obj(t, "2", "metadata.labels.tier=db"))
			},
			want{reason: ReasonFiltered}},
		{"stops matching ignores changed", Spec{Expression: web, Changed: []string{"status.phase"}},
			Options{}, func(t testing.TB) *event.Event { return upd(obj(t, "1"), obj(t, "2", "metadata.labels.tier=api")) },
			want{deliver: true, typ: event.EventDelete, object: "old", reason: ReasonStoppedMatching}},
		{"starts matching ignores changed", Spec{Expression: web, Changed: []string{"status.phase"}},
			Options{}, func(t testing.TB) *event.Event { return upd(obj(t, "1", "metadata.labels.tier=api"), obj(t, "2")) },
			want{deliver: true, typ: event.EventAdd, object: "new", reason: ReasonStartedMatching}},
		{"both match but unchanged", Spec{Expression: web, Changed: []string{"status.phase"}},
			Options{}, func(t testing.TB) *event.Event { return upd(obj(t, "1"), obj(t, "2", "metadata.labels.x=y")) },
			want{reason: ReasonUnchanged}},
		{"error on new, open: counts as match", Spec{Expression: failed},
			Options{}, func(t testing.TB) *event.Event {
				return upd(obj(t, "1", "status.phase=Pending"), obj(t, "2", "-status"))
			},
			want{deliver: true, typ: event.EventAdd, object: "new", reason: ReasonStartedMatching, err: "no such key"}},
		{"error on old, closed: counts as no match", Spec{Expression: failed, OnError: OnErrorClosed},
			Options{}, func(t testing.TB) *event.Event {
				return upd(obj(t, "1", "-status"), obj(t, "2", "status.phase=Failed"))
			},
			want{deliver: true, typ: event.EventAdd, object: "new", reason: ReasonStartedMatching, err: "no such key"}},
		{"error on new, closed, old matched", Spec{Expression: failed, OnError: OnErrorClosed},
			Options{}, func(t testing.TB) *event.Event {
				return upd(obj(t, "1", "status.phase=Failed"), obj(t, "2", "-status"))
			},
			want{deliver: true, typ: event.EventDelete, object: "old", reason: ReasonStoppedMatching, err: "no such key"}},
		{"error on both, closed", Spec{Expression: failed, OnError: OnErrorClosed},
			Options{}, func(t testing.TB) *event.Event { return upd(obj(t, "1", "-status"), obj(t, "2", "-status")) },
			want{reason: ReasonError, err: "no such key"}},
		{"error on both, open", Spec{Expression: failed},
			Options{}, func(t testing.TB) *event.Event { return upd(obj(t, "1", "-status"), obj(t, "2", "-status")) },
			want{deliver: true, err: "no such key"}},

		// Event predicates: no transitions.
		{"event predicate update true", Spec{Expression: `object.metadata.labels["tier"] != oldObject.metadata.labels["tier"]`},
			Options{}, func(t testing.TB) *event.Event { return upd(obj(t, "1"), obj(t, "2", "metadata.labels.tier=api")) },
			want{deliver: true}},
		{"event predicate update false", Spec{Expression: `object.metadata.labels["tier"] != oldObject.metadata.labels["tier"]`},
			Options{}, func(t testing.TB) *event.Event { return upd(obj(t, "1"), obj(t, "2")) },
			want{reason: ReasonFiltered}},
		{"event predicate on type", Spec{Expression: `type == "update" && object.metadata.labels["tier"] == "web"`},
			Options{}, func(t testing.TB) *event.Event { return upd(obj(t, "1"), obj(t, "2", "metadata.labels.tier=api")) },
			want{reason: ReasonFiltered}},
		{"event predicate with changed", Spec{Expression: `type == "update"`, Changed: []string{"status.phase"}},
			Options{}, func(t testing.TB) *event.Event { return upd(obj(t, "1"), obj(t, "2")) },
			want{reason: ReasonUnchanged}},

		// generationChanged: only updates that change the generation, or
		// start the deletion, whatever the filter says.
		{"generation unchanged", Spec{GenerationChanged: true},
			Options{}, func(t testing.TB) *event.Event {
				return upd(gen(obj(t, "1"), 3), gen(obj(t, "2", "status.phase=Failed"), 3))
			},
			want{reason: ReasonGeneration}},
		{"generation changed", Spec{GenerationChanged: true},
			Options{}, func(t testing.TB) *event.Event { return upd(gen(obj(t, "1"), 3), gen(obj(t, "2"), 4)) },
			want{deliver: true}},
		{"generation unchanged, deletion starts", Spec{GenerationChanged: true},
			Options{}, func(t testing.TB) *event.Event { return upd(gen(obj(t, "1"), 3), deleting(gen(obj(t, "2"), 3))) },
			want{deliver: true}},
		{"generation unchanged, already deleting", Spec{GenerationChanged: true},
			Options{}, func(t testing.TB) *event.Event {
				return upd(deleting(gen(obj(t, "1"), 3)), deleting(gen(obj(t, "2", "status.phase=Failed"), 3)))
			},
			want{reason: ReasonGeneration}},
		{"generation unchanged, starts matching", Spec{Expression: failed, GenerationChanged: true},
			Options{}, func(t testing.TB) *event.Event {
				return upd(gen(obj(t, "1"), 3), gen(obj(t, "2", "status.phase=Failed"), 3))
			},
			want{reason: ReasonGeneration}},
		{"generation changed, starts matching", Spec{Expression: failed, GenerationChanged: true},
			Options{}, func(t testing.TB) *event.Event {
				return upd(gen(obj(t, "1"), 3), gen(obj(t, "2", "status.phase=Failed"), 4))
			},
			want{deliver: true, typ: event.EventAdd, object: "new", reason: ReasonStartedMatching}},
		{"generation on adds and deletes", Spec{GenerationChanged: true},
			Options{}, func(t testing.TB) *event.Event { return add(gen(obj(t, "1"), 3)) },
			want{deliver: true}},
		{"resync with generationChanged", Spec{GenerationChanged: true},
			Options{}, func(t testing.TB) *event.Event { return upd(gen(obj(t, "1"), 3), gen(obj(t, "1"), 3)) },
			want{reason: ReasonResync}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := mustCompile(t, tt.spec, tt.opts)
			ev := tt.ev(t)
			before := snapshot(ev)
			d := f.Decide(ev)
			checkDecision(t, ev, d, tt.want)
			if after := snapshot(ev); !reflect.DeepEqual(before, after) {
				t.Fatal("Decide modified the event or its objects")
			}
			// A second call answers the same, from the memo.
			d2 := f.Decide(ev)
			if d2.Deliver != d.Deliver || d2.Reason != d.Reason || (d2.Err == nil) != (d.Err == nil) {
				t.Fatalf("second call: %+v, first: %+v", d2, d)
			}
		})
	}
}

// eventSnapshot is a deep copy of what an event shows.
type eventSnapshot struct {
	ev       event.Event
	obj, old map[string]any
}

func snapshot(ev *event.Event) eventSnapshot {
	s := eventSnapshot{ev: *ev}
	if ev.Object != nil {
		s.obj = ev.Object.DeepCopy().Object
	}
	if ev.OldObject != nil {
		s.old = ev.OldObject.DeepCopy().Object
	}
	return s
}

// withItems returns a pod with a list of n integers at spec.items.
func withItems(t testing.TB, n int) *unstructured.Unstructured {
	u := obj(t, "1")
	items := make([]any, n)
	for i := range items {
		items[i] = int64(i)
	}
	u.Object["spec"].(map[string]any)["items"] = items
	return u
}

func TestCompileErrors(t *testing.T) {
	tests := []struct {
		name  string
		spec  Spec
		field string
		msg   []string // substrings of the problem's message
	}{
		{"syntax", Spec{Expression: `object.status.phase ==`}, "filter",
			[]string{"ERROR: <input>:1:23: Syntax error", "| object.status.phase =="}},
		{"undeclared variable", Spec{Expression: `obj.status.phase == "Failed"`}, "filter",
			[]string{"undeclared reference to 'obj'"}},
		{"non-bool result", Spec{Expression: `object.spec.replicas + 1`}, "filter",
			[]string{"must evaluate to bool", "type is int"}},
		{"dyn result", Spec{Expression: `object.spec.paused`}, "filter",
			[]string{"must evaluate to bool", "type is dyn", "== true"}},
		{"no such overload", Spec{Expression: `type > 1`}, "filter",
			[]string{"found no matching overload"}},
		{"resource field type", Spec{Expression: `resource.kind == 1`}, "filter",
			[]string{"found no matching overload"}},
		{"too expensive", Spec{Expression: `object.spec.containers.all(c, object.spec.containers.all(d, object.spec.containers.all(e, c.name != "")))`}, "filter",
			[]string{"estimated worst-case cost", "exceeds the limit of 10000000", "nested comprehensions"}},
		{"bad path", Spec{Changed: []string{"status.phase", "a..b"}}, "changed[1]",
			[]string{`invalid field path "a..b": empty key at byte 2`}},
		{"bad onError", Spec{OnError: "sometimes"}, "onError",
			[]string{`must be "open" or "closed"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, err := Compile(tt.spec, Options{})
			if err == nil {
				t.Fatalf("compiled: %+v", f)
			}
			var probs Errors
			if !errors.As(err, &probs) || len(probs) != 1 {
				t.Fatalf("error %v, want one Problem", err)
			}
			if probs[0].Field != tt.field {
				t.Fatalf("field %q, want %q", probs[0].Field, tt.field)
			}
			for _, m := range tt.msg {
				if !strings.Contains(probs[0].Message, m) {
					t.Errorf("message %q lacks %q", probs[0].Message, m)
				}
			}
		})
	}

	t.Run("all problems at once", func(t *testing.T) {
		_, err := Compile(Spec{Expression: "1", Changed: []string{"", "ok", "x["}, OnError: "no"}, Options{})
		var probs Errors
		if !errors.As(err, &probs) {
			t.Fatal(err)
		}
		var fields []string
		for _, p := range probs {
			fields = append(fields, p.Field)
		}
		if got := strings.Join(fields, ","); got != "filter,changed[0],changed[2],onError" {
			t.Fatalf("fields %s", got)
		}
	})

	t.Run("estimate limit is an option", func(t *testing.T) {
		// Two nested loops are within the default limit...
		const nested2 = `object.spec.containers.all(c, object.spec.containers.all(d, c.name != ""))`
		mustCompile(t, Spec{Expression: nested2}, Options{})
		// ...and refused under a lower one, or with larger assumed sizes.
		if _, err := Compile(Spec{Expression: nested2}, Options{EstimatedCostLimit: 100_000}); err == nil {
			t.Fatal("compiled under a lower limit")
		}
		if _, err := Compile(Spec{Expression: nested2}, Options{AssumedMaxSize: 10_000}); err == nil {
			t.Fatal("compiled with larger assumed sizes")
		}
		// A loop comparing object strings is fine, two nested ones are not.
		mustCompile(t, Spec{Expression: `object.spec.containers.exists(c, c.name == object.metadata.name)`}, Options{})
		if _, err := Compile(Spec{Expression: `object.spec.containers.all(c, object.spec.containers.exists(d, c.name == d.name))`}, Options{}); err == nil {
			t.Fatal("compiled two nested loops comparing strings")
		}
	})
}

func TestCostTracking(t *testing.T) {
	for _, tt := range []struct {
		expr    string
		tracked bool
	}{
		{`object.metadata.labels["tier"] == "web"`, false},
		{`object.status.phase == "Running" && size(object.spec.containers) < 3`, false},
		{`object.spec.containers.exists(c, c.name == "web")`, true},
		{`object.metadata.name == oldObject.metadata.name`, true},
		{`object.metadata.name.matches("^web-")`, true},
	} {
		f := mustCompile(t, Spec{Expression: tt.expr}, Options{})
		if f.prog.tracked != tt.tracked {
			t.Errorf("%s: tracked %v, want %v (estimate %+v)", tt.expr, f.prog.tracked, tt.tracked, f.prog.estimate)
		}
	}
	// An untracked expression must be one that cannot reach the limit,
	// even a tiny one.
	f := mustCompile(t, Spec{Expression: `object.metadata.labels["tier"] == "web"`}, Options{CostLimit: 2})
	if !f.prog.tracked {
		t.Error("an expression estimated above CostLimit runs untracked")
	}
}

func TestEvaluatedOnce(t *testing.T) {
	c, err := NewCache(Options{})
	if err != nil {
		t.Fatal(err)
	}
	const expr = `object.metadata.labels["tier"] == "web"`
	var fs []*Filter
	for i := range 10 {
		// Different bindings, same expression: one program.
		f, err := c.Compile(Spec{Expression: expr, Changed: []string{fmt.Sprintf("spec.f%d", i)}, Resyncs: i%2 == 0})
		if err != nil {
			t.Fatal(err)
		}
		fs = append(fs, f)
	}
	prog := fs[0].prog
	for _, f := range fs {
		if f.prog != prog {
			t.Fatal("filters with the same expression do not share a program")
		}
	}
	other, err := c.Compile(Spec{Expression: expr + " && true"})
	if err != nil {
		t.Fatal(err)
	}
	if other.prog == prog {
		t.Fatal("different expressions share a program")
	}

	// Every plugin's listener builds its own Event around the same object.
	o1 := obj(t, "1")
	decideAll := func(mk func() *event.Event) {
		for _, f := range fs {
			f.Decide(mk())
		}
	}
	decideAll(func() *event.Event { return add(o1) })
	if n := prog.evals.Load(); n != 1 {
		t.Fatalf("add: %d evaluations for 10 filters, want 1", n)
	}
	// An update judges old and new objects; the old one was judged by the
	// add already.
	o2 := obj(t, "2", "metadata.labels.tier=api")
	decideAll(func() *event.Event { return upd(o1, o2) })
	if n := prog.evals.Load(); n != 2 {
		t.Fatalf("update: %d evaluations in all, want 2", n)
	}
	// The delete carries the last state, already judged.
	decideAll(func() *event.Event { return del(o2) })
	if n := prog.evals.Load(); n != 2 {
		t.Fatalf("delete: %d evaluations in all, want 2", n)
	}
	// Another copy of the same state (a relist) is another object: the
	// memo does not trust content it has not seen, but it is not wrong
	// either.
	o3 := o2.DeepCopy()
	decideAll(func() *event.Event { return add(o3) })
	if n := prog.evals.Load(); n != 3 {
		t.Fatalf("copy: %d evaluations in all, want 3", n)
	}

	t.Run("event predicate", func(t *testing.T) {
		var fs []*Filter
		for range 5 {
			f, err := c.Compile(Spec{Expression: `type != "delete" && object.metadata.labels["tier"] == "web"`})
			if err != nil {
				t.Fatal(err)
			}
			fs = append(fs, f)
		}
		o := obj(t, "10")
		for _, f := range fs {
			f.Decide(add(o))
		}
		for _, f := range fs {
			f.Decide(del(o)) // same object, other type: another evaluation
		}
		if n := fs[0].prog.evals.Load(); n != 2 {
			t.Fatalf("%d evaluations, want 2", n)
		}
	})

	t.Run("resource-sensitive", func(t *testing.T) {
		f, err := c.Compile(Spec{Expression: `resource.name == "pods"`})
		if err != nil {
			t.Fatal(err)
		}
		o := obj(t, "11")
		other := &event.ResourceRef{Name: "web-pods", Version: "v1", Resource: "pods", Kind: "Pod"}
		if d := f.Decide(add(o)); !d.Deliver {
			t.Fatal("pods filtered")
		}
		// Same object through another resource sharing the event.
		if d := f.Decide(&event.Event{Type: event.EventAdd, Resource: other, Object: o}); d.Deliver {
			t.Fatal("web-pods delivered: the memo mixed up resources")
		}
	})

	t.Run("no resourceVersion", func(t *testing.T) {
		f, err := c.Compile(Spec{Expression: `object.metadata.name != ""`})
		if err != nil {
			t.Fatal(err)
		}
		o := obj(t, "")
		f.Decide(add(o))
		f.Decide(add(o))
		if n := f.prog.evals.Load(); n != 2 {
			t.Fatalf("%d evaluations, want 2: objects without resourceVersion are not memoized", n)
		}
	})
}

// TestConcurrentDecide runs plugins' listeners concurrently over the same
// stream of object pointers, as client-go does; run with -race.
func TestConcurrentDecide(t *testing.T) {
	// A tiny memo exercises collisions and slot replacement; a large one
	// checks that listeners share evaluations.
	t.Run("small memo", func(t *testing.T) { testConcurrentDecide(t, 8, false) })
	t.Run("large memo", func(t *testing.T) { testConcurrentDecide(t, 1<<16, true) })
}

func testConcurrentDecide(t *testing.T, memoSize int, checkShared bool) {
	c, err := NewCache(Options{MemoSize: memoSize})
	if err != nil {
		t.Fatal(err)
	}
	specs := []Spec{
		{Expression: `object.metadata.labels["tier"] == "web"`},
		{Expression: `object.metadata.labels["tier"] == "web"`, Changed: []string{"status.phase"}},
		{Expression: `object.status.phase == "Running"`, OnError: OnErrorClosed},
		{Expression: `type == "update" && object.metadata.labels["tier"] != oldObject.metadata.labels["tier"]`},
		{Changed: []string{`metadata.labels["tier"]`}},
	}
	var fs []*Filter
	for _, s := range specs {
		f, err := c.Compile(s)
		if err != nil {
			t.Fatal(err)
		}
		fs = append(fs, f)
	}
	// A stream of states: tier flips every third version.
	const n = 300
	objs := make([]*unstructured.Unstructured, n)
	for i := range objs {
		tier := "web"
		if i%3 == 0 {
			tier = "api"
		}
		objs[i] = obj(t, fmt.Sprint(i+1), "metadata.labels.tier="+tier)
	}
	eventAt := func(i int) *event.Event {
		if i == 0 {
			return add(objs[0])
		}
		return upd(objs[i-1], objs[i])
	}
	// What each filter decides, computed sequentially on a fresh cache.
	ref, _ := NewCache(Options{})
	wantDeliver := make([][]bool, len(specs))
	for j, s := range specs {
		f, err := ref.Compile(s)
		if err != nil {
			t.Fatal(err)
		}
		for i := range objs {
			wantDeliver[j] = append(wantDeliver[j], f.Decide(eventAt(i)).Deliver)
		}
	}

	const listenersPerFilter = 4
	var wg sync.WaitGroup
	errs := make(chan error, len(fs)*listenersPerFilter)
	for j, f := range fs {
		for range listenersPerFilter {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range objs {
					if got := f.Decide(eventAt(i)).Deliver; got != wantDeliver[j][i] {
						errs <- fmt.Errorf("filter %d event %d: deliver %v, want %v", j, i, got, wantDeliver[j][i])
						return
					}
				}
			}()
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if !checkShared {
		return
	}
	// Each program evaluated each state (or event) about once, not once
	// per listener: collisions between the ~1200 keys may add a few.
	for j, f := range fs {
		if f.prog == nil {
			continue
		}
		if got := f.prog.evals.Load(); got > 2*n {
			t.Errorf("filter %d: %d evaluations for %d events and %d listeners", j, got, n, listenersPerFilter)
		}
	}
}

func TestFilterSpec(t *testing.T) {
	in := Spec{Expression: `true`, Changed: []string{"a"}}
	f := mustCompile(t, in, Options{})
	in.Changed[0] = "b"
	s := f.Spec()
	if s.OnError != OnErrorOpen || s.Changed[0] != "a" {
		t.Fatalf("Spec() = %+v", s)
	}
	if !f.StatePredicate() {
		t.Fatal("`true` is not a state predicate")
	}
	if mustCompile(t, Spec{Expression: `oldObject == null`}, Options{}).StatePredicate() {
		t.Fatal("an expression reading oldObject is a state predicate")
	}
}

func TestCacheReleasesPrograms(t *testing.T) {
	c, err := NewCache(Options{})
	if err != nil {
		t.Fatal(err)
	}
	const expr = `object.metadata.name == "x"`
	f := mustCompileIn(t, c, Spec{Expression: expr})
	id := f.prog.id
	c.mu.Lock()
	wp := c.programs[expr]
	c.mu.Unlock()
	if wp.Value() != f.prog {
		t.Fatal("program not cached")
	}
	f = nil // the only Filter using the program
	for i := 0; i < 5 && wp.Value() != nil; i++ {
		runtime.GC()
	}
	if wp.Value() != nil {
		t.Fatal("program still reachable after GC although no Filter uses it: the cache keeps it alive")
	}
	// A later Compile builds a new program rather than failing on the
	// dead entry, whether or not the cleanup has run yet.
	g := mustCompileIn(t, c, Spec{Expression: expr})
	if g.prog.id == id {
		t.Fatal("dead program reused")
	}
	if d := g.Decide(add(obj(t, "1"))); d.Deliver {
		t.Fatal("new program gives a wrong answer")
	}
}

func mustCompileIn(t *testing.T, c *Cache, spec Spec) *Filter {
	t.Helper()
	f, err := c.Compile(spec)
	if err != nil {
		t.Fatal(err)
	}
	return f
}
