package kit

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/informer-host/informer-host/abi"
)

// ctlHost is fakeHost with the controller-mode imports, recording what
// the kit sent and answering as programmed.
type ctlHost struct {
	fakeHost
	requeues     []int64
	children     []string
	statuses     []string
	childrenCode int32 // children_apply's answer
	statusCode   int32
	requeueCode  int32
	message      string
}

func (h *ctlHost) requeueAfter(ms int64) int32 {
	h.requeues = append(h.requeues, ms)
	return h.requeueCode
}
func (h *ctlHost) childrenApply(b []byte) int32 {
	h.children = append(h.children, string(b))
	return h.childrenCode
}
func (h *ctlHost) statusApply(b []byte) int32 {
	h.statuses = append(h.statuses, string(b))
	return h.statusCode
}
func (h *ctlHost) resultMessage(buf []byte) int32 {
	return copySized(buf, []byte(h.message))
}

// reconcile calls ih_reconcile of a plugin whose reconciler is r.
func (h *ctlHost) reconcile(r Reconciler, flags uint8, obj string) int32 {
	p := &plugin{host: h}
	p.onReconcile = func(p *plugin, n int32) int32 { return p.runReconcile(r, n) }
	h.header = abi.AppendHeader(nil, &abi.Header{Type: abi.EventReconcile, Flags: flags, Fields: [abi.HeaderFieldCount]string{
		"cronjobs", "batch.tutorial.kubebuilder.io", "v1", "cronjobs", "CronJob", "shop", "nightly", "u1", "7"}})
	h.obj = nil
	if obj != "" {
		h.obj = []byte(obj)
	}
	h.errMsg, h.inEvent = "", true
	defer func() { h.inEvent = false }()
	return p.reconcile(int32(len(h.header)))
}

func TestReconcileRequest(t *testing.T) {
	cases := []struct {
		name  string
		flags uint8
		obj   string
		want  string
	}{
		{"present", 0, `{"spec":{"schedule":"* * * * *"}}`, "shop/nightly object=true deleting=false initial=false schedule=* * * * *"},
		{"absent", abi.FlagAbsent, "", "shop/nightly object=false deleting=false initial=false schedule="},
		{"deleting on a restart", abi.FlagDeleting | abi.FlagInitialList, `{"spec":{"schedule":"@daily"}}`,
			"shop/nightly object=true deleting=true initial=true schedule=@daily"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var got string
			h := &ctlHost{}
			rc := h.reconcile(ReconcileFunc(func(_ context.Context, req Request) (Result, error) {
				var sched string
				if req.Object != nil {
					sched, _ = req.Object.Get("spec.schedule")
				}
				var v struct{}
				if err := req.Decode(&v); (err == nil) != (req.Object != nil) || (err != nil && !errors.Is(err, ErrNoObject)) {
					t.Errorf("Decode: %v", err)
				}
				got = strings.Join([]string{req.Key(), "object=" + boolText(req.Object != nil), "deleting=" + boolText(req.Deleting),
					"initial=" + boolText(req.Initial), "schedule=" + sched}, " ")
				return Result{}, nil
			}), c.flags, c.obj)
			if rc != abi.ResultOK || got != c.want {
				t.Fatalf("rc %d %q, request %q, want %q", rc, h.errMsg, got, c.want)
			}
		})
	}
}

func boolText(b bool) string {
	if b {
		return "true"
	}
	return "false"
}

