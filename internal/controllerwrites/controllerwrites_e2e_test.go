package controllerwrites

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiext "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	k8stypes "k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/tools/cache"

	"github.com/informer-host/informer-host/internal/config"
	"github.com/informer-host/informer-host/internal/kubewrite"
	"github.com/informer-host/informer-host/internal/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) { os.Exit(testenv.Run(m, &env)) }

// The tests' primary: a namespaced CRD with a status subresource whose
// conditions are a map list keyed by type (as metav1.Condition's
// generated schemas are), so managers own conditions one by one.
const group = "cwrites.example.com"

var (
	e2eWidgets = Resource{Name: "widgets", GVR: schema.GroupVersionResource{Group: group, Version: "v1", Resource: "widgets"}, Kind: "Widget", Namespaced: true}
	crdOnce    sync.Once
	crdErr     error
)

func installCRD(t *testing.T) {
	t.Helper()
	env.Require(t)
	crdOnce.Do(func() { crdErr = createCRD() })
	if crdErr != nil {
		t.Fatal(crdErr)
	}
}

func createCRD() error {
	str := apiextv1.JSONSchemaProps{Type: "string"}
	cond := apiextv1.JSONSchemaProps{Type: "object", Required: []string{"type", "status", "lastTransitionTime", "reason", "message"},
		Properties: map[string]apiextv1.JSONSchemaProps{
			"type": str, "status": {Type: "string", Enum: []apiextv1.JSON{{Raw: []byte(`"True"`)}, {Raw: []byte(`"False"`)}, {Raw: []byte(`"Unknown"`)}}},
			"reason": str, "message": str, "lastTransitionTime": {Type: "string", Format: "date-time"},
			"observedGeneration": {Type: "integer", Format: "int64"},
		}}
	listType, keys := "map", []string{"type"}
	crds := apiext.NewForConfigOrDie(env.Config).ApiextensionsV1().CustomResourceDefinitions()
	_, err := crds.Create(context.Background(), testenv.WidgetCRD(group, apiextv1.CustomResourceDefinitionVersion{Name: "v1", Served: true, Storage: true,
		Subresources: &apiextv1.CustomResourceSubresources{Status: &apiextv1.CustomResourceSubresourceStatus{}},
		Schema: &apiextv1.CustomResourceValidation{OpenAPIV3Schema: &apiextv1.JSONSchemaProps{Type: "object",
			Properties: map[string]apiextv1.JSONSchemaProps{
				"spec": {Type: "object", XPreserveUnknownFields: new(true)},
				"status": {Type: "object", Properties: map[string]apiextv1.JSONSchemaProps{
					"phase": str, "other": str,
					"conditions": {Type: "array", XListType: &listType, XListMapKeys: keys, Items: &apiextv1.JSONSchemaPropsOrArray{Schema: &cond}},
				}},
			}}}}), metav1.CreateOptions{})
	if err != nil {
		return err
	}
	// The CRD's handler serves a moment after the CRD is created.
	dyn := dynamic.NewForConfigOrDie(env.Config)
	deadline := time.Now().Add(testenv.EventuallyTimeout)
	for {
		_, err := dyn.Resource(e2eWidgets.GVR).List(context.Background(), metav1.ListOptions{Limit: 1})
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("widgets not served: %w", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func admin() dynamic.Interface { return dynamic.NewForConfigOrDie(env.Config) }

func createWidget(t *testing.T, ns, name string, finalizers ...string) *unstructured.Unstructured {
	t.Helper()
	u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": group + "/v1", "kind": "Widget",
		"metadata": map[string]any{"name": name, "namespace": ns}, "spec": map[string]any{"n": int64(1)}}}
	u.SetFinalizers(finalizers)
	out, err := admin().Resource(e2eWidgets.GVR).Namespace(ns).Create(context.Background(), u, metav1.CreateOptions{FieldManager: "test"})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func get(t *testing.T, r Resource, ns, name string) (*unstructured.Unstructured, bool) {
	t.Helper()
	u, err := admin().Resource(r.GVR).Namespace(ns).Get(context.Background(), name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, false
	}
	if err != nil {
		t.Fatal(err)
	}
	return u, true
}

// ownedCache is the host's side of OwnedLister: an informer on
// configmaps, indexed by OwnerIndexFunc.
type ownedCache struct{ inf cache.SharedIndexInformer }

func (c *ownedCache) ListOwned(resource, owner string) []*unstructured.Unstructured {
	items, _ := c.inf.GetIndexer().ByIndex(OwnerIndex, owner)
	out := make([]*unstructured.Unstructured, 0, len(items))
	for _, it := range items {
		out = append(out, it.(*unstructured.Unstructured))
	}
	return out
}

// has reports whether the cache holds ns/name (want true) or not.
func (c *ownedCache) waitFor(t *testing.T, ns, name string, want bool) {
	t.Helper()
	testenv.Eventually(t, fmt.Sprintf("the cache to have %s/%s: %v", ns, name, want), func() bool {
		_, ok, _ := c.inf.GetStore().GetByKey(ns + "/" + name)
		return ok == want
	})
}

func startCache(t *testing.T) *ownedCache {
	t.Helper()
	inf := dynamicinformer.NewFilteredDynamicInformer(admin(), configmaps.GVR, metav1.NamespaceAll, 0,
		cache.Indexers{OwnerIndex: OwnerIndexFunc}, nil).Informer()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go inf.Run(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		t.Fatal("configmaps cache did not sync")
	}
	return &ownedCache{inf: inf}
}

// newWriter is a controller's Writer as the host builds it: over the
// plugin's kubewrite.Writer (its identity, budget, codes).
func newWriter(t *testing.T, plugin, finalizer string, owned OwnedLister, now func() time.Time) *Writer {
	t.Helper()
	return newWriterFor(t, plugin, e2eWidgets, finalizer, owned, now)
}

func newWriterFor(t *testing.T, plugin string, primary Resource, finalizer string, owned OwnedLister, now func() time.Time) *Writer {
	t.Helper()
	return newConfinedWriter(t, plugin, primary, finalizer, owned, now, "")
}

// newConfinedWriter is newWriterFor for a plugin confined to namespace
// ns ("": none), a tenant's.
func newConfinedWriter(t *testing.T, plugin string, primary Resource, finalizer string, owned OwnedLister, now func() time.Time, ns string) *Writer {
	t.Helper()
	kc, err := kubewrite.New(kubewrite.Options{Config: env.Config, Resolve: func(name string) (schema.GroupVersionResource, bool) {
		switch name {
		case "widgets":
			return e2eWidgets.GVR, true
		case "configmaps":
			return configmaps.GVR, true
		case "namespaces":
			return namespaces.GVR, true
		}
		return schema.GroupVersionResource{}, false
	}})
	if err != nil {
		t.Fatal(err)
	}
	verbs := []string{config.VerbCreate, config.VerbPatch, config.VerbApply, config.VerbDelete}
	kw, err := kc.For(kubewrite.PluginOptions{Plugin: plugin, Grant: config.WritesGrant{QPS: 1000, Burst: 1000, Resources: []config.WriteGrant{
		{Resource: "widgets", Verbs: verbs, Subresources: []string{"status"}},
		{Resource: "configmaps", Verbs: verbs},
	}}, Namespace: ns})
	if err != nil {
		t.Fatal(err)
	}
	return New(Options{Plugin: plugin, Writes: kw, Client: kw.Dynamic(), Primary: primary, Owns: []Resource{configmaps},
		Owned: owned, Finalizer: finalizer, Now: now})
}

func cm(ns, name string) string {
	md := map[string]any{"name": name}
	if ns != "" {
		md["namespace"] = ns
	}
	b, _ := json.Marshal(map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": md, "data": map[string]any{"from": name}})
	return string(b)
}

func set(children ...string) []byte { return []byte("[" + strings.Join(children, ",") + "]") }

func mustApply(t *testing.T, w *Writer, key Key, primary *unstructured.Unstructured, children []byte) {
	t.Helper()
	failed, err := w.ApplyChildren(context.Background(), key, primary, children)
	if err != nil || len(failed) > 0 {
		t.Fatalf("ApplyChildren %s: %v %v", keyString(key), err, failed)
	}
}

// Two calls for one primary: the second set drops a child in the
// primary's namespace and one in another namespace; both go, and
// nothing of another primary or another plugin is touched. The first
// call's children carry the bookkeeping, and the ownerReference only
// where Kubernetes allows it.
func TestE2EChildrenApplyAndPrune(t *testing.T) {
	installCRD(t)
	ns, dst := env.Namespace(t), env.Namespace(t)
	p1, p2 := createWidget(t, ns, "p1"), createWidget(t, ns, "p2")
	c := startCache(t)
	w := newWriter(t, "ctl.wasm", "", c, nil)
	other := newWriter(t, "other.wasm", "", c, nil)

	mustApply(t, w, Key{ns, "p1"}, p1, set(cm("", "a"), cm(ns, "b"), cm(dst, "x")))
	mustApply(t, other, Key{ns, "p1"}, p1, set(cm("", "d")))
	mustApply(t, w, Key{ns, "p2"}, p2, set(cm("", "c")))

	a, _ := get(t, configmaps, ns, "a")
	refs := a.GetOwnerReferences()
	if len(refs) != 1 || refs[0].UID != p1.GetUID() || refs[0].Kind != "Widget" || refs[0].APIVersion != group+"/v1" ||
		!*refs[0].Controller || !*refs[0].BlockOwnerDeletion {
		t.Fatalf("a's ownerReferences: %+v", refs)
	}
	if a.GetLabels()[LabelPlugin] != "ctl-wasm" || a.GetAnnotations()[AnnotationOwner] != "widgets."+group+"/"+ns+"/p1/"+string(p1.GetUID()) {
		t.Fatalf("a's bookkeeping: %v %v", a.GetLabels(), a.GetAnnotations())
	}
	if mf := a.GetManagedFields(); len(mf) != 1 || mf[0].Manager != "informer-host/ctl.wasm" || mf[0].Operation != metav1.ManagedFieldsOperationApply {
		t.Fatalf("a's managedFields: %+v", mf)
	}
	x, _ := get(t, configmaps, dst, "x")
	if len(x.GetOwnerReferences()) != 0 || x.GetAnnotations()[AnnotationOwner] == "" {
		t.Fatalf("cross-namespace x: ownerReferences %+v, annotations %v", x.GetOwnerReferences(), x.GetAnnotations())
	}

	for _, k := range [][2]string{{ns, "a"}, {ns, "b"}, {dst, "x"}, {ns, "c"}, {ns, "d"}} {
		c.waitFor(t, k[0], k[1], true)
	}
	mustApply(t, w, Key{ns, "p1"}, p1, set(cm("", "a")))
	for _, k := range [][2]string{{ns, "b"}, {dst, "x"}} {
		if _, ok := get(t, configmaps, k[0], k[1]); ok {
			t.Errorf("%s/%s, no longer wanted, was not pruned", k[0], k[1])
		}
	}
	for _, k := range [][2]string{{ns, "a"}, {ns, "c"}, {ns, "d"}} {
		if _, ok := get(t, configmaps, k[0], k[1]); !ok {
			t.Errorf("%s/%s was pruned: it is wanted, or another primary's, or another plugin's", k[0], k[1])
		}
	}
}

// A cluster-scoped primary (here a Namespace) may own children in any
// namespace: each gets the ownerReference, and pruning works across them.
func TestE2EClusterScopedPrimary(t *testing.T) {
	a, b := env.Namespace(t), env.Namespace(t)
	primary, ok := get(t, namespaces, "", a)
	if !ok {
		t.Fatal("no namespace", a)
	}
	c := startCache(t)
	w := newWriterFor(t, "ctl.wasm", namespaces, "", c, nil)
	mustApply(t, w, Key{"", a}, primary, set(cm(a, "x"), cm(b, "y")))
	for _, k := range [][2]string{{a, "x"}, {b, "y"}} {
		u, _ := get(t, configmaps, k[0], k[1])
		if refs := u.GetOwnerReferences(); len(refs) != 1 || refs[0].Kind != "Namespace" || refs[0].APIVersion != "v1" || refs[0].UID != primary.GetUID() {
			t.Fatalf("%s/%s ownerReferences %+v", k[0], k[1], refs)
		}
		c.waitFor(t, k[0], k[1], true)
	}
	mustApply(t, w, Key{"", a}, primary, set(cm(a, "x")))
	if _, ok := get(t, configmaps, b, "y"); ok {
		t.Fatal("y, no longer wanted, was not pruned")
	}
}

// The controller ownerReference is what Kubernetes' garbage collector
// follows: deleting the primary deletes its children in its namespace.
// The one across namespaces has none; PruneAll removes it.
func TestE2EGarbageCollectorAndPruneAll(t *testing.T) {
	installCRD(t)
	env.Controllers(t)
	ns, dst := env.Namespace(t), env.Namespace(t)
	p := createWidget(t, ns, "p")
	c := startCache(t)
	w := newWriter(t, "ctl.wasm", "", c, nil)
	mustApply(t, w, Key{ns, "p"}, p, set(cm("", "a"), cm(dst, "x")))
	if err := admin().Resource(e2eWidgets.GVR).Namespace(ns).Delete(context.Background(), "p", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, "the garbage collector to delete the child a", func() bool {
		_, ok := get(t, configmaps, ns, "a")
		return !ok
	})
	if _, ok := get(t, configmaps, dst, "x"); !ok {
		t.Fatal("the cross-namespace child went with its primary; nothing should have linked them for the collector")
	}
	c.waitFor(t, dst, "x", true)
	if failed, err := w.PruneAll(context.Background(), Key{ns, "p"}); err != nil || len(failed) > 0 {
		t.Fatal(err, failed)
	}
	if _, ok := get(t, configmaps, dst, "x"); ok {
		t.Fatal("PruneAll left the cross-namespace child")
	}
}

// A primary deleted and created again under its name is another object:
// the children applied for the old one that the new set does not name
// are stale and go; one the new set names is taken over (its owner is
// the new primary).
func TestE2ERecreatedPrimary(t *testing.T) {
	installCRD(t)
	ns := env.Namespace(t)
	old := createWidget(t, ns, "p")
	c := startCache(t)
	w := newWriter(t, "ctl.wasm", "", c, nil)
	mustApply(t, w, Key{ns, "p"}, old, set(cm("", "a"), cm("", "b")))
	c.waitFor(t, ns, "a", true)
	c.waitFor(t, ns, "b", true)
	if err := admin().Resource(e2eWidgets.GVR).Namespace(ns).Delete(context.Background(), "p", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	p := createWidget(t, ns, "p")
	mustApply(t, w, Key{ns, "p"}, p, set(cm("", "a")))
	if _, ok := get(t, configmaps, ns, "b"); ok {
		t.Fatal("the old primary's child b was not pruned")
	}
	a, ok := get(t, configmaps, ns, "a")
	if !ok {
		t.Fatal("a was pruned")
	}
	if refs := a.GetOwnerReferences(); len(refs) != 1 || refs[0].UID != p.GetUID() {
		t.Fatalf("a's ownerReferences %+v, want only the new primary %s", refs, p.GetUID())
	}
	if o, _ := ParseOwner(a.GetAnnotations()[AnnotationOwner]); o.UID != string(p.GetUID()) {
		t.Fatalf("a's owner annotation names %s", o.UID)
	}
}

func condition(t *testing.T, u *unstructured.Unstructured, typ string) *metav1.Condition {
	t.Helper()
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		m := c.(map[string]any)
		if m["type"] == typ {
			ltt, err := time.Parse(time.RFC3339, m["lastTransitionTime"].(string))
			if err != nil {
				t.Fatal(err)
			}
			og, _ := m["observedGeneration"].(int64)
			return &metav1.Condition{Type: typ, Status: metav1.ConditionStatus(m["status"].(string)), Reason: m["reason"].(string),
				Message: m["message"].(string), ObservedGeneration: og, LastTransitionTime: metav1.NewTime(ltt)}
		}
	}
	return nil
}

// Status through the status subresource by apply: another manager's
// status field and condition stay; observedGeneration follows the
// primary; lastTransitionTime stays while the status holds and moves
// when it changes.
func TestE2EStatusConditions(t *testing.T) {
	installCRD(t)
	ns := env.Namespace(t)
	createWidget(t, ns, "p")
	res := admin().Resource(e2eWidgets.GVR).Namespace(ns)
	ctx := context.Background()
	otherStatus := []byte(`{"apiVersion":"` + group + `/v1","kind":"Widget","metadata":{"name":"p","namespace":"` + ns + `"},
		"status":{"other":"keep","conditions":[{"type":"OtherReady","status":"True","reason":"Theirs","message":"","lastTransitionTime":"2020-01-01T00:00:00Z"}]}}`)
	force := true
	if _, err := res.Patch(ctx, "p", k8stypes.ApplyPatchType, otherStatus, metav1.PatchOptions{FieldManager: "other-manager", Force: &force}, "status"); err != nil {
		t.Fatal(err)
	}
	var now time.Time
	w := newWriter(t, "ctl.wasm", "", nil, func() time.Time { return now })

	t1 := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	now = t1
	p, _ := get(t, e2eWidgets, ns, "p")
	if err := w.ApplyStatus(ctx, p, []byte(`{"phase":"Pending","conditions":[{"type":"Ready","status":"True","reason":"First","message":"up"}]}`)); err != nil {
		t.Fatal(err)
	}
	p, _ = get(t, e2eWidgets, ns, "p")
	ready := condition(t, p, "Ready")
	if ready == nil || !ready.LastTransitionTime.Time.Equal(t1) || ready.ObservedGeneration != p.GetGeneration() || ready.Reason != "First" {
		t.Fatalf("Ready after the first apply: %+v (generation %d)", ready, p.GetGeneration())
	}
	keepsOthers := func() {
		t.Helper()
		if o, _, _ := unstructured.NestedString(p.Object, "status", "other"); o != "keep" || condition(t, p, "OtherReady") == nil {
			t.Fatalf("another manager's status was clobbered: %v", p.Object["status"])
		}
	}
	keepsOthers()

	// A spec change (a new generation), the same status, a new reason:
	// the transition time holds, observedGeneration follows.
	if _, err := res.Patch(ctx, "p", k8stypes.MergePatchType, []byte(`{"spec":{"n":2}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	p, _ = get(t, e2eWidgets, ns, "p")
	now = t1.Add(time.Hour)
	if err := w.ApplyStatus(ctx, p, []byte(`{"phase":"Running","conditions":[{"type":"Ready","status":"True","reason":"Second","message":"still up"}]}`)); err != nil {
		t.Fatal(err)
	}
	gen := p.GetGeneration()
	p, _ = get(t, e2eWidgets, ns, "p")
	ready = condition(t, p, "Ready")
	if ready == nil || !ready.LastTransitionTime.Time.Equal(t1) || ready.ObservedGeneration != gen || gen < 2 || ready.Reason != "Second" {
		t.Fatalf("Ready with an unchanged status: %+v, want lastTransitionTime %v and observedGeneration %d", ready, t1, gen)
	}
	keepsOthers()

	t3 := t1.Add(2 * time.Hour)
	now = t3
	if err := w.ApplyStatus(ctx, p, []byte(`{"conditions":[{"type":"Ready","status":"False","reason":"Down","message":"gone"}]}`)); err != nil {
		t.Fatal(err)
	}
	p, _ = get(t, e2eWidgets, ns, "p")
	if ready = condition(t, p, "Ready"); ready == nil || !ready.LastTransitionTime.Time.Equal(t3) || ready.Status != "False" {
		t.Fatalf("Ready after its status changed: %+v, want lastTransitionTime %v", ready, t3)
	}
	if phase, found, _ := unstructured.NestedString(p.Object, "status", "phase"); found {
		t.Errorf("phase %q stayed after the plugin stopped applying it", phase)
	}
	keepsOthers()
}

func finalizers(t *testing.T, ns, name string) []string {
	t.Helper()
	u, ok := get(t, e2eWidgets, ns, name)
	if !ok {
		return nil
	}
	return u.GetFinalizers()
}

// patchFinalizers is the other manager: JSON patches of its own.
func patchFinalizers(t *testing.T, ns, name, ops string) {
	t.Helper()
	if _, err := admin().Resource(e2eWidgets.GVR).Namespace(ns).Patch(context.Background(), name, k8stypes.JSONPatchType, []byte(ops), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
}

// releaseAll lets the test's namespace go: the widgets' finalizers off.
func releaseAll(t *testing.T, ns string) {
	t.Cleanup(func() {
		list, err := admin().Resource(e2eWidgets.GVR).Namespace(ns).List(context.Background(), metav1.ListOptions{})
		if err != nil {
			return
		}
		for _, u := range list.Items {
			_, _ = admin().Resource(e2eWidgets.GVR).Namespace(ns).Patch(context.Background(), u.GetName(), k8stypes.MergePatchType,
				[]byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{})
		}
	})
}

// The managed finalizer is added and removed from stale cached copies
// while another manager changes the list: its finalizers always survive,
// ours is added once and removed once.
func TestE2EFinalizerRaces(t *testing.T) {
	installCRD(t)
	ns := env.Namespace(t)
	releaseAll(t, ns)
	const mine, keep, second, third = "example.com/mine", "other.example.com/keep", "other.example.com/second", "other.example.com/third"
	w := newWriter(t, "ctl.wasm", mine, nil, nil)
	ctx := context.Background()

	// Cached without finalizers; meanwhile the other manager set its
	// list: ours must join it, not replace it.
	cached := createWidget(t, ns, "q")
	patchFinalizers(t, ns, "q", `[{"op":"add","path":"/metadata/finalizers","value":["`+keep+`"]}]`)
	if added, err := w.EnsureFinalizer(ctx, cached); err != nil || !added {
		t.Fatal(added, err)
	}
	if got := finalizers(t, ns, "q"); !slices.Equal(got, []string{keep, mine}) {
		t.Fatalf("finalizers %q, want %q and ours", got, keep)
	}

	// Cached with one; meanwhile the other manager appended.
	cached = createWidget(t, ns, "p", keep)
	patchFinalizers(t, ns, "p", `[{"op":"add","path":"/metadata/finalizers/-","value":"`+second+`"}]`)
	before, _ := get(t, e2eWidgets, ns, "p")
	added, err := w.EnsureFinalizer(ctx, cached)
	if err != nil || !added {
		t.Fatal(added, err)
	}
	if got := finalizers(t, ns, "p"); !slices.Equal(got, []string{keep, second, mine}) {
		t.Fatalf("finalizers %q", got)
	}
	after, _ := get(t, e2eWidgets, ns, "p")
	if !OnlyHostMetadataChanged(before, after, "ctl.wasm", mine) {
		t.Fatal("adding the managed finalizer counts as a change of the primary")
	}
	// Ours in the middle, cached; meanwhile the one before it went, so
	// ours moved to index 0 and index 1 is another's.
	patchFinalizers(t, ns, "p", `[{"op":"remove","path":"/metadata/finalizers/0"},{"op":"add","path":"/metadata/finalizers/-","value":"`+third+`"}]`)
	cached, _ = get(t, e2eWidgets, ns, "p") // [second, mine, third]
	patchFinalizers(t, ns, "p", `[{"op":"test","path":"/metadata/finalizers/0","value":"`+second+`"},{"op":"remove","path":"/metadata/finalizers/0"}]`)
	if err := w.RemoveFinalizer(ctx, cached); err != nil {
		t.Fatal(err)
	}
	if got := finalizers(t, ns, "p"); !slices.Equal(got, []string{third}) {
		t.Fatalf("finalizers %q, want only %q", got, third)
	}

	// Under a manager that keeps flipping its own finalizer: ours comes
	// and goes on request, theirs is never lost.
	stop := make(chan struct{})
	var flips sync.WaitGroup
	flips.Add(1)
	go func() {
		defer flips.Done()
		dyn := admin().Resource(e2eWidgets.GVR).Namespace(ns)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			u, err := dyn.Get(context.Background(), "p", metav1.GetOptions{})
			if err != nil {
				continue
			}
			ops := `[{"op":"add","path":"/metadata/finalizers/-","value":"other.example.com/flip"}]`
			if i := slices.Index(u.GetFinalizers(), "other.example.com/flip"); i >= 0 {
				ops = fmt.Sprintf(`[{"op":"test","path":"/metadata/finalizers/%d","value":"other.example.com/flip"},{"op":"remove","path":"/metadata/finalizers/%d"}]`, i, i)
			}
			_, _ = dyn.Patch(context.Background(), "p", k8stypes.JSONPatchType, []byte(ops), metav1.PatchOptions{})
		}
	}()
	defer func() { close(stop); flips.Wait() }()
	for round := range 10 {
		want := round%2 == 0
		// As the host's loop would: a try that ran out of attempts
		// under contention is tried again on the next reconcile.
		testenv.Eventually(t, fmt.Sprintf("round %d: our finalizer present=%v", round, want), func() bool {
			cur, _ := get(t, e2eWidgets, ns, "p")
			if want {
				_, err = w.EnsureFinalizer(ctx, cur)
			} else {
				err = w.RemoveFinalizer(ctx, cur)
			}
			return err == nil
		})
		got := finalizers(t, ns, "p")
		if slices.Contains(got, mine) != want || !slices.Contains(got, third) {
			t.Fatalf("round %d: finalizers %q: want ours=%v and %q", round, got, want, third)
		}
		if n := len(slices.DeleteFunc(slices.Clone(got), func(f string) bool { return f != mine })); n > 1 {
			t.Fatalf("round %d: ours %d times: %q", round, n, got)
		}
	}
}

// Release takes one finalizer off a resource's objects (the deleting
// ones only, or all), never another's.
func TestE2ERelease(t *testing.T) {
	installCRD(t)
	ns := env.Namespace(t)
	releaseAll(t, ns)
	mine := "example.com/" + ns // unique: Release lists every namespace
	const theirs = "other.example.com/keep"
	createWidget(t, ns, "r1", mine)
	createWidget(t, ns, "r2", mine, theirs)
	createWidget(t, ns, "r3", mine)
	for _, n := range []string{"r1", "r2"} {
		if err := admin().Resource(e2eWidgets.GVR).Namespace(ns).Delete(context.Background(), n, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	n, err := Release(context.Background(), admin(), e2eWidgets.GVR, mine, true)
	if err != nil || n != 2 {
		t.Fatalf("Release deleting only: %d, %v; want 2", n, err)
	}
	if _, ok := get(t, e2eWidgets, ns, "r1"); ok {
		t.Error("r1 (deleting, only our finalizer) is still there")
	}
	if got := finalizers(t, ns, "r2"); !slices.Equal(got, []string{theirs}) {
		t.Errorf("r2's finalizers %q, want only %q", got, theirs)
	}
	if got := finalizers(t, ns, "r3"); !slices.Equal(got, []string{mine}) {
		t.Errorf("r3 (not deleting) lost its finalizer: %q", got)
	}
	if n, err := Release(context.Background(), admin(), e2eWidgets.GVR, mine, false); err != nil || n != 1 {
		t.Fatalf("Release all: %d, %v; want 1", n, err)
	}
	if got := finalizers(t, ns, "r3"); len(got) != 0 {
		t.Errorf("r3's finalizers %q", got)
	}
}

// The requeue time goes onto the primary and comes back from it; an
// unchanged time is not written again; the write is the host's own
// metadata only; zero clears it.
func TestE2ERequeueRoundTrip(t *testing.T) {
	installCRD(t)
	ns := env.Namespace(t)
	p := createWidget(t, ns, "p")
	w := newWriter(t, "ctl.wasm", "", nil, nil)
	ctx := context.Background()
	due := time.Now().Add(90*time.Minute + 250*time.Millisecond)
	if err := w.PersistRequeue(ctx, p, due); err != nil {
		t.Fatal(err)
	}
	p2, _ := get(t, e2eWidgets, ns, "p")
	at, ok := RequeueAt(p2, "ctl.wasm")
	if !ok || at.Before(due) || at.Sub(due) >= time.Second {
		t.Fatalf("RequeueAt = %v, %v; want %v rounded up to the second", at, ok, due)
	}
	if !OnlyHostMetadataChanged(p, p2, "ctl.wasm", "") {
		t.Fatal("the requeue write counts as a change of the primary")
	}
	if err := w.PersistRequeue(ctx, p2, due); err != nil {
		t.Fatal(err)
	}
	if p3, _ := get(t, e2eWidgets, ns, "p"); p3.GetResourceVersion() != p2.GetResourceVersion() {
		t.Fatal("an unchanged requeue time was written again")
	}
	if err := w.PersistRequeue(ctx, p2, time.Time{}); err != nil {
		t.Fatal(err)
	}
	if p4, _ := get(t, e2eWidgets, ns, "p"); p4.GetAnnotations()[RequeueAnnotation("ctl.wasm")] != "" {
		t.Fatalf("cleared, yet: %v", p4.GetAnnotations())
	}
}
