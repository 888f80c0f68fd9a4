package rbacgen

import (
	"context"
	"testing"

	authzv1 "k8s.io/api/authorization/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/informer-host/informer-host/internal/config"
	"github.com/informer-host/informer-host/internal/testenv"
)

// With plugin resources watched and a tenancy ceiling, the generated
// RBAC, applied to the real apiserver, lets the daemon's ServiceAccount
// read Plugin and ClusterPlugin objects, update their status, record
// Events about them, review a tenant ServiceAccount's access, and act
// as any ServiceAccount of the ceiling's namespace, and no more: not
// another namespace's ServiceAccounts, not the objects' specs.
func TestPluginResourcesRBACOnTheAPIServer(t *testing.T) {
	env.Require(t)
	ctx := context.Background()
	daemonNS, team, other := env.Namespace(t), env.Namespace(t), env.Namespace(t)
	cfg, err := config.Parse("test.yaml", []byte("apiVersion: informer-host/v1\ntenancy: {ceilings: [{namespaces: ["+team+"]}]}\n"))
	if err != nil {
		t.Fatal(err)
	}
	r, err := Generate(ctx, cfg, Options{Namespace: daemonNS, ServiceAccount: "informer-host", Name: "informer-host-" + daemonNS})
	if err != nil {
		t.Fatal(err)
	}
	apply(t, r.Objects())
	sa := env.ServiceAccount(t, daemonNS, "informer-host")
	cs := kubernetes.NewForConfigOrDie(sa)
	may := mayFunc(t, cs)
	type attrs = authzv1.ResourceAttributes
	const g = "informer-host.io"
	testenv.Eventually(t, "the generated RBAC to take effect", func() bool {
		return may(attrs{Verb: "impersonate", Resource: "serviceaccounts", Namespace: team, Name: "bot"}) &&
			may(attrs{Verb: "list", Group: g, Resource: "plugins"})
	})
	granted := []attrs{
		{Verb: "get", Group: g, Resource: "plugins", Namespace: other}, {Verb: "list", Group: g, Resource: "plugins"},
		{Verb: "watch", Group: g, Resource: "plugins"}, {Verb: "list", Group: g, Resource: "clusterplugins"},
		{Verb: "watch", Group: g, Resource: "clusterplugins"},
		{Verb: "update", Group: g, Resource: "plugins", Subresource: "status", Namespace: other},
		{Verb: "update", Group: g, Resource: "clusterplugins", Subresource: "status"},
		{Verb: "create", Group: "events.k8s.io", Resource: "events", Namespace: other},
		{Verb: "patch", Group: "events.k8s.io", Resource: "events", Namespace: other},
		{Verb: "impersonate", Resource: "serviceaccounts", Namespace: team, Name: "any-name"},
		{Verb: "create", Group: "authorization.k8s.io", Resource: "subjectaccessreviews"},
	}
	refused := []attrs{
		{Verb: "update", Group: g, Resource: "plugins", Namespace: other}, {Verb: "create", Group: g, Resource: "plugins", Namespace: other},
		{Verb: "delete", Group: g, Resource: "clusterplugins"}, {Verb: "patch", Group: g, Resource: "plugins", Subresource: "status", Namespace: other},
		{Verb: "impersonate", Resource: "serviceaccounts", Namespace: other, Name: "bot"},
		{Verb: "impersonate", Resource: "users", Name: "admin"},
		{Verb: "create", Resource: "events", Namespace: other}, {Verb: "list", Resource: "secrets", Namespace: team},
		{Verb: "create", Group: "authentication.k8s.io", Resource: "tokenreviews"},
	}
	checkAccess(t, may, granted, refused)

	// Real calls: acting as a tenant's ServiceAccount in the ceiling's
	// namespace, and not elsewhere.
	as := func(ns string) error {
		c := rest.CopyConfig(sa)
		c.Impersonate = rest.ImpersonationConfig{UserName: "system:serviceaccount:" + ns + ":bot"}
		_, err := kubernetes.NewForConfigOrDie(c).AuthorizationV1().SelfSubjectAccessReviews().Create(ctx,
			&authzv1.SelfSubjectAccessReview{Spec: authzv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &attrs{Verb: "get", Resource: "pods", Namespace: ns}}},
			metav1.CreateOptions{})
		return err
	}
	if err := as(team); err != nil {
		t.Errorf("acting as a ServiceAccount of the ceiling's namespace: %v", err)
	}
	if err := as(other); !apierrors.IsForbidden(err) {
		t.Errorf("acting as a ServiceAccount of another namespace: %v, want forbidden", err)
	}
	_, err = cs.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authzv1.SubjectAccessReview{Spec: authzv1.SubjectAccessReviewSpec{
		User: "system:serviceaccount:" + team + ":bot", ResourceAttributes: &attrs{Verb: "list", Resource: "pods", Namespace: team}}}, metav1.CreateOptions{})
	if err != nil {
		t.Errorf("reviewing a tenant's access: %v", err)
	}
}
