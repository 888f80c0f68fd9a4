package deploy

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	authzv1 "k8s.io/api/authorization/v1"
	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"

	"github.com/informer-host/informer-host/internal/config"
	"github.com/informer-host/informer-host/internal/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) { os.Exit(testenv.Run(m, &env)) }

// manifests returns every object of the kustomization in dir: the files
// its resources list, the kustomizations of the directories they list,
// and its patches applied.
func manifests(t *testing.T, dir string) []*unstructured.Unstructured {
	t.Helper()
	var k struct {
		Resources []string `json:"resources"`
		Patches   []struct {
			Path string `json:"path"`
		} `json:"patches"`
	}
	b, err := os.ReadFile(filepath.Join(dir, "kustomization.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(b, &k); err != nil {
		t.Fatal(err)
	}
	var out []*unstructured.Unstructured
	for _, f := range k.Resources {
		f = filepath.Join(dir, f)
		if st, err := os.Stat(f); err == nil && st.IsDir() {
			out = append(out, manifests(t, f)...)
			continue
		}
		out = append(out, decodeAll(t, f)...)
	}
	for _, p := range k.Patches {
		for _, patch := range decodeAll(t, filepath.Join(dir, p.Path)) {
			target := find(out, patch.GetKind(), patch.GetName())
			if target == nil {
				t.Fatalf("%s: patches %s %s, which the resources lack", p.Path, patch.GetKind(), patch.GetName())
			}
			merge(target.Object, patch.Object)
		}
	}
	return out
}

// merge applies patch to obj as a JSON merge patch does. The overlays'
// patches set map fields only (no lists), where kustomize's strategic
// merge does the same.
func merge(obj, patch map[string]any) {
	for k, v := range patch {
		pm, ok := v.(map[string]any)
		if om, isMap := obj[k].(map[string]any); ok && isMap {
			merge(om, pm)
			continue
		}
		obj[k] = v
	}
}

func find(objs []*unstructured.Unstructured, kind, name string) *unstructured.Unstructured {
	for _, u := range objs {
		if u.GetKind() == kind && u.GetName() == name {
			return u
		}
	}
	return nil
}

// decodeAll returns the objects of a YAML file of one or more documents.
func decodeAll(t *testing.T, file string) []*unstructured.Unstructured {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var out []*unstructured.Unstructured
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(b), 4096)
	for {
		var u unstructured.Unstructured
		if err := dec.Decode(&u.Object); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		if len(u.Object) > 0 {
			out = append(out, &u)
		}
	}
	return out
}

func TestManifestsApplyAndGrantWhatTheDaemonNeeds(t *testing.T) {
	env.Require(t)
	shipped, may, _ := apply(t, ".")
	if !shipped.LeaderElection.Enabled {
		t.Error("the base does not run with leader election")
	}
	// rbac.yaml is generated (make rbac): get and update name the lease.
	lease := shipped.LeaderElection.LeaseName
	for _, verb := range []string{"get", "create", "update"} {
		allowed(t, may, authzv1.ResourceAttributes{Namespace: "informer-host", Group: "coordination.k8s.io", Resource: "leases", Verb: verb, Name: lease})
	}
	if may(authzv1.ResourceAttributes{Namespace: "informer-host", Group: "coordination.k8s.io", Resource: "leases", Verb: "update", Name: "someone-elses"}) {
		t.Error("the service account may update a lease not its own")
	}
}

// The FlowSchema the base ships is valid and takes the daemon's requests:
// the apiserver finds its priority level (not dangling) and answers a
// request of the daemon's ServiceAccount with that FlowSchema's uid in
// its priority-and-fairness header.
func TestFlowSchemaClassifiesTheDaemon(t *testing.T) {
	env.Require(t)
	apply(t, ".")
	ctx := context.Background()
	fs, err := env.Client.FlowcontrolV1().FlowSchemas().Get(ctx, "informer-host", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, "the FlowSchema to be found not dangling", func() bool {
		cur, err := env.Client.FlowcontrolV1().FlowSchemas().Get(ctx, "informer-host", metav1.GetOptions{})
		if err != nil {
			return false
		}
		for _, c := range cur.Status.Conditions {
			if c.Type == flowcontrolv1.FlowSchemaConditionDangling {
				return c.Status == flowcontrolv1.ConditionFalse
			}
		}
		return false
	})
	sa := rest.CopyConfig(env.Config)
	sa.Impersonate = rest.ImpersonationConfig{UserName: "system:serviceaccount:informer-host:informer-host"}
	hc, err := rest.HTTPClientFor(sa)
	if err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, "a request of the daemon to be classified by its FlowSchema", func() bool {
		resp, err := hc.Get(sa.Host + "/api/v1/namespaces/informer-host/configmaps")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.Header.Get(flowcontrolv1.ResponseHeaderMatchedFlowSchemaUID) == string(fs.UID)
	})
}

