package controllerwrites

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	k8stypes "k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	dynfake "k8s.io/client-go/dynamic/fake"

	"github.com/informer-host/informer-host/abi"
	"github.com/informer-host/informer-host/internal/kubewrite"
)

func TestPluginLabel(t *testing.T) {
	long := strings.Repeat("a", 80)
	for _, tc := range []struct{ in, want string }{
		{"copy.wasm", "copy-wasm"},
		{"CronJob_Ctl.wasm", "cronjob-ctl-wasm"},
		{"...", "plugin"},
		{long + "1.wasm", ""}, // checked below: bounded, valid, distinct
	} {
		got := PluginLabel(tc.in)
		if tc.want != "" && got != tc.want {
			t.Errorf("PluginLabel(%q) = %q, want %q", tc.in, got, tc.want)
		}
		if errs := validation.IsDNS1123Label(got); len(errs) > 0 {
			t.Errorf("PluginLabel(%q) = %q is no DNS label: %v", tc.in, got, errs)
		}
		if errs := validation.IsValidLabelValue(got); len(errs) > 0 {
			t.Errorf("PluginLabel(%q) = %q is no label value: %v", tc.in, got, errs)
		}
		if errs := validation.IsQualifiedName(RequeueAnnotation(tc.in)); len(errs) > 0 {
			t.Errorf("RequeueAnnotation(%q) = %q is no annotation key: %v", tc.in, RequeueAnnotation(tc.in), errs)
		}
	}
	if a, b := PluginLabel(long+"1.wasm"), PluginLabel(long+"2.wasm"); a == b {
		t.Errorf("two long names share the label %q", a)
	}
}

func TestOwnerRoundTrip(t *testing.T) {
	for _, o := range []Owner{
		{Resource: widgets.GVR.GroupResource(), Namespace: "ns", Name: "w", UID: "u1"},
		{Resource: configmaps.GVR.GroupResource(), Namespace: "ns", Name: "c", UID: "u2"},
		{Resource: clusterWs.GVR.GroupResource(), Name: "cw", UID: "u3"},
	} {
		got, ok := ParseOwner(o.String())
		if !ok || got != o {
			t.Errorf("ParseOwner(%q) = %+v, %v; want %+v", o.String(), got, ok, o)
		}
		keys, _ := OwnerIndexFunc(&unstructured.Unstructured{Object: map[string]any{
			"metadata": map[string]any{"annotations": map[string]any{AnnotationOwner: o.String()}}}})
		if len(keys) != 1 || keys[0] != o.IndexKey() {
			t.Errorf("OwnerIndexFunc = %q, want [%q]", keys, o.IndexKey())
		}
	}
	for _, bad := range []string{"", "a/b/c", "widgets.example.com//" + "/u", "a/b/c/d/e"} {
		if _, ok := ParseOwner(bad); ok {
			t.Errorf("ParseOwner(%q) accepted", bad)
		}
	}
}

const primaryJSON = `{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"p","namespace":"ns","uid":"uid-p","generation":3}}`

