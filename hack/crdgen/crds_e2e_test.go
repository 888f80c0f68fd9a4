package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"

	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiext "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/yaml"

	"github.com/informer-host/informer-host/internal/pluginapi/v1alpha1"
	"github.com/informer-host/informer-host/internal/testenv"
)

var (
	installOnce sync.Once
	installErr  error
)

// install creates the committed CRDs once per test binary.
func install(t *testing.T) {
	t.Helper()
	env.Require(t)
	installOnce.Do(func() {
		crds := apiext.NewForConfigOrDie(env.Config).ApiextensionsV1().CustomResourceDefinitions()
		for _, plural := range []string{"plugins", "clusterplugins"} {
			b, err := os.ReadFile(filepath.Join(crdDir, FileName(plural)))
			if err != nil {
				installErr = err
				return
			}
			var crd apiextv1.CustomResourceDefinition
			if err := yaml.UnmarshalStrict(b, &crd); err != nil {
				installErr = err
				return
			}
			if _, err := crds.Create(context.Background(), &crd, metav1.CreateOptions{}); err != nil {
				installErr = err
				return
			}
		}
	})
	if installErr != nil {
		t.Fatalf("the apiserver refused the committed CRDs: %v", installErr)
	}
}

// Both CRDs are accepted by the real apiserver (structural, their CEL
// rules compiled within the cost budget) and become Established.
func TestCRDsAreEstablished(t *testing.T) {
	install(t)
	crds := apiext.NewForConfigOrDie(env.Config).ApiextensionsV1().CustomResourceDefinitions()
	for _, name := range []string{"plugins." + v1alpha1.Group, "clusterplugins." + v1alpha1.Group} {
		testenv.Eventually(t, name+" to be Established", func() bool {
			crd, err := crds.Get(context.Background(), name, metav1.GetOptions{})
			if err != nil {
				return false
			}
			established, accepted := false, false
			for _, c := range crd.Status.Conditions {
				if c.Type == apiextv1.NonStructuralSchema && c.Status == apiextv1.ConditionTrue {
					t.Fatalf("%s: %s", name, c.Message)
				}
				established = established || (c.Type == apiextv1.Established && c.Status == apiextv1.ConditionTrue)
				accepted = accepted || (c.Type == apiextv1.NamesAccepted && c.Status == apiextv1.ConditionTrue)
			}
			return established && accepted
		})
	}
}

// object parses a manifest.
func object(t *testing.T, manifest string) *unstructured.Unstructured {
	t.Helper()
	u := &unstructured.Unstructured{}
	if err := yaml.Unmarshal([]byte(manifest), &u.Object); err != nil {
		t.Fatalf("%v\n%s", err, manifest)
	}
	return u
}

// create creates u as kubectl does by default (unknown fields refused,
// not dropped).
func create(t *testing.T, u *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	t.Helper()
	TestCRDsAreEstablished(t)
	dyn := dynamic.NewForConfigOrDie(env.Config)
	opts := metav1.CreateOptions{FieldValidation: "Strict"}
	if u.GetKind() == v1alpha1.KindPlugin {
		return dyn.Resource(v1alpha1.PluginsGVR).Namespace(u.GetNamespace()).Create(context.Background(), u, opts)
	}
	t.Cleanup(func() {
		_ = dyn.Resource(v1alpha1.ClusterPluginsGVR).Delete(context.Background(), u.GetName(), metav1.DeleteOptions{})
	})
	return dyn.Resource(v1alpha1.ClusterPluginsGVR).Create(context.Background(), u, opts)
}

const validPlugin = `
apiVersion: informer-host.io/v1alpha1
kind: Plugin
metadata: {name: labeler, namespace: NS}
spec:
  source: {oci: "ghcr.io/team-a/labeler:v1", pullPolicy: Always, refreshInterval: 1m}
  verify: {required: true, publicKeys: ["-----BEGIN PUBLIC KEY-----\nMFkw\n-----END PUBLIC KEY-----\n"]}
  serviceAccountName: labeler
  bindings:
  - {resource: pods, events: [add, update], filter: "object.metadata.namespace == 'team-a'", changed: [metadata.labels]}
  delivery: {mode: latest, bufferSize: 100, retryBackoff: 10ms, maxRetryBackoff: 10s}
  limits: {memoryPages: 64, callTimeout: 500ms, parkAfter: 2}
  config: {labels: {team: a}, dryRun: false, weights: [1, 2.5]}
  grants:
    cache: [{resource: pods, indexes: [owner]}]
    state: {maxBytes: 1Mi}
    metrics: {maxSeries: 10, maxBytes: 4096}
    writes: {resources: [{resource: pods, verbs: [patch]}], qps: 2.5, timeout: 5s}
    events: {}
    http: {upstreams: [api]}
  controller: {for: pods, owns: [configmaps], watches: [{resource: secrets, label: app}], finalizer: team-a.example.com/cleanup}
`