// The sharded overlay runs three members with sharding on, a
// PodDisruptionBudget that lets one go at a time, and the RBAC the members'
// Leases need.
func TestShardedOverlay(t *testing.T) {
	env.Require(t)
	shipped, may, objs := apply(t, "sharded")
	if !shipped.Sharding.Enabled || shipped.LeaderElection.Enabled {
		t.Errorf("the overlay's config: sharding %+v, leaderElection %+v; want sharding alone", shipped.Sharding, shipped.LeaderElection)
	}
	dep := find(objs, "Deployment", "informer-host")
	// Numbers come out of YAML as int64 or float64, depending on the file.
	r, _, _ := unstructured.NestedFieldNoCopy(dep.Object, "spec", "replicas")
	if replicas, _ := strconv.Atoi(fmt.Sprint(r)); replicas < 3 {
		t.Errorf("the overlay runs %v replicas, want at least 3", r)
	}
	pdb := find(objs, "PodDisruptionBudget", "informer-host")
	if pdb == nil {
		t.Fatal("the overlay has no PodDisruptionBudget")
	}
	sel, _, _ := unstructured.NestedStringMap(pdb.Object, "spec", "selector", "matchLabels")
	podLabels, _, _ := unstructured.NestedStringMap(dep.Object, "spec", "template", "metadata", "labels")
	for k, v := range sel {
		if podLabels[k] != v {
			t.Errorf("the PodDisruptionBudget selects %s=%s, which the pods lack (%v)", k, v, podLabels)
		}
	}
	if mu, _, _ := unstructured.NestedFieldNoCopy(pdb.Object, "spec", "maxUnavailable"); fmt.Sprint(mu) != "1" {
		t.Errorf("the PodDisruptionBudget's maxUnavailable is %v, want 1", mu)
	}
	// What package shard does with Leases: its own (get, create, update,
	// delete on SIGTERM), the group's (list), dead members' (delete).
	for _, verb := range []string{"get", "list", "create", "update", "delete"} {
		allowed(t, may, authzv1.ResourceAttributes{Namespace: "informer-host", Group: "coordination.k8s.io", Resource: "leases", Verb: verb})
	}
}

// apply creates (or updates) the objects of the kustomization in dir,
// checks that the config they ship validates and that the service account
// may watch what it names, and returns the config and a question to the
// apiserver: may the service account do this?
func apply(t *testing.T, dir string) (*config.Config, func(authzv1.ResourceAttributes) bool, []*unstructured.Unstructured) {
	t.Helper()
	objs := manifests(t, dir)
	dyn := dynamic.NewForConfigOrDie(env.Config)
	ctx := context.Background()
	var shipped *config.Config
	for _, u := range objs {
		gvk := u.GroupVersionKind()
		gvr := schema.GroupVersionResource{Group: gvk.Group, Version: gvk.Version, Resource: map[string]string{
			"Namespace": "namespaces", "ServiceAccount": "serviceaccounts", "ClusterRole": "clusterroles",
			"ClusterRoleBinding": "clusterrolebindings", "Role": "roles", "RoleBinding": "rolebindings",
			"ConfigMap": "configmaps", "Deployment": "deployments", "Service": "services",
			"PodDisruptionBudget": "poddisruptionbudgets",
			"FlowSchema":          "flowschemas", "PriorityLevelConfiguration": "prioritylevelconfigurations",
		}[gvk.Kind]}
		if gvr.Resource == "" {
			t.Fatalf("no resource known for kind %s", gvk.Kind)
		}
		var r dynamic.ResourceInterface = dyn.Resource(gvr)
		if ns := u.GetNamespace(); ns != "" {
			r = dyn.Resource(gvr).Namespace(ns)
		}
		_, err := r.Create(ctx, u, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			// The other kustomization's test applied it first.
			var cur *unstructured.Unstructured
			if cur, err = r.Get(ctx, u.GetName(), metav1.GetOptions{}); err == nil {
				u = u.DeepCopy()
				u.SetResourceVersion(cur.GetResourceVersion())
				_, err = r.Update(ctx, u, metav1.UpdateOptions{})
			}
		}
		if err != nil {
			t.Errorf("apply %s %s: %v", gvk.Kind, u.GetName(), err)
		}
		if gvk.Kind == "ConfigMap" && u.GetName() == "informer-host-config" {
			text, _, _ := unstructured.NestedString(u.Object, "data", "config.yaml")
			if shipped, err = config.Parse(filepath.Join("deploy", dir, "config.yaml"), []byte(text)); err != nil {
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
			allowed(t, may, authzv1.ResourceAttributes{Group: r.Group, Version: r.Version, Resource: res, Verb: verb})
		}
	}
	if may(authzv1.ResourceAttributes{Resource: "secrets", Verb: "list"}) {
		t.Error("the service account may list secrets, which the shipped config does not watch")
	}
	return shipped, may, objs
}

// allowed waits until the apiserver says the service account may do
// attrs: its RBAC authorizer learns of new Roles through informers, a
// moment after they are created.
func allowed(t *testing.T, may func(authzv1.ResourceAttributes) bool, attrs authzv1.ResourceAttributes) {
	t.Helper()
	testenv.Eventually(t, fmt.Sprintf("the service account to be allowed to %s %s in %q", attrs.Verb, attrs.Resource, attrs.Namespace),
		func() bool { return may(attrs) })
}
