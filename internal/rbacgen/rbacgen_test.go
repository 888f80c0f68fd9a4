package rbacgen

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	"github.com/informer-host/informer-host/internal/config"
	"github.com/informer-host/informer-host/internal/pluginapi/v1alpha1"
)

// head leaves plugin resources out: their rules, always there with
// pluginResources.watch auto, have tests of their own
// (TestGeneratePluginResources).
const head = "apiVersion: informer-host/v1\npluginResources: {watch: off}\n"

// rulesText renders rules one a line, "scope group resources [names] verbs",
// scope "*" for the ClusterRole; an identity's after the daemon's, as
// "as namespace/name scope ...".
func rulesText(r *RBAC) []string {
	var out []string
	line := func(scope string, rule Rule) string {
		s := fmt.Sprintf("%s %q %s", scope, rule.APIGroups[0], strings.Join(rule.Resources, ","))
		if len(rule.ResourceNames) > 0 {
			s += " [" + strings.Join(rule.ResourceNames, ",") + "]"
		}
		return s + " " + strings.Join(rule.Verbs, ",")
	}
	for _, rule := range r.Cluster {
		out = append(out, line("*", rule))
	}
	for _, ns := range r.Namespaces() {
		for _, rule := range r.Namespaced[ns] {
			out = append(out, line(ns, rule))
		}
	}
	for _, id := range r.Identities {
		as := "as " + id.Namespace + "/" + id.ServiceAccount + " "
		for _, rule := range id.Cluster {
			out = append(out, line(as+"*", rule))
		}
		for _, ns := range id.Namespaces() {
			for _, rule := range id.Namespaced[ns] {
				out = append(out, line(as+ns, rule))
			}
		}
	}
	return out
}

func parse(t *testing.T, text string) *config.Config {
	t.Helper()
	cfg, err := config.Parse("test.yaml", []byte(head+text))
	if err != nil {
		t.Fatalf("config does not parse:\n%v", err)
	}
	return cfg
}

