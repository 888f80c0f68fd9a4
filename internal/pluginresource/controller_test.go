package pluginresource

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"

	"github.com/informer-host/informer-host/internal/config"
	"github.com/informer-host/informer-host/internal/pluginapi/v1alpha1"
)

const baseConfig = `apiVersion: informer-host/v1
resources:
  - {name: pods, version: v1, resource: pods}
plugins:
  modules:
    - {file: taken.wasm, bindings: [{resource: pods}]}
`

// object is a plugin object; ns "" makes a ClusterPlugin.
func object(ns, name string, gen int64, spec map[string]any) *unstructured.Unstructured {
	kind := v1alpha1.KindClusterPlugin
	if ns != "" {
		kind = v1alpha1.KindPlugin
	}
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": v1alpha1.Group + "/" + v1alpha1.Version, "kind": kind, "spec": spec,
	}}
	u.SetNamespace(ns)
	u.SetName(name)
	u.SetGeneration(gen)
	u.SetUID(types.UID(ns + "/" + name))
	return u
}

// testController is a Controller over objs as its synced caches hold
// them, logging to logs.
func testController(t *testing.T, o Options, objs ...*unstructured.Unstructured) (*Controller, *bytes.Buffer) {
	t.Helper()
	logs := &bytes.Buffer{}
	o.Logger = slog.New(slog.NewTextHandler(logs, nil))
	if o.KeyDir == "" {
		o.KeyDir = filepath.Join(t.TempDir(), "keys")
	}
	cluster := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	namespaced := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	for _, u := range objs {
		into := cluster
		if u.GetNamespace() != "" {
			into = namespaced
		}
		if err := into.Add(u); err != nil {
			t.Fatal(err)
		}
	}
	return &Controller{o: o, logged: map[types.UID]string{},
		plugins:        cache.NewGenericLister(namespaced, v1alpha1.PluginsGVR.GroupResource()),
		clusterPlugins: cache.NewGenericLister(cluster, v1alpha1.ClusterPluginsGVR.GroupResource()),
	}, logs
}

func base(t *testing.T, extra string) *config.Config {
	t.Helper()
	c, err := config.Parse(filepath.Join(t.TempDir(), "config.yaml"), []byte(baseConfig+extra))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func pemKey(t *testing.T) string {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalPKIXPublicKey(&k.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}))
}

var pods = []any{map[string]any{"resource": "pods"}}

// admitAll admits a tenant's module as tenancy would, recording what it
// was asked.
type admitAll struct{ calls []string }

func (a *admitAll) admit(_ context.Context, _ *config.Config, ns, sa string, m config.Module, running int) (config.Module, *Refusal) {
	a.calls = append(a.calls, ns+"/"+sa+"/"+m.File+"/"+string(rune('0'+running)))
	m.Namespace = ns
	return m, nil
}