// Whatever is wrong with the set, the call fails as a whole, naming the
// child and what to do, and writes nothing.
func TestApplyChildrenRefusesBadSets(t *testing.T) {
	cm := func(extra string) string {
		return `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c"` + extra + `}}`
	}
	for _, tc := range []struct {
		name, children string
		owns           []Resource
		deny           string
		code           int32
		msg            string
	}{
		{"not an array", `{"a":1}`, nil, "", abi.ErrInvalid, "one JSON array"},
		{"trailing data", `[] []`, nil, "", abi.ErrInvalid, "one JSON array"},
		{"not an object", `[1]`, nil, "", abi.ErrInvalid, "child 0 is not a JSON object"},
		{"no name", `[{"apiVersion":"v1","kind":"ConfigMap","metadata":{}}]`, nil, "", abi.ErrInvalid, "child 0 needs metadata.name"},
		{"no kind nor apiVersion", `[{"metadata":{"name":"x"}}]`, nil, "", abi.ErrInvalid, "needs apiVersion and kind"},
		{"not owned", `[` + cm("") + `,{"apiVersion":"v1","kind":"Secret","metadata":{"name":"s"}}]`, nil, "", abi.ErrDenied,
			"child 1 (Secret s): v1 Secret is not among the controller's owned resources (configmaps = v1 ConfigMap): add its resource to controller.owns"},
		{"other version", `[{"apiVersion":"v2","kind":"ConfigMap","metadata":{"name":"c"}}]`, nil, "", abi.ErrDenied, "not among"},
		{"outside the grant", `[` + cm(`,"namespace":"elsewhere"`) + `]`, nil, "elsewhere", abi.ErrDenied, "child 0 (ConfigMap elsewhere/c): no grant"},
		{"duplicate", `[` + cm("") + `,` + cm(`,"namespace":"ns"`) + `]`, nil, "", abi.ErrInvalid, "children 0 and 1 are the same object"},
		{"controller reference", `[` + cm(`,"ownerReferences":[{"apiVersion":"v1","kind":"X","name":"x","uid":"u","controller":true}]`) + `]`, nil, "", abi.ErrInvalid, "has a controller ownerReference"},
		{"cluster-scoped with a namespace", `[{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"n","namespace":"ns"}}]`, []Resource{namespaces}, "", abi.ErrInvalid, "Namespace is cluster-scoped: remove metadata.namespace"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := &fakeWrites{deny: func(r *kubewrite.Request) string {
				if tc.deny != "" && r.Namespace == tc.deny {
					return "no grant"
				}
				return ""
			}}
			owns := tc.owns
			if owns == nil {
				owns = []Resource{configmaps}
			}
			w := New(Options{Plugin: "p.wasm", Writes: f, Primary: widgets, Owns: owns})
			failed, err := w.ApplyChildren(context.Background(), Key{"ns", "p"}, obj(primaryJSON), []byte(tc.children))
			if Code(err) != tc.code || !strings.Contains(fmt.Sprint(err), tc.msg) {
				t.Fatalf("err = %s %v, want %s containing %q", abi.ErrorName(Code(err)), err, abi.ErrorName(tc.code), tc.msg)
			}
			if len(failed) > 0 || len(f.reqs) > 0 {
				t.Fatalf("wrote %d requests (%d failed) for a refused set", len(f.reqs), len(failed))
			}
		})
	}
}

// A cluster-scoped primary cannot default a namespaced child's namespace.
func TestApplyChildrenClusterPrimaryNeedsNamespace(t *testing.T) {
	w := New(Options{Plugin: "p.wasm", Writes: &fakeWrites{}, Primary: clusterWs, Owns: []Resource{configmaps}})
	_, err := w.ApplyChildren(context.Background(), Key{"", "cw"}, obj(`{"apiVersion":"example.com/v1","kind":"ClusterWidget","metadata":{"name":"cw","uid":"u"}}`),
		[]byte(`[{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c"}}]`))
	if Code(err) != abi.ErrInvalid || !strings.Contains(err.Error(), "needs metadata.namespace") {
		t.Fatalf("err = %v", err)
	}
}

