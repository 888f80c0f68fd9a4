package daemon

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"k8s.io/client-go/util/retry"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiext "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/yaml"

	"github.com/informer-host/informer-host/host"
	"github.com/informer-host/informer-host/internal/pluginapi/v1alpha1"
	"github.com/informer-host/informer-host/internal/pluginresource"
	"github.com/informer-host/informer-host/internal/testenv"
)

// Plugin objects, from a daemon that starts before their CRDs exist:
// until then it runs config.yaml's plugins as it always did and says once
// that the resources are not served; once they are, a ClusterPlugin loads
// and is delivered events, hot-reloads on spec changes under churn without
// losing one, is refused (naming the field) when its spec is invalid or
// its name is taken, a team's Plugin is refused without tenancy, and a
// deleted ClusterPlugin's plugin unloads.
func TestPluginResources(t *testing.T) {
	ns := env.Namespace(t)
	ctx := context.Background()
	counter := testenv.WAT(t, "../../host/testdata/plugins/counter.wat")
	dir := env.DaemonDir(t, map[string][]byte{"counter.wasm": counter})
	srcDir := t.TempDir()
	srcFile := func(n int) string {
		f := filepath.Join(srcDir, fmt.Sprintf("counter-%d.wasm", n))
		if err := os.WriteFile(f, variant(counter, n), 0o644); err != nil {
			t.Fatal(err)
		}
		return f
	}
	cfg := writeSourcesConfig(t, dir, ns, "")
	sighup := make(chan os.Signal, 1)
	r := startReplica(t, cfg, Options{resourcesDiscovery: 50 * time.Millisecond, Reload: sighup})
	d := r.d

	cms := env.Client.CoreV1().ConfigMaps(ns)
	for i := range 3 {
		if _, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprint("cm-", i)}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	lastCount := func(plugin string) int {
		lines := r.logs.Lines("plugin="+plugin, `msg="count=`)
		if len(lines) == 0 {
			return -1
		}
		n, _ := strconv.Atoi(countRE.FindStringSubmatch(lines[len(lines)-1])[1])
		return n
	}

	// No CRDs: config.yaml's plugin runs; the daemon looks again and again
	// and says so once.
	testenv.Eventually(t, "the directory's counter to count 3", func() bool { return lastCount("counter.wasm") == 3 })
	testenv.Eventually(t, "discovery to be asked several times", func() bool {
		return len(r.logs.Lines("plugin resources: not served yet")) >= 5
	})
	if n := len(r.logs.Lines("level=INFO", "plugin resources not watched")); n != 1 {
		t.Errorf("the missing CRDs were reported %d times, want once", n)
	}
	if errs := r.logs.Lines("level=ERROR"); len(errs) > 0 {
		t.Errorf("errors without the CRDs:\n%s", strings.Join(errs, "\n"))
	}
	if d.PluginResources() == nil || len(d.PluginResources().Admissions()) != 0 {
		t.Fatal("the controller is missing or admitted something without the CRDs")
	}

	installPluginCRDs(t)
	testenv.Eventually(t, "the plugin resources to be watched", func() bool {
		return len(r.logs.Lines("plugin resources watched")) == 1
	})

	dyn := dynamic.NewForConfigOrDie(env.Config)
	clusterPlugins := dyn.Resource(v1alpha1.ClusterPluginsGVR)
	// Cluster-scoped names, unique to this test's namespace.
	name := func(s string) string { return s + "-" + ns }
	apply := func(o *unstructured.Unstructured) { t.Helper(); applyObject(t, clusterPlugins, o) }
	plugin := func(n, file string, extra map[string]any) *unstructured.Unstructured {
		spec := map[string]any{
			"source":   map[string]any{"file": file},
			"bindings": []any{map[string]any{"resource": "cms"}},
		}
		for k, v := range extra {
			spec[k] = v
		}
		return &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": v1alpha1.Group + "/" + v1alpha1.Version, "kind": v1alpha1.KindClusterPlugin,
			"metadata": map[string]any{"name": n}, "spec": spec,
		}}
	}
	admission := func(n string) (pluginresource.Admission, bool) {
		for _, a := range d.PluginResources().Admissions() {
			if a.Name == n {
				return a, true
			}
		}
		return pluginresource.Admission{}, false
	}
	status := func(file string) (host.PluginStatus, bool) {
		for _, s := range d.Host().Status() {
			if s.File == file {
				return s, true
			}
		}
		return host.PluginStatus{}, false
	}

	// A ClusterPlugin loads and is delivered the configmaps.
	res := name("rescounter")
	resFile := v1alpha1.PluginName("", res)
	apply(plugin(res, srcFile(1), nil))
	testenv.Eventually(t, "the ClusterPlugin's counter to count 3", func() bool { return lastCount(resFile) == 3 })
	if a, ok := admission(res); !ok || !a.Admitted || a.Generation != 1 || a.Plugin != resFile || !strings.HasPrefix(a.Source, "file:///") {
		t.Errorf("admission %+v, want admitted at generation 1 with its file source", a)
	}
	if _, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cm-3"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, "a new configmap to be counted", func() bool { return lastCount(resFile) == 4 })

	// Spec changes hot-reload it under churn, without losing an event:
	// new bytes (another source file) and new settings alike.
	stopChurn := churnConfigMaps(t, ns)
	for i := 2; i <= 7; i++ {
		before, _ := status(resFile)
		if i%2 == 0 {
			want := sha(variant(counter, i))
			apply(plugin(res, srcFile(i), nil))
			testenv.Eventually(t, fmt.Sprintf("spec change %d: the new source to run", i), func() bool {
				st, _ := status(resFile)
				return st.SHA256 == want && st.State == host.StateRunning
			})
		} else {
			apply(plugin(res, srcFile(i-1), map[string]any{"limits": map[string]any{"callTimeout": fmt.Sprintf("%ds", i)}}))
			testenv.Eventually(t, fmt.Sprintf("spec change %d: the new settings to be applied", i), func() bool {
				st, _ := status(resFile)
				return st.Counters.Reloads > before.Counters.Reloads && st.State == host.StateRunning
			})
		}
	}
	stopChurn()
	list, err := cms.List(ctx, metav1.ListOptions{LabelSelector: testenv.SeenKeysSelector})
	if err != nil {
		t.Fatal(err)
	}
	// The plugin's output is rate limited, and under churn its last
	// lines may have been dropped: each look updates cm-0, which counts
	// nothing and makes it log its count again.
	probe := 0
	for _, p := range []string{resFile, "counter.wasm"} {
		testenv.Eventually(t, fmt.Sprintf("%s to count the cluster's %d configmaps", p, len(list.Items)), func() bool {
			probe++
			cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cm-0"}, Data: map[string]string{"probe": strconv.Itoa(probe)}}
			if _, err := cms.Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
				t.Fatal(err)
			}
			return lastCount(p) == len(list.Items)
		})
	}
	if a, _ := admission(res); !a.Admitted || a.Generation != 7 {
		t.Errorf("admission after 6 spec changes: %+v, want admitted at generation 7", a)
	}

	// A config file reload merges the objects again: a config.yaml
	// module of the ClusterPlugin's name wins over it, and once that is
	// gone the object's plugin runs again; a reload that changes nothing
	// of it (SIGHUP) leaves it running as it was.
	writeSourcesConfig(t, dir, ns, "  modules:\n    - {file: "+resFile+"}\n")
	testenv.Eventually(t, "config.yaml's module of the same name to win", func() bool {
		a, _ := admission(res)
		_, running := status(resFile)
		return a.Reason == v1alpha1.ReasonNameConflict && strings.Contains(a.Message, "config.yaml") && !running
	})
	writeSourcesConfig(t, dir, ns, "")
	testenv.Eventually(t, "the ClusterPlugin's plugin to run again", func() bool {
		st, ok := status(resFile)
		a, _ := admission(res)
		return ok && st.State == host.StateRunning && a.Admitted && lastCount(resFile) == len(list.Items)
	})
	before, _ := status(resFile)
	reloads := len(r.logs.Lines("config reloaded", "reason=SIGHUP"))
	sighup <- syscall.SIGHUP
	testenv.Eventually(t, "SIGHUP to reload", func() bool { return len(r.logs.Lines("config reloaded", "reason=SIGHUP")) > reloads })
	if st, _ := status(resFile); st.SHA256 != before.SHA256 || st.Counters.Reloads != before.Counters.Reloads || st.LoadedAt != before.LoadedAt {
		t.Errorf("SIGHUP reloaded the unchanged ClusterPlugin: before %+v, after %+v", before.Counters, st.Counters)
	}

	// An invalid spec is refused, naming its field, and logged once per
	// generation however often the daemon applies the objects again.
	bad := name("resbad")
	apply(plugin(bad, srcFile(1), map[string]any{"bindings": []any{map[string]any{"resource": "cmz"}}}))
	testenv.Eventually(t, "the invalid spec to be refused", func() bool {
		a, ok := admission(bad)
		return ok && !a.Admitted && a.Reason == v1alpha1.ReasonRefused &&
			strings.Contains(a.Message, `spec.bindings[0].resource: binding refers to resource "cmz", which is not configured (configured: cms)`)
	})
	if _, ok := status(v1alpha1.PluginName("", bad)); ok {
		t.Error("the refused ClusterPlugin's plugin is in the host")
	}

	// A name the plugin directory has is refused; the directory's file
	// keeps running as it was.
	taken := "counter"
	apply(plugin(taken, srcFile(2), nil))
	testenv.Eventually(t, "the taken name to be refused", func() bool {
		a, ok := admission(taken)
		return ok && !a.Admitted && a.Reason == v1alpha1.ReasonNameConflict && strings.Contains(a.Message, "plugin directory")
	})
	if st, _ := status("counter.wasm"); st.SHA256 != sha(counter) {
		t.Errorf("the directory's counter.wasm runs %.12s, want its own bytes %.12s", st.SHA256, sha(counter))
	}

	// A team's Plugin without tenancy is refused.
	plugins := dyn.Resource(v1alpha1.PluginsGVR).Namespace(ns)
	team := plugin("team", "", nil)
	team.SetKind(v1alpha1.KindPlugin)
	team.SetNamespace(ns)
	_ = unstructured.SetNestedField(team.Object, map[string]any{"oci": "localhost:1/none:v1"}, "spec", "source")
	_ = unstructured.SetNestedField(team.Object, "default", "spec", "serviceAccountName")
	if _, err := plugins.Create(ctx, team, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, "the team's Plugin to be refused", func() bool {
		a, ok := admission("team")
		return ok && !a.Admitted && a.Kind == v1alpha1.KindPlugin && a.Reason == v1alpha1.ReasonNotAllowed
	})
	if n := len(r.logs.Lines("plugin object refused", "name="+bad)); n != 1 {
		t.Errorf("the invalid spec's refusal was logged %d times, want once", n)
	}

	// Deleted, the ClusterPlugin's plugin unloads.
	if err := clusterPlugins.Delete(ctx, res, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, "the deleted ClusterPlugin's plugin to unload", func() bool {
		_, ok := status(resFile)
		return !ok
	})
	if _, ok := admission(res); ok {
		t.Error("the deleted object still has an admission")
	}
	if st, _ := status("counter.wasm"); st.State != host.StateRunning {
		t.Errorf("config.yaml's plugin is %s after the objects changed", st.State)
	}

	// The CRDs deleted, the objects' plugins unload and the daemon stops
	// watching, saying so once, and goes back to looking.
	apply(plugin(res, srcFile(1), nil))
	testenv.Eventually(t, "the ClusterPlugin to load again", func() bool {
		st, ok := status(resFile)
		return ok && st.State == host.StateRunning
	})
	uninstallPluginCRDs(t)
	testenv.Eventually(t, "the plugin to unload with its CRD", func() bool {
		_, ok := status(resFile)
		return !ok && len(r.logs.Lines("plugin resources no longer served")) == 1
	})
	looks := len(r.logs.Lines("plugin resources: not served yet"))
	testenv.Eventually(t, "discovery to be asked again", func() bool {
		return len(r.logs.Lines("plugin resources: not served yet")) >= looks+3
	})
	if n := len(r.logs.Lines("level=INFO", "plugin resources not watched")); n != 2 {
		t.Errorf("the missing CRDs were reported %d times over two absences, want twice", n)
	}
	if st, _ := status("counter.wasm"); st.State != host.StateRunning {
		t.Errorf("config.yaml's plugin is %s without the CRDs", st.State)
	}
	if errs := r.logs.Lines("level=ERROR"); len(errs) > 0 {
		t.Errorf("errors:\n%s", strings.Join(errs, "\n"))
	}
}

