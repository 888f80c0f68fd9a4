//go:build !wasip1

package kittest

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/informer-host/informer-host/abi"
	"github.com/informer-host/informer-host/abi/kit"
)

// widgets is a reconciler for the loop's tests: a Widget wants
// spec.replicas ConfigMaps beside it and one copy in namespace dst, has
// status.replicas and a Ready condition, and is reconciled again every
// spec.every seconds. A deleting Widget is cleaned up once cleanup
// allows it.
type widgets struct {
	cleanup bool
	calls   []kit.Request
}

func (w *widgets) Reconcile(_ context.Context, req kit.Request) (kit.Result, error) {
	w.calls = append(w.calls, req)
	if req.Object == nil {
		return kit.Result{}, nil
	}
	if req.Deleting {
		if !w.cleanup {
			return kit.Result{}, kit.Retry(errors.New("cleanup not done"))
		}
		return kit.Result{}, nil
	}
	var wd struct {
		Spec struct {
			Replicas int
			Every    int
			Broken   bool
		}
	}
	if err := req.Decode(&wd); err != nil {
		return kit.Result{}, err
	}
	children := &kit.Children{}
	for i := 0; i < wd.Spec.Replicas; i++ {
		if err := children.Add(kit.NewObj("v1", "ConfigMap", "", fmt.Sprintf("%s-%d", req.Name, i)).Set("data.index", fmt.Sprint(i))); err != nil {
			return kit.Result{}, err
		}
	}
	type cm struct {
		APIVersion string            `json:"apiVersion"`
		Kind       string            `json:"kind"`
		Metadata   map[string]string `json:"metadata"`
		Data       map[string]string `json:"data"`
	}
	if err := children.Add(cm{"v1", "ConfigMap", map[string]string{"namespace": "dst", "name": req.Namespace + "." + req.Name},
		map[string]string{"from": req.Key()}}); err != nil {
		return kit.Result{}, err
	}
	status := (&kit.Status{}).Set("replicas", wd.Spec.Replicas)
	ready := kit.Condition{Type: "Ready", Status: kit.ConditionTrue, Reason: "Applied"}
	if wd.Spec.Broken {
		ready = kit.Condition{Type: "Ready", Status: kit.ConditionFalse, Reason: "Broken", Message: "spec.broken is set"}
	}
	status.SetCondition(ready)
	return kit.Result{Children: children, Status: status, RequeueAfter: time.Duration(wd.Spec.Every) * time.Second}, nil
}

var (
	widgetKind = Kind{Name: "widgets", APIVersion: "example.com/v1", Kind: "Widget"}
	cmKind     = Kind{Name: "configmaps", APIVersion: "v1", Kind: "ConfigMap"}
)

func newWidgetLoop(t *testing.T, c Controller) (*Loop, *widgets) {
	h := New(t)
	w := &widgets{cleanup: true}
	kit.HandleReconcile(w)
	c.For = widgetKind
	c.Owns = []Kind{cmKind}
	return h.Controller(c), w
}

func widget(name string, replicas, every int, broken bool) string {
	return fmt.Sprintf(`{"metadata":{"namespace":"shop","name":%q},"spec":{"replicas":%d,"every":%d,"broken":%t}}`, name, replicas, every, broken)
}

func mustOK(t *testing.T, rs []Reconciled) []Reconciled {
	t.Helper()
	if len(rs) == 0 {
		t.Fatal("nothing was reconciled")
	}
	for _, r := range rs {
		if r.Code != OK {
			t.Fatalf("%v", r)
		}
	}
	return rs
}

func condition(t *testing.T, l *Loop, name string) map[string]any {
	t.Helper()
	o, ok := l.Object("widgets", "shop", name)
	if !ok {
		t.Fatalf("widget %s is gone", name)
	}
	conds, _ := o["status"].(map[string]any)["conditions"].([]any)
	if len(conds) != 1 {
		t.Fatalf("conditions %v", conds)
	}
	return conds[0].(map[string]any)
}