func TestGenerate(t *testing.T) {
	resolve := func(_ context.Context, gvk schema.GroupVersionKind) (string, error) {
		if gvk.Kind == "Widget" {
			return "", errors.New("no kind Widget")
		}
		return strings.ToLower(gvk.Kind) + "s", nil
	}
	tests := []struct {
		name    string
		config  string
		opts    Options
		want    []string
		wantErr string
	}{{
		name:   "nothing configured gives no rules",
		config: "",
		want:   nil,
	}, {
		name: "watches: cluster-wide, per namespace, and what a cluster-wide one covers is not repeated",
		config: `resources:
  - {name: pods, version: v1, resource: pods}
  - {name: deploys, group: apps, version: v1, resource: deployments, namespaces: [b, a]}
  - {name: pods-in-a, version: v1, resource: pods, namespaces: [a], labelSelector: x=y}
  - {name: cms, version: v1, resource: configmaps}
`,
		want: []string{
			`* "" configmaps,pods get,list,watch`,
			`a "apps" deployments get,list,watch`,
			`b "apps" deployments get,list,watch`,
		},
	}, {
		name: "built-in kinds without discovery: their exact plurals and scope",
		config: `resources:
  - {name: pods, version: v1, kind: Pod}
  - {name: eps, version: v1, kind: Endpoints}
  - {name: policies, group: networking.k8s.io, version: v1, kind: NetworkPolicy}
  - {name: slices, group: discovery.k8s.io, version: v1, kind: EndpointSlice}
  - {name: ingclasses, group: networking.k8s.io, version: v1, kind: IngressClass}
`,
		want: []string{
			`* "" endpoints,pods get,list,watch`,
			`* "discovery.k8s.io" endpointslices get,list,watch`,
			`* "networking.k8s.io" ingressclasses,networkpolicies get,list,watch`,
		},
	}, {
		name:    "a kind-only resource that is not built in, without discovery, asks for its plural",
		config:  "resources:\n  - {name: w, group: example.com, version: v1, kind: Widget}\n",
		wantErr: `test.yaml: resource "w" names kind Widget.example.com only, which is not a built-in kind, and RBAC rules name plural resources: set its resource (probably "widgets") instead of kind, or pass --kubeconfig`,
	}, {
		name:   "a kind-only resource resolved through discovery",
		config: "resources:\n  - {name: pods, version: v1, kind: Pod}\n",
		opts:   Options{Resolve: resolve},
		want:   []string{`* "" pods get,list,watch`},
	}, {
		name:    "a kind discovery does not know is an error",
		config:  "resources:\n  - {name: w, group: example.com, version: v1, kind: Widget}\n",
		opts:    Options{Resolve: resolve},
		wantErr: `test.yaml: resource "w": kind Widget.example.com: no kind Widget`,
	}, {
		name: "leader election: its lease by name in the daemon's namespace, create unnamed; the seen keys' ConfigMaps there",
		config: `leaderElection: {enabled: true, leaseName: le}
`,
		want: []string{
			`ih "" configmaps create,delete,get,list,update`,
			`ih "coordination.k8s.io" leases create`,
			`ih "coordination.k8s.io" leases [le] get,update`,
		},
	}, {
		name:   "leader election in the namespace the file names",
		config: "leaderElection: {enabled: true}\n",
		opts:   Options{LeaseNamespace: "elsewhere"},
		want: []string{
			`elsewhere "" configmaps create,delete,get,list,update`,
			`elsewhere "coordination.k8s.io" leases create`,
			`elsewhere "coordination.k8s.io" leases [informer-host] get,update`,
		},
	}, {
		name:   "sharding: every member lease in the sharding namespace, unnamed; the seen keys' ConfigMaps there",
		config: "sharding: {enabled: true}\n",
		opts:   Options{ShardNamespace: "shards"},
		want: []string{
			`shards "" configmaps create,delete,get,list,update`,
			`shards "coordination.k8s.io" leases create,delete,get,list,update`,
		},
	}, {
		name:   "leader election disabled needs no lease",
		config: "leaderElection: {enabled: false}\n",
		want:   nil,
	}, {
		name: "writes: exactly the granted verbs, apply as patch and create (on a subresource, which an apply never creates, patch only), subresources, namespaces, both resource spellings",
		config: `resources:
  - {name: pods, version: v1, resource: pods}
plugins:
  modules:
    - file: a.wasm
      grants:
        writes:
          resources:
            - {resource: pods, verbs: [apply, patch], subresources: [status]}
            - {resource: v1/configmaps, verbs: [create, delete], namespaces: [x]}
            - {resource: apps/v1/deployments, verbs: [delete]}
    - file: b.wasm
      grants:
        writes:
          resources:
            - {resource: v1/configmaps, verbs: [create], namespaces: [x, y]}
`,
		want: []string{
			`* "" pods create,get,list,patch,watch`,
			`* "" pods/status patch`,
			`* "apps" deployments delete`,
			`x "" configmaps create,delete`,
			`y "" configmaps create`,
		},
	}, {
		name: "writes: apply alone is patch and create",
		config: `plugins:
  modules:
    - file: a.wasm
      grants:
        writes:
          resources:
            - {resource: v1/configmaps, verbs: [apply], namespaces: [x]}
`,
		want: []string{`x "" configmaps create,patch`},
	}, {
		name: "writes without namespaces go to the watched ones when every resource names namespaces, namespaced resources only",
		config: `resources:
  - {name: pods, version: v1, resource: pods, namespaces: [a]}
  - {name: cms, version: v1, kind: ConfigMap, namespaces: [b]}
plugins:
  modules:
    - file: a.wasm
      grants:
        writes:
          resources:
            - {resource: pods, verbs: [delete]}
            - {resource: v1/secrets, verbs: [create]}
            - {resource: v1/namespaces, verbs: [patch]}
            - {resource: example.com/v1/widgets, verbs: [patch]}
            - {resource: v1/services, verbs: [patch], namespaces: [c]}
`,
		want: []string{
			`* "" namespaces patch`,
			`* "example.com" widgets patch`,
			`a "" pods delete,get,list,watch`,
			`a "" secrets create`,
			`b "" configmaps get,list,watch`,
			`b "" pods delete`,
			`b "" secrets create`,
			`c "" services patch`,
		},
	}, {
		name: "plugins.default's grants count: a module the config does not name gets them",
		config: `plugins:
  default:
    grants:
      writes:
        resources:
          - {resource: v1/secrets, verbs: [create]}
`,
		want: []string{`* "" secrets create`},
	}, {
		name: "events: create and patch, core and events.k8s.io, cluster-wide",
		config: `resources:
  - {name: pods, version: v1, resource: pods, namespaces: [a]}
  - {name: nodes, version: v1, resource: nodes}
plugins:
  modules:
    - file: a.wasm
      grants: {events: {}}
`,
		want: []string{
			`* "" events create,patch`,
			`* "" nodes get,list,watch`,
			`* "events.k8s.io" events create,patch`,
			`a "" pods get,list,watch`,
		},
	}, {
		name: "events: only in the watched namespaces when every resource names namespaces",
		config: `resources:
  - {name: pods, version: v1, resource: pods, namespaces: [a]}
  - {name: cms, version: v1, resource: configmaps, namespaces: [b]}
plugins:
  modules:
    - file: a.wasm
      grants: {events: {}}
`,
		want: []string{
			`a "" events create,patch`,
			`a "" pods get,list,watch`,
			`a "events.k8s.io" events create,patch`,
			`b "" configmaps get,list,watch`,
			`b "" events create,patch`,
			`b "events.k8s.io" events create,patch`,
		},
	}, {
		name: "impersonation: exactly the ServiceAccounts, and their plugins' writes and Events are not the daemon's",
		config: `plugins:
  modules:
    - file: a.wasm
      grants:
        impersonate: {serviceAccount: team/sa-a}
        events: {}
        writes:
          resources:
            - {resource: v1/secrets, verbs: [patch]}
    - file: b.wasm
      grants:
        impersonate: {serviceAccount: team/sa-b}
    - file: c.wasm
      grants:
        impersonate: {serviceAccount: other/sa-c}
    - file: d.wasm
      grants:
        impersonate: {serviceAccount: team/sa-a}
        writes:
          resources:
            - {resource: v1/configmaps, verbs: [apply], namespaces: [x]}
`,
		want: []string{
			`other "" serviceaccounts [sa-c] impersonate`,
			`team "" serviceaccounts [sa-a] impersonate`,
			`team "" serviceaccounts [sa-b] impersonate`,
			`as team/sa-a * "" events create,patch`,
			`as team/sa-a * "" secrets patch`,
			`as team/sa-a * "events.k8s.io" events create,patch`,
			`as team/sa-a x "" configmaps create,patch`,
		},
	}, {
		name: "a controller with neither finalizer nor owns: its identity patches the primary for the requeue time, where the primaries are",
		config: `resources:
  - {name: widgets, group: example.com, version: v1, resource: widgets, namespaces: [a]}
plugins:
  modules:
    - file: ctl.wasm
      controller: {for: widgets}
      grants:
        impersonate: {serviceAccount: team/ctl}
        writes: {resources: [{resource: v1/configmaps, verbs: [create], namespaces: [a]}]}
`,
		want: []string{
			`a "example.com" widgets get,list,watch`,
			`team "" serviceaccounts [ctl] impersonate`,
			`as team/ctl a "" configmaps create`,
			`as team/ctl a "example.com" widgets patch`,
		},
	}, {
		name: "a controller without a writes grant: the host writes nothing as it, so its identity gets nothing",
		config: `resources:
  - {name: widgets, group: example.com, version: v1, resource: widgets, namespaces: [a]}
plugins:
  modules:
    - file: ctl.wasm
      controller: {for: widgets}
      grants:
        impersonate: {serviceAccount: team/ctl}
`,
		want: []string{
			`a "example.com" widgets get,list,watch`,
			`team "" serviceaccounts [ctl] impersonate`,
		},
	}, {
		name: "a controller's identity: its grants, the finalizer's reads, the owner's finalizers for blockOwnerDeletion; the daemon only watches",
		config: `resources:
  - {name: widgets, group: example.com, version: v1, resource: widgets, namespaces: [a, b]}
  - {name: cms, version: v1, resource: configmaps, namespaces: [a, b]}
  - {name: secrets, version: v1, resource: secrets, namespaces: [a, b]}
plugins:
  modules:
    - file: ctl.wasm
      controller: {for: widgets, owns: [cms, secrets], finalizer: example.com/cleanup, onRemove: release}
      grants:
        impersonate: {serviceAccount: team/ctl}
        writes:
          resources:
            - {resource: widgets, verbs: [patch, apply], subresources: [status]}
            - {resource: cms, verbs: [apply, delete]}
            - {resource: secrets, verbs: [apply, delete], namespaces: [a]}
`,
		want: []string{
			`a "" configmaps,secrets get,list,watch`,
			`a "example.com" widgets get,list,watch`,
			`b "" configmaps,secrets get,list,watch`,
			`b "example.com" widgets get,list,watch`,
			`team "" serviceaccounts [ctl] impersonate`,
			`as team/ctl a "" configmaps,secrets create,delete,patch`,
			`as team/ctl a "example.com" widgets create,get,list,patch`,
			`as team/ctl a "example.com" widgets/finalizers update`,
			`as team/ctl a "example.com" widgets/status patch`,
			`as team/ctl b "" configmaps create,delete,patch`,
			`as team/ctl b "example.com" widgets create,get,list,patch`,
			`as team/ctl b "example.com" widgets/finalizers update`,
			`as team/ctl b "example.com" widgets/status patch`,
		},
	}, {
		name: "a cluster-scoped primary on the daemon's identity: its finalizers everywhere, no list without onRemove: release",
		config: `resources:
  - {name: nss, version: v1, resource: namespaces}
  - {name: cms, version: v1, resource: configmaps}
plugins:
  modules:
    - file: ctl.wasm
      controller: {for: nss, owns: [cms], finalizer: example.com/cleanup}
      grants:
        writes:
          resources:
            - {resource: nss, verbs: [patch]}
            - {resource: cms, verbs: [apply, delete]}
`,
		want: []string{
			`* "" configmaps create,delete,get,list,patch,watch`,
			`* "" namespaces get,list,patch,watch`,
			`* "" namespaces/finalizers update`,
		},
	}, {
		name:   "server auth: token and access reviews",
		config: "",
		opts:   Options{ServerAuth: true},
		want: []string{
			`* "authentication.k8s.io" tokenreviews create`,
			`* "authorization.k8s.io" subjectaccessreviews create`,
		},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := tt.opts
			o.Namespace, o.ServiceAccount = "ih", "daemon"
			r, err := Generate(context.Background(), parse(t, tt.config), o)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want it to contain %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := rulesText(r); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("rules:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tt.want, "\n"))
			}
		})
	}
}