// The ownerReference goes where Kubernetes accepts it, and only there;
// the label and the annotation go everywhere; a namespace defaults to
// the primary's; the apply forces, as the plugin's request.
func TestApplyChildrenDecorates(t *testing.T) {
	for _, tc := range []struct {
		name     string
		primary  Resource
		key      Key
		pobj     string
		child    string
		owns     Resource
		wantNS   string
		wantRefs bool
	}{
		{"same namespace, defaulted", widgets, Key{"ns", "p"}, primaryJSON, `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c"},"data":{"n":"1"}}`, configmaps, "ns", true},
		{"other namespace", widgets, Key{"ns", "p"}, primaryJSON, `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c","namespace":"dst"}}`, configmaps, "dst", false},
		{"cluster-scoped child of a namespaced primary", widgets, Key{"ns", "p"}, primaryJSON, `{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"n"}}`, namespaces, "", false},
		{"cluster-scoped primary", clusterWs, Key{"", "cw"}, `{"apiVersion":"example.com/v1","kind":"ClusterWidget","metadata":{"name":"cw","uid":"uid-p"}}`,
			`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c","namespace":"any"}}`, configmaps, "any", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := &fakeWrites{}
			w := New(Options{Plugin: "My.wasm", Writes: f, Primary: tc.primary, Owns: []Resource{tc.owns}})
			failed, err := w.ApplyChildren(context.Background(), tc.key, obj(tc.pobj), []byte("["+tc.child+"]"))
			if err != nil || len(failed) > 0 {
				t.Fatal(err, failed)
			}
			applies := f.requests(abi.WriteApply)
			if len(applies) != 1 {
				t.Fatalf("%d applies", len(applies))
			}
			r := applies[0]
			if r.Namespace != tc.wantNS || r.Resource != tc.owns.Name || !r.Force || r.Name == "" {
				t.Fatalf("request %+v", r)
			}
			u := &unstructured.Unstructured{Object: body(r)}
			if u.GetNamespace() != tc.wantNS {
				t.Errorf("body namespace %q, want %q", u.GetNamespace(), tc.wantNS)
			}
			if got := u.GetLabels()[LabelPlugin]; got != "my-wasm" {
				t.Errorf("label %q", got)
			}
			want := Owner{Resource: tc.primary.GVR.GroupResource(), Namespace: tc.key.Namespace, Name: tc.key.Name, UID: "uid-p"}.String()
			if got := u.GetAnnotations()[AnnotationOwner]; got != want {
				t.Errorf("owner annotation %q, want %q", got, want)
			}
			refs := u.GetOwnerReferences()
			if !tc.wantRefs {
				if len(refs) != 0 {
					t.Errorf("ownerReferences %+v where Kubernetes allows none", refs)
				}
				return
			}
			if len(refs) != 1 || refs[0].UID != "uid-p" || refs[0].Name != tc.key.Name || refs[0].Kind != tc.primary.Kind ||
				refs[0].Controller == nil || !*refs[0].Controller || refs[0].BlockOwnerDeletion == nil || !*refs[0].BlockOwnerDeletion {
				t.Errorf("ownerReferences %+v", refs)
			}
		})
	}
}

// child returns a cached child as the host would have applied it.
func cachedChild(kind, ns, name, uid, plugin, owner string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetAPIVersion("v1")
	u.SetKind(kind)
	u.SetNamespace(ns)
	u.SetName(name)
	u.SetUID(k8stypes.UID(uid))
	u.SetLabels(map[string]string{LabelPlugin: PluginLabel(plugin)})
	u.SetAnnotations(map[string]string{AnnotationOwner: owner})
	return u
}