const validClusterPlugin = `
apiVersion: informer-host.io/v1alpha1
kind: ClusterPlugin
metadata: {name: NAME}
spec:
  source: {file: "file:///plugins/audit.wasm", sha256: "sha256:abababababababababababababababababababababababababababababababab"}
  verify: {identities: [{issuer: "https://token.actions.githubusercontent.com", subject: "https://github.com/org/repo/.github/workflows/release.yaml@refs/heads/main"}]}
  bindings: [{resource: pods}]
  config: "a scalar is a config too"
  grants: {impersonate: {serviceAccount: ops/auditor}, state: {maxBytes: 1048576}}
`

// A Plugin and a ClusterPlugin using every kind of module field are
// accepted as written, unknown fields refused, and read back whole:
// nothing of the spec (config's free-form value included) is pruned.
func TestValidPluginsAreAccepted(t *testing.T) {
	install(t)
	ns := env.Namespace(t)
	got, err := create(t, object(t, strings.ReplaceAll(validPlugin, "NS", ns)))
	if err != nil {
		t.Fatalf("a valid Plugin was refused: %v", err)
	}
	weights, _, _ := unstructured.NestedSlice(got.Object, "spec", "config", "weights")
	team, _, _ := unstructured.NestedString(got.Object, "spec", "config", "labels", "team")
	timeout, _, _ := unstructured.NestedString(got.Object, "spec", "grants", "writes", "timeout")
	if len(weights) != 2 || team != "a" || timeout != "5s" {
		t.Errorf("the Plugin read back lost fields: %v", got.Object["spec"])
	}
	got, err = create(t, object(t, strings.ReplaceAll(validClusterPlugin, "NAME", "audit-"+ns)))
	if err != nil {
		t.Fatalf("a valid ClusterPlugin was refused: %v", err)
	}
	if c, _, _ := unstructured.NestedString(got.Object, "spec", "config"); c != "a scalar is a config too" {
		t.Errorf("config read back = %v", got.Object["spec"])
	}
	if sa, _, _ := unstructured.NestedString(got.Object, "spec", "grants", "impersonate", "serviceAccount"); sa != "ops/auditor" {
		t.Errorf("grants.impersonate read back = %q", sa)
	}
}

// Invalid objects are refused by the apiserver itself, each with a
// message naming what is wrong.
func TestInvalidPluginsAreRefused(t *testing.T) {
	install(t)
	ns := env.Namespace(t)
	plugin := strings.ReplaceAll(validPlugin, "NS", ns)
	cluster := strings.ReplaceAll(validClusterPlugin, "NAME", "bad-"+ns)
	cases := []struct {
		name     string
		manifest string
		old, new string // the edit of the valid manifest
		want     string // in the apiserver's message
	}{
		{"a dotted name", plugin, "name: labeler", "name: team.labeler", "metadata.name: Invalid value: metadata.name must be a DNS label"},
		{"a dotted cluster name", cluster, "name: bad-", "name: bad.", "metadata.name: Invalid value: metadata.name must be a DNS label"},
		{"two sources", plugin, `{oci: "ghcr.io/team-a/labeler:v1",`, `{oci: "ghcr.io/team-a/labeler:v1", https: "https://example.com/x.wasm", sha256: "sha256:abababababababababababababababababababababababababababababababab",`, "spec.source: Invalid value: spec.source must set exactly one of oci, https, configMap"},
		{"no source", plugin, `{oci: "ghcr.io/team-a/labeler:v1", pullPolicy: Always,`, `{pullPolicy: Always,`, "spec.source: Invalid value: spec.source must set exactly one of oci, https, configMap"},
		{"two cluster sources", cluster, `{file: "file:///plugins/audit.wasm",`, `{file: "file:///plugins/audit.wasm", oci: "ghcr.io/o/a:v1",`, "spec.source must set exactly one of oci, https, configMap, file"},
		{"a file source on a Plugin", plugin, `{oci: "ghcr.io/team-a/labeler:v1",`, `{file: "file:///etc/passwd",`, `unknown field "spec.source.file"`},
		{"impersonate on a Plugin", plugin, "events: {}", "events: {}\n    impersonate: {serviceAccount: kube-system/admin}", `unknown field "spec.grants.impersonate"`},
		{"a Plugin without a ServiceAccount", plugin, "serviceAccountName: labeler", "", "spec.serviceAccountName: Required value"},
		{"a ClusterPlugin's ConfigMap without a namespace", cluster, `{file: "file:///plugins/audit.wasm",`, `{configMap: {name: mods, key: a.wasm},`, "spec.source.configMap.namespace: Required value"},
		{"https without sha256", plugin, `{oci: "ghcr.io/team-a/labeler:v1",`, `{https: "https://example.com/x.wasm",`, "an https source needs sha256"},
		{"an unknown pull policy", plugin, "pullPolicy: Always", "pullPolicy: Sometimes", `spec.source.pullPolicy: Unsupported value: "Sometimes"`},
		{"bindings as a string", plugin, "  bindings:\n  - {resource: pods, events: [add, update], filter: \"object.metadata.namespace == 'team-a'\", changed: [metadata.labels]}", "  bindings: pods", "spec.bindings: Invalid value: \"string\": spec.bindings in body must be of type array"},
		{"a number for a duration", plugin, "callTimeout: 500ms", "callTimeout: 10", `spec.limits.callTimeout: Invalid value: "integer": spec.limits.callTimeout in body must be of type string`},
		{"a string for a count", plugin, "bufferSize: 100", "bufferSize: many", `spec.delivery.bufferSize: Invalid value: "string": spec.delivery.bufferSize in body must be of type integer`},
		{"a list for a size", plugin, "maxBytes: 1Mi", "maxBytes: [1]", "spec.grants.state.maxBytes"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if !strings.Contains(tc.manifest, tc.old) {
				t.Fatalf("the valid manifest has no %q", tc.old)
			}
			_, err := create(t, object(t, strings.Replace(tc.manifest, tc.old, tc.new, 1)))
			if err == nil {
				t.Fatal("accepted")
			}
			if !apierrors.IsInvalid(err) && !apierrors.IsBadRequest(err) {
				t.Errorf("refused as %v, not as invalid", apierrors.ReasonForError(err))
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("the refusal %q does not say %q", err, tc.want)
			}
			t.Log(err)
		})
	}
}

