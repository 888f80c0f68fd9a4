package host

import (
	"context"
	"slices"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Host-side filters cut deliveries as configured: `changed` passes an
// update only when a listed field changes; resyncs are dropped unless a
// binding asks for them; a label filter passes exactly the matching
// objects, and an object that starts or stops matching arrives as an add
// or a delete.
func TestFiltersCutDeliveries(t *testing.T) {
	healthy := fixture(t, "healthy")
	hs, err := newHarness(t, `
apiVersion: informer-host/v1
resources:
  - {name: cms, version: v1, resource: configmaps, namespaces: [NS], resyncPeriod: 1s}
plugins:
  directory: DIR
  default:
    bindings: [{resource: cms}]
  modules:
    - file: phase.wasm
      bindings: [{resource: cms, changed: [data.phase]}]
    - file: web.wasm
      bindings: [{resource: cms, filter: 'object.metadata.?labels.?tier.orValue("") == "web"'}]
    - file: resyncs.wasm
      bindings: [{resource: cms, resyncs: true}]
    - file: all.wasm
`, map[string][]byte{"phase.wasm": healthy, "web.wasm": healthy, "resyncs.wasm": healthy, "all.wasm": healthy})
	if err != nil {
		t.Fatal(err)
	}
	cms := env.Client.CoreV1().ConfigMaps(hs.ns)
	a := hs.createCM("a", map[string]string{"phase": "Pending"})
	a = hs.updateCM(a, "other", "1")       // phase unchanged
	a = hs.updateCM(a, "phase", "Running") // phase changed
	setLabel := func(v string) {
		t.Helper()
		a = a.DeepCopy()
		a.Labels = map[string]string{"tier": v}
		var err error
		if a, err = cms.Update(context.Background(), a, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	setLabel("web")                  // starts matching
	a = hs.updateCM(a, "other", "2") // matches before and after
	setLabel("db")                   // stops matching
	a = hs.updateCM(a, "other", "3") // matches neither before nor after
	if _, err := cms.Create(context.Background(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "w",
		Labels: map[string]string{"tier": "web"}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// The informer resyncs every second: updates whose old and new object
	// are the same version of a.
	eventually(t, "resyncs to reach the plugin that asks for them", func() bool {
		for _, d := range hs.rec.of("resyncs.wasm") {
			if d.Type == 2 && d.Key == hs.ns+"/a" && d.RV == a.ResourceVersion && d.OldRV == d.RV {
				return true
			}
		}
		return false
	})
	hs.deleteCM("a")
	hs.deleteCM("w")
	hs.createCM("marker", nil)
	for _, p := range []string{"phase.wasm", "all.wasm"} {
		eventually(t, p+" to see the marker", func() bool {
			got := hs.rec.strings(p)
			return len(got) > 0 && got[len(got)-1] == "add "+hs.ns+"/marker ok"
		})
	}

	ns := hs.ns
	want := map[string][]string{
		"phase.wasm": {"add " + ns + "/a ok", "update " + ns + "/a ok", "add " + ns + "/w ok",
			"delete " + ns + "/a ok", "delete " + ns + "/w ok", "add " + ns + "/marker ok"},
		"web.wasm": {"add " + ns + "/a ok", "update " + ns + "/a ok", "delete " + ns + "/a ok",
			"add " + ns + "/w ok", "delete " + ns + "/w ok"},
		"all.wasm": {"add " + ns + "/a ok", "update " + ns + "/a ok", "update " + ns + "/a ok", "update " + ns + "/a ok",
			"update " + ns + "/a ok", "update " + ns + "/a ok", "update " + ns + "/a ok", "add " + ns + "/w ok",
			"delete " + ns + "/a ok", "delete " + ns + "/w ok", "add " + ns + "/marker ok"},
	}
	for p, w := range want {
		if got := hs.rec.strings(p); !slices.Equal(got, w) {
			t.Errorf("%s:\n got %q\nwant %q", p, got, w)
		}
	}
	// web.wasm's add of a is the new object (labelled web), its delete the
	// old one (still labelled web): the plugin's view stays consistent.
	web := hs.rec.of("web.wasm")
	if len(web) >= 3 && (web[0].RV == web[2].RV) {
		t.Errorf("synthetic add and delete carry the same object version %s", web[0].RV)
	}
	st := hs.status("phase.wasm").Filtered["cms"]
	if st.Unchanged != 5 || st.Resync == 0 {
		t.Errorf("phase.wasm filter counters %+v; want 5 unchanged updates and some resyncs", st)
	}
	if st := hs.status("web.wasm").Filtered["cms"]; st.Filtered < 2 {
		t.Errorf("web.wasm filter counters %+v; want the non-matching events counted", st)
	}
}

// generationChanged passes an update only when it changed
// metadata.generation: a Deployment's label change and the status the
// controller manager writes are dropped and counted, a change of its
// spec arrives; adds and deletes are not affected.
func TestGenerationChangedBinding(t *testing.T) {
	healthy := fixture(t, "healthy")
	hs, err := newHarness(t, `
apiVersion: informer-host/v1
resources:
  - {name: deps, group: apps, version: v1, resource: deployments, namespaces: [NS]}
plugins:
  directory: DIR
  modules:
    - file: gen.wasm
      bindings: [{resource: deps, generationChanged: true}]
    - file: all.wasm
      bindings: [{resource: deps}]
`, map[string][]byte{"gen.wasm": healthy, "all.wasm": healthy})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	deps := env.Client.AppsV1().Deployments(hs.ns)
	create := func(name string) {
		t.Helper()
		labels := map[string]string{"app": name}
		if _, err := deps.Create(ctx, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: appsv1.DeploymentSpec{Selector: &metav1.LabelSelector{MatchLabels: labels},
				Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels},
					Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "x"}}}}},
		}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	patch := func(body string) {
		t.Helper()
		// A merge patch: the controller manager writes the status
		// meanwhile, and a patch does not conflict with that.
		if _, err := deps.Patch(ctx, "d", types.MergePatchType, []byte(body), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	create("d")
	patch(`{"metadata":{"labels":{"tier":"web"}}}`) // the generation stays
	patch(`{"spec":{"replicas":3}}`)                // a new generation
	if err := deps.Delete(ctx, "d", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	create("marker")
	for _, p := range []string{"gen.wasm", "all.wasm"} {
		eventually(t, p+" to see the marker", func() bool {
			return slices.Contains(hs.rec.strings(p), "add "+hs.ns+"/marker ok")
		})
	}
	ns := hs.ns
	var gen []string
	for _, s := range hs.rec.strings("gen.wasm") {
		if s != "add "+ns+"/marker ok" && s != "update "+ns+"/marker ok" {
			gen = append(gen, s)
		}
	}
	if want := []string{"add " + ns + "/d ok", "update " + ns + "/d ok", "delete " + ns + "/d ok"}; !slices.Equal(gen, want) {
		t.Errorf("gen.wasm saw %q, want %q: only the update that changed the spec", gen, want)
	}
	var all int
	for _, s := range hs.rec.strings("all.wasm") {
		if s == "update "+ns+"/d ok" {
			all++
		}
	}
	if all < 2 {
		t.Errorf("all.wasm saw %d updates of d, want at least the label's and the spec's", all)
	}
	if st := hs.status("gen.wasm").Filtered["deps"]; st.Generation == 0 || st.Filtered+st.Unchanged != 0 {
		t.Errorf("gen.wasm filter counters %+v; want the label's update counted as generation", st)
	}
	if v := hs.pluginMetric("informer_host_plugin_filtered_total", map[string]string{"plugin": "gen.wasm", "binding": "deps", "reason": "generation"}); v <= 0 {
		t.Error("informer_host_plugin_filtered_total{reason=generation} is 0")
	}
}