func TestGenerateRequiresTheIdentity(t *testing.T) {
	if _, err := Generate(context.Background(), parse(t, ""), Options{Namespace: "ns"}); err == nil {
		t.Error("no error without a service account")
	}
}

// Every rule says why it is there, one reason per config entry needing it.
func TestGenerateSaysWhy(t *testing.T) {
	cfg := parse(t, `resources:
  - {name: pods, version: v1, resource: pods}
plugins:
  modules:
    - file: a.wasm
      grants:
        writes:
          resources:
            - {resource: pods, verbs: [patch]}
`)
	r, err := Generate(context.Background(), cfg, Options{Namespace: "ih", ServiceAccount: "d"})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{`plugin "a.wasm" writes pods`, `watch resource "pods"`}
	if len(r.Cluster) != 1 || !reflect.DeepEqual(r.Cluster[0].Why, want) {
		t.Errorf("rules %+v, want one saying %q", r.Cluster, want)
	}
}

// What Write prints decodes to exactly Objects(), the same bytes every
// time; names that YAML would misread are quoted.
func TestWriteRoundTrips(t *testing.T) {
	cfg := parse(t, `resources:
  - {name: pods, version: v1, resource: pods, namespaces: ["0123", "true"]}
  - {name: cms, version: v1, resource: configmaps}
leaderElection: {enabled: true, leaseName: "1e3"}
plugins:
  modules:
    - file: a.wasm
      grants:
        impersonate: {serviceAccount: "null/on"}
        writes:
          resources:
            - {resource: cms, verbs: [apply]}
`)
	o := Options{Namespace: "ih", ServiceAccount: "no", Name: "y"}
	r, err := Generate(context.Background(), cfg, o)
	if err != nil {
		t.Fatal(err)
	}
	var first bytes.Buffer
	if err := r.Write(&first, "header line\n\nand another"); err != nil {
		t.Fatal(err)
	}
	for range 5 {
		again, err := Generate(context.Background(), cfg, o)
		if err != nil {
			t.Fatal(err)
		}
		var b bytes.Buffer
		if err := again.Write(&b, "header line\n\nand another"); err != nil {
			t.Fatal(err)
		}
		if b.String() != first.String() {
			t.Fatalf("output differs between runs:\n%s\n---\n%s", first.String(), b.String())
		}
	}
	if !strings.HasPrefix(first.String(), "# header line\n#\n# and another\napiVersion:") {
		t.Errorf("header not printed as comments:\n%s", first.String())
	}
	var got []runtime.Object
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(first.Bytes()), 4096)
	for {
		var raw map[string]any
		if err := dec.Decode(&raw); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		b, _ := yaml.Marshal(raw)
		var obj runtime.Object
		switch raw["kind"] {
		case "ClusterRole":
			obj = &rbacv1.ClusterRole{}
		case "ClusterRoleBinding":
			obj = &rbacv1.ClusterRoleBinding{}
		case "Role":
			obj = &rbacv1.Role{}
		case "RoleBinding":
			obj = &rbacv1.RoleBinding{}
		default:
			t.Fatalf("unexpected kind %v", raw["kind"])
		}
		if err := yaml.UnmarshalStrict(b, obj); err != nil {
			t.Fatal(err)
		}
		got = append(got, obj)
	}
	if n := len(got); n != 12 {
		t.Errorf("%d objects, want 12 (the daemon's ClusterRole, four Roles and their bindings; the identity's ClusterRole and binding)", n)
	}
	if want := r.Objects(); !reflect.DeepEqual(got, want) {
		t.Errorf("decoded:\n%s\nwant:\n%s", dump(got), dump(want))
	}
	var namespaces []string
	for _, o := range got {
		if role, ok := o.(*rbacv1.Role); ok {
			namespaces = append(namespaces, role.Namespace)
		}
	}
	if want := []string{"0123", "ih", "null", "true"}; !sort.StringsAreSorted(namespaces) || !reflect.DeepEqual(namespaces, want) {
		t.Errorf("Roles in %q, want %q", namespaces, want)
	}
}

