package testenv

import (
	"context"
	"errors"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	authzv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// The manifests' tests (deploy/, deploy/helm/) read the objects that a
// kustomization or a chart renders as the kubelet and the apiserver
// would: these are what they share.

// DecodeObjects returns the objects of a stream of YAML (or JSON)
// documents; what names the stream goes into errors.
func DecodeObjects(t testing.TB, what, text string) []*unstructured.Unstructured {
	t.Helper()
	var out []*unstructured.Unstructured
	dec := utilyaml.NewYAMLOrJSONDecoder(strings.NewReader(text), 4096)
	for {
		var u unstructured.Unstructured
		if err := dec.Decode(&u.Object); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if len(u.Object) > 0 {
			out = append(out, &u)
		}
	}
	return out
}

// FindObject returns the object of objs of that kind and name, or nil.
func FindObject(objs []*unstructured.Unstructured, kind, name string) *unstructured.Unstructured {
	for _, u := range objs {
		if u.GetKind() == kind && u.GetName() == name {
			return u
		}
	}
	return nil
}

// RBACObjects returns the RBAC objects of objs by kind, namespace and name.
func RBACObjects(objs []*unstructured.Unstructured) map[string]map[string]any {
	out := map[string]map[string]any{}
	for _, u := range objs {
		switch u.GetKind() {
		case "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding":
			out[u.GetKind()+"/"+u.GetNamespace()+"/"+u.GetName()] = u.Object
		}
	}
	return out
}

// ServiceAccountMay returns a question to the apiserver, asked as the
// ServiceAccount namespace/name: may it do attrs?
func (e *Env) ServiceAccountMay(t testing.TB, namespace, name string) func(authzv1.ResourceAttributes) bool {
	t.Helper()
	sa := rest.CopyConfig(e.Config)
	sa.Impersonate = rest.ImpersonationConfig{UserName: "system:serviceaccount:" + namespace + ":" + name}
	cs := kubernetes.NewForConfigOrDie(sa)
	return func(attrs authzv1.ResourceAttributes) bool {
		r, err := cs.AuthorizationV1().SelfSubjectAccessReviews().Create(context.Background(),
			&authzv1.SelfSubjectAccessReview{Spec: authzv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &attrs}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return r.Status.Allowed
	}
}

// PodConfigFile lays out the files container c of dep sees (PodFiles)
// and returns the path there of the config file its --config argument
// names: so a config is parsed with the files it names where the pod has
// them, and a path no mount provides fails validation as in the pod.
func PodConfigFile(t testing.TB, dep *appsv1.Deployment, c *corev1.Container, objs []*unstructured.Unstructured) string {
	t.Helper()
	root := PodFiles(t, dep, c, objs)
	i := slices.Index(c.Args, "--config")
	if i < 0 || i+1 >= len(c.Args) {
		t.Fatalf("the container's args %q name no --config", c.Args)
	}
	return filepath.Join(root, c.Args[i+1])
}

// PodFiles writes the files container c of dep sees in its ConfigMap,
// Secret and projected volumes, as the kubelet lays them out from the
// objects in objs, under a temporary root, and returns the root: a path
// the container opens is root+path. An object the pod mounts that objs
// lack fails the test (the kubelet would not start the pod) unless the
// volume marks it optional, as does a key its items name that it lacks.
func PodFiles(t testing.TB, dep *appsv1.Deployment, c *corev1.Container, objs []*unstructured.Unstructured) string {
	t.Helper()
	root := t.TempDir()
	object := func(kind, name string, optional *bool) map[string][]byte {
		u := FindObject(objs, kind, name)
		if u == nil {
			if optional != nil && *optional {
				return nil
			}
			t.Fatalf("the pod mounts %s %s, which the manifests do not hold: the kubelet would not start it", kind, name)
		}
		data := map[string][]byte{}
		switch kind {
		case "ConfigMap":
			var cm corev1.ConfigMap
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &cm); err != nil {
				t.Fatal(err)
			}
			for k, v := range cm.Data {
				data[k] = []byte(v)
			}
			maps.Copy(data, cm.BinaryData)
		case "Secret":
			var s corev1.Secret
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &s); err != nil {
				t.Fatal(err)
			}
			maps.Copy(data, s.Data)
			for k, v := range s.StringData {
				data[k] = []byte(v)
			}
		}
		return data
	}
	write := func(dir, kind, name string, items []corev1.KeyToPath, optional *bool) {
		data := object(kind, name, optional)
		if data == nil {
			return
		}
		files := map[string][]byte{}
		if len(items) == 0 {
			files = data
		}
		for _, it := range items {
			v, ok := data[it.Key]
			if !ok {
				t.Fatalf("the pod mounts key %s of %s %s, which it lacks: the kubelet would not start it", it.Key, kind, name)
			}
			files[it.Path] = v
		}
		for p, v := range files {
			f := filepath.Join(root, dir, p)
			if err := os.MkdirAll(filepath.Dir(f), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(f, v, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	volumes := map[string]corev1.Volume{}
	for _, v := range dep.Spec.Template.Spec.Volumes {
		volumes[v.Name] = v
	}
	for _, m := range c.VolumeMounts {
		v, ok := volumes[m.Name]
		if !ok {
			t.Fatalf("the container mounts volume %s, which the pod lacks", m.Name)
		}
		switch {
		case v.ConfigMap != nil:
			write(m.MountPath, "ConfigMap", v.ConfigMap.Name, v.ConfigMap.Items, v.ConfigMap.Optional)
		case v.Secret != nil:
			write(m.MountPath, "Secret", v.Secret.SecretName, v.Secret.Items, v.Secret.Optional)
		case v.Projected != nil:
			for _, src := range v.Projected.Sources {
				switch {
				case src.ConfigMap != nil:
					write(m.MountPath, "ConfigMap", src.ConfigMap.Name, src.ConfigMap.Items, src.ConfigMap.Optional)
				case src.Secret != nil:
					write(m.MountPath, "Secret", src.Secret.Name, src.Secret.Items, src.Secret.Optional)
				}
			}
		}
	}
	return root
}