func TestConversion(t *testing.T) {
	key := pemKey(t)
	for _, tc := range []struct {
		name   string
		ns     string
		spec   map[string]any
		check  func(t *testing.T, m config.Module)
		reason string // refused with this reason, and a message holding want
		want   string
	}{
		{name: "oci", spec: map[string]any{"source": map[string]any{"oci": "ghcr.io/org/x:v1", "pullPolicy": "Always"}, "bindings": pods},
			check: func(t *testing.T, m config.Module) {
				if m.Source != "oci://ghcr.io/org/x:v1" || m.PullPolicy != config.PullAlways || m.File != "x.wasm" {
					t.Errorf("module %+v", m)
				}
			}},
		{name: "https with sha256", spec: map[string]any{"source": map[string]any{"https": "https://example.com/x.wasm", "sha256": strings.Repeat("ab", 32)}, "bindings": pods},
			check: func(t *testing.T, m config.Module) {
				if m.Source != "https://example.com/x.wasm" || m.SHA256 != "sha256:"+strings.Repeat("ab", 32) || m.PullPolicy != config.PullIfNotPresent {
					t.Errorf("module %+v", m)
				}
			}},
		{name: "https without sha256", spec: map[string]any{"source": map[string]any{"https": "https://example.com/x.wasm"}, "bindings": pods},
			reason: v1alpha1.ReasonRefused, want: "spec.source: an https:// source needs sha256"},
		{name: "file", spec: map[string]any{"source": map[string]any{"file": "/srv/x.wasm"}, "bindings": pods},
			check: func(t *testing.T, m config.Module) {
				if m.Source != "file:///srv/x.wasm" {
					t.Errorf("source %q", m.Source)
				}
			}},
		{name: "file of a Plugin", ns: "team-a", spec: map[string]any{"source": map[string]any{"file": "/srv/x.wasm"}, "bindings": pods, "serviceAccountName": "bot"},
			reason: v1alpha1.ReasonRefused, want: "spec.source.file: only a ClusterPlugin may read the daemon's disk"},
		{name: "two sources", spec: map[string]any{"source": map[string]any{"oci": "ghcr.io/org/x:v1", "https": "https://e.com/x"}, "bindings": pods},
			reason: v1alpha1.ReasonRefused, want: "spec.source: sets oci and https; set exactly one of oci, https, configMap or file"},
		{name: "no source", spec: map[string]any{"bindings": pods},
			reason: v1alpha1.ReasonRefused, want: "spec.source: required: one of oci, https, configMap or file"},
		{name: "source typo", spec: map[string]any{"source": map[string]any{"ocii": "ghcr.io/org/x:v1"}, "bindings": pods},
			reason: v1alpha1.ReasonRefused, want: `spec.source.ocii: unknown field; did you mean "oci"?`},
		{name: "source field at the top", spec: map[string]any{"source": map[string]any{"oci": "ghcr.io/org/x:v1"}, "pullPolicy": "Always", "bindings": pods},
			reason: v1alpha1.ReasonRefused, want: "spec.pullPolicy: unknown field; it belongs under spec.source"},
		{name: "source setting checked", spec: map[string]any{"source": map[string]any{"oci": "ghcr.io/org/x:v1", "pullPolicy": "Sometimes"}, "bindings": pods},
			reason: v1alpha1.ReasonRefused, want: `spec.source.pullPolicy: unknown pull policy "Sometimes"`},
		{name: "module field checked", spec: map[string]any{"source": map[string]any{"oci": "ghcr.io/org/x:v1"}, "bindings": []any{map[string]any{"resource": "pod"}}},
			reason: v1alpha1.ReasonRefused, want: `spec.bindings[0].resource: binding refers to resource "pod"`},
		{name: "configMap of another namespace", ns: "team-a", spec: map[string]any{"source": map[string]any{"configMap": map[string]any{"namespace": "team-b", "name": "m", "key": "x.wasm"}}, "bindings": pods, "serviceAccountName": "bot"},
			reason: v1alpha1.ReasonRefused, want: "spec.source.configMap.namespace: a Plugin reads ConfigMaps of its own namespace team-a only"},
		{name: "configMap of a ClusterPlugin without namespace", spec: map[string]any{"source": map[string]any{"configMap": map[string]any{"name": "m", "key": "x.wasm"}}, "bindings": pods},
			reason: v1alpha1.ReasonRefused, want: "spec.source.configMap.namespace: required for a ClusterPlugin"},
		{name: "configMap", ns: "team-a", spec: map[string]any{"source": map[string]any{"configMap": map[string]any{"name": "mods", "key": "x.wasm"}}, "bindings": pods, "serviceAccountName": "bot"},
			check: func(t *testing.T, m config.Module) {
				if m.Source != "configmap://team-a/mods/x.wasm" || m.Namespace != "team-a" {
					t.Errorf("module %+v", m)
				}
			}},
		{name: "public keys", spec: map[string]any{"source": map[string]any{"oci": "ghcr.io/org/x:v1"}, "bindings": pods,
			"verify": map[string]any{"required": true, "publicKeys": []any{key, key}}},
			check: func(t *testing.T, m config.Module) {
				if m.Verify == nil || !m.Verify.Required || len(m.Verify.Keys) != 2 || m.Verify.Keys[0] != m.Verify.Keys[1] {
					t.Fatalf("verify %+v", m.Verify)
				}
				b, err := os.ReadFile(m.Verify.Keys[0])
				if err != nil || string(b) != key || !strings.HasPrefix(filepath.Base(m.Verify.Keys[0]), "sha256-") {
					t.Errorf("key file %s: %q, %v", m.Verify.Keys[0], b, err)
				}
			}},
		{name: "not a key", spec: map[string]any{"source": map[string]any{"oci": "ghcr.io/org/x:v1"}, "bindings": pods,
			"verify": map[string]any{"publicKeys": []any{"hello"}}},
			reason: v1alpha1.ReasonRefused, want: "spec.verify.publicKeys[0]: not a PEM public key"},
		{name: "a file key", spec: map[string]any{"source": map[string]any{"oci": "ghcr.io/org/x:v1"}, "bindings": pods,
			"verify": map[string]any{"keys": []any{"/etc/passwd"}}},
			reason: v1alpha1.ReasonRefused, want: "spec.verify.keys: unknown field"},
		{name: "identities without a trusted root", spec: map[string]any{"source": map[string]any{"oci": "ghcr.io/org/x:v1"}, "bindings": pods,
			"verify": map[string]any{"identities": []any{map[string]any{"issuer": "https://issuer", "subject": "me"}}}},
			reason: v1alpha1.ReasonRefused, want: "spec.verify.identities: keyless signatures are checked against a trusted root"},
		{name: "Plugin without serviceAccountName", ns: "team-a", spec: map[string]any{"source": map[string]any{"oci": "ghcr.io/org/x:v1"}, "bindings": pods},
			reason: v1alpha1.ReasonRefused, want: "spec.serviceAccountName: required"},
		{name: "ClusterPlugin with serviceAccountName", spec: map[string]any{"source": map[string]any{"oci": "ghcr.io/org/x:v1"}, "bindings": pods, "serviceAccountName": "bot"},
			reason: v1alpha1.ReasonRefused, want: "spec.serviceAccountName: a ClusterPlugin acts as its grants.impersonate says"},
		{name: "Plugin impersonating", ns: "team-a", spec: map[string]any{"source": map[string]any{"oci": "ghcr.io/org/x:v1"}, "bindings": pods, "serviceAccountName": "bot",
			"grants": map[string]any{"impersonate": map[string]any{"serviceAccount": "team-a/admin"}}},
			reason: v1alpha1.ReasonRefused, want: "spec.grants.impersonate: a Plugin acts as its spec.serviceAccountName"},
		{name: "Plugin admitted", ns: "team-a", spec: map[string]any{"source": map[string]any{"oci": "ghcr.io/org/x:v1"}, "bindings": pods, "serviceAccountName": "bot"},
			check: func(t *testing.T, m config.Module) {
				if m.Namespace != "team-a" || m.File != "team-a.x.wasm" {
					t.Errorf("module %+v", m)
				}
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			adm := &admitAll{}
			c, _ := testController(t, Options{Admit: adm.admit}, object(tc.ns, "x", 3, tc.spec))
			mods := c.Modules(context.Background(), base(t, ""))
			as := c.Admissions()
			if len(as) != 1 {
				t.Fatalf("admissions %+v", as)
			}
			a := as[0]
			if a.Generation != 3 || a.Name != "x" || a.Namespace != tc.ns || a.Plugin != v1alpha1.PluginName(tc.ns, "x") {
				t.Errorf("admission %+v", a)
			}
			if tc.reason != "" {
				if a.Admitted || len(mods) != 0 || a.Reason != tc.reason || !strings.Contains(a.Message, tc.want) {
					t.Errorf("admission %+v, want refused %s with %q", a, tc.reason, tc.want)
				}
				return
			}
			if !a.Admitted || len(mods) != 1 {
				t.Fatalf("admission %+v, want admitted", a)
			}
			tc.check(t, mods[0])
		})
	}
}

