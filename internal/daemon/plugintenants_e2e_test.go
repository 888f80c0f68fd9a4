package daemon

import (
	"bufio"
	"context"
	"maps"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"

	"github.com/informer-host/informer-host/host"
	"github.com/informer-host/informer-host/internal/pluginapi/v1alpha1"
	"github.com/informer-host/informer-host/internal/pluginresource"
	"github.com/informer-host/informer-host/internal/testenv"
)

// Two tenants, end to end: the daemon has tenancy ceilings for two
// namespaces, each with a ServiceAccount its Role lets read and write
// configmaps and record Events, and a Plugin object whose module (the
// prober, a plugin trying to reach the other tenant) is kept in a
// ConfigMap of its namespace. Each becomes Ready, is handed its own
// namespace's objects only, and its reach into the other namespace is
// refused at run time:
//
//   - cache_get of the other tenant's ConfigMap: ERR_ABSENT, as if absent
//   - cache_list and cache_index of the other namespace: nothing
//   - k8s_write patch, apply, delete, create there: ERR_DENIED, counted in
//     informer_host_plugin_denied_total
//
// Then the attempts beyond a ceiling, each a Plugin object refused whole
// (its plugin never runs) with its reason and the field in its status,
// while both tenants keep running untouched:
//
//   - a Plugin in a namespace without a ceiling (NamespaceNotAllowed)
//   - a binding of a resource the ceiling does not allow
//   - a write verb over the ceiling's; a write resource outside it
//   - grants.impersonate set (refused by the apiserver: not in the schema)
//   - limits.memoryPages over maxMemoryPages
//   - limits.callTimeout 0 (no deadline)
//   - an upstream the ceiling does not allow
//   - one Plugin more than maxPlugins
//   - a configMap source in another namespace
//   - a ServiceAccount without RBAC for its bound resource (Forbidden)
func TestTenantPlugins(t *testing.T) {
	ctx := context.Background()
	teamA, teamB, stray := env.Namespace(t), env.Namespace(t), env.Namespace(t)
	dir := env.DaemonDir(t, nil)
	prober := testenv.WAT(t, "../../host/testdata/plugins/prober.wat")
	all := teamA + ", " + teamB + ", " + stray
	cfg := writeDaemonConfigText(t, dir, `apiVersion: informer-host/v1
kubeconfig: kubeconfig
resources:
  - {name: cms, version: v1, resource: configmaps, namespaces: [`+all+`], labelSelector: "`+testenv.SeenKeysSelector+`"}
  - {name: secrets, version: v1, resource: secrets, namespaces: [`+all+`]}
upstreams:
  - {name: hooks, url: 'https://hooks.example'}
plugins:
  directory: plugins
  sourceCache: cache
tenancy:
  ceilings:
    - namespaces: [`+teamA+`]
      resources: [cms]
      writes: [{resource: cms, verbs: [create, patch, apply, delete]}]
      events: true
      maxPlugins: 1
      maxMemoryPages: 64
      maxCallTimeout: 1s
      writesQPS: 5
      writesBurst: 10
    - namespaces: [`+teamB+`]
      resources: [cms]
      writes: [{resource: cms, verbs: [apply, delete]}]
      events: true
      maxMemoryPages: 64
      maxCallTimeout: 1s
      writesQPS: 5
      writesBurst: 10
server:
  address: 127.0.0.1:0
`)

	// Each namespace: the module in a ConfigMap, the ConfigMap the other
	// tenant probes for, a ServiceAccount with a Role, and one without.
	for _, ns := range []string{teamA, teamB, stray} {
		cms := env.Client.CoreV1().ConfigMaps(ns)
		for _, cm := range []*corev1.ConfigMap{
			{ObjectMeta: metav1.ObjectMeta{Name: "mods"}, BinaryData: map[string][]byte{"prober.wasm": prober}},
			{ObjectMeta: metav1.ObjectMeta{Name: "target"}},
		} {
			if _, err := cms.Create(ctx, cm, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		for _, sa := range []string{"tenant", "norbac"} {
			if _, err := env.Client.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: sa}}, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "tenant"}, Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "list", "watch", "patch", "create", "delete"}},
			{APIGroups: []string{"", "events.k8s.io"}, Resources: []string{"events"}, Verbs: []string{"create", "patch"}},
		}}
		if _, err := env.Client.RbacV1().Roles(ns).Create(ctx, role, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		rb := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "tenant"},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "tenant"},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: "tenant"}}}
		if _, err := env.Client.RbacV1().RoleBindings(ns).Create(ctx, rb, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}

	installPluginCRDs(t)
	r := startReplica(t, cfg, Options{resourcesDiscovery: 50 * time.Millisecond})
	plugins := dynamic.NewForConfigOrDie(env.Config).Resource(v1alpha1.PluginsGVR)

	// spec is a tenant's prober spec, probing other, with changes.
	spec := func(ns, other string, verbs []any, change map[string]any) map[string]any {
		s := map[string]any{
			"source":             map[string]any{"configMap": map[string]any{"name": "mods", "key": "prober.wasm"}},
			"serviceAccountName": "tenant",
			"bindings":           []any{map[string]any{"resource": "cms"}},
			"config":             other,
			"grants": map[string]any{
				"cache":  []any{map[string]any{"resource": "cms"}},
				"writes": map[string]any{"resources": []any{map[string]any{"resource": "cms", "verbs": verbs}}},
			},
		}
		maps.Copy(s, change)
		return s
	}
	create := func(ns, name string, spec map[string]any) {
		t.Helper()
		o := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": v1alpha1.Group + "/" + v1alpha1.Version, "kind": v1alpha1.KindPlugin,
			"metadata": map[string]any{"name": name, "namespace": ns}, "spec": spec,
		}}
		if _, err := plugins.Namespace(ns).Create(ctx, o, metav1.CreateOptions{}); err != nil {
			t.Fatalf("Plugin %s/%s: %v", ns, name, err)
		}
	}
	ready := func(ns, name string) *metav1.Condition {
		st, _ := objectStatus(t, plugins.Namespace(ns), name)
		return meta.FindStatusCondition(st.Conditions, v1alpha1.ConditionReady)
	}
	hostStatus := func(plugin string) (host.PluginStatus, bool) {
		for _, s := range r.d.Host().Status() {
			if s.File == plugin {
				return s, true
			}
		}
		return host.PluginStatus{}, false
	}
	admission := func(ns, name string) (pluginresource.Admission, bool) {
		for _, a := range r.d.PluginResources().Admissions() {
			if a.Namespace == ns && a.Name == name {
				return a, true
			}
		}
		return pluginresource.Admission{}, false
	}
	// own counts the configmaps of ns the daemon watches.
	own := func(ns string) int {
		l, err := env.Client.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{LabelSelector: testenv.SeenKeysSelector})
		if err != nil {
			t.Fatal(err)
		}
		return len(l.Items)
	}
	probes := func(plugin string) map[string]int {
		out := map[string]int{}
		for _, l := range r.logs.Lines("plugin="+plugin, "stream=log") {
			for _, label := range []string{"get=", "listother=", "index=", "patch=", "apply=", "delete=", "create="} {
				if _, seen := out[label]; seen {
					continue
				}
				if i := strings.Index(l, `msg="`+label); i >= 0 {
					v := l[i+len(`msg="`)+len(label):]
					v = v[:strings.IndexByte(v, '"')]
					n, err := strconv.Atoi(v)
					if err != nil {
						t.Fatalf("%s logged %q: %v", plugin, l, err)
					}
					out[label] = n
				}
			}
		}
		return out
	}
	denied := func(plugin string) float64 {
		_, body := testenv.Get(t, r.url+"/metrics")
		total := 0.0
		sc := bufio.NewScanner(strings.NewReader(body))
		for sc.Scan() {
			l := sc.Text()
			if strings.HasPrefix(l, "informer_host_plugin_denied_total{") && strings.Contains(l, `plugin="`+plugin+`"`) {
				n, err := strconv.ParseFloat(l[strings.LastIndexByte(l, ' ')+1:], 64)
				if err != nil {
					t.Fatal(err)
				}
				total += n
			}
		}
		return total
	}

	// The two tenants: Ready, each handed its own namespace's objects.
	tenants := []struct{ ns, other, plugin string }{
		{teamA, teamB, v1alpha1.PluginName(teamA, "a-prober")},
		{teamB, teamA, v1alpha1.PluginName(teamB, "a-prober")},
	}
	create(teamA, "a-prober", spec(teamA, teamB, []any{"create", "patch", "apply", "delete"}, nil))
	create(teamB, "a-prober", spec(teamB, teamA, []any{"apply", "delete"}, nil))
	for _, tn := range tenants {
		testenv.Eventually(t, tn.plugin+" Ready", func() bool {
			c := ready(tn.ns, "a-prober")
			return c != nil && c.Status == metav1.ConditionTrue && c.Reason == v1alpha1.ReasonRunning
		})
		testenv.Eventually(t, tn.plugin+" to be handed its namespace's objects", func() bool {
			st, _ := hostStatus(tn.plugin)
			return st.Synced && int(st.Counters.Delivered) == own(tn.ns)
		})
	}

	// At run time, each one's reach into the other's namespace: refused.
	for _, tn := range tenants {
		want := map[string]int{"get=": -1, "listother=": 0, "index=": 0, "patch=": -8, "apply=": -8, "delete=": -8, "create=": -8}
		testenv.Eventually(t, tn.plugin+" to report its probes", func() bool { return len(probes(tn.plugin)) == len(want) })
		if got := probes(tn.plugin); !maps.Equal(got, want) {
			t.Errorf("%s probing %s: %v, want %v (absent, nothing listed, every write denied)", tn.plugin, tn.other, got, want)
		}
		if n := denied(tn.plugin); n < 4 {
			t.Errorf("denied_total{%s} = %v, want every refused write counted (>= 4)", tn.plugin, n)
		}
		for _, name := range []string{"target", "planted"} {
			cm, err := env.Client.CoreV1().ConfigMaps(tn.other).Get(ctx, name, metav1.GetOptions{})
			if name == "target" && (err != nil || len(cm.Data) != 0) {
				t.Errorf("%s's target after %s's probes: %v, %v; want it untouched", tn.other, tn.plugin, cm.Data, err)
			}
			if name == "planted" && err == nil {
				t.Errorf("%s planted a ConfigMap in %s", tn.plugin, tn.other)
			}
		}
	}
	before := map[string]host.PluginStatus{}
	for _, tn := range tenants {
		before[tn.plugin], _ = hostStatus(tn.plugin)
	}

	// The attempts beyond the ceilings, each refused whole.
	refusals := []struct {
		what, ns, name  string
		spec            map[string]any
		reason, message string
	}{
		{"a namespace without a ceiling", stray, "noceiling", spec(stray, teamA, []any{"apply"}, nil),
			v1alpha1.ReasonNotAllowed, "namespace \"" + stray + "\" has no tenancy ceiling"},
		{"a bound resource outside the ceiling", teamB, "bindsecrets",
			spec(teamB, teamA, []any{"apply"}, map[string]any{"bindings": []any{map[string]any{"resource": "secrets"}}}),
			v1alpha1.ReasonOverCeiling, `spec.bindings[0].resource: resource "secrets" is not among the resources the ceiling of namespace ` + teamB},
		{"a write verb over the ceiling", teamB, "createverb", spec(teamB, teamA, []any{"create"}, nil),
			v1alpha1.ReasonOverCeiling, `verb "create" on "cms" is over the ceiling of namespace ` + teamB},
		{"a write resource outside the ceiling", teamB, "writesecrets",
			spec(teamB, teamA, nil, map[string]any{"grants": map[string]any{"writes": map[string]any{"resources": []any{map[string]any{"resource": "secrets", "verbs": []any{"apply"}}}}}}),
			v1alpha1.ReasonOverCeiling, `writes to "secrets" are not allowed by the ceiling of namespace ` + teamB},
		{"memoryPages over the ceiling", teamB, "bigmemory", spec(teamB, teamA, []any{"apply"}, map[string]any{"limits": map[string]any{"memoryPages": int64(128)}}),
			v1alpha1.ReasonOverCeiling, "spec.limits.memoryPages: 128 is over the ceiling of namespace " + teamB},
		{"callTimeout 0", teamB, "nodeadline", spec(teamB, teamA, []any{"apply"}, map[string]any{"limits": map[string]any{"callTimeout": "0s"}}),
			v1alpha1.ReasonOverCeiling, "spec.limits.callTimeout: 0s (no deadline) is over the ceiling"},
		{"an upstream not allowed", teamB, "upstream",
			spec(teamB, teamA, nil, map[string]any{"grants": map[string]any{"http": map[string]any{"upstreams": []any{"hooks"}}}}),
			v1alpha1.ReasonOverCeiling, `spec.grants.http.upstreams[0]: upstream "hooks" is not allowed`},
		{"one Plugin over maxPlugins", teamA, "b-second", spec(teamA, teamB, []any{"apply"}, nil),
			v1alpha1.ReasonOverCeiling, "namespace " + teamA + " already runs 1 plugins"},
		{"a configMap source in another namespace", teamB, "othercm",
			spec(teamB, teamA, []any{"apply"}, map[string]any{"source": map[string]any{"configMap": map[string]any{"namespace": teamA, "name": "mods", "key": "prober.wasm"}}}),
			v1alpha1.ReasonRefused, "spec.source.configMap.namespace: a Plugin reads ConfigMaps of its own namespace " + teamB + " only"},
		{"a ServiceAccount without RBAC for its binding", teamB, "norbac", spec(teamB, teamA, []any{"apply"}, map[string]any{"serviceAccountName": "norbac"}),
			v1alpha1.ReasonForbidden, "ServiceAccount " + teamB + "/norbac may not list configmaps"},
	}
	for _, c := range refusals {
		create(c.ns, c.name, c.spec)
	}
	// grants.impersonate is not in the Plugin CRD's schema: the apiserver
	// refuses it under strict field validation (kubectl's default), and
	// prunes it otherwise, so it never reaches the daemon.
	imp := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": v1alpha1.Group + "/" + v1alpha1.Version, "kind": v1alpha1.KindPlugin,
		"metadata": map[string]any{"name": "impersonates", "namespace": teamB},
		"spec":     spec(teamB, teamA, []any{"apply"}, nil),
	}}
	_ = unstructured.SetNestedField(imp.Object, map[string]any{"serviceAccount": teamA + "/tenant"}, "spec", "grants", "impersonate")
	_, err := plugins.Namespace(teamB).Create(ctx, imp, metav1.CreateOptions{FieldValidation: metav1.FieldValidationStrict})
	if err == nil || !strings.Contains(err.Error(), `unknown field "spec.grants.impersonate"`) {
		t.Errorf("a Plugin with grants.impersonate: created with %v, want it refused naming the field", err)
	}
	if _, ok := hostStatus(v1alpha1.PluginName(teamB, "impersonates")); ok {
		t.Error("the Plugin with grants.impersonate runs")
	}
	for _, c := range refusals {
		testenv.Eventually(t, c.what+": refused, the reason and the field in the object's status", func() bool {
			rc := ready(c.ns, c.name)
			return rc != nil && rc.Status == metav1.ConditionFalse && rc.Reason == c.reason && strings.Contains(rc.Message, c.message)
		})
		if a, ok := admission(c.ns, c.name); !ok || a.Admitted {
			t.Errorf("%s: admission %+v, want refused", c.what, a)
		}
		if st, ok := hostStatus(v1alpha1.PluginName(c.ns, c.name)); ok {
			t.Errorf("%s: the refused plugin is in the host (%s)", c.what, st.State)
		}
	}
	// Both tenants run on untouched, and on their own objects only.
	for _, tn := range tenants {
		if _, err := env.Client.CoreV1().ConfigMaps(tn.ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "after"}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for _, tn := range tenants {
		testenv.Eventually(t, tn.plugin+" to keep handling its namespace's objects", func() bool {
			st, _ := hostStatus(tn.plugin)
			return st.State == host.StateRunning && int(st.Counters.Delivered) == own(tn.ns)
		})
		st, _ := hostStatus(tn.plugin)
		if b := before[tn.plugin]; st.SHA256 != b.SHA256 || st.LoadedAt != b.LoadedAt || st.Counters.Reloads != b.Counters.Reloads {
			t.Errorf("%s was reloaded by the refused objects: loaded %v → %v, reloads %d → %d", tn.plugin, b.LoadedAt, st.LoadedAt, b.Counters.Reloads, st.Counters.Reloads)
		}
		if c := ready(tn.ns, "a-prober"); c == nil || c.Status != metav1.ConditionTrue {
			t.Errorf("%s no longer Ready: %+v", tn.plugin, c)
		}
	}
	if t.Failed() {
		for _, a := range r.d.PluginResources().Admissions() {
			t.Logf("admission %s/%s: %s %s", a.Namespace, a.Name, a.Reason, a.Message)
		}
	}
}
