package host

import (
	"context"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