func TestLoopChildrenStatusAndRequeue(t *testing.T) {
	l, _ := newWidgetLoop(t, Controller{Plugin: "widgets.wasm"})
	start := l.Now()
	l.Apply("widgets", widget("w", 2, 30, false))
	mustOK(t, l.Run())

	// Children: two beside the Widget, owned by it; one in dst, which an
	// ownerReference cannot reach, tracked by the owner annotation.
	if got := strings.Join(l.Keys("configmaps"), " "); got != "dst/shop.w shop/w-0 shop/w-1" {
		t.Fatalf("children %s", got)
	}
	w, _ := l.Object("widgets", "shop", "w")
	uid := metaOf(w)["uid"]
	same, _ := l.Object("configmaps", "shop", "w-1")
	refs := metaOf(same)["ownerReferences"].([]any)
	if ref := refs[0].(map[string]any); ref["uid"] != uid || ref["controller"] != true || ref["kind"] != "Widget" {
		t.Fatalf("ownerReferences %v", refs)
	}
	if same["data"].(map[string]any)["index"] != "1" {
		t.Fatalf("child %v", same)
	}
	cross, _ := l.Object("configmaps", "dst", "shop.w")
	if metaOf(cross)["ownerReferences"] != nil {
		t.Fatalf("a child in another namespace got an ownerReference: %v", cross)
	}
	ann := metaOf(cross)["annotations"].(map[string]any)[OwnerAnnotation]
	if ann != fmt.Sprintf("widgets/shop/w/%s", uid) || metaOf(cross)["labels"].(map[string]any)[PluginLabel] != "widgets.wasm" {
		t.Fatalf("bookkeeping %v", metaOf(cross))
	}

	// Status: replicas and the condition, completed by the host.
	c := condition(t, l, "w")
	if c["lastTransitionTime"] != kit.Timestamp(start) || c["observedGeneration"] != 1.0 || c["status"] != "True" {
		t.Fatalf("condition %v", c)
	}

	// The timer: not before 30s, then once.
	if at, ok := l.RequeueAt("shop", "w"); !ok || !at.Equal(start.Add(30*time.Second)) {
		t.Fatalf("requeue at %v %t", at, ok)
	}
	if rs := l.Advance(29 * time.Second); len(rs) != 0 {
		t.Fatalf("reconciled before the timer: %v", rs)
	}
	if rs := mustOK(t, l.Advance(time.Second)); len(rs) != 1 || rs[0].Key() != "shop/w" {
		t.Fatalf("timer: %v", rs)
	}

	// Fewer replicas: the child left out is pruned; the condition's status
	// is unchanged, so its transition time stays; the generation moved.
	l.Apply("widgets", widget("w", 1, 30, false))
	mustOK(t, l.Run())
	if got := strings.Join(l.Keys("configmaps"), " "); got != "dst/shop.w shop/w-0" {
		t.Fatalf("children after scaling down %s", got)
	}
	c = condition(t, l, "w")
	if c["lastTransitionTime"] != kit.Timestamp(start) || c["observedGeneration"] != 2.0 {
		t.Fatalf("condition %v", c)
	}
	var st struct{ Status struct{ Replicas int } }
	if l.Decode("widgets", "shop", "w", &st); st.Status.Replicas != 1 {
		t.Fatalf("status %+v", st)
	}

	// A transition: the time is the fake clock's now.
	l.Advance(time.Minute)
	l.Apply("widgets", widget("w", 1, 0, true))
	mustOK(t, l.Run())
	if c = condition(t, l, "w"); c["lastTransitionTime"] != kit.Timestamp(l.Now()) || c["reason"] != "Broken" {
		t.Fatalf("condition %v", c)
	}
	if _, ok := l.RequeueAt("shop", "w"); ok {
		t.Fatal("a result without RequeueAfter left the timer")
	}

	// The Widget goes: the garbage collector takes its owned children,
	// the absent reconcile prunes the one in dst.
	l.Delete("widgets", "shop", "w")
	rs := mustOK(t, l.Run())
	if last := rs[len(rs)-1]; !last.Absent {
		t.Fatalf("want an absent reconcile last: %v", rs)
	}
	if got := l.Keys("configmaps"); len(got) != 0 {
		t.Fatalf("children left: %v", got)
	}
}

