// Package deploy holds the Kubernetes manifests (apply with
// `kubectl apply -k deploy/`); its test applies them to a real apiserver
// and checks that the RBAC they grant covers what the daemon does.
package deploy

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"

	authzv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"

	"github.com/informer-host/informer-host/config"
	"github.com/informer-host/informer-host/internal/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) { os.Exit(testenv.Run(m, &env)) }

// manifests returns every object of the files kustomization.yaml lists.
func manifests(t *testing.T) []*unstructured.Unstructured {
	t.Helper()
	var k struct {
		Resources []string `json:"resources"`
	}
	b, err := os.ReadFile("kustomization.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(b, &k); err != nil {
		t.Fatal(err)
	}
	var out []*unstructured.Unstructured
	for _, f := range k.Resources {
		b, err := os.ReadFile(filepath.Join(".", f))
		if err != nil {
			t.Fatal(err)
		}
		dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(b), 4096)
		for {
			var u unstructured.Unstructured
			if err := dec.Decode(&u.Object); errors.Is(err, io.EOF) {
				break
			} else if err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			if len(u.Object) > 0 {
				out = append(out, &u)
			}
		}
	}
	return out
}

func TestManifestsApplyAndGrantWhatTheDaemonNeeds(t *testing.T) {
	objs := manifests(t)
	dyn := dynamic.NewForConfigOrDie(env.Config)
	ctx := context.Background()
	var shipped *config.Config
	for _, u := range objs {
		gvk := u.GroupVersionKind()
		gvr := schema.GroupVersionResource{Group: gvk.Group, Version: gvk.Version, Resource: map[string]string{
			"Namespace": "namespaces", "ServiceAccount": "serviceaccounts", "ClusterRole": "clusterroles",
			"ClusterRoleBinding": "clusterrolebindings", "Role": "roles", "RoleBinding": "rolebindings",
			"ConfigMap": "configmaps", "Deployment": "deployments", "Service": "services",
		}[gvk.Kind]}
		if gvr.Resource == "" {
			t.Fatalf("no resource known for kind %s", gvk.Kind)
		}
		var err error
		if ns := u.GetNamespace(); ns != "" {
			_, err = dyn.Resource(gvr).Namespace(ns).Create(ctx, u, metav1.CreateOptions{})
		} else {
			_, err = dyn.Resource(gvr).Create(ctx, u, metav1.CreateOptions{})
		}
		if err != nil {
			t.Errorf("apply %s %s: %v", gvk.Kind, u.GetName(), err)
		}
		if gvk.Kind == "ConfigMap" && u.GetName() == "informer-host-config" {
			text, _, _ := unstructured.NestedString(u.Object, "data", "config.yaml")
			if shipped, err = config.Parse("deploy/config.yaml", []byte(text)); err != nil {
				t.Errorf("the config the manifests ship does not validate:\n%v", err)
			}
		}
	}
	if shipped == nil {
		t.Fatal("the manifests ship no config")
	}

	// Ask the apiserver, as the daemon's service account, whether it may
	// do what the shipped config makes it do.
	sa := rest.CopyConfig(env.Config)
	sa.Impersonate = rest.ImpersonationConfig{UserName: "system:serviceaccount:informer-host:informer-host"}
	cs := kubernetes.NewForConfigOrDie(sa)
	may := func(attrs authzv1.ResourceAttributes) bool {
		r, err := cs.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx,
			&authzv1.SelfSubjectAccessReview{Spec: authzv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &attrs}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return r.Status.Allowed
	}
	plural := map[string]string{"Pod": "pods"}
	for _, r := range shipped.Resources {
		res := r.Resource
		if res == "" {
			res = plural[r.Kind]
		}
		for _, verb := range []string{"list", "watch"} {
			if !may(authzv1.ResourceAttributes{Group: r.Group, Version: r.Version, Resource: res, Verb: verb}) {
				t.Errorf("the service account may not %s %s", verb, res)
			}
		}
	}
	// rbac.yaml is generated (make rbac): get and update name the lease.
	lease := shipped.LeaderElection.LeaseName
	for _, verb := range []string{"get", "create", "update"} {
		if !may(authzv1.ResourceAttributes{Namespace: "informer-host", Group: "coordination.k8s.io", Resource: "leases", Verb: verb, Name: lease}) {
			t.Errorf("the service account may not %s its lease", verb)
		}
	}
	if may(authzv1.ResourceAttributes{Namespace: "informer-host", Group: "coordination.k8s.io", Resource: "leases", Verb: "update", Name: "someone-elses"}) {
		t.Error("the service account may update a lease not its own")
	}
	if may(authzv1.ResourceAttributes{Resource: "secrets", Verb: "list"}) {
		t.Error("the service account may list secrets, which the shipped config does not watch")
	}
}