// installPluginCRDs installs the committed CRDs of Plugin and
// ClusterPlugin (deploy/crds), removed when the test ends, so the
// package's other daemons run, as before, on an apiserver without them.
func installPluginCRDs(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	crds := apiext.NewForConfigOrDie(env.Config).ApiextensionsV1().CustomResourceDefinitions()
	gone := func() bool {
		_, err1 := crds.Get(ctx, "plugins."+v1alpha1.Group, metav1.GetOptions{})
		_, err2 := crds.Get(ctx, "clusterplugins."+v1alpha1.Group, metav1.GetOptions{})
		return apierrors.IsNotFound(err1) && apierrors.IsNotFound(err2)
	}
	// Another test's CRDs of the same names may still be going away.
	testenv.Eventually(t, "no plugin CRDs left by another test", gone)
	// Removed when the test ends, and gone before the next test starts
	// a daemon that must not see them go.
	t.Cleanup(func() {
		for _, plural := range []string{"plugins", "clusterplugins"} {
			_ = crds.Delete(context.Background(), plural+"."+v1alpha1.Group, metav1.DeleteOptions{})
		}
		testenv.Eventually(t, "the plugin CRDs to be gone at the end of the test", gone)
	})
	for _, plural := range []string{"plugins", "clusterplugins"} {
		b, err := os.ReadFile(filepath.Join("..", "..", "deploy", "crds", v1alpha1.Group+"_"+plural+".yaml"))
		if err != nil {
			t.Fatal(err)
		}
		var crd apiextv1.CustomResourceDefinition
		if err := yaml.UnmarshalStrict(b, &crd); err != nil {
			t.Fatal(err)
		}
		if _, err := crds.Create(ctx, &crd, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// Discovery may list a CRD recreated under a name just deleted a
	// moment before its handler serves it: both are waited for.
	dyn := dynamic.NewForConfigOrDie(env.Config)
	testenv.Eventually(t, "the plugin CRDs to be served", func() bool {
		list, err := env.Client.Discovery().ServerResourcesForGroupVersion(schema.GroupVersion{Group: v1alpha1.Group, Version: v1alpha1.Version}.String())
		if err != nil || len(list.APIResources) < 2 {
			return false
		}
		_, err1 := dyn.Resource(v1alpha1.ClusterPluginsGVR).List(ctx, metav1.ListOptions{})
		_, err2 := dyn.Resource(v1alpha1.PluginsGVR).List(ctx, metav1.ListOptions{})
		return err1 == nil && err2 == nil
	})
}

// uninstallPluginCRDs deletes the plugin CRDs and waits until the
// apiserver no longer serves them.
func uninstallPluginCRDs(t *testing.T) {
	t.Helper()
	crds := apiext.NewForConfigOrDie(env.Config).ApiextensionsV1().CustomResourceDefinitions()
	for _, plural := range []string{"plugins", "clusterplugins"} {
		if err := crds.Delete(context.Background(), plural+"."+v1alpha1.Group, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	testenv.Eventually(t, "the plugin CRDs to be gone", func() bool {
		_, err := env.Client.Discovery().ServerResourcesForGroupVersion(schema.GroupVersion{Group: v1alpha1.Group, Version: v1alpha1.Version}.String())
		return apierrors.IsNotFound(err)
	})
}

// churnConfigMaps creates, updates and deletes configmaps of ns until
// the returned func is called. It keeps one object in 25 and paces
// itself, so the plugins' replays stay within a burst of log lines (the
// counts are read from them).
func churnConfigMaps(t *testing.T, ns string) (stop func()) {
	cms := env.Client.CoreV1().ConfigMaps(ns)
	var done atomic.Bool
	var wg sync.WaitGroup
	for g := range 2 {
		wg.Go(func() {
			ctx := context.Background()
			for i := 0; !done.Load(); i++ {
				n := fmt.Sprintf("churn-%d-%d", g, i)
				cm, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: n}}, metav1.CreateOptions{})
				if err == nil {
					cm.Data = map[string]string{"i": strconv.Itoa(i)}
					_, err = cms.Update(ctx, cm, metav1.UpdateOptions{})
				}
				if err == nil && i%25 != 0 {
					err = cms.Delete(ctx, n, metav1.DeleteOptions{})
				}
				if err != nil {
					t.Errorf("churn: %v", err)
					return
				}
				time.Sleep(10 * time.Millisecond) // pacing, not waiting for anything
			}
		})
	}
	return func() { done.Store(true); wg.Wait() }
}

// variant returns wasm with a custom section appended: a module that
// behaves the same, with other bytes (and sha256).
func variant(wasm []byte, n int) []byte {
	payload := append([]byte{1, 'v'}, []byte(strconv.Itoa(n))...)
	out := append(append([]byte(nil), wasm...), 0) // custom section id
	return append(append(out, byte(len(payload))), payload...)
}

func sha(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// applyObject creates o, or updates it to o when it exists; the test's
// cleanup deletes what it created. The status writer updates the object
// as well, so an update that meets a newer resourceVersion reads it again.
func applyObject(t *testing.T, c dynamic.ResourceInterface, o *unstructured.Unstructured) {
	t.Helper()
	ctx := context.Background()
	_, err := c.Get(ctx, o.GetName(), metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		_, err = c.Create(ctx, o, metav1.CreateOptions{})
		t.Cleanup(func() { _ = c.Delete(context.Background(), o.GetName(), metav1.DeleteOptions{}) })
	case err == nil:
		err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
			cur, err := c.Get(ctx, o.GetName(), metav1.GetOptions{})
			if err != nil {
				return err
			}
			o.SetResourceVersion(cur.GetResourceVersion())
			_, err = c.Update(ctx, o, metav1.UpdateOptions{})
			return err
		})
	}
	if err != nil {
		t.Fatal(err)
	}
}
