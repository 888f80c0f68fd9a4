package tenancy

import (
	"context"
	"os"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/informer-host/informer-host/internal/config"
	"github.com/informer-host/informer-host/internal/pluginapi/v1alpha1"
	"github.com/informer-host/informer-host/internal/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) { os.Exit(testenv.Run(m, &env)) }

// NewReviewer against the real apiserver's RBAC: a tenant whose
// ServiceAccount may list and watch ConfigMaps in its namespace (through
// a binding to the namespace's ServiceAccounts group, which the review
// must count as a token would) and patch and create them (bound to the
// ServiceAccount itself) is admitted with a binding and an apply grant
// on ConfigMaps; asking to bind Pods, or to delete ConfigMaps, it is
// refused Forbidden, naming the field and the missing permission.
func TestAdmitReviewsRealRBAC(t *testing.T) {
	env.Require(t)
	ctx := context.Background()
	team := env.Namespace(t)
	env.ServiceAccount(t, team, "bot")
	rb := env.Client.RbacV1()
	role := func(name string, verbs ...string) {
		if _, err := rb.Roles(team).Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: name},
			Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: verbs}}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	bind := func(name string, subject rbacv1.Subject) {
		if _, err := rb.RoleBindings(team).Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: name},
			Subjects: []rbacv1.Subject{subject}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	role("read", "list", "watch")
	bind("read", rbacv1.Subject{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: "system:serviceaccounts:" + team})
	role("write", "patch", "create")
	bind("write", rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Name: "bot", Namespace: team})

	doc := `apiVersion: informer-host/v1
resources:
- {name: cms, version: v1, resource: configmaps}
- {name: pods, version: v1, resource: pods}
tenancy:
  ceilings:
  - namespaces: [TEAM]
    resources: [cms, pods]
    writes: [{resource: cms, verbs: [apply, delete]}]
plugins:
  modules:
  - {file: ok.wasm, bindings: [{resource: cms}], grants: {writes: {resources: [{resource: cms, verbs: [apply]}]}}}
  - {file: pods.wasm, bindings: [{resource: pods}]}
  - {file: deleter.wasm, bindings: [{resource: cms}], grants: {writes: {resources: [{resource: cms, verbs: [delete]}]}}}
`
	cfg, err := config.Parse("config.yaml", []byte(strings.ReplaceAll(doc, "TEAM", team)))
	if err != nil {
		t.Fatal(err)
	}
	rev := NewReviewer(env.Client)
	var admitted config.Module
	testenv.Eventually(t, "the tenant's RBAC to take effect and its plugin to be admitted", func() bool {
		m, r := Admit(ctx, cfg, rev, team, "bot", cfg.Plugins.Modules[0], 0)
		admitted = m
		return r == nil
	})
	if admitted.Namespace != team {
		t.Errorf("admitted module's namespace %q", admitted.Namespace)
	}
	for i, want := range map[int]string{
		1: "spec.bindings[0].resource: ServiceAccount " + team + "/bot may not list pods in namespace " + team,
		2: "spec.grants.writes.resources[0].verbs[0]: ServiceAccount " + team + "/bot may not delete configmaps in namespace " + team,
	} {
		_, r := Admit(ctx, cfg, rev, team, "bot", cfg.Plugins.Modules[i], 0)
		if r == nil || r.Reason != v1alpha1.ReasonForbidden || !strings.Contains(r.Problems.Error(), want) {
			t.Errorf("module %s: refusal %+v, want %s with %q", cfg.Plugins.Modules[i].File, r, v1alpha1.ReasonForbidden, want)
		}
	}
}