func TestLoopFinalizer(t *testing.T) {
	l, w := newWidgetLoop(t, Controller{Finalizer: "example.com/cleanup"})
	w.cleanup = false
	l.Apply("widgets", widget("w", 1, 0, false))
	mustOK(t, l.Run())
	o, _ := l.Object("widgets", "shop", "w")
	if fs := finalizers(o); !reflect.DeepEqual(fs, []any{"example.com/cleanup"}) {
		t.Fatalf("finalizers %v", fs)
	}

	l.Delete("widgets", "shop", "w")
	rs := l.Run()
	if len(rs) != 1 || !rs[0].Deleting || rs[0].Code != Retry {
		t.Fatalf("%v", rs)
	}
	if _, ok := l.Object("widgets", "shop", "w"); !ok {
		t.Fatal("the Widget went before its cleanup was done")
	}
	// Backoff: 5ms after the first failure.
	w.cleanup = true
	rs = mustOK(t, l.Advance(5*time.Millisecond))
	if !rs[0].Deleting || !rs[len(rs)-1].Absent {
		t.Fatalf("%v", rs)
	}
	if _, ok := l.Object("widgets", "shop", "w"); ok {
		t.Fatal("the Widget stayed after its cleanup")
	}
	if got := l.Keys("configmaps"); len(got) != 0 {
		t.Fatalf("children left: %v", got)
	}
}

func TestLoopChildFailures(t *testing.T) {
	l, _ := newWidgetLoop(t, Controller{})
	l.OnChild(func(c map[string]any) error {
		if metaOf(c)["namespace"] == "dst" {
			return errors.New("ERR_FORBIDDEN: configmaps is forbidden in dst")
		}
		return nil
	})
	l.Apply("widgets", widget("w", 1, 10, false))
	rs := l.Run()
	want := "children_apply shop/w: 1 children failed\nConfigMap dst/shop.w: ERR_FORBIDDEN: configmaps is forbidden in dst"
	if rs[0].Code != Error || rs[0].Message != want {
		t.Fatalf("%v, want message %q", rs[0], want)
	}
	if got := strings.Join(l.Keys("configmaps"), " "); got != "shop/w-0" {
		t.Fatalf("the others were not applied: %s", got)
	}
	if _, ok := l.RequeueAt("shop", "w"); ok {
		t.Fatal("a failed reconcile set its timer")
	}
	// The applied child's own event brought the key back at once, as the
	// host's informer would: a second failure, so a 10ms backoff.
	if len(rs) != 2 || rs[1].Code != Error {
		t.Fatalf("%v", rs)
	}
	l.OnChild(nil)
	if rs := l.Advance(9 * time.Millisecond); len(rs) != 0 {
		t.Fatalf("reconciled before its backoff: %v", rs)
	}
	mustOK(t, l.Advance(time.Millisecond))
	if got := strings.Join(l.Keys("configmaps"), " "); got != "dst/shop.w shop/w-0" {
		t.Fatalf("children %s", got)
	}
}

func TestLoopDeniedChild(t *testing.T) {
	h := New(t)
	kit.HandleReconcile(kit.ReconcileFunc(func(context.Context, kit.Request) (kit.Result, error) {
		c := &kit.Children{}
		_ = c.Add(kit.NewObj("v1", "Secret", "", "s"))
		return kit.Result{Children: c}, nil
	}))
	l := h.Controller(Controller{For: widgetKind, Owns: []Kind{cmKind}})
	l.Apply("widgets", widget("w", 0, 0, false))
	rs := l.Run()
	if rs[0].Code != Error || !strings.Contains(rs[0].Message, "ERR_DENIED: Secret shop/s: not an object of controller.owns [configmaps]") {
		t.Fatalf("%v", rs[0])
	}
}

