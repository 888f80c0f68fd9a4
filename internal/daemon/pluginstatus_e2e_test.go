package daemon

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"

	"github.com/informer-host/informer-host/host"
	"github.com/informer-host/informer-host/internal/pluginapi/v1alpha1"
	"github.com/informer-host/informer-host/internal/pluginstatus"
	"github.com/informer-host/informer-host/internal/testenv"
)

// The status of ClusterPlugin objects as a daemon runs them with real
// plugins: Ready with the running digest; a broken new version Degraded
// with why, while the old one runs and Ready is False; a plugin that
// keeps trapping quarantined, another parking its poison object; an
// Event on the object for each of these transitions.
func TestPluginResourceStatus(t *testing.T) {
	ns := env.Namespace(t)
	ctx := context.Background()
	counter := testenv.WAT(t, "../../host/testdata/plugins/counter.wat")
	poisonall := testenv.WAT(t, "../../host/testdata/plugins/poisonall.wat")
	dir := env.DaemonDir(t, nil)
	file := func(name string, b []byte) string {
		f := filepath.Join(t.TempDir(), name)
		if err := os.WriteFile(f, b, 0o644); err != nil {
			t.Fatal(err)
		}
		return f
	}
	installPluginCRDs(t)
	r := startReplica(t, writeSourcesConfig(t, dir, ns, ""), Options{resourcesDiscovery: 50 * time.Millisecond})

	clusterPlugins := dynamic.NewForConfigOrDie(env.Config).Resource(v1alpha1.ClusterPluginsGVR)
	apply := func(name, source string, limits map[string]any) {
		t.Helper()
		spec := map[string]any{"source": map[string]any{"file": source}, "bindings": []any{map[string]any{"resource": "cms"}}}
		if limits != nil {
			spec["limits"] = limits
		}
		o := &unstructured.Unstructured{Object: map[string]any{"apiVersion": v1alpha1.Group + "/" + v1alpha1.Version,
			"kind": v1alpha1.KindClusterPlugin, "metadata": map[string]any{"name": name}, "spec": spec}}
		applyObject(t, clusterPlugins, o)
	}
	status := func(name string) (v1alpha1.PluginStatus, int64) { return objectStatus(t, clusterPlugins, name) }
	is := hasCondition
	events := func(name string) map[string]int {
		list, err := env.Client.EventsV1().Events(metav1.NamespaceDefault).List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]int{}
		for _, e := range list.Items {
			if e.Regarding.Name == name && e.Regarding.Kind == v1alpha1.KindClusterPlugin {
				out[e.Reason]++
			}
		}
		return out
	}
	hostSHA := func(plugin string) string {
		for _, s := range r.d.Host().Status() {
			if s.File == plugin && s.State == host.StateRunning {
				return s.SHA256
			}
		}
		return ""
	}

	// Applied: Ready, with the digest it runs.
	good := variant(counter, 1)
	name := "status-" + ns
	apply(name, file("good.wasm", good), nil)
	testenv.Eventually(t, "Ready with the running digest", func() bool {
		st, gen := status(name)
		return is(st, v1alpha1.ConditionReady, metav1.ConditionTrue, v1alpha1.ReasonRunning) && st.Digest == "sha256:"+sha(good) &&
			st.ObservedGeneration == gen && is(st, v1alpha1.ConditionSynced, metav1.ConditionTrue, v1alpha1.ReasonSynced) &&
			is(st, v1alpha1.ConditionVerified, metav1.ConditionUnknown, v1alpha1.ReasonNoPolicy) && len(st.Replicas) == 1
	})
	testenv.Eventually(t, "a Loaded Event", func() bool { return events(name)["Loaded"] == 1 })

	// A broken version: Degraded with why, the old one runs, not Ready.
	apply(name, file("broken.wasm", []byte("\x00asm\x01\x00\x00\x00 not a module")), nil)
	testenv.Eventually(t, "Degraded LoadFailed while the old version runs", func() bool {
		st, gen := status(name)
		return st.ObservedGeneration == gen && st.Digest == "sha256:"+sha(good) &&
			is(st, v1alpha1.ConditionDegraded, metav1.ConditionTrue, v1alpha1.ReasonLoadFailed, "keeps running") &&
			is(st, v1alpha1.ConditionReady, metav1.ConditionFalse, v1alpha1.ReasonLoadFailed) && st.LastFailure != nil
	})
	if got := hostSHA(v1alpha1.PluginName("", name)); got != sha(good) {
		t.Errorf("the host runs %.12s, want the previous version %.12s", got, sha(good))
	}
	testenv.Eventually(t, "a LoadFailed Event", func() bool { return events(name)["LoadFailed"] == 1 })

	// A plugin trapping on one object: quarantined with parking off,
	// parked otherwise.
	quarantined, parker := "quarantine-"+ns, "parker-"+ns
	apply(quarantined, file("poisonall.wasm", poisonall), map[string]any{"restartBackoff": "10ms", "maxConsecutiveFailures": int64(2), "parkAfter": int64(0)})
	apply(parker, file("poisonall-2.wasm", variant(poisonall, 2)), map[string]any{"restartBackoff": "10ms", "parkAfter": int64(2)})
	for _, n := range []string{quarantined, parker} {
		testenv.Eventually(t, n+" Ready", func() bool {
			st, _ := status(n)
			return is(st, v1alpha1.ConditionReady, metav1.ConditionTrue, v1alpha1.ReasonRunning)
		})
	}
	if _, err := env.Client.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "poison"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, "Quarantined", func() bool {
		st, _ := status(quarantined)
		return is(st, v1alpha1.ConditionQuarantined, metav1.ConditionTrue, v1alpha1.ReasonQuarantined, "unreachable") &&
			is(st, v1alpha1.ConditionReady, metav1.ConditionFalse, v1alpha1.ReasonQuarantined)
	})
	testenv.Eventually(t, "ObjectsParked", func() bool {
		st, _ := status(parker)
		return st.Parked == 1 && is(st, v1alpha1.ConditionDegraded, metav1.ConditionTrue, v1alpha1.ReasonObjectsParked, "poison") &&
			is(st, v1alpha1.ConditionReady, metav1.ConditionFalse, v1alpha1.ReasonObjectsParked)
	})
	testenv.Eventually(t, "Quarantined and Parked Events", func() bool {
		return events(quarantined)["Quarantined"] == 1 && events(parker)["Parked"] == 1
	})
	if e := events(name); e["Loaded"] != 1 || e["LoadFailed"] != 1 || len(e) != 2 {
		t.Errorf("Events of %s: %v, want one Loaded and one LoadFailed", name, e)
	}
}

// objectStatus reads the status of the plugin object name of ri, and its
// generation.
func objectStatus(t *testing.T, ri dynamic.ResourceInterface, name string) (v1alpha1.PluginStatus, int64) {
	t.Helper()
	obj, err := ri.Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	st, err := pluginstatus.StatusOf(obj)
	if err != nil {
		t.Fatal(err)
	}
	return st, obj.GetGeneration()
}

// hasCondition reports whether st has condition typ at s with reason, its
// message holding every one of words.
func hasCondition(st v1alpha1.PluginStatus, typ string, s metav1.ConditionStatus, reason string, words ...string) bool {
	c := meta.FindStatusCondition(st.Conditions, typ)
	if c == nil || c.Status != s || c.Reason != reason {
		return false
	}
	for _, w := range words {
		if !strings.Contains(c.Message, w) {
			return false
		}
	}
	return true
}