// Prune deletes exactly the plugin's children of this primary key that
// are not wanted (those of an earlier primary of the same name too),
// with the cached uid as precondition; a failure is reported per child
// and does not stop the rest; absent or replaced children are no failure.
func TestApplyChildrenPrunes(t *testing.T) {
	gr := widgets.GVR.GroupResource()
	mine := Owner{Resource: gr, Namespace: "ns", Name: "p", UID: "uid-p"}.String()
	older := Owner{Resource: gr, Namespace: "ns", Name: "p", UID: "uid-old"}.String()
	other := Owner{Resource: gr, Namespace: "ns", Name: "q", UID: "uid-q"}.String()
	cache := []*unstructured.Unstructured{
		cachedChild("ConfigMap", "ns", "keep", "u1", "p.wasm", mine),
		cachedChild("ConfigMap", "ns", "stale", "u2", "p.wasm", mine),
		cachedChild("ConfigMap", "dst", "stale-cross", "u3", "p.wasm", mine),
		cachedChild("ConfigMap", "ns", "of-old-primary", "u4", "p.wasm", older),
		cachedChild("ConfigMap", "ns", "other-primary", "u5", "p.wasm", other),
		cachedChild("ConfigMap", "ns", "other-plugin", "u6", "q.wasm", mine),
		cachedChild("ConfigMap", "ns", "fails", "u7", "p.wasm", mine),
		cachedChild("ConfigMap", "ns", "gone", "u8", "p.wasm", mine),
		cachedChild("ConfigMap", "ns", "replaced", "u9", "p.wasm", mine),
	}
	f := &fakeWrites{answer: func(r *kubewrite.Request) (int32, string) {
		switch r.Name {
		case "fails", "new-fails":
			return abi.ErrForbidden, "forbidden by RBAC"
		case "gone":
			return abi.ErrAbsent, "not found"
		case "replaced":
			return abi.ErrConflict, "uid precondition"
		}
		return 0, ""
	}}
	// A lister that answers with everything: the Writer filters.
	w := New(Options{Plugin: "p.wasm", Writes: f, Primary: widgets, Owns: []Resource{configmaps},
		Owned: listerFunc(func(res, owner string) []*unstructured.Unstructured { return cache })})
	failed, err := w.ApplyChildren(context.Background(), Key{"ns", "p"}, obj(primaryJSON), []byte(
		`[{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"keep"}},{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"new-fails"}},{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"new"}}]`))
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, f := range failed {
		lines = append(lines, fmt.Sprintf("%s %s", f, abi.ErrorName(f.Code)))
	}
	want := []string{"ConfigMap ns/new-fails: forbidden by RBAC ERR_FORBIDDEN", "ConfigMap ns/fails: prune: forbidden by RBAC ERR_FORBIDDEN"}
	if fmt.Sprint(lines) != fmt.Sprint(want) {
		t.Errorf("failures:\n%s\nwant\n%s", strings.Join(lines, "\n"), strings.Join(want, "\n"))
	}
	if n := len(f.requests(abi.WriteApply)); n != 3 {
		t.Errorf("%d applies, want 3 (a failure stops no other child)", n)
	}
	var deleted []string
	for _, r := range f.requests(abi.WriteDelete) {
		deleted = append(deleted, r.Namespace+"/"+r.Name+"@"+r.UID)
	}
	wantDel := []string{"ns/stale@u2", "dst/stale-cross@u3", "ns/of-old-primary@u4", "ns/fails@u7", "ns/gone@u8", "ns/replaced@u9"}
	if fmt.Sprint(deleted) != fmt.Sprint(wantDel) {
		t.Errorf("deleted %q, want %q", deleted, wantDel)
	}

	// Absent: an empty set prunes every child of the key; a set is refused.
	f.reqs = nil
	if _, err := w.ApplyChildren(context.Background(), Key{"ns", "p"}, nil, []byte(`[{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"keep"}}]`)); Code(err) != abi.ErrAbsent {
		t.Errorf("children of an absent primary: %v, want ERR_ABSENT", err)
	}
	if len(f.reqs) != 0 {
		t.Errorf("wrote %d requests for a refused set", len(f.reqs))
	}
	if _, err := w.ApplyChildren(context.Background(), Key{"ns", "p"}, nil, []byte(`[]`)); err != nil {
		t.Fatal(err)
	}
	if n := len(f.requests(abi.WriteDelete)); n != 7 {
		t.Errorf("absent primary: %d deletes, want 7 (every child of p.wasm for ns/p)", n)
	}
}

// A canceled call stops at once with ERR_CANCELED.
func TestApplyChildrenCanceled(t *testing.T) {
	f := &fakeWrites{answer: func(*kubewrite.Request) (int32, string) { return abi.ErrCanceled, "stopped" }}
	w := New(Options{Plugin: "p.wasm", Writes: f, Primary: widgets, Owns: []Resource{configmaps}})
	_, err := w.ApplyChildren(context.Background(), Key{"ns", "p"}, obj(primaryJSON), []byte(
		`[{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a"}},{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"b"}}]`))
	if Code(err) != abi.ErrCanceled || len(f.reqs) != 1 {
		t.Fatalf("err %v after %d requests", err, len(f.reqs))
	}
}