// The ConfigMap source's string: a Plugin's namespace is its own.
func TestConfigMapSourceString(t *testing.T) {
	for _, tc := range []struct{ ns, cmNS, want string }{
		{"team-a", "", "configmap://team-a/mods/x.wasm"},
		{"team-a", "team-a", "configmap://team-a/mods/x.wasm"},
		{"", "ops", "configmap://ops/mods/x.wasm"},
	} {
		src := map[string]any{"configMap": map[string]any{"namespace": tc.cmNS, "name": "mods", "key": "x.wasm"}}
		if got, probs := sourceString(src, tc.ns, nil); got != tc.want || len(probs) > 0 {
			t.Errorf("Plugin in %q, configMap namespace %q: %q %v, want %q", tc.ns, tc.cmNS, got, probs, tc.want)
		}
	}
}

func TestTenancyAndNames(t *testing.T) {
	spec := func() map[string]any {
		return map[string]any{"source": map[string]any{"oci": "ghcr.io/org/x:v1"}, "bindings": pods, "serviceAccountName": "bot"}
	}
	cluster := func() map[string]any {
		return map[string]any{"source": map[string]any{"oci": "ghcr.io/org/x:v1"}, "bindings": pods}
	}
	objs := []*unstructured.Unstructured{
		object("team-a", "two", 1, spec()), object("team-a", "one", 1, spec()), object("team-b", "one", 1, spec()),
		object("", "taken", 1, cluster()), object("", "indir", 1, cluster()), object("", "free", 1, cluster()),
	}
	adm := &admitAll{}
	c, _ := testController(t, Options{Admit: adm.admit, Reserved: func() []string { return []string{"indir.wasm"} }}, objs...)
	mods := c.Modules(context.Background(), base(t, ""))
	var names []string
	for _, m := range mods {
		names = append(names, m.File)
	}
	if want := []string{"free.wasm", "team-a.one.wasm", "team-a.two.wasm", "team-b.one.wasm"}; !slices.Equal(names, want) {
		t.Errorf("admitted %v, want %v", names, want)
	}
	// A namespace's Plugins are counted in name order.
	if want := []string{"team-a/bot/team-a.one.wasm/0", "team-a/bot/team-a.two.wasm/1", "team-b/bot/team-b.one.wasm/0"}; !slices.Equal(adm.calls, want) {
		t.Errorf("Admit was asked %v, want %v", adm.calls, want)
	}
	refused := map[string]Admission{}
	for _, a := range c.Admissions() {
		if !a.Admitted {
			refused[a.Name] = a
		}
	}
	if a := refused["taken"]; a.Reason != v1alpha1.ReasonNameConflict || !strings.Contains(a.Message, "config.yaml's plugins.modules has a plugin called taken.wasm") ||
		a.Source != "oci://ghcr.io/org/x:v1" {
		t.Errorf("taken: %+v", a)
	}
	if a := refused["indir"]; a.Reason != v1alpha1.ReasonNameConflict || !strings.Contains(a.Message, "has a file called indir.wasm") {
		t.Errorf("indir: %+v", a)
	}

	// Admit's refusal is the object's; without Admit every Plugin is
	// refused.
	over := func(context.Context, *config.Config, string, string, config.Module, int) (config.Module, *Refusal) {
		return config.Module{}, &Refusal{Reason: v1alpha1.ReasonOverCeiling, Problems: config.Errors{{Message: "spec.grants.state: the ceiling of team-a allows no state"}}}
	}
	for _, tc := range []struct {
		admit        AdmitFunc
		reason, want string
	}{
		{over, v1alpha1.ReasonOverCeiling, "spec.grants.state: the ceiling of team-a allows no state"},
		{nil, v1alpha1.ReasonNotAllowed, "runs no team's plugins"},
	} {
		c, _ := testController(t, Options{Admit: tc.admit}, object("team-a", "one", 1, spec()))
		if mods := c.Modules(context.Background(), base(t, "")); len(mods) != 0 {
			t.Errorf("admitted %v", mods)
		}
		if a := c.Admissions()[0]; a.Admitted || a.Reason != tc.reason || !strings.Contains(a.Message, tc.want) {
			t.Errorf("admission %+v, want %s with %q", a, tc.reason, tc.want)
		}
	}
}