func TestReconcileResults(t *testing.T) {
	someChildren := func() *Children {
		c := &Children{}
		if err := c.Add(NewObj("v1", "ConfigMap", "dst", "a").Set("data.k", "v")); err != nil {
			t.Fatal(err)
		}
		return c
	}
	ready := func() *Status {
		s := &Status{}
		s.SetCondition(Condition{Type: "Ready", Status: ConditionTrue, Reason: "Copied"})
		return s.Set("copies", 1)
	}
	cases := []struct {
		name                string
		res                 Result
		err                 error
		statusCode          int32
		childrenCode        int32
		resultMessage       string
		wantRC              int32
		wantMsg             string
		wantChildren        int
		wantStatus          int
		wantRequeues        []int64
		wantChildrenFailure bool
	}{
		{name: "ok with a timer", res: Result{RequeueAfter: 90 * time.Second}, wantRC: abi.ResultOK, wantRequeues: []int64{90000}},
		{name: "ok without a timer clears it", wantRC: abi.ResultOK, wantRequeues: []int64{0}},
		{name: "a sub-millisecond timer is one millisecond", res: Result{RequeueAfter: time.Microsecond}, wantRC: abi.ResultOK, wantRequeues: []int64{1}},
		{name: "negative timer", res: Result{RequeueAfter: -time.Second}, wantRC: abi.ResultError, wantMsg: "RequeueAfter is negative"},
		{name: "children and status", res: Result{Children: someChildren(), Status: ready()}, wantRC: abi.ResultOK,
			wantChildren: 1, wantStatus: 1, wantRequeues: []int64{0}},
		{name: "an error applies the status, not the children", res: Result{Children: someChildren(), Status: ready(), RequeueAfter: time.Minute},
			err: errors.New("source unreadable"), wantRC: abi.ResultError, wantMsg: "source unreadable", wantStatus: 1},
		{name: "status of a primary gone meanwhile", res: Result{Status: ready()}, statusCode: abi.ErrAbsent, wantRC: abi.ResultOK,
			wantStatus: 1, wantRequeues: []int64{0}},
		{name: "status refused", res: Result{Status: ready()}, statusCode: abi.ErrForbidden, wantRC: abi.ResultError, wantStatus: 1,
			wantMsg: "status_apply shop/nightly: ERR_FORBIDDEN"},
		{name: "retry", err: Retry(errors.New("later")), wantRC: abi.ResultRetry, wantMsg: "later"},
		{name: "drop", err: Drop(errors.New("never")), wantRC: abi.ResultDrop, wantMsg: "never"},
		{name: "children that failed", res: Result{Children: someChildren()}, childrenCode: 2,
			resultMessage: "ConfigMap dst/a: ERR_FORBIDDEN: configmaps is forbidden\nConfigMap dst/b: ERR_UNPROCESSABLE: data: Too long",
			wantRC:        abi.ResultError, wantChildren: 1, wantChildrenFailure: true,
			wantMsg: "children_apply shop/nightly: 2 children failed\nConfigMap dst/a: ERR_FORBIDDEN: configmaps is forbidden\nConfigMap dst/b: ERR_UNPROCESSABLE: data: Too long"},
		{name: "children denied", res: Result{Children: someChildren()}, childrenCode: abi.ErrDenied,
			resultMessage: "Secret dst/a: not one of controller.owns", wantRC: abi.ResultError, wantChildren: 1,
			wantMsg: "children_apply 1 children of shop/nightly: ERR_DENIED: Secret dst/a: not one of controller.owns"},
		{name: "a child without a name", res: Result{Children: func() *Children {
			c := &Children{}
			_ = c.Add(map[string]any{"apiVersion": "v1", "kind": "ConfigMap"})
			return c
		}()}, wantRC: abi.ResultError, wantMsg: "child 1: the ConfigMap has no metadata.name"},
		{name: "a condition without a status", res: Result{Status: func() *Status {
			s := &Status{}
			s.SetCondition(Condition{Type: "Ready", Status: "yes"})
			return s
		}()}, wantRC: abi.ResultError, wantMsg: `condition Ready: status is "yes", want True, False or Unknown`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := &ctlHost{childrenCode: c.childrenCode, statusCode: c.statusCode, message: c.resultMessage}
			var applyErr error
			rc := h.reconcile(ReconcileFunc(func(context.Context, Request) (Result, error) { return c.res, c.err }), 0, `{}`)
			if rc != c.wantRC || !strings.Contains(h.errMsg, c.wantMsg) {
				t.Fatalf("rc %d %q, want %d %q", rc, h.errMsg, c.wantRC, c.wantMsg)
			}
			if len(h.children) != c.wantChildren || len(h.statuses) != c.wantStatus {
				t.Fatalf("children_apply %d times, status_apply %d times; want %d, %d", len(h.children), len(h.statuses), c.wantChildren, c.wantStatus)
			}
			if strings.Join(i64s(h.requeues), ",") != strings.Join(i64s(c.wantRequeues), ",") {
				t.Fatalf("requeue_after %v, want %v", h.requeues, c.wantRequeues)
			}
			_ = applyErr
			if c.wantStatus > 0 {
				var st map[string]any
				if err := json.Unmarshal([]byte(h.statuses[0]), &st); err != nil || st["copies"] != 1.0 {
					t.Fatalf("status %s: %v", h.statuses[0], err)
				}
				if conds, _ := st["conditions"].([]any); len(conds) != 1 || conds[0].(map[string]any)["lastTransitionTime"] != nil {
					t.Fatalf("status %s: want one condition, without a lastTransitionTime (the host's)", h.statuses[0])
				}
			}
		})
	}
}