func TestApplyStatusValidates(t *testing.T) {
	for _, tc := range []struct{ status, msg string }{
		{`[]`, "must be one JSON object"},
		{`{"conditions":{}}`, "conditions must be a JSON array"},
		{`{"conditions":[1]}`, "condition 0 is not a JSON object"},
		{`{"conditions":[{"status":"True","reason":"R"}]}`, "condition 0 needs a type"},
		{`{"conditions":[{"type":"bad type","status":"True","reason":"R"}]}`, "is not a qualified name"},
		{`{"conditions":[{"type":"Ready","status":"true","reason":"R"}]}`, `status "true" must be True, False or Unknown`},
		{`{"conditions":[{"type":"Ready","status":"True","reason":"not camel"}]}`, "must be a CamelCase word"},
		{`{"conditions":[{"type":"Ready","status":"True","reason":"R"},{"type":"Ready","status":"False","reason":"R"}]}`, `"Ready" is given twice`},
	} {
		f := &fakeWrites{}
		w := New(Options{Plugin: "p.wasm", Writes: f, Primary: widgets})
		err := w.ApplyStatus(context.Background(), obj(primaryJSON), []byte(tc.status))
		if Code(err) != abi.ErrInvalid || !strings.Contains(fmt.Sprint(err), tc.msg) {
			t.Errorf("%s: %v, want ERR_INVALID with %q", tc.status, err, tc.msg)
		}
		if len(f.reqs) > 0 {
			t.Errorf("%s: written", tc.status)
		}
	}
	w := New(Options{Plugin: "p.wasm", Writes: &fakeWrites{}, Primary: widgets})
	if err := w.ApplyStatus(context.Background(), nil, []byte(`{}`)); Code(err) != abi.ErrAbsent {
		t.Errorf("absent primary: %v", err)
	}
}

