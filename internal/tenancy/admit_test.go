package tenancy

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"

	"github.com/informer-host/informer-host/internal/config"
	"github.com/informer-host/informer-host/internal/pluginapi/v1alpha1"
)

const base = `apiVersion: informer-host/v1
resources:
- {name: pods, version: v1, resource: pods}
- {name: configmaps, version: v1, resource: configmaps}
- {name: secrets, version: v1, resource: secrets}
upstreams:
- {name: hooks, url: 'https://hooks.example'}
- {name: billing, url: 'https://billing.example'}
tenancy:
  ceilings:
  - namespaces: [team-a]
    resources: [pods, configmaps]
    writes:
    - {resource: configmaps, verbs: [apply, patch], subresources: [status]}
    events: true
    upstreams: [hooks]
    maxPlugins: 2
    maxMemoryPages: 128
    maxBufferSize: 500
    maxCallTimeout: 200ms
    writesQPS: 2
    writesBurst: 4
  - namespaces: [team-b]
    resources: [pods]
plugins:
  modules:
`

// module parses one plugins.modules entry (indented under "  - ") with
// the built-in defaults, as ParseModule hands a spec to Admit.
func module(t *testing.T, lines ...string) (*config.Config, config.Module) {
	t.Helper()
	doc := base + "  - file: team-a.m.wasm\n"
	for _, l := range lines {
		doc += "    " + l + "\n"
	}
	c, err := config.Parse("config.yaml", []byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	return c, c.Plugins.Modules[0]
}

// The attempts a tenant may make beyond its ceiling, each refused whole
// with the field and the ceiling named.
func TestAdmitRefuses(t *testing.T) {
	cases := []struct {
		name    string
		ns      string
		running int
		lines   []string
		reason  string
		want    []string
	}{
		{"namespace without ceiling", "team-z", 0, []string{"bindings: [{resource: pods}]"}, v1alpha1.ReasonNotAllowed,
			[]string{`Plugin team-z/team-a.m: metadata.namespace: namespace "team-z" has no tenancy ceiling in config.yaml`}},
		{"binding outside resources", "team-a", 0, []string{"bindings: [{resource: secrets}]"}, v1alpha1.ReasonOverCeiling,
			[]string{`spec.bindings[0].resource: resource "secrets" is not among the resources the ceiling of namespace team-a (tenancy.ceilings[0] in config.yaml) allows (pods, configmaps)`}},
		{"cache grant outside resources", "team-a", 0, []string{"bindings: [{resource: pods}]", "grants: {cache: [{resource: secrets}]}"}, v1alpha1.ReasonOverCeiling,
			[]string{`spec.grants.cache[0].resource: resource "secrets" is not among`}},
		{"controller owns outside", "team-a", 0, []string{"controller: {for: pods, owns: [secrets]}",
			"grants: {writes: {resources: [{resource: secrets, verbs: [apply, delete]}]}}"}, v1alpha1.ReasonOverCeiling,
			[]string{`spec.controller.owns[0]: resource "secrets" is not among`, `spec.grants.writes.resources[0].resource: writes to "secrets" are not allowed`}},
		{"controller watches outside", "team-a", 0, []string{"controller: {for: pods, watches: [{resource: secrets, label: app}]}"}, v1alpha1.ReasonOverCeiling,
			[]string{`spec.controller.watches[0].resource: resource "secrets" is not among`}},
		{"write verb over", "team-a", 0, []string{"bindings: [{resource: pods}]", "grants: {writes: {resources: [{resource: v1/configmaps, verbs: [delete]}]}}"}, v1alpha1.ReasonOverCeiling,
			[]string{`spec.grants.writes.resources[0].verbs[0]: verb "delete" on "v1/configmaps" is over the ceiling`}},
		{"write subresource over", "team-a", 0, []string{"bindings: [{resource: pods}]", "grants: {writes: {resources: [{resource: configmaps, verbs: [patch], subresources: [scale]}]}}"}, v1alpha1.ReasonOverCeiling,
			[]string{`spec.grants.writes.resources[0].subresources[0]: subresource "scale"`}},
		{"write in another namespace", "team-a", 0, []string{"bindings: [{resource: pods}]", "grants: {writes: {resources: [{resource: configmaps, verbs: [patch], namespaces: [team-b]}]}}"}, v1alpha1.ReasonOverCeiling,
			[]string{`spec.grants.writes.resources[0].namespaces[0]: namespace "team-b": a Plugin writes only in its own namespace, team-a`}},
		{"events not allowed", "team-b", 0, []string{"bindings: [{resource: pods}]", "grants: {events: {}}"}, v1alpha1.ReasonOverCeiling,
			[]string{`spec.grants.events: Events are not allowed`}},
		{"state not allowed", "team-a", 0, []string{"bindings: [{resource: pods}]", "grants: {state: {}}"}, v1alpha1.ReasonOverCeiling,
			[]string{`spec.grants.state: state is not allowed`}},
		{"metrics not allowed", "team-a", 0, []string{"bindings: [{resource: pods}]", "grants: {metrics: {}}"}, v1alpha1.ReasonOverCeiling,
			[]string{`spec.grants.metrics: metrics are not allowed`}},
		{"upstream not allowed", "team-a", 0, []string{"bindings: [{resource: pods}]", "grants: {http: {upstreams: [billing]}}"}, v1alpha1.ReasonOverCeiling,
			[]string{`spec.grants.http.upstreams[0]: upstream "billing" is not allowed by the ceiling of namespace team-a (tenancy.ceilings[0] in config.yaml) (hooks)`}},
		{"impersonate set", "team-a", 0, []string{"bindings: [{resource: pods}]", "grants: {impersonate: {serviceAccount: kube-system/admin}}"}, v1alpha1.ReasonRefused,
			[]string{`spec.grants.impersonate: a Plugin may not set it: it acts as its serviceAccountName (team-a/bot)`}},
		{"memory over", "team-a", 0, []string{"bindings: [{resource: pods}]", "limits: {memoryPages: 200}"}, v1alpha1.ReasonOverCeiling,
			[]string{`spec.limits.memoryPages: 200 is over the ceiling of namespace team-a (tenancy.ceilings[0] in config.yaml) (maxMemoryPages 128)`}},
		{"buffer over", "team-a", 0, []string{"bindings: [{resource: pods}]", "delivery: {bufferSize: 501}"}, v1alpha1.ReasonOverCeiling,
			[]string{`spec.delivery.bufferSize: 501 is over`}},
		{"call timeout over", "team-a", 0, []string{"bindings: [{resource: pods}]", "limits: {callTimeout: 300ms}"}, v1alpha1.ReasonOverCeiling,
			[]string{`spec.limits.callTimeout: 300ms is over`}},
		{"no deadline", "team-a", 0, []string{"bindings: [{resource: pods}]", "limits: {callTimeout: 0s}"}, v1alpha1.ReasonOverCeiling,
			[]string{`spec.limits.callTimeout: 0s (no deadline) is over`}},
		{"max plugins reached", "team-a", 2, []string{"bindings: [{resource: pods}]"}, v1alpha1.ReasonOverCeiling,
			[]string{`metadata.name: namespace team-a already runs 2 plugins, the most the ceiling of namespace team-a (tenancy.ceilings[0] in config.yaml) allows (maxPlugins)`}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, m := module(t, tc.lines...)
			before := m
			got, r := Admit(context.Background(), c, nil, tc.ns, "bot", m, tc.running)
			if r == nil {
				t.Fatalf("admitted: %+v", got)
			}
			if r.Reason != tc.reason {
				t.Errorf("reason = %s, want %s", r.Reason, tc.reason)
			}
			for _, w := range tc.want {
				if !strings.Contains(r.Problems.Error(), w) {
					t.Errorf("problems lack %q:\n%v", w, r.Problems)
				}
			}
			// Refused whole: nothing of the confinement is half applied.
			if got.Namespace != "" || got.Grants.Impersonate != before.Grants.Impersonate {
				t.Errorf("a refused module came back changed: %+v", got)
			}
		})
	}
}