// A refusal is logged once per generation, however often the objects are
// applied again.
func TestRefusalLoggedOncePerGeneration(t *testing.T) {
	bad := map[string]any{"source": map[string]any{"oci": "ghcr.io/org/x:v1"}, "bindngs": pods}
	c, logs := testController(t, Options{}, object("", "bad", 1, bad))
	b := base(t, "")
	for range 3 {
		c.Modules(context.Background(), b)
	}
	if n := strings.Count(logs.String(), "plugin object refused"); n != 1 {
		t.Errorf("logged %d times at generation 1, want once:\n%s", n, logs)
	}
	c2, _ := testController(t, Options{}, object("", "bad", 2, bad))
	c.clusterPlugins = c2.clusterPlugins
	c.Modules(context.Background(), b)
	if n := strings.Count(logs.String(), "plugin object refused"); n != 2 {
		t.Errorf("logged %d times after generation 2, want twice:\n%s", n, logs)
	}
	if !strings.Contains(logs.String(), `spec.bindngs: unknown field; did you mean \"bindings\"?`) {
		t.Errorf("the log does not name the field:\n%s", logs)
	}
}

func TestOnlySpecChangesReload(t *testing.T) {
	spec := map[string]any{"source": map[string]any{"oci": "ghcr.io/org/x:v1"}}
	withStatus := object("", "x", 1, spec)
	withStatus.Object["status"] = map[string]any{"observedGeneration": int64(1)}
	if specChanged(object("", "x", 1, spec), withStatus) {
		t.Error("a status update (same generation) reloads")
	}
	if !specChanged(object("", "x", 1, spec), object("", "x", 2, spec)) {
		t.Error("a new generation does not reload")
	}
}