func TestLoopRestartKeepsTimers(t *testing.T) {
	l, w := newWidgetLoop(t, Controller{})
	l.Apply("widgets", widget("w", 0, 60, false))
	mustOK(t, l.Run())
	l.Advance(20 * time.Second)
	l.Restart()
	rs := mustOK(t, l.Run())
	if len(rs) != 1 || !rs[0].Initial || !w.calls[len(w.calls)-1].Initial {
		t.Fatalf("%v", rs)
	}
	// The restart's reconcile set the timer again from its now.
	if at, _ := l.RequeueAt("shop", "w"); !at.Equal(l.Now().Add(time.Minute)) {
		t.Fatalf("timer at %v", at)
	}
}

// Status fields are the plugin's: one it stops setting goes, another
// manager's stays, and so do its conditions.
func TestLoopStatusOwnership(t *testing.T) {
	h := New(t)
	fields := []string{"a", "b"}
	kit.HandleReconcile(kit.ReconcileFunc(func(context.Context, kit.Request) (kit.Result, error) {
		s := &kit.Status{}
		for _, f := range fields {
			s.Set(f, 1)
		}
		s.SetCondition(kit.Condition{Type: "Mine", Status: kit.ConditionTrue})
		return kit.Result{Status: s}, nil
	}))
	l := h.Controller(Controller{For: widgetKind})
	l.Apply("widgets", `{"metadata":{"namespace":"shop","name":"w"},"status":{"other":"x","conditions":[{"type":"Theirs","status":"False"}]}}`)
	mustOK(t, l.Run())
	fields = []string{"a"}
	l.Apply("widgets", `{"metadata":{"namespace":"shop","name":"w"},"spec":{"x":1}}`)
	mustOK(t, l.Run())
	var st struct {
		Status struct {
			A, B, Other any
			Conditions  []kit.Condition
		}
	}
	l.Decode("widgets", "shop", "w", &st)
	if st.Status.A != 1.0 || st.Status.B != nil || st.Status.Other != "x" || len(st.Status.Conditions) != 2 ||
		st.Status.Conditions[0].Type != "Theirs" || st.Status.Conditions[1].ObservedGeneration != 2 {
		t.Fatalf("%+v", st.Status)
	}
}

func TestLoopWatches(t *testing.T) {
	h := New(t)
	var keys []string
	kit.HandleReconcile(kit.ReconcileFunc(func(_ context.Context, req kit.Request) (kit.Result, error) {
		keys = append(keys, req.Key())
		return kit.Result{}, nil
	}))
	secrets := Kind{Name: "secrets", APIVersion: "v1", Kind: "Secret"}
	l := h.Controller(Controller{For: widgetKind, Watches: []Watch{
		{Kind: secrets, Label: "example.com/widget"},
		{Kind: secrets, Map: func(o map[string]any) []string {
			if ref, ok := o["data"].(map[string]any)["for"].(string); ok {
				return []string{ref}
			}
			return nil
		}},
	}})
	l.Apply("secrets", `{"metadata":{"namespace":"shop","name":"s","labels":{"example.com/widget":"w"}},"data":{"for":"other/v"}}`)
	mustOK(t, l.Run())
	if strings.Join(keys, " ") != "shop/w other/v" {
		t.Fatalf("reconciled %v", keys)
	}
	if !reflect.DeepEqual(l.Queued(), []string(nil)) {
		t.Fatalf("queue %v", l.Queued())
	}
}

// The controller imports outside a reconcile are ERR_NO_EVENT, and
// requeue_after checks its bounds, as the host's do.
func TestControllerImportsOutsideReconcile(t *testing.T) {
	h := New(t)
	if h.ChildrenApply([]byte("[]")) != abi.ErrNoEvent || h.StatusApply([]byte("{}")) != abi.ErrNoEvent || h.ReconcileRequeueAfter(1) != abi.ErrNoEvent {
		t.Fatal("a controller import outside ih_reconcile worked")
	}
	l := h.Controller(Controller{For: widgetKind})
	l.current = "shop/w"
	if h.ReconcileRequeueAfter(-1) != abi.ErrInvalid || h.ReconcileRequeueAfter(367*24*3600*1000) != abi.ErrInvalid {
		t.Fatal("requeue_after out of bounds accepted")
	}
	if h.ChildrenApply([]byte(`{}`)) != abi.ErrInvalid || h.ChildrenApply([]byte(`[{"kind":"ConfigMap"}]`)) != abi.ErrInvalid {
		t.Fatal("an invalid children set accepted")
	}
	if h.StatusApply([]byte(`{}`)) != abi.ErrAbsent {
		t.Fatal("status of an absent primary accepted")
	}
}

