package engine

import (
	"context"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/informer-host/informer-host/event"
)

// Each kit's reconciler through the real engine, not only its fake: the
// header and object it reads, the children_apply, status_apply and
// reconcile_requeue_after bodies it sends (the fakes could agree with a
// kit on a shape the engine does not take), a child's failure as the
// answer's message, and a status for an absent primary skipped.
func TestKitReconcile(t *testing.T) {
	e := newEngine(t, Options{})
	widgets := &event.ResourceRef{Name: "widgets", Group: "example.com", Version: "v1", Resource: "widgets", Kind: "Widget"}
	sts := &event.ResourceRef{Name: "statefulsets", Group: "apps", Version: "v1", Resource: "statefulsets", Kind: "StatefulSet"}
	widget := func(spec map[string]any) *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{"apiVersion": "example.com/v1", "kind": "Widget",
			"metadata": map[string]any{"namespace": "shop", "name": "w", "uid": "u1", "resourceVersion": "3"}, "spec": spec}}
	}
	for _, tc := range []struct {
		name, wasm       string
		res              *event.ResourceRef
		obj              *unstructured.Unstructured
		failed           int32
		msg              string
		code             Code
		message          string
		children, status string
		requeue          []time.Duration
	}{
		{name: "as", wasm: "kits/as-reconcile-plugin.wasm", res: widgets, obj: widget(map[string]any{"replicas": int64(2), "every": "30000"}), code: CodeOK,
			children: `[{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"w-0","labels":{"app":"wid\"get"}},"data":{"index":0}},{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"w-1","labels":{"app":"wid\"get"}},"data":{"index":1}}]`,
			status:   `{"replicas":2,"conditions":[{"type":"Ready","status":"True","reason":"Applied","message":"2 config maps"}]}`, requeue: []time.Duration{30 * time.Second}},
		{name: "as failed child", wasm: "kits/as-reconcile-plugin.wasm", res: widgets, obj: widget(map[string]any{"replicas": int64(1)}), failed: 1, msg: "ConfigMap shop/w-0: ERR_FORBIDDEN: no",
			code: CodeError, message: "children_apply: 1 of 1 children failed: ConfigMap shop/w-0: ERR_FORBIDDEN: no"},
		{name: "as absent", wasm: "kits/as-reconcile-plugin.wasm", res: widgets, code: CodeOK, children: `[]`, requeue: []time.Duration{0}},
		{name: "c", wasm: "kits/c-reconcile.wasm", res: widgets, obj: widget(nil), code: CodeOK,
			children: `[{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"w"}}]`,
			status:   `{"conditions":[{"type":"Ready","status":"True","reason":"Copied"}]}`, requeue: []time.Duration{time.Minute}},
		{name: "c absent", wasm: "kits/c-reconcile.wasm", res: widgets, code: CodeOK, children: `[]`, requeue: []time.Duration{0}},
		{name: "c failed child", wasm: "kits/c-reconcile.wasm", res: widgets, obj: widget(nil), failed: 1, msg: "ConfigMap shop/w: ERR_FORBIDDEN: no",
			code: CodeError, message: "children_apply: 1 children failed: ConfigMap shop/w: ERR_FORBIDDEN: no"},
		{name: "rust service-per-pod absent", wasm: "plugins/service-per-pod-rs.wasm", res: sts, code: CodeOK, children: `[]`, requeue: []time.Duration{0}},
		{name: "rust service-per-pod opted out", wasm: "plugins/service-per-pod-rs.wasm", res: sts, code: CodeOK, children: `[]`, requeue: []time.Duration{0},
			obj: &unstructured.Unstructured{Object: map[string]any{"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": map[string]any{"namespace": "web", "name": "nginx"}}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := e.Load(context.Background(), "k.wasm", kitExample(t, tc.wasm), Limits{CallTimeout: time.Minute, MemoryPages: 256})
			if err != nil {
				t.Fatal(err)
			}
			if !m.Reconciles() {
				t.Fatal("no ih_reconcile")
			}
			inst := instantiate(t, m, InstanceOptions{Writes: &fakeWriter{}})
			ns, name := "shop", "w"
			if tc.obj != nil {
				ns, name = tc.obj.GetNamespace(), tc.obj.GetName()
			}
			fc := &fakeController{failed: tc.failed, msg: tc.msg}
			r, err := inst.Reconcile(context.Background(), &ReconcileRequest{Env: NewReconcileEnvelope(tc.res, ns, name, tc.obj), Call: fc})
			if err != nil {
				t.Fatal(err)
			}
			if r.Code != tc.code || r.Message != tc.message {
				t.Fatalf("result %+v, want %v %q", r, tc.code, tc.message)
			}
			if tc.children != "" && (len(fc.children) != 1 || fc.children[0] != tc.children) {
				t.Errorf("children %q\nwant %q", fc.children, tc.children)
			}
			if tc.status != "" && (len(fc.status) != 1 || fc.status[0] != tc.status) {
				t.Errorf("status %q\nwant %q", fc.status, tc.status)
			}
			if len(fc.requeues) != len(tc.requeue) || (len(tc.requeue) == 1 && fc.requeues[0] != tc.requeue[0]) {
				t.Errorf("requeues %v, want %v", fc.requeues, tc.requeue)
			}
		})
	}
}