func i64s(v []int64) []string {
	var out []string
	for _, x := range v {
		out = append(out, time.Duration(x).String())
	}
	return out
}

// A reconciler that applies its children itself sees each failed child,
// and the set is not applied again when it returns it.
func TestChildrenApplyInReconcile(t *testing.T) {
	h := &ctlHost{childrenCode: 1, message: "Job shop/nightly-1: ERR_FORBIDDEN: jobs.batch is forbidden"}
	var failures []ChildFailure
	rc := h.reconcile(ReconcileFunc(func(ctx context.Context, _ Request) (Result, error) {
		c := &Children{}
		_ = c.Add(NewObj("batch/v1", "Job", "", "nightly-1"))
		if err := c.Apply(context.Background()); err == nil || !strings.Contains(err.Error(), "context of a Reconcile call") {
			t.Fatalf("Apply outside the call: %v", err)
		}
		err := c.Apply(ctx)
		var ce *ChildrenError
		if !errors.As(err, &ce) {
			t.Fatalf("Apply: %v, want a *ChildrenError", err)
		}
		failures = ce.Failures
		s := &Status{}
		s.SetCondition(Condition{Type: "Ready", Status: ConditionFalse, Reason: "JobsFailed", Message: err.Error()})
		return Result{Children: c, Status: s}, nil
	}), 0, `{}`)
	want := ChildFailure{Kind: "Job", Namespace: "shop", Name: "nightly-1", Message: "ERR_FORBIDDEN: jobs.batch is forbidden"}
	if rc != abi.ResultOK || len(failures) != 1 || failures[0] != want || len(h.children) != 1 || len(h.statuses) != 1 {
		t.Fatalf("rc %d %q, failures %+v, children_apply %d times", rc, h.errMsg, failures, len(h.children))
	}
}

func TestReconcileRegistration(t *testing.T) {
	// Without a reconciler, ih_reconcile is an ERROR naming the fix.
	h := &ctlHost{}
	p := &plugin{host: h}
	if rc := p.reconcile(0); rc != abi.ResultError || !strings.Contains(h.errMsg, "kit.HandleReconcile") {
		t.Fatalf("rc %d %q", rc, h.errMsg)
	}
	// A reconciler alone is enough for ih_init; ih_handle then says the
	// plugin is a controller.
	p.onReconcile = func(*plugin, int32) int32 { return abi.ResultOK }
	if rc := p.init(0); rc != abi.InitOK {
		t.Fatalf("ih_init %d %q", rc, h.errMsg)
	}
	if rc := h.deliver(p, abi.EventAdd, 0, `{}`, ""); rc != abi.ResultError || !strings.Contains(h.errMsg, "controller: block") {
		t.Fatalf("ih_handle %d %q", rc, h.errMsg)
	}
	if rc := (&plugin{host: h}).init(0); rc != abi.InitRefused || !strings.Contains(h.errMsg, "kit.HandleReconcile") {
		t.Fatalf("ih_init without either: %d %q", rc, h.errMsg)
	}
	// An event header is not a reconcile's.
	h.header = abi.AppendHeader(nil, &abi.Header{Type: abi.EventAdd})
	h.inEvent = true
	rc := p.runReconcile(ReconcileFunc(func(context.Context, Request) (Result, error) { return Result{}, nil }), int32(len(h.header)))
	if rc != abi.ResultError || !strings.Contains(h.errMsg, "want reconcile") {
		t.Fatalf("rc %d %q", rc, h.errMsg)
	}
}

func TestReconcilePanic(t *testing.T) {
	h := &ctlHost{}
	rc := h.reconcile(ReconcileFunc(func(context.Context, Request) (Result, error) {
		var m map[string]int
		m["x"] = 1
		return Result{}, nil
	}), 0, `{}`)
	if rc != abi.ResultError || !strings.Contains(h.errMsg, "panic in Reconcile: assignment to entry in nil map (") {
		t.Fatalf("rc %d %q", rc, h.errMsg)
	}
}

