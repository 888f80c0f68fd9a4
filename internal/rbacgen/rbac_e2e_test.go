package rbacgen

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"

	authnv1 "k8s.io/api/authentication/v1"
	authzv1 "k8s.io/api/authorization/v1"
	coordv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/informer-host/informer-host/internal/seenkeys"
	"github.com/informer-host/informer-host/internal/testenv"
)

var env *testenv.Env

// The package's control plane enforces OwnerReferencesPermissionEnforcement,
// as production clusters do, so that a controller's generated RBAC is
// shown to let its children block their owner's deletion.
func TestMain(m *testing.M) {
	os.Exit(testenv.RunWith(m, &env, testenv.Options{AdmissionPlugins: []string{"OwnerReferencesPermissionEnforcement"}}))
}

// apply creates the generated objects as the administrator and removes
// the cluster-wide ones when the test ends (namespaces take the rest).
func apply(t *testing.T, objs []runtime.Object) {
	t.Helper()
	ctx := context.Background()
	rb := env.Client.RbacV1()
	for _, o := range objs {
		var err error
		switch o := o.(type) {
		case *rbacv1.ClusterRole:
			_, err = rb.ClusterRoles().Create(ctx, o, metav1.CreateOptions{})
			t.Cleanup(func() { _ = rb.ClusterRoles().Delete(ctx, o.Name, metav1.DeleteOptions{}) })
		case *rbacv1.ClusterRoleBinding:
			_, err = rb.ClusterRoleBindings().Create(ctx, o, metav1.CreateOptions{})
			t.Cleanup(func() { _ = rb.ClusterRoleBindings().Delete(ctx, o.Name, metav1.DeleteOptions{}) })
		case *rbacv1.Role:
			_, err = rb.Roles(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
		case *rbacv1.RoleBinding:
			_, err = rb.RoleBindings(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
		default:
			t.Fatalf("unexpected object %T", o)
		}
		if err != nil {
			t.Fatalf("apply %T: %v", o, err)
		}
	}
}

// mayFunc asks, with a SelfSubjectAccessReview, whether cs's user may do a.
func mayFunc(t *testing.T, cs kubernetes.Interface) func(a authzv1.ResourceAttributes) bool {
	return func(a authzv1.ResourceAttributes) bool {
		t.Helper()
		rev, err := cs.AuthorizationV1().SelfSubjectAccessReviews().Create(context.Background(),
			&authzv1.SelfSubjectAccessReview{Spec: authzv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &a}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return rev.Status.Allowed
	}
}

// checkAccess reports every action of granted that may refuses and of
// refused that it allows.
func checkAccess(t *testing.T, may func(authzv1.ResourceAttributes) bool, granted, refused []authzv1.ResourceAttributes) {
	t.Helper()
	for _, a := range granted {
		if !may(a) {
			t.Errorf("not allowed, but granted: %+v", a)
		}
	}
	for _, a := range refused {
		if may(a) {
			t.Errorf("allowed, but not granted: %+v", a)
		}
	}
}

// The generated RBAC, applied to the real apiserver (RBAC authorization),
// lets the daemon's ServiceAccount (authenticated by a TokenRequest token)
// do every action the config grants, and refuses a sample of the ones it
// does not: checked with SelfSubjectAccessReviews and with real calls. A
// grant of apply alone lets an apply create its object. The ServiceAccount
// a plugin acts as gets its own RBAC: its plugin's writes and Events get
// through as it, and nothing more.
func TestGeneratedRBACOnTheAPIServer(t *testing.T) {
	env.Require(t)
	ctx := context.Background()
	daemonNS, team, ids, other := env.Namespace(t), env.Namespace(t), env.Namespace(t), env.Namespace(t)
	text := strings.NewReplacer("TEAM", team, "IDS", ids).Replace(`resources:
  - {name: cms, version: v1, resource: configmaps}
  - {name: pods, version: v1, resource: pods, namespaces: [TEAM]}
leaderElection: {enabled: true, leaseName: rbac-lease}
plugins:
  modules:
    - file: writer.wasm
      grants:
        writes:
          resources:
            - {resource: cms, verbs: [create, apply, delete]}
            - {resource: pods, verbs: [patch], subresources: [status], namespaces: [TEAM]}
            - {resource: v1/serviceaccounts, verbs: [apply], namespaces: [TEAM]}
        events: {}
    - file: actor.wasm
      grants:
        impersonate: {serviceAccount: IDS/sa-a}
        writes:
          resources:
            - {resource: v1/secrets, verbs: [create], namespaces: [IDS]}
            - {resource: v1/configmaps, verbs: [apply], namespaces: [IDS]}
        events: {}
`)
	r, err := Generate(ctx, parse(t, text), Options{Namespace: daemonNS, ServiceAccount: "informer-host",
		Name: "informer-host-" + daemonNS, ServerAuth: true})
	if err != nil {
		t.Fatal(err)
	}
	apply(t, r.Objects())
	sa := env.ServiceAccount(t, daemonNS, "informer-host")
	cs := kubernetes.NewForConfigOrDie(sa)

	may := mayFunc(t, cs)
	// The RBAC authorizer sees new roles through its informers.
	testenv.Eventually(t, "the generated RBAC to take effect", func() bool {
		return may(authzv1.ResourceAttributes{Verb: "patch", Resource: "pods", Subresource: "status", Namespace: team}) &&
			may(authzv1.ResourceAttributes{Verb: "list", Resource: "configmaps"}) &&
			may(authzv1.ResourceAttributes{Verb: "patch", Resource: "serviceaccounts", Namespace: team})
	})

	type attrs = authzv1.ResourceAttributes
	granted := []attrs{
		{Verb: "list", Resource: "configmaps"}, {Verb: "watch", Resource: "configmaps"}, {Verb: "get", Resource: "configmaps", Namespace: other},
		{Verb: "list", Resource: "pods", Namespace: team}, {Verb: "watch", Resource: "pods", Namespace: team},
		{Verb: "create", Resource: "configmaps", Namespace: other}, {Verb: "patch", Resource: "configmaps", Namespace: other},
		{Verb: "delete", Resource: "configmaps", Namespace: other},
		{Verb: "patch", Resource: "pods", Namespace: team}, {Verb: "patch", Resource: "pods", Subresource: "status", Namespace: team},
		{Verb: "create", Group: "coordination.k8s.io", Resource: "leases", Namespace: daemonNS},
		{Verb: "get", Group: "coordination.k8s.io", Resource: "leases", Namespace: daemonNS, Name: "rbac-lease"},
		{Verb: "update", Group: "coordination.k8s.io", Resource: "leases", Namespace: daemonNS, Name: "rbac-lease"},
		{Verb: "get", Resource: "configmaps", Namespace: daemonNS}, {Verb: "list", Resource: "configmaps", Namespace: daemonNS},
		{Verb: "create", Resource: "configmaps", Namespace: daemonNS}, {Verb: "update", Resource: "configmaps", Namespace: daemonNS},
		{Verb: "delete", Resource: "configmaps", Namespace: daemonNS},
		{Verb: "create", Resource: "events", Namespace: other}, {Verb: "patch", Resource: "events", Namespace: other},
		{Verb: "create", Group: "events.k8s.io", Resource: "events", Namespace: other},
		{Verb: "patch", Group: "events.k8s.io", Resource: "events", Namespace: other},
		{Verb: "impersonate", Resource: "serviceaccounts", Namespace: ids, Name: "sa-a"},
		{Verb: "create", Group: "authentication.k8s.io", Resource: "tokenreviews"},
		{Verb: "create", Group: "authorization.k8s.io", Resource: "subjectaccessreviews"},
	}
	refused := []attrs{
		{Verb: "list", Resource: "pods"}, {Verb: "list", Resource: "pods", Namespace: other},
		{Verb: "patch", Resource: "pods", Namespace: other}, {Verb: "delete", Resource: "pods", Namespace: team},
		{Verb: "create", Resource: "pods", Namespace: team}, {Verb: "update", Resource: "pods", Subresource: "status", Namespace: team},
		{Verb: "update", Resource: "configmaps", Namespace: other}, {Verb: "deletecollection", Resource: "configmaps", Namespace: other},
		{Verb: "list", Resource: "secrets", Namespace: other}, {Verb: "create", Resource: "secrets", Namespace: ids},
		{Verb: "update", Group: "coordination.k8s.io", Resource: "leases", Namespace: daemonNS, Name: "another-lease"},
		{Verb: "create", Group: "coordination.k8s.io", Resource: "leases", Namespace: other},
		{Verb: "delete", Group: "coordination.k8s.io", Resource: "leases", Namespace: daemonNS, Name: "rbac-lease"},
		{Verb: "delete", Resource: "events", Namespace: other}, {Verb: "list", Resource: "events", Namespace: other},
		{Verb: "impersonate", Resource: "serviceaccounts", Namespace: ids, Name: "sa-b"},
		{Verb: "impersonate", Resource: "users", Name: "admin"}, {Verb: "impersonate", Resource: "groups", Name: "system:masters"},
		{Verb: "get", Resource: "nodes"}, {Verb: "escalate", Group: "rbac.authorization.k8s.io", Resource: "clusterroles"},
	}
	checkAccess(t, may, granted, refused)
	// And every rule the generator printed holds, verb by verb.
	for _, rule := range r.Cluster {
		for _, res := range rule.Resources {
			for _, v := range rule.Verbs {
				resource, sub, _ := strings.Cut(res, "/")
				if !may(attrs{Verb: v, Group: rule.APIGroups[0], Resource: resource, Subresource: sub}) {
					t.Errorf("cluster rule %v: may not %s %s", rule.Why, v, res)
				}
			}
		}
	}

	forbidden := func(what string, err error) {
		t.Helper()
		if !apierrors.IsForbidden(err) {
			t.Errorf("%s: got %v, want forbidden", what, err)
		}
	}
	ok := func(what string, err error) {
		t.Helper()
		if err != nil {
			t.Errorf("%s: %v", what, err)
		}
	}

	// Real calls: the keys plugins were handed, written and read back
	// as the daemon does (internal/seenkeys).
	seen := seenkeys.New(seenkeys.Options{Backend: seenkeys.ConfigMaps(cs.CoreV1(), daemonNS, "leader")})
	seen.Set(ctx, "writer.wasm").Add(seenkeys.Key{Resource: "cms", Namespace: team, Name: "a", UID: "0f8fad5b-d9cb-469f-a165-70867728950e"})
	ok("write the seen keys' ConfigMaps", seen.Flush(ctx))
	seen.Forget("writer.wasm")
	ok("delete the seen keys' ConfigMaps", seen.Close(ctx))

	// Real calls: watches.
	_, err = cs.CoreV1().ConfigMaps("").List(ctx, metav1.ListOptions{})
	ok("list configmaps in every namespace", err)
	_, err = cs.CoreV1().Pods(team).List(ctx, metav1.ListOptions{})
	ok("list pods in the watched namespace", err)
	_, err = cs.CoreV1().Pods(other).List(ctx, metav1.ListOptions{})
	forbidden("list pods elsewhere", err)
	_, _, err = cs.Discovery().ServerGroupsAndResources()
	ok("discovery (the default system:discovery role)", err)

	// Writes: create, server-side apply of a new object with patch alone,
	// delete; update was not granted.
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "created", Namespace: other}}
	_, err = cs.CoreV1().ConfigMaps(other).Create(ctx, cm, metav1.CreateOptions{})
	ok("create a configmap", err)
	_, err = cs.CoreV1().ConfigMaps(other).Apply(ctx, corev1ac.ConfigMap("applied", other).WithData(map[string]string{"k": "v"}),
		metav1.ApplyOptions{FieldManager: "informer-host/writer.wasm"})
	ok("server-side apply creating a configmap", err)
	_, err = cs.CoreV1().ConfigMaps(other).Update(ctx, cm, metav1.UpdateOptions{})
	forbidden("update a configmap", err)
	ok("delete a configmap", cs.CoreV1().ConfigMaps(other).Delete(ctx, "applied", metav1.DeleteOptions{}))
	// A grant of apply alone: the apply that creates the object needs
	// create beside patch.
	_, err = cs.CoreV1().ServiceAccounts(team).Apply(ctx, corev1ac.ServiceAccount("applied", team).WithLabels(map[string]string{"by": "apply"}),
		metav1.ApplyOptions{FieldManager: "informer-host/writer.wasm"})
	ok("server-side apply creating a serviceaccount, granted apply only", err)
	_, err = cs.CoreV1().ServiceAccounts(team).Apply(ctx, corev1ac.ServiceAccount("applied", team).WithLabels(map[string]string{"by": "apply-again"}),
		metav1.ApplyOptions{FieldManager: "informer-host/writer.wasm"})
	ok("server-side apply changing it", err)
	forbidden("delete the serviceaccount, not granted", cs.CoreV1().ServiceAccounts(team).Delete(ctx, "applied", metav1.DeleteOptions{}))

	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: team},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "example.invalid/c"}}}}
	if _, err := env.Client.CoreV1().Pods(team).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	_, err = cs.CoreV1().Pods(team).Patch(ctx, "p", types.MergePatchType, []byte(`{"status":{"message":"patched"}}`), metav1.PatchOptions{}, "status")
	ok("patch a pod's status", err)
	_, err = cs.CoreV1().Pods(team).Patch(ctx, "p", types.MergePatchType, []byte(`{"metadata":{"labels":{"a":"b"}}}`), metav1.PatchOptions{})
	ok("patch a pod", err)
	forbidden("delete a pod", cs.CoreV1().Pods(team).Delete(ctx, "p", metav1.DeleteOptions{}))
	_, err = cs.CoreV1().Secrets(ids).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "s"}}, metav1.CreateOptions{})
	forbidden("create a secret (granted to a plugin that acts as its own ServiceAccount)", err)

	// The lease: create, get and update its own; not another's.
	leases := cs.CoordinationV1().Leases(daemonNS)
	l, err := leases.Create(ctx, &coordv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "rbac-lease"}}, metav1.CreateOptions{})
	ok("create the lease", err)
	if err == nil {
		l, err = leases.Get(ctx, "rbac-lease", metav1.GetOptions{})
		ok("get the lease", err)
		if err == nil {
			holder := "me"
			l.Spec.HolderIdentity = &holder
			_, err = leases.Update(ctx, l, metav1.UpdateOptions{})
			ok("update the lease", err)
		}
	}
	if _, err := env.Client.CoordinationV1().Leases(daemonNS).Create(ctx, &coordv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "another-lease"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	_, err = leases.Get(ctx, "another-lease", metav1.GetOptions{})
	forbidden("get another lease", err)

	// Events, both APIs.
	_, err = cs.CoreV1().Events(other).Create(ctx, &corev1.Event{
		ObjectMeta:     metav1.ObjectMeta{Name: "e1"},
		InvolvedObject: corev1.ObjectReference{Kind: "ConfigMap", Namespace: other, Name: "created"},
		Reason:         "Test", Message: "m", Type: corev1.EventTypeNormal,
	}, metav1.CreateOptions{})
	ok("create a core Event", err)
	_, err = cs.EventsV1().Events(other).Create(ctx, &eventsv1.Event{ObjectMeta: metav1.ObjectMeta{Name: "e2"},
		EventTime: metav1.NowMicro(), ReportingController: "informer-host/writer.wasm", ReportingInstance: "x", Action: "Test",
		Regarding: corev1.ObjectReference{Kind: "ConfigMap", Namespace: other, Name: "created"},
		Reason:    "Test", Note: "m", Type: corev1.EventTypeNormal}, metav1.CreateOptions{})
	ok("create an events.k8s.io Event", err)

	// Impersonation: the granted ServiceAccount, which itself may do
	// nothing here; not another one.
	as := func(name string) kubernetes.Interface {
		c := rest.CopyConfig(sa)
		c.Impersonate = rest.ImpersonationConfig{UserName: fmt.Sprintf("system:serviceaccount:%s:%s", ids, name)}
		return kubernetes.NewForConfigOrDie(c)
	}
	who, err := as("sa-a").AuthenticationV1().SelfSubjectReviews().Create(ctx, &authnv1.SelfSubjectReview{}, metav1.CreateOptions{})
	ok("act as sa-a", err)
	if want := "system:serviceaccount:" + ids + ":sa-a"; err == nil && who.Status.UserInfo.Username != want {
		t.Errorf("acting as %q, want %q", who.Status.UserInfo.Username, want)
	}

	// The identity's own generated RBAC: what actor.wasm's grants need as
	// sa-a, and nothing more.
	saA := as("sa-a")
	mayAs := mayFunc(t, saA)
	testenv.Eventually(t, "sa-a's generated RBAC to take effect", func() bool {
		return mayAs(attrs{Verb: "create", Resource: "secrets", Namespace: ids}) && mayAs(attrs{Verb: "create", Resource: "events", Namespace: other})
	})
	for _, a := range []attrs{
		{Verb: "create", Resource: "secrets", Namespace: ids},
		{Verb: "patch", Resource: "configmaps", Namespace: ids}, {Verb: "create", Resource: "configmaps", Namespace: ids},
		{Verb: "create", Resource: "events", Namespace: other}, {Verb: "patch", Resource: "events", Namespace: other},
		{Verb: "create", Group: "events.k8s.io", Resource: "events", Namespace: other},
		{Verb: "patch", Group: "events.k8s.io", Resource: "events", Namespace: other},
	} {
		if !mayAs(a) {
			t.Errorf("sa-a not allowed, but actor.wasm is granted: %+v", a)
		}
	}
	for _, a := range []attrs{
		{Verb: "create", Resource: "secrets", Namespace: other}, {Verb: "get", Resource: "secrets", Namespace: ids},
		{Verb: "list", Resource: "secrets", Namespace: ids}, {Verb: "update", Resource: "secrets", Namespace: ids},
		{Verb: "delete", Resource: "secrets", Namespace: ids},
		{Verb: "patch", Resource: "configmaps", Namespace: other}, {Verb: "create", Resource: "configmaps", Namespace: other},
		{Verb: "get", Resource: "configmaps", Namespace: ids}, {Verb: "delete", Resource: "configmaps", Namespace: ids},
		{Verb: "update", Resource: "configmaps", Namespace: ids}, {Verb: "list", Resource: "configmaps"},
		{Verb: "list", Resource: "pods", Namespace: team}, {Verb: "patch", Resource: "pods", Namespace: team},
		{Verb: "delete", Resource: "events", Namespace: other},
		{Verb: "impersonate", Resource: "serviceaccounts", Namespace: ids, Name: "sa-b"},
		{Verb: "create", Group: "coordination.k8s.io", Resource: "leases", Namespace: daemonNS},
	} {
		if mayAs(a) {
			t.Errorf("sa-a allowed, but actor.wasm is not granted: %+v", a)
		}
	}
	_, err = saA.CoreV1().Secrets(ids).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "s"}}, metav1.CreateOptions{})
	ok("create a secret as sa-a, as its generated Role allows", err)
	_, err = saA.CoreV1().ConfigMaps(ids).Apply(ctx, corev1ac.ConfigMap("applied", ids).WithData(map[string]string{"k": "v"}),
		metav1.ApplyOptions{FieldManager: "informer-host/actor.wasm"})
	ok("server-side apply creating a configmap as sa-a, granted apply only", err)
	_, err = saA.CoreV1().Secrets(other).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "s"}}, metav1.CreateOptions{})
	forbidden("create a secret as sa-a outside the grant's namespace", err)
	forbidden("delete a configmap as sa-a, not granted", saA.CoreV1().ConfigMaps(ids).Delete(ctx, "applied", metav1.DeleteOptions{}))
	_, err = as("sa-b").AuthenticationV1().SelfSubjectReviews().Create(ctx, &authnv1.SelfSubjectReview{}, metav1.CreateOptions{})
	forbidden("act as sa-b", err)

	// --server-auth=kubernetes.
	_, err = cs.AuthenticationV1().TokenReviews().Create(ctx, &authnv1.TokenReview{Spec: authnv1.TokenReviewSpec{Token: "x"}}, metav1.CreateOptions{})
	ok("create a TokenReview", err)
	_, err = cs.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authzv1.SubjectAccessReview{Spec: authzv1.SubjectAccessReviewSpec{
		User: "someone", NonResourceAttributes: &authzv1.NonResourceAttributes{Path: "/metrics", Verb: "get"}}}, metav1.CreateOptions{})
	ok("create a SubjectAccessReview", err)
}
