package deploy

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	authzv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"

	"github.com/informer-host/informer-host/internal/config"
	"github.com/informer-host/informer-host/internal/rbacgen"
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
			target.Object = merge(t, p.Path, target.Object, patch.Object)
		}
	}
	return out
}

// merge applies patch to obj as kustomize's patches do: a strategic
// merge patch, with the merge keys of the kind's Go type (a container by
// its name, a volume by its name, a volume mount by its path) and null
// deleting a field (the image-volume overlay drops the base's configMap
// source that way).
func merge(t *testing.T, file string, obj, patch map[string]any) map[string]any {
	t.Helper()
	kind, _ := obj["kind"].(string)
	typed, ok := map[string]any{"Deployment": appsv1.Deployment{}, "ConfigMap": corev1.ConfigMap{}}[kind]
	if !ok {
		t.Fatalf("%s: patches a %s, whose merge keys the test does not know", file, kind)
	}
	meta, err := strategicpatch.NewPatchMetaFromStruct(typed)
	if err != nil {
		t.Fatal(err)
	}
	out, err := strategicpatch.StrategicMergeMapPatchUsingLookupPatchMeta(obj, patch, meta)
	if err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	return out
}

var find = testenv.FindObject

// decodeAll returns the objects of a YAML file of one or more documents.
func decodeAll(t *testing.T, file string) []*unstructured.Unstructured {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	return testenv.DecodeObjects(t, file, string(b))
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
// then operatorObjs (what the operator creates by hand, as the
// kustomization's comments say, in the namespace the manifests create), checks that the config they ship
// validates as the daemon reads it in its pod and that the service
// account may watch what it names, and returns the config and a question
// to the apiserver: may the service account do this?
func apply(t *testing.T, dir string, operatorObjs ...*unstructured.Unstructured) (*config.Config, func(authzv1.ResourceAttributes) bool, []*unstructured.Unstructured) {
	t.Helper()
	objs := manifests(t, dir)
	ctx := context.Background()
	for _, u := range append(objs[:len(objs):len(objs)], operatorObjs...) {
		if err := createOrUpdate(ctx, u); err != nil {
			t.Errorf("apply %s %s: %v", u.GetKind(), u.GetName(), err)
		}
	}
	shipped := podConfig(t, append(objs[:len(objs):len(objs)], operatorObjs...))

	// Ask the apiserver, as the daemon's service account, whether it may
	// do what the shipped config makes it do.
	may := env.ServiceAccountMay(t, "informer-host", "informer-host")
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

// resources are the plural names of the kinds the manifests hold.
var resources = map[string]string{
	"Namespace": "namespaces", "ServiceAccount": "serviceaccounts", "ClusterRole": "clusterroles",
	"ClusterRoleBinding": "clusterrolebindings", "Role": "roles", "RoleBinding": "rolebindings",
	"ConfigMap": "configmaps", "Secret": "secrets", "Deployment": "deployments", "Service": "services",
	"PodDisruptionBudget": "poddisruptionbudgets", "CustomResourceDefinition": "customresourcedefinitions",
	"FlowSchema": "flowschemas", "PriorityLevelConfiguration": "prioritylevelconfigurations",
}

// createOrUpdate creates u, or updates it when it exists: the tests of the
// other kustomizations apply objects of the same names.
func createOrUpdate(ctx context.Context, u *unstructured.Unstructured) error {
	gvk := u.GroupVersionKind()
	gvr := schema.GroupVersionResource{Group: gvk.Group, Version: gvk.Version, Resource: resources[gvk.Kind]}
	if gvr.Resource == "" {
		return fmt.Errorf("no resource known for kind %s", gvk.Kind)
	}
	dyn := dynamic.NewForConfigOrDie(env.Config)
	var r dynamic.ResourceInterface = dyn.Resource(gvr)
	if ns := u.GetNamespace(); ns != "" {
		r = dyn.Resource(gvr).Namespace(ns)
	}
	_, err := r.Create(ctx, u, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		var cur *unstructured.Unstructured
		if cur, err = r.Get(ctx, u.GetName(), metav1.GetOptions{}); err == nil {
			u = u.DeepCopy()
			u.SetResourceVersion(cur.GetResourceVersion())
			_, err = r.Update(ctx, u, metav1.UpdateOptions{})
		}
	}
	return err
}

// daemon returns the Deployment of objs and its informer-host container.
func daemon(t *testing.T, objs []*unstructured.Unstructured) (*appsv1.Deployment, *corev1.Container) {
	t.Helper()
	u := find(objs, "Deployment", "informer-host")
	if u == nil {
		t.Fatal("the manifests have no Deployment informer-host")
	}
	var dep appsv1.Deployment
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &dep); err != nil {
		t.Fatalf("Deployment informer-host: %v", err)
	}
	for i, c := range dep.Spec.Template.Spec.Containers {
		if c.Name == "informer-host" {
			return &dep, &dep.Spec.Template.Spec.Containers[i]
		}
	}
	t.Fatal("the Deployment has no container informer-host")
	return nil, nil
}

// podConfig returns the config the daemon of objs reads in its pod, and
// fails the test when it does not validate there.
func podConfig(t *testing.T, objs []*unstructured.Unstructured) *config.Config {
	t.Helper()
	file := podView(t, objs)
	text, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	c, err := config.Parse(file, text)
	if err != nil {
		t.Fatalf("the config the manifests ship does not validate as the pod sees it:\n%v", err)
	}
	return c
}

// mustYAML returns the YAML document b, decoded and encoded again.
func mustYAML(t *testing.T, b []byte) []byte {
	t.Helper()
	var v map[string]any
	if err := yaml.Unmarshal(b, &v); err != nil {
		t.Fatal(err)
	}
	out, err := yaml.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// podView writes the files the daemon's container sees in its
// ConfigMap, Secret and projected volumes, as the kubelet lays them out
// from the objects in objs, under a temporary root, and returns the path
// there of the config file its --config names: so the config is parsed
// with the files it names where the pod has them, and a path that no
// mount provides fails validation here as it would in the pod.
func podView(t *testing.T, objs []*unstructured.Unstructured) string {
	t.Helper()
	dep, c := daemon(t, objs)
	return testenv.PodConfigFile(t, dep, c, objs)
}

// allowed waits until the apiserver says the service account may do
// attrs: its RBAC authorizer learns of new Roles through informers, a
// moment after they are created.
func allowed(t *testing.T, may func(authzv1.ResourceAttributes) bool, attrs authzv1.ResourceAttributes) {
	t.Helper()
	testenv.Eventually(t, fmt.Sprintf("the service account to be allowed to %s %s in %q", attrs.Verb, attrs.Resource, attrs.Namespace),
		func() bool { return may(attrs) })
}

// The image-volume overlay mounts an image at the plugin directory,
// read-only, and keeps the base's config. What this proves, against the
// real kube-apiserver (1.37): the overlay's objects apply; the apiserver
// keeps the Pod template's image volume (were the ImageVolume feature off,
// it would drop the volume and its mounts, not refuse them, so the test
// reads the Deployment back); a Pod made from the template passes the
// apiserver's Pod validation and admission (a server-side dry run), while
// the same Pod with an invalid pullPolicy is refused there, so the image
// volume's fields are validated, not ignored. What it does not prove:
// there is no kubelet or container runtime here, so nothing pulls or
// mounts the image; whether the node's runtime accepts the image's media
// types (deployment-patch.yaml says which do), and that the daemon then
// finds the modules in /plugins, is untested.
func TestImageVolumeOverlay(t *testing.T) {
	env.Require(t)
	_, _, objs := apply(t, "image-volume")
	want, err := os.ReadFile(filepath.Join("base", "config.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := yaml.Marshal(find(objs, "ConfigMap", "informer-host-config").Object); !bytes.Equal(got, mustYAML(t, want)) {
		t.Errorf("the overlay's config is not the base's:\n%s", got)
	}
	shipped := podConfig(t, objs)
	ctx := context.Background()
	cur, err := env.Client.AppsV1().Deployments("informer-host").Get(ctx, "informer-host", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var vol *corev1.Volume
	for i, v := range cur.Spec.Template.Spec.Volumes {
		if v.Name == "plugins" {
			vol = &cur.Spec.Template.Spec.Volumes[i]
		}
	}
	if vol == nil || vol.Image == nil {
		t.Fatalf("the apiserver kept no image volume named plugins: %+v", cur.Spec.Template.Spec.Volumes)
	}
	if vol.ConfigMap != nil {
		t.Errorf("the plugins volume still has the base's ConfigMap source: %+v", vol)
	}
	if vol.Image.Reference == "" || vol.Image.PullPolicy != corev1.PullIfNotPresent {
		t.Errorf("the image volume is %+v; want a reference and pullPolicy IfNotPresent", vol.Image)
	}
	var mounted bool
	for _, m := range cur.Spec.Template.Spec.Containers[0].VolumeMounts {
		if m.Name == "plugins" {
			mounted = true
			if m.MountPath != shipped.PluginDir() || !m.ReadOnly {
				t.Errorf("the image is mounted at %s (read-only %v); want read-only at the config's plugin directory %s", m.MountPath, m.ReadOnly, shipped.PluginDir())
			}
		}
	}
	if !mounted {
		t.Errorf("the daemon's container does not mount the plugins volume: %+v", cur.Spec.Template.Spec.Containers[0].VolumeMounts)
	}

	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "informer-host-", Namespace: "informer-host", Labels: cur.Spec.Template.Labels},
		Spec:       *cur.Spec.Template.Spec.DeepCopy(),
	}
	dry := metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}
	got, err := env.Client.CoreV1().Pods("informer-host").Create(ctx, pod, dry)
	if err != nil {
		t.Fatalf("a Pod of the overlay's template is refused: %v", err)
	}
	if !slices.ContainsFunc(got.Spec.Volumes, func(v corev1.Volume) bool { return v.Name == "plugins" && v.Image != nil }) {
		t.Errorf("the dry-run Pod lost its image volume: %+v", got.Spec.Volumes)
	}
	bad := pod.DeepCopy()
	for i := range bad.Spec.Volumes {
		if bad.Spec.Volumes[i].Image != nil {
			bad.Spec.Volumes[i].Image.PullPolicy = "Sometimes"
		}
	}
	if _, err := env.Client.CoreV1().Pods("informer-host").Create(ctx, bad, dry); !apierrors.IsInvalid(err) {
		t.Errorf("a Pod whose image volume has pullPolicy Sometimes: got %v, want the apiserver to refuse it as invalid", err)
	} else if !strings.Contains(err.Error(), "image.pullPolicy") {
		t.Errorf("the apiserver refused the bad pullPolicy, but not for the image volume: %v", err)
	}
}

// The registry overlay: a plugin from an OCI registry (source: oci://, a
// refreshInterval), the pull Secret and the signing key as files beside
// the config, and a volume for the sources' cache. Its objects apply to
// the real apiserver (which checks that the Secret's .dockerconfigjson is
// a docker config); its config validates as the daemon reads it in the pod
// (config.Parse checks that the files it names exist: podView lays them
// out from the Secret and ConfigMaps as the kubelet would); and its RBAC is
// the base's, since the daemon reads the Secret from its mount, not the
// API: the RBAC generated from the overlay's config is deploy/base/rbac.yaml
// byte for byte, the overlay ships the base's RBAC objects and no other,
// and the service account may not read Secrets.
//
// It needs the config schema of plugin sources (plugins.modules[].source,
// refreshInterval, verify, plugins.dockerConfig, plugins.sourceCache);
// before that schema is in internal/config, config.Parse refuses the
// overlay's config as unknown fields.
func TestRegistryOverlay(t *testing.T) {
	env.Require(t)
	shipped, may, objs := apply(t, "registry", trustConfigMap(t))
	text, _, _ := unstructured.NestedString(find(objs, "ConfigMap", "informer-host-config").Object, "data", "config.yaml")
	var raw struct {
		Plugins struct {
			SourceCache  string `json:"sourceCache"`
			DockerConfig string `json:"dockerConfig"`
			Modules      []struct {
				Source          string `json:"source"`
				RefreshInterval string `json:"refreshInterval"`
			} `json:"modules"`
		} `json:"plugins"`
	}
	if err := yaml.Unmarshal([]byte(text), &raw); err != nil {
		t.Fatal(err)
	}
	var sourced bool
	for _, m := range raw.Plugins.Modules {
		if strings.HasPrefix(m.Source, "oci://") && m.RefreshInterval != "" {
			sourced = true
		}
	}
	if !sourced {
		t.Errorf("the overlay's config has no module with an oci:// source and a refreshInterval: %+v", raw.Plugins.Modules)
	}
	if raw.Plugins.DockerConfig == "" {
		t.Error("the overlay's config names no dockerConfig (the pull Secret's file)")
	}
	// The cache is a volume of its own, writable, and not the compilation
	// cache's: a PersistentVolumeClaim can replace it alone.
	_, c := daemon(t, objs)
	cache := -1
	for i, m := range c.VolumeMounts {
		if strings.HasPrefix(raw.Plugins.SourceCache+"/", strings.TrimSuffix(m.MountPath, "/")+"/") {
			cache = i
		}
	}
	if cache < 0 || c.VolumeMounts[cache].ReadOnly || c.VolumeMounts[cache].MountPath == "/var/cache/informer-host" {
		t.Errorf("plugins.sourceCache %q is not on a writable volume of its own: mounts %+v", raw.Plugins.SourceCache, c.VolumeMounts)
	}
	if sec := find(objs, "Secret", "informer-host-registry"); sec == nil {
		t.Error("the overlay ships no pull Secret")
	} else if typ, _, _ := unstructured.NestedString(sec.Object, "type"); typ != string(corev1.SecretTypeDockerConfigJson) {
		t.Errorf("the pull Secret is of type %q, want %s", typ, corev1.SecretTypeDockerConfigJson)
	}

	// RBAC: what the overlay's config needs is what the base ships.
	gen, err := rbacgen.Generate(context.Background(), shipped, rbacgen.Options{Namespace: "informer-host", ServiceAccount: "informer-host"})
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	header := "The least-privilege RBAC of informer-host for deploy/base/config.yaml, generated by\n" +
		"  informer-host rbac --config deploy/base/config.yaml --config-map-key config.yaml\n" +
		"Do not edit: change the config and run the command again."
	if err := gen.Write(&out, header); err != nil {
		t.Fatal(err)
	}
	want, err := os.ReadFile(filepath.Join("base", "rbac.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if out.String() != string(want) {
		t.Errorf("the overlay's config needs other RBAC than deploy/base/rbac.yaml:\n%s", out.String())
	}
	if got, base := testenv.RBACObjects(objs), testenv.RBACObjects(manifests(t, ".")); !reflect.DeepEqual(got, base) {
		t.Errorf("the overlay's RBAC objects differ from the base's:\n%v\nwant\n%v", got, base)
	}
	for _, verb := range []string{"get", "list", "watch"} {
		if may(authzv1.ResourceAttributes{Namespace: "informer-host", Resource: "secrets", Verb: verb, Name: "informer-host-registry"}) {
			t.Errorf("the service account may %s the pull Secret through the API; it reads the mounted file", verb)
		}
	}
}

// trustConfigMap is the ConfigMap the registry overlay tells the operator
// to create (kubectl create configmap informer-host-trust
// --from-file=cosign.pub): a freshly made public key.
func trustConfigMap(t *testing.T) *unstructured.Unstructured {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": "informer-host-trust", "namespace": "informer-host"},
		"data":     map[string]any{"cosign.pub": string(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}))},
	}}
}