// kubectl get plugins -A (the real kubectl) shows a Plugin's status in
// the columns READY SOURCE DIGEST VERIFIED PARKED AGE; and
// clusterplugins the same without NAMESPACE.
func TestKubectlGetPluginsShowsTheColumns(t *testing.T) {
	install(t)
	ns := env.Namespace(t)
	ctx := context.Background()
	dyn := dynamic.NewForConfigOrDie(env.Config)
	digest := "sha256:" + strings.Repeat("0123456789abcdef", 4)
	status := map[string]any{
		"observedGeneration": int64(1),
		"source":             "oci://ghcr.io/team-a/labeler:v1",
		"digest":             digest,
		"parked":             int64(3),
		"conditions": []any{
			map[string]any{"type": "Ready", "status": "True", "reason": "Running", "message": "runs on 1 replica", "lastTransitionTime": "2026-01-01T00:00:00Z"},
			map[string]any{"type": "Verified", "status": "False", "reason": "NotVerified", "message": "no signature", "lastTransitionTime": "2026-01-01T00:00:00Z"},
		},
	}
	p, err := create(t, object(t, strings.ReplaceAll(validPlugin, "NS", ns)))
	if err != nil {
		t.Fatal(err)
	}
	p.Object["status"] = status
	if _, err := dyn.Resource(v1alpha1.PluginsGVR).Namespace(ns).UpdateStatus(ctx, p, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("status subresource: %v", err)
	}
	cname := "audit-" + ns
	c, err := create(t, object(t, strings.ReplaceAll(validClusterPlugin, "NAME", cname)))
	if err != nil {
		t.Fatal(err)
	}
	c.Object["status"] = status
	if _, err := dyn.Resource(v1alpha1.ClusterPluginsGVR).UpdateStatus(ctx, c, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("status subresource: %v", err)
	}
	// Through the main resource a status is not written.
	got, err := dyn.Resource(v1alpha1.PluginsGVR).Namespace(ns).Get(ctx, "labeler", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	got.Object["status"] = map[string]any{"digest": "sha256:other"}
	got, err = dyn.Resource(v1alpha1.PluginsGVR).Namespace(ns).Update(ctx, got, metav1.UpdateOptions{})
	if d, _, _ := unstructured.NestedString(got.Object, "status", "digest"); err != nil || d != digest {
		t.Errorf("an update of the object changed its status digest to %q (%v)", d, err)
	}

	dir := t.TempDir()
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := env.WriteKubeconfig(kubeconfig); err != nil {
		t.Fatal(err)
	}
	kubectl := func(args ...string) string {
		t.Helper()
		args = append([]string{"--kubeconfig", kubeconfig, "--cache-dir", filepath.Join(dir, "cache")}, args...)
		out, err := exec.Command("kubectl", args...).CombinedOutput()
		if err != nil {
			t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	row := regexp.MustCompile(`(?m)^` + ns + `\s+labeler\s+True\s+oci://ghcr\.io/team-a/labeler:v1\s+` + digest + `\s+False\s+3\s+\d+[smh]\s*$`)
	out := kubectl("get", "plugins", "-A")
	if !regexp.MustCompile(`(?m)^NAMESPACE\s+NAME\s+READY\s+SOURCE\s+DIGEST\s+VERIFIED\s+PARKED\s+AGE\s*$`).MatchString(out) || !row.MatchString(out) {
		t.Errorf("kubectl get plugins -A:\n%s", out)
	}
	out = kubectl("get", "clusterplugins", cname)
	crow := regexp.MustCompile(`(?m)^` + cname + `\s+True\s+oci://ghcr\.io/team-a/labeler:v1\s+` + digest + `\s+False\s+3\s+\d+[smh]\s*$`)
	if !regexp.MustCompile(`(?m)^NAME\s+READY\s+SOURCE\s+DIGEST\s+VERIFIED\s+PARKED\s+AGE\s*$`).MatchString(out) || !crow.MatchString(out) {
		t.Errorf("kubectl get clusterplugins:\n%s", out)
	}
	t.Logf("kubectl get plugins -A:\n%s", kubectl("get", "plugins", "-A"))
}