func TestObjAndApply(t *testing.T) {
	at := time.Date(2026, 3, 1, 12, 30, 15, 999, time.FixedZone("CET", 3600))
	o := NewObj("v1", "ConfigMap", "dst", "copy").Label("copy.example.com/source", "src.a").
		Annotate("example.com/at", "x").Set("data.key", "v").Set(`data["a.b"]`, "w").Set("metadata.labels.team", "x").
		Set("status.seen", at)
	b, err := Apply(o)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"apiVersion":"v1","data":{"a.b":"w","key":"v"},"kind":"ConfigMap","metadata":{"annotations":{"example.com/at":"x"},` +
		`"labels":{"copy.example.com/source":"src.a","team":"x"},"name":"copy","namespace":"dst"},"status":{"seen":"2026-03-01T11:30:15Z"}}`
	if string(b) != want {
		t.Fatalf("got  %s\nwant %s", b, want)
	}
	type meta struct {
		Name string `json:"name"`
	}
	typed := struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
		Metadata   meta   `json:"metadata"`
	}{"batch/v1", "Job", meta{"j"}}
	if _, err := Apply(typed); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		obj  any
		want string
	}{
		{map[string]any{"kind": "Job"}, "has no apiVersion"},
		{map[string]any{"apiVersion": "v1"}, "has no kind"},
		{[]int{1}, "not a JSON object"},
		{map[string]any{"x": func() {}}, "does not marshal"},
	} {
		if _, err := Apply(c.obj); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Apply(%v): %v, want %q", c.obj, err, c.want)
		}
	}
	func() {
		defer func() {
			if r := recover(); r == nil || !strings.Contains(r.(string), "cannot be set") {
				t.Errorf("Set with an index: %v", r)
			}
		}()
		o.Set("spec.containers[0].image", "x")
	}()
}

func TestSetCondition(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	s := &Status{}
	if !s.SetCondition(Condition{Type: "Ready", Status: ConditionFalse, Reason: "Waiting", LastTransitionTime: t0}) {
		t.Fatal("a new condition is a change")
	}
	// The same status: the transition time stays (meta.SetStatusCondition).
	if !s.SetCondition(Condition{Type: "Ready", Status: ConditionFalse, Reason: "StillWaiting"}) {
		t.Fatal("a new reason is a change")
	}
	if c, _ := s.Condition("Ready"); !c.LastTransitionTime.Equal(t0) || c.Reason != "StillWaiting" {
		t.Fatalf("%+v", c)
	}
	if s.SetCondition(Condition{Type: "Ready", Status: ConditionFalse, Reason: "StillWaiting"}) {
		t.Fatal("the same condition again is no change")
	}
	// Another status: a transition, the time left to the host.
	s.SetCondition(Condition{Type: "Ready", Status: ConditionTrue, Reason: "Done"})
	s.SetCondition(Condition{Type: "Degraded", Status: ConditionFalse})
	s.Set("conditions", "ignored").Set("lastScheduleTime", t0)
	b, err := s.JSON()
	if err != nil {
		t.Fatal(err)
	}
	want := `{"conditions":[{"type":"Ready","status":"True","reason":"Done"},{"type":"Degraded","status":"False"}],"lastScheduleTime":"2026-01-01T00:00:00Z"}`
	if string(b) != want {
		t.Fatalf("got  %s\nwant %s", b, want)
	}
	var back Condition
	if err := json.Unmarshal([]byte(`{"type":"Ready","status":"True","lastTransitionTime":"2026-01-01T00:00:00Z","observedGeneration":3}`), &back); err != nil ||
		!back.LastTransitionTime.Equal(t0) || back.ObservedGeneration != 3 {
		t.Fatalf("%+v %v", back, err)
	}
}

func TestParseFailures(t *testing.T) {
	got := parseFailures("ConfigMap dst/a: ERR_CONFLICT: x\nsomething else\n", 3)
	want := []ChildFailure{
		{Kind: "ConfigMap", Namespace: "dst", Name: "a", Message: "ERR_CONFLICT: x"},
		{Message: "something else"},
		{Message: "failed (the host's message named fewer children)"},
	}
	if len(got) != len(want) {
		t.Fatalf("%+v", got)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("%d: %+v, want %+v", i, got[i], want[i])
		}
	}
}