// A primary deleted while the daemon was down: the restart hands its key
// to the plugin as absent, and the child the garbage collector cannot
// reach (in another namespace) is pruned.
func TestLoopDeleteWhileAway(t *testing.T) {
	l, w := newWidgetLoop(t, Controller{})
	l.Apply("widgets", widget("w", 1, 0, false))
	mustOK(t, l.Run())
	l.DeleteWhileAway("widgets", "shop", "w")
	if got := strings.Join(l.Keys("configmaps"), " "); got != "dst/shop.w" || len(l.Queued()) != 0 {
		t.Fatalf("children %s, queue %v", got, l.Queued())
	}
	rs := mustOK(t, func() []Reconciled { l.Restart(); return l.Run() }())
	// The pruned child's delete brings the key back once more, as its
	// event would in the host.
	if !rs[0].Absent || !rs[0].Initial || w.calls[len(w.calls)-1].Object != nil {
		t.Fatalf("%v", rs)
	}
	if got := l.Keys("configmaps"); len(got) != 0 {
		t.Fatalf("children left: %v", got)
	}
}

func TestLoopGenerationChangedAndFilter(t *testing.T) {
	statusOnly := kit.ReconcileFunc(func(_ context.Context, req kit.Request) (kit.Result, error) {
		g, _ := req.Object.Get("metadata.generation")
		return kit.Result{Status: (&kit.Status{}).Set("seen", g)}, nil
	})
	cases := []struct {
		name              string
		generationChanged bool
		want              int // reconciles of the create, then of a label change
		wantLabel         int
	}{
		// The status write comes back as an update of the primary.
		{"every update", false, 2, 1},
		{"generation changes only", true, 1, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := New(t)
			kit.HandleReconcile(statusOnly)
			l := h.Controller(Controller{For: widgetKind, GenerationChanged: c.generationChanged})
			l.Apply("widgets", widget("w", 0, 0, false))
			if rs := mustOK(t, l.Run()); len(rs) != c.want {
				t.Fatalf("%d reconciles, want %d: %v", len(rs), c.want, rs)
			}
			l.Apply("widgets", `{"metadata":{"namespace":"shop","name":"w","labels":{"a":"b"}},"spec":{"replicas":0,"every":0,"broken":false}}`)
			if rs := l.Run(); len(rs) != c.wantLabel {
				t.Fatalf("%d reconciles of a label change, want %d: %v", len(rs), c.wantLabel, rs)
			}
			// A deletion starting gives a new generation: it is seen.
			l.Apply("widgets", `{"metadata":{"namespace":"shop","name":"w","finalizers":["x"]}}`)
			l.Run()
			l.Delete("widgets", "shop", "w")
			if rs := l.Run(); len(rs) == 0 || !rs[0].Deleting {
				t.Fatalf("the deletion was not reconciled: %v", rs)
			}
		})
	}

	h := New(t)
	var calls int
	kit.HandleReconcile(kit.ReconcileFunc(func(context.Context, kit.Request) (kit.Result, error) { calls++; return kit.Result{}, nil }))
	l := h.Controller(Controller{For: widgetKind, Filter: func(o map[string]any) bool {
		return o["spec"].(map[string]any)["replicas"] != 0.0
	}})
	l.Apply("widgets", widget("w", 0, 0, false))
	if rs := l.Run(); len(rs) != 1 || !rs[0].Filtered || calls != 0 {
		t.Fatalf("%v, %d calls", rs, calls)
	}
	l.Delete("widgets", "shop", "w")
	if rs := l.Run(); len(rs) != 1 || !rs[0].Absent || calls != 1 {
		t.Fatalf("an absent key is reconciled whatever the filter: %v, %d calls", rs, calls)
	}
}