func TestAdmitConfines(t *testing.T) {
	c, m := module(t, "bindings: [{resource: pods}]",
		"grants: {events: {}, http: {upstreams: [hooks]}, writes: {qps: 50, resources: [{resource: configmaps, verbs: [apply], subresources: [status]}]}}")
	got, r := Admit(context.Background(), c, nil, "team-a", "bot", m, 1)
	if r != nil {
		t.Fatalf("refused: %v", r.Problems)
	}
	if got.Namespace != "team-a" || got.Grants.Impersonate == nil || got.Grants.Impersonate.ServiceAccount != "team-a/bot" {
		t.Errorf("not confined: namespace %q, impersonate %+v", got.Namespace, got.Grants.Impersonate)
	}
	if ns := got.Grants.Writes.Resources[0].Namespaces; !slices.Equal(ns, []string{"team-a"}) {
		t.Errorf("write namespaces = %v", ns)
	}
	if m.Grants.Writes.Resources[0].Namespaces != nil {
		t.Error("Admit changed the module it was given")
	}
	// Left out, the built-in defaults are above the ceiling: lowered to it.
	if got.Limits.MemoryPages != 128 || got.Delivery.BufferSize != 500 || got.Limits.CallTimeout.Duration != 200*time.Millisecond {
		t.Errorf("limits not capped: %+v, buffer %d", got.Limits, got.Delivery.BufferSize)
	}
	if got.Grants.Writes.QPS != 2 || got.Grants.Writes.Burst != 4 {
		t.Errorf("write rate %g/%d, want the namespace budget 2/4", got.Grants.Writes.QPS, got.Grants.Writes.Burst)
	}
}