func dump(objs []runtime.Object) string {
	b, _ := yaml.Marshal(objs)
	return string(b)
}

func TestScalar(t *testing.T) {
	for in, want := range map[string]string{
		"pods": "pods", "": `""`, "coordination.k8s.io": "coordination.k8s.io", "pods/status": "pods/status",
		"1e3": `"1e3"`, "true": `"true"`, "no": `"no"`, "Pod": `"Pod"`, "a b": `"a b"`, "-x": `"-x"`, "*": `"*"`,
	} {
		if got := scalar(in); got != want {
			t.Errorf("scalar(%q) = %s, want %s", in, got, want)
		}
	}
}

func TestGeneratePluginResources(t *testing.T) {
	daemon := []string{
		`* "events.k8s.io" events create,patch`,
		`* "informer-host.io" clusterplugins,plugins get,list,watch`,
		`* "informer-host.io" clusterplugins/status,plugins/status update`,
	}
	tests := []struct {
		name, config string
		want         []string
	}{{
		name: "watch off: nothing", config: "pluginResources: {watch: off}\n",
	}, {
		name: "watch auto (the default): read them, write their status and Events", config: "",
		want: daemon,
	}, {
		name: "ceilings: impersonate in exactly their namespaces, and access reviews",
		config: `tenancy:
  ceilings:
  - namespaces: [team-b, team-a]
  - namespaces: [team-c]
`,
		want: append([]string{`* "authorization.k8s.io" subjectaccessreviews create`}, append(slices.Clone(daemon),
			`team-a "" serviceaccounts impersonate`, `team-b "" serviceaccounts impersonate`, `team-c "" serviceaccounts impersonate`)...),
	}, {
		name: "a ceiling for every namespace: impersonate cluster-wide",
		config: `tenancy:
  ceilings:
  - namespaces: [team-a]
  - namespaces: ['*']
`,
		want: append([]string{`* "" serviceaccounts impersonate`, `* "authorization.k8s.io" subjectaccessreviews create`}, daemon...),
	}, {
		name: "ceilings with watch off: nothing", config: "pluginResources: {watch: off}\ntenancy: {ceilings: [{namespaces: [team-a]}]}\n",
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := config.Parse("test.yaml", []byte("apiVersion: informer-host/v1\n"+tt.config))
			if err != nil {
				t.Fatal(err)
			}
			r, err := Generate(context.Background(), cfg, Options{Namespace: "ih", ServiceAccount: "daemon"})
			if err != nil {
				t.Fatal(err)
			}
			if got := rulesText(r); !slices.Equal(got, tt.want) {
				t.Errorf("rules:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tt.want, "\n"))
			}
		})
	}
	if pluginGroup != v1alpha1.Group {
		t.Errorf("pluginGroup %q is not the plugin resources' group %q", pluginGroup, v1alpha1.Group)
	}
}
