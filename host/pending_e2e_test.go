package host

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiext "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apiextclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset/typed/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/informer-host/informer-host/event"
	"github.com/informer-host/informer-host/informer"
	"github.com/informer-host/informer-host/internal/testenv"
)

// A plugin bound to a resource whose CRD does not exist yet loads and
// waits; once the resource is served it gets every object there is, as
// the resource's initial list, then every change, including those made
// while the resource starts. The resource is the v2 of a CRD that is
// created after the host starts and serves only v1 at first, so that
// objects exist before the resource starts, for certain: they are made
// through v1 while v2 is not served.
//
// This passes on the pipeline as it was before the did-you-mean work too:
// a pending resource's listeners are kept apart from its state
// (Pipeline.regs) and attached before its informers start, so they get
// the initial list as it arrives; nothing is lost. The test keeps that so.
func TestPluginBoundToAPendingResourceGetsEverythingOnceServed(t *testing.T) {
	hs, err := newHarness(t, `
apiVersion: informer-host/v1
resources:
  - {name: widgets, group: NS.example.com, version: v2, kind: Widget, namespaces: [NS]}
plugins:
  directory: DIR
  default:
    bindings: [{resource: widgets}]
`, map[string][]byte{"p.wasm": fixture(t, "healthy")}, func(hs *harness) { hs.pending = true })
	if err != nil {
		t.Fatal(err)
	}
	if st := resourceStatus(hs, "widgets"); st.Phase != informer.PhasePending || !strings.Contains(st.Error, `serves no kind "Widget"`) {
		t.Fatalf("widgets before its CRD exists: %+v, want Pending, not served", st)
	}
	group := hs.ns + ".example.com"
	crds, crd := createWidgetCRD(t, group, testenv.OpenWidgetVersion("v1", true))
	dyn := dynamic.NewForConfigOrDie(env.Config)
	widgets := func(v string) dynamic.ResourceInterface {
		return dyn.Resource(schema.GroupVersionResource{Group: group, Version: v, Resource: "widgets"}).Namespace(hs.ns)
	}
	create := func(v, name string) error {
		_, err := widgets(v).Create(context.Background(), &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": group + "/" + v, "kind": "Widget",
			"metadata": map[string]any{"name": name}, "spec": map[string]any{"n": int64(0)},
		}}, metav1.CreateOptions{})
		return err
	}
	// The CRD's handler serves v1 a moment after the CRD is created.
	eventually(t, "v1 widgets to be served", func() bool {
		err := create("v1", "w0")
		if err != nil && !apierrors.IsNotFound(err) {
			t.Fatal(err)
		}
		return err == nil
	})
	for i := 1; i < 5; i++ {
		if err := create("v1", fmt.Sprint("w", i)); err != nil {
			t.Fatal(err)
		}
	}
	if st := resourceStatus(hs, "widgets"); st.Phase != informer.PhasePending {
		t.Fatalf("widgets/v2 while only v1 is served: %+v, want Pending", st)
	}
	if s := hs.status("p.wasm"); s.State != StateRunning || s.Synced {
		t.Fatalf("plugin bound to a pending resource: %+v, want running and not synced", s)
	}

	// Serve v2 too: the resource starts, and the plugin gets its initial
	// list, then the changes made through v2.
	crd, err = crds.Get(context.Background(), crd.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	crd.Spec.Versions = append(crd.Spec.Versions, testenv.OpenWidgetVersion("v2", true))
	// Changes go on while the resource starts (discovery, list, watch):
	// each lands in the initial list or after it, none in between.
	stop, stopped := make(chan struct{}), make(chan error, 1)
	go func() {
		for i := 0; ; i++ {
			select {
			case <-stop:
				stopped <- nil
				return
			default:
			}
			w, err := widgets("v1").Get(context.Background(), "w2", metav1.GetOptions{})
			if err == nil {
				w.Object["spec"] = map[string]any{"n": int64(i)}
				_, err = widgets("v1").Update(context.Background(), w, metav1.UpdateOptions{})
			}
			if err == nil {
				err = create("v1", fmt.Sprint("during-", i))
			}
			if err != nil {
				stopped <- err
				return
			}
		}
	}()
	if _, err := crds.Update(context.Background(), crd, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the plugin to be synced on widgets", func() bool { return hs.status("p.wasm").Synced })
	close(stop)
	if err := <-stopped; err != nil {
		t.Fatal(err)
	}
	w0, err := widgets("v2").Get(context.Background(), "w0", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	w0.Object["spec"] = map[string]any{"n": int64(1)}
	if _, err := widgets("v2").Update(context.Background(), w0, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := widgets("v2").Delete(context.Background(), "w1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := create("v2", "w5"); err != nil {
		t.Fatal(err)
	}

	// The plugin's view, built from what it was handed, ends as the
	// apiserver's; and it was handed each step.
	want := map[string]string{}
	list, err := widgets("v2").List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range list.Items {
		want[hs.ns+"/"+w.GetName()] = w.GetResourceVersion()
	}
	view := func() map[string]string {
		v := map[string]string{}
		for _, d := range hs.rec.of("p.wasm") {
			switch d.Type {
			case event.EventAdd, event.EventUpdate:
				v[d.Key] = d.RV
			case event.EventDelete:
				delete(v, d.Key)
			}
		}
		return v
	}
	eventually(t, "the plugin's view to match the apiserver's", func() bool { return fmt.Sprint(view()) == fmt.Sprint(want) })
	got := map[string][]string{}
	for _, d := range hs.rec.of("p.wasm") {
		what := d.Type.String()
		if d.Initial {
			what = "initial " + what
		}
		got[what] = append(got[what], strings.TrimPrefix(d.Key, hs.ns+"/"))
	}
	for what, must := range map[string][]string{
		"initial add": {"w0", "w1", "w2", "w3", "w4"},
		"add":         {"w5"},
		"update":      {"w0"},
		"delete":      {"w1"},
	} {
		for _, name := range must {
			if !slices.Contains(got[what], name) {
				t.Errorf("no %s of %s; the plugin got %v", what, name, got)
			}
		}
	}
	t.Logf("the plugin got %d objects in the initial list, then %d adds and %d updates", len(got["initial add"]), len(got["add"]), len(got["update"]))
	if len(got["delete"]) != 1 {
		t.Errorf("deletes: %v, want w1 alone", got["delete"])
	}
}

// A controller-mode plugin whose primary resource is served only after
// it loaded, with no object at all, counts as synced once the resource's
// initial list (empty) is in: nothing is queued, so nothing else would
// wake its worker to look.
func TestControllerBoundToAPendingEmptyResourceSyncs(t *testing.T) {
	hs, err := newHarness(t, `
apiVersion: informer-host/v1
resources:
  - {name: widgets, group: NS.example.com, version: v1, kind: Widget, namespaces: [NS]}
plugins:
  directory: DIR
  default:
    controller: {for: widgets}
`, map[string][]byte{reconcilerPlugin: testPlugin(t, "reconciler")}, func(hs *harness) { hs.pending = true })
	if err != nil {
		t.Fatal(err)
	}
	if s := hs.status(reconcilerPlugin); s.State != StateRunning || s.Synced {
		t.Fatalf("controller bound to a pending resource: %+v, want running and not synced", s)
	}
	createWidgetCRD(t, hs.ns+".example.com", testenv.OpenWidgetVersion("v1", true))
	eventually(t, "widgets to be served", func() bool { return resourceStatus(hs, "widgets").Synced })
	eventually(t, "the controller to be synced on widgets", func() bool { return hs.status(reconcilerPlugin).Synced })
}

// createWidgetCRD creates the namespaced Widget CRD of group, deleted
// when the test ends.
func createWidgetCRD(t *testing.T, group string, versions ...apiextv1.CustomResourceDefinitionVersion) (apiextclient.CustomResourceDefinitionInterface, *apiextv1.CustomResourceDefinition) {
	t.Helper()
	crds := apiext.NewForConfigOrDie(env.Config).ApiextensionsV1().CustomResourceDefinitions()
	crd, err := crds.Create(context.Background(), testenv.WidgetCRD(group, versions...), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = crds.Delete(context.Background(), crd.Name, metav1.DeleteOptions{}) })
	return crds, crd
}

func resourceStatus(hs *harness, name string) informer.ResourceStatus {
	for _, st := range hs.p.Status() {
		if st.Name == name {
			return st
		}
	}
	hs.t.Fatalf("no resource %s", name)
	return informer.ResourceStatus{}
}