type fakeReviewer struct {
	deny  map[string]bool // "verb resource[/sub]"
	err   error
	asked []string
}

func (f *fakeReviewer) Allowed(_ context.Context, user string, a authorizationv1.ResourceAttributes) (bool, string, error) {
	k := a.Verb + " " + a.Resource
	if a.Subresource != "" {
		k += "/" + a.Subresource
	}
	f.asked = append(f.asked, user+" "+a.Namespace+" "+k)
	return !f.deny[k], "no RBAC policy matched", f.err
}

func TestAdmitReviews(t *testing.T) {
	c, m := module(t, "bindings: [{resource: pods}]",
		"grants: {writes: {resources: [{resource: configmaps, verbs: [apply], subresources: [status]}]}}")
	rev := &fakeReviewer{}
	if _, r := Admit(context.Background(), c, rev, "team-a", "bot", m, 0); r != nil {
		t.Fatalf("refused: %v", r.Problems)
	}
	want := []string{
		"system:serviceaccount:team-a:bot team-a list pods",
		"system:serviceaccount:team-a:bot team-a watch pods",
		"system:serviceaccount:team-a:bot team-a patch configmaps",
		"system:serviceaccount:team-a:bot team-a create configmaps",
		"system:serviceaccount:team-a:bot team-a patch configmaps/status",
	}
	if !slices.Equal(rev.asked, want) {
		t.Errorf("asked %q\nwant  %q", rev.asked, want)
	}

	for _, tc := range []struct {
		deny, want string
	}{
		{"watch pods", `spec.bindings[0].resource: ServiceAccount team-a/bot may not watch pods in namespace team-a (no RBAC policy matched)`},
		{"create configmaps", `spec.grants.writes.resources[0].verbs[0]: ServiceAccount team-a/bot may not create configmaps in namespace team-a`},
		{"patch configmaps/status", `spec.grants.writes.resources[0].subresources[0]: ServiceAccount team-a/bot may not patch configmaps/status`},
	} {
		_, r := Admit(context.Background(), c, &fakeReviewer{deny: map[string]bool{tc.deny: true}}, "team-a", "bot", m, 0)
		if r == nil || r.Reason != v1alpha1.ReasonForbidden || !strings.Contains(r.Problems.Error(), tc.want) {
			t.Errorf("deny %s: refusal %+v, want %s with %q", tc.deny, r, v1alpha1.ReasonForbidden, tc.want)
		}
	}
	_, r := Admit(context.Background(), c, &fakeReviewer{err: errors.New("apiserver down")}, "team-a", "bot", m, 0)
	if r == nil || !strings.Contains(r.Problems.Error(), "could not review") {
		t.Errorf("a failed review admitted the module: %+v", r)
	}
}