// The body is the status subresource's apply: apiVersion, kind, name
// and namespace, the plugin's fields; each condition with the primary's
// generation and a lastTransitionTime kept while its status holds.
func TestApplyStatusConditions(t *testing.T) {
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	now := t0.Add(time.Hour)
	p := obj(primaryJSON)
	p.Object["spec"] = map[string]any{"x": "y"}
	p.Object["status"] = map[string]any{"conditions": []any{
		map[string]any{"type": "Ready", "status": "True", "reason": "Old", "message": "", "lastTransitionTime": t0.Format(time.RFC3339)},
		map[string]any{"type": "Synced", "status": "True", "reason": "Old", "message": "", "lastTransitionTime": t0.Format(time.RFC3339)},
	}}
	f := &fakeWrites{}
	w := New(Options{Plugin: "p.wasm", Writes: f, Primary: widgets, Now: func() time.Time { return now.Add(300 * time.Millisecond) }})
	err := w.ApplyStatus(context.Background(), p, []byte(`{"phase":"Running","big":12345678901234567,"conditions":[
		{"type":"Ready","status":"True","reason":"Same","message":"still"},
		{"type":"Synced","status":"False","reason":"Broke","lastTransitionTime":"2000-01-01T00:00:00Z","observedGeneration":99},
		{"type":"New","status":"Unknown","reason":"First"},
		{"type":"Bare","status":"True"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	rs := f.requests(abi.WriteApply)
	if len(rs) != 1 || rs[0].Sub != "status" || !rs[0].Force || rs[0].Resource != "widgets" || rs[0].Namespace != "ns" || rs[0].Name != "p" {
		t.Fatalf("requests %+v", rs)
	}
	if !strings.Contains(string(rs[0].Body), "12345678901234567") {
		t.Errorf("an int64 lost its digits: %s", rs[0].Body)
	}
	b := body(rs[0])
	if b["apiVersion"] != "example.com/v1" || b["kind"] != "Widget" || b["spec"] != nil {
		t.Errorf("body %v", b)
	}
	if md := b["metadata"].(map[string]any); len(md) != 2 || md["name"] != "p" || md["namespace"] != "ns" {
		t.Errorf("metadata %v", md)
	}
	st := b["status"].(map[string]any)
	if st["phase"] != "Running" {
		t.Errorf("status %v", st)
	}
	var conds []metav1.Condition
	for _, c := range st["conditions"].([]any) {
		var mc metav1.Condition
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(c.(map[string]any), &mc); err != nil {
			t.Fatal(err)
		}
		conds = append(conds, mc)
	}
	want := []metav1.Condition{
		{Type: "Ready", Status: "True", Reason: "Same", Message: "still", ObservedGeneration: 3, LastTransitionTime: metav1.NewTime(t0)},
		{Type: "Synced", Status: "False", Reason: "Broke", ObservedGeneration: 3, LastTransitionTime: metav1.NewTime(now)},
		{Type: "New", Status: "Unknown", Reason: "First", ObservedGeneration: 3, LastTransitionTime: metav1.NewTime(now)},
		{Type: "Bare", Status: "True", ObservedGeneration: 3, LastTransitionTime: metav1.NewTime(now)},
	}
	if bare := st["conditions"].([]any)[3].(map[string]any); bare["reason"] != nil {
		t.Errorf("a condition without a reason went with one: %v", bare)
	}
	if len(conds) != len(want) {
		t.Fatalf("conditions %+v", conds)
	}
	for i := range want {
		if !conds[i].LastTransitionTime.Equal(&want[i].LastTransitionTime) {
			t.Errorf("%s: lastTransitionTime %v, want %v", want[i].Type, conds[i].LastTransitionTime, want[i].LastTransitionTime)
		}
		conds[i].LastTransitionTime = want[i].LastTransitionTime
		if conds[i] != want[i] {
			t.Errorf("condition %+v, want %+v", conds[i], want[i])
		}
	}
}

// The finalizer patches: an append conditional on uid and
// resourceVersion; on a conflict a fresh read and another try; nothing
// on an object that has it or is deleting; the removal tests the index.
func TestFinalizerPatches(t *testing.T) {
	p := obj(`{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"p","namespace":"ns","uid":"uid-p","resourceVersion":"1","finalizers":["a.example.com/x"]}}`)
	live := p.DeepCopy()
	live.SetResourceVersion("2")
	live.SetFinalizers([]string{"b.example.com/y", "a.example.com/x"})
	client := dynfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{widgets.GVR: "WidgetList"}, live)
	calls := 0
	f := &fakeWrites{answer: func(r *kubewrite.Request) (int32, string) {
		calls++
		if calls == 1 {
			return abi.ErrConflict, "the object has been modified"
		}
		return 0, ""
	}}
	w := New(Options{Plugin: "p.wasm", Writes: f, Client: client, Primary: widgets, Finalizer: "example.com/mine"})
	added, err := w.EnsureFinalizer(context.Background(), p)
	if err != nil || !added {
		t.Fatal(added, err)
	}
	rs := f.requests(abi.WriteJSONPatch)
	if len(rs) != 2 || rs[0].ResourceVersion != "1" || rs[1].ResourceVersion != "2" || rs[1].UID != "uid-p" ||
		string(rs[1].Body) != `[{"op":"add","path":"/metadata/finalizers/-","value":"example.com/mine"}]` {
		t.Fatalf("patches %+v", rs)
	}

	f.reqs, calls = nil, 1
	bare := p.DeepCopy()
	bare.SetFinalizers(nil)
	if added, err := w.EnsureFinalizer(context.Background(), bare); !added || err != nil {
		t.Fatal(added, err)
	}
	if rs := f.requests(abi.WriteJSONPatch); string(rs[0].Body) != `[{"op":"add","path":"/metadata/finalizers","value":["example.com/mine"]}]` || rs[0].ResourceVersion != "1" {
		t.Fatalf("patch of an object without finalizers: %s", rs[0].Body)
	}

	f.reqs = nil
	has := p.DeepCopy()
	has.SetFinalizers([]string{"example.com/mine"})
	deleting := p.DeepCopy()
	deleting.SetDeletionTimestamp(&metav1.Time{Time: time.Now()})
	for _, o := range []*unstructured.Unstructured{has, deleting, nil} {
		if added, err := w.EnsureFinalizer(context.Background(), o); added || err != nil {
			t.Fatal(added, err)
		}
	}
	if len(f.reqs) != 0 {
		t.Fatalf("patched an object that has the finalizer or is deleting: %+v", f.reqs)
	}

	// Removal: the cached object has it at index 1; the first patch fails
	// (the list moved), the fresh read has it at index 0.
	live.SetFinalizers([]string{"example.com/mine", "b.example.com/y"})
	client = dynfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{widgets.GVR: "WidgetList"}, live)
	f = &fakeWrites{answer: func(r *kubewrite.Request) (int32, string) {
		if strings.Contains(string(r.Body), "/1") {
			return abi.ErrUnprocessable, "test failed"
		}
		return 0, ""
	}}
	w = New(Options{Plugin: "p.wasm", Writes: f, Client: client, Primary: widgets, Finalizer: "example.com/mine"})
	cached := p.DeepCopy()
	cached.SetFinalizers([]string{"a.example.com/x", "example.com/mine"})
	if err := w.RemoveFinalizer(context.Background(), cached); err != nil {
		t.Fatal(err)
	}
	rs = f.requests(abi.WriteJSONPatch)
	if len(rs) != 2 || string(rs[1].Body) != `[{"op":"test","path":"/metadata/finalizers/0","value":"example.com/mine"},{"op":"remove","path":"/metadata/finalizers/0"}]` || rs[1].UID != "uid-p" {
		t.Fatalf("patches %+v", rs)
	}

	// A conflict that never ends is reported after a bounded number of tries.
	f = &fakeWrites{answer: func(*kubewrite.Request) (int32, string) { return abi.ErrConflict, "modified" }}
	w = New(Options{Plugin: "p.wasm", Writes: f, Client: client, Primary: widgets, Finalizer: "example.com/mine"})
	if err := w.RemoveFinalizer(context.Background(), cached); Code(err) != abi.ErrConflict {
		t.Fatalf("err %v", err)
	}
	if len(f.reqs) != finalizerAttempts {
		t.Fatalf("%d tries, want %d", len(f.reqs), finalizerAttempts)
	}
}

func TestPersistRequeue(t *testing.T) {
	f := &fakeWrites{}
	w := New(Options{Plugin: "p.wasm", Writes: f, Primary: widgets})
	p := obj(primaryJSON)
	due := time.Date(2026, 5, 6, 7, 8, 9, 1, time.UTC) // rounded up to :10
	if err := w.PersistRequeue(context.Background(), p, due); err != nil {
		t.Fatal(err)
	}
	rs := f.requests(abi.WriteMergePatch)
	if len(rs) != 1 || rs[0].UID != "uid-p" || string(rs[0].Body) != `{"metadata":{"annotations":{"controller.informer-host.io/requeue-at.p-wasm":"2026-05-06T07:08:10Z"}}}` {
		t.Fatalf("patches %+v", rs)
	}
	p.SetAnnotations(map[string]string{RequeueAnnotation("p.wasm"): "2026-05-06T07:08:10Z"})
	if at, ok := RequeueAt(p, "p.wasm"); !ok || !at.Equal(due.Truncate(time.Second).Add(time.Second)) {
		t.Fatalf("RequeueAt = %v, %v", at, ok)
	}
	if _, ok := RequeueAt(p, "other.wasm"); ok {
		t.Fatal("another plugin's time read back")
	}
	f.reqs = nil
	if err := w.PersistRequeue(context.Background(), p, due.Add(500*time.Millisecond)); err != nil || len(f.reqs) != 0 {
		t.Fatalf("rewrote an unchanged time: %v %+v", err, f.reqs)
	}
	if err := w.PersistRequeue(context.Background(), p, time.Time{}); err != nil {
		t.Fatal(err)
	}
	if rs := f.requests(abi.WriteMergePatch); len(rs) != 1 || string(rs[0].Body) != `{"metadata":{"annotations":{"controller.informer-host.io/requeue-at.p-wasm":null}}}` {
		t.Fatalf("clear: %+v", rs)
	}
	f.reqs = nil
	p.SetAnnotations(nil)
	if err := w.PersistRequeue(context.Background(), p, time.Time{}); err != nil || len(f.reqs) != 0 {
		t.Fatalf("cleared a time that is not there: %v %+v", err, f.reqs)
	}
	f.answer = func(*kubewrite.Request) (int32, string) { return abi.ErrAbsent, "gone" }
	if err := w.PersistRequeue(context.Background(), p, due); err != nil {
		t.Fatalf("a gone primary needs no timer: %v", err)
	}
	f.answer = func(*kubewrite.Request) (int32, string) { return abi.ErrForbidden, "no patch" }
	if err := w.PersistRequeue(context.Background(), p, due); Code(err) != abi.ErrForbidden {
		t.Fatalf("err %v", err)
	}
}

func TestOnlyHostMetadataChanged(t *testing.T) {
	base := `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"p","namespace":"ns","resourceVersion":"1","finalizers":["o.example.com/f"],"annotations":{"a":"b"}},"data":{"k":"v"}}`
	ann := RequeueAnnotation("p.wasm")
	for _, tc := range []struct {
		name string
		edit func(u *unstructured.Unstructured)
		want bool
	}{
		{"resync", func(u *unstructured.Unstructured) {}, false},
		{"requeue annotation", func(u *unstructured.Unstructured) {
			u.SetResourceVersion("2")
			u.SetAnnotations(map[string]string{"a": "b", ann: "2026-01-01T00:00:00Z"})
		}, true},
		{"the plugin's finalizer and managedFields", func(u *unstructured.Unstructured) {
			u.SetResourceVersion("2")
			u.SetFinalizers([]string{"o.example.com/f", "example.com/mine"})
			u.SetManagedFields([]metav1.ManagedFieldsEntry{{Manager: "informer-host/p.wasm"}})
		}, true},
		{"another plugin's annotation", func(u *unstructured.Unstructured) {
			u.SetResourceVersion("2")
			u.SetAnnotations(map[string]string{"a": "b", RequeueAnnotation("q.wasm"): "x"})
		}, false},
		{"another finalizer", func(u *unstructured.Unstructured) {
			u.SetResourceVersion("2")
			u.SetFinalizers(nil)
		}, false},
		{"data", func(u *unstructured.Unstructured) {
			u.SetResourceVersion("2")
			u.Object["data"] = map[string]any{"k": "w"}
		}, false},
		{"deletion", func(u *unstructured.Unstructured) {
			u.SetResourceVersion("2")
			u.SetDeletionTimestamp(&metav1.Time{Time: time.Now()})
		}, false},
	} {
		old, new := obj(base), obj(base)
		tc.edit(new)
		if got := OnlyHostMetadataChanged(old, new, "p.wasm", "example.com/mine"); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
		if got := OnlyHostMetadataChanged(new, old, "p.wasm", "example.com/mine"); got != tc.want {
			t.Errorf("%s, reversed: %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestCode(t *testing.T) {
	for err, want := range map[error]int32{
		nil:                       0,
		&Error{abi.ErrDenied, ""}: abi.ErrDenied,
		fmt.Errorf("x: %w", &Error{abi.ErrConflict, ""}): abi.ErrConflict,
		context.Canceled:         abi.ErrCanceled,
		context.DeadlineExceeded: abi.ErrTimeout,
		fmt.Errorf("other"):      abi.ErrUnavailable,
	} {
		if got := Code(err); got != want {
			t.Errorf("Code(%v) = %s, want %s", err, abi.ErrorName(got), abi.ErrorName(want))
		}
	}
}
