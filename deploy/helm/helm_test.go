package helm

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/restmapper"
	"sigs.k8s.io/yaml"

	"github.com/informer-host/informer-host/internal/config"
	"github.com/informer-host/informer-host/internal/pluginapi/v1alpha1"
	"github.com/informer-host/informer-host/internal/testenv"
)

// chart is the chart's directory, relative to this package.
const chart = "informer-host"

var env *testenv.Env

func TestMain(m *testing.M) {
	code := testenv.Run(m, &env)
	if binDir != "" {
		_ = os.RemoveAll(binDir)
	}
	os.Exit(code)
}

// helmBin is the path of helm as `make helm` builds it: $HELM (the
// Makefile sets it), else where hack/helm/build.sh puts the version
// hack/helm/go.mod pins, as testenv finds the control plane. A missing
// binary fails the test and says how to build it; -short skips, as it
// does every test that needs a built tool.
func helmBin(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("runs helm, built by `make helm`, which -short does not use")
	}
	bin := os.Getenv("HELM")
	if bin == "" {
		gomod := filepath.Join("..", "..", "hack", "helm", "go.mod")
		b, err := os.ReadFile(gomod)
		if err != nil {
			t.Fatal(err)
		}
		m := regexp.MustCompile(`(?m)^require helm\.sh/helm/v4 (v\S+)$`).FindSubmatch(b)
		if m == nil {
			t.Fatalf("%s has no `require helm.sh/helm/v4 vX.Y.Z` line, which hack/helm/build.sh reads too", gomod)
		}
		cache := os.Getenv("INFORMER_HOST_CACHE")
		if cache == "" {
			base, err := os.UserCacheDir()
			if err != nil {
				t.Fatal(err)
			}
			cache = filepath.Join(base, "informer-host")
		}
		bin = filepath.Join(cache, "helm", string(m[1]), "helm")
	}
	if st, err := os.Stat(bin); err != nil || st.Mode()&0o111 == 0 {
		t.Fatalf("helm not found at %s: run `make helm` (hack/helm/build.sh builds it from the Go module proxy once, "+
			"into the cache by version) or point $HELM at one", bin)
	}
	return bin
}

// run runs bin with args in dir, with a home of its own (no helm
// repositories or registry logins of the machine's) and env added.
func run(t *testing.T, dir string, env []string, bin string, args ...string) (string, error) {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), bin, args...)
	cmd.Dir = dir
	home := t.TempDir()
	cmd.Env = append([]string{"HOME=" + home, "PATH=" + os.Getenv("PATH"), "HELM_CACHE_HOME=" + filepath.Join(home, "cache"),
		"HELM_CONFIG_HOME=" + filepath.Join(home, "config"), "HELM_DATA_HOME=" + filepath.Join(home, "data")}, env...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.String(), err
}

// render runs `helm template` of the chart in namespace ns with args (the
// value flags) and returns the objects, CRDs included.
func render(t *testing.T, ns string, args ...string) []*unstructured.Unstructured {
	t.Helper()
	out, err := renderText(t, ns, args...)
	if err != nil {
		t.Fatalf("helm template %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return decode(t, out)
}

func renderText(t *testing.T, ns string, args ...string) (string, error) {
	t.Helper()
	return run(t, ".", nil, helmBin(t), append([]string{"template", "informer-host", chart, "--namespace", ns, "--include-crds"}, args...)...)
}

func decode(t *testing.T, text string) []*unstructured.Unstructured {
	t.Helper()
	return testenv.DecodeObjects(t, "helm template", text)
}

var find = testenv.FindObject

func kinds(objs []*unstructured.Unstructured) []string {
	var out []string
	for _, u := range objs {
		out = append(out, u.GetKind()+"/"+u.GetName())
	}
	return out
}

// typed converts u into out, failing on fields out's type lacks.
func typed(t *testing.T, u *unstructured.Unstructured, out any) {
	t.Helper()
	if u == nil {
		t.Fatalf("no object to read as %T", out)
	}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(u.Object, out, true); err != nil {
		t.Fatalf("%s %s: %v", u.GetKind(), u.GetName(), err)
	}
}

// deployment returns the Deployment and its daemon container.
func deployment(t *testing.T, objs []*unstructured.Unstructured) (*appsv1.Deployment, *corev1.Container) {
	t.Helper()
	var dep appsv1.Deployment
	typed(t, find(objs, "Deployment", "informer-host"), &dep)
	if len(dep.Spec.Template.Spec.Containers) != 1 {
		t.Fatalf("the Deployment has %d containers, want the daemon's", len(dep.Spec.Template.Spec.Containers))
	}
	return &dep, &dep.Spec.Template.Spec.Containers[0]
}

// configText is the config.yaml of the rendered ConfigMap.
func configText(t *testing.T, objs []*unstructured.Unstructured) string {
	t.Helper()
	text, ok, _ := unstructured.NestedString(find(objs, "ConfigMap", "informer-host-config").Object, "data", "config.yaml")
	if !ok {
		t.Fatalf("no ConfigMap informer-host-config with data config.yaml among %v", kinds(objs))
	}
	return text
}

// podConfig parses the config the daemon reads in its pod (podView), as
// the daemon does: a file the config names that no mount provides fails
// here as in the pod.
func podConfig(t *testing.T, objs []*unstructured.Unstructured) *config.Config {
	t.Helper()
	file := podView(t, objs)
	text, err := os.ReadFile(file)
	if err != nil {
		t.Fatalf("the config file --config names is not in any mount: %v", err)
	}
	cfg, err := config.Parse(file, text)
	if err != nil {
		t.Fatalf("the config the chart renders does not validate as the pod sees it:\n%v\n%s", err, text)
	}
	return cfg
}

// podView lays out the files the daemon's container sees (its config
// volume: the projected ConfigMap, Secret and trust ConfigMap), as the
// kubelet writes them from the rendered objects, under a temporary root
// and returns the path there of the file --config names.
func podView(t *testing.T, objs []*unstructured.Unstructured) string {
	t.Helper()
	dep, c := deployment(t, objs)
	return testenv.PodConfigFile(t, dep, c, objs)
}

func TestLint(t *testing.T) {
	for _, vs := range valueSets {
		t.Run(vs.name, func(t *testing.T) {
			args := append([]string{"lint", "--strict", chart, "--namespace", "informer-host"}, vs.args(t, "informer-host")...)
			if out, err := run(t, ".", nil, helmBin(t), args...); err != nil {
				t.Fatalf("helm %s: %v\n%s", strings.Join(args, " "), err, out)
			}
		})
	}
}

// A value set: the flags of one way to install the chart, and what its
// rendered objects must hold.
type valueSet struct {
	name  string
	args  func(t *testing.T, ns string) []string
	check func(t *testing.T, objs []*unstructured.Unstructured)
}

func flags(f ...string) func(*testing.T, string) []string {
	return func(*testing.T, string) []string { return f }
}

// pdb checks the PodDisruptionBudget: present exactly when want, one pod
// at a time, selecting the Deployment's pods.
func pdb(t *testing.T, objs []*unstructured.Unstructured, want bool) {
	t.Helper()
	u := find(objs, "PodDisruptionBudget", "informer-host")
	if (u != nil) != want {
		t.Fatalf("PodDisruptionBudget rendered: %v, want %v (%v)", u != nil, want, kinds(objs))
	}
	if u == nil {
		return
	}
	var p struct {
		Spec struct {
			MaxUnavailable any                  `json:"maxUnavailable"`
			Selector       metav1.LabelSelector `json:"selector"`
		} `json:"spec"`
	}
	b, _ := json.Marshal(u.Object)
	if err := json.Unmarshal(b, &p); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(p.Spec.MaxUnavailable) != "1" {
		t.Errorf("maxUnavailable %v, want 1", p.Spec.MaxUnavailable)
	}
	dep, _ := deployment(t, objs)
	for k, v := range p.Spec.Selector.MatchLabels {
		if dep.Spec.Template.Labels[k] != v {
			t.Errorf("the PodDisruptionBudget selects %s=%s, which the pods lack (%v)", k, v, dep.Spec.Template.Labels)
		}
	}
}

func replicas(t *testing.T, objs []*unstructured.Unstructured, want int32) {
	t.Helper()
	if dep, _ := deployment(t, objs); dep.Spec.Replicas == nil || *dep.Spec.Replicas != want {
		t.Errorf("replicas %v, want %d", dep.Spec.Replicas, want)
	}
}

// rules returns the RBAC rules the rendered Roles and ClusterRoles give,
// as "namespace group/resource verb" strings ("" namespace: cluster-wide).
func rules(t *testing.T, objs []*unstructured.Unstructured) []string {
	t.Helper()
	var out []string
	for _, u := range objs {
		if u.GetKind() != "Role" && u.GetKind() != "ClusterRole" {
			continue
		}
		var r struct {
			Rules []struct{ APIGroups, Resources, Verbs []string } `json:"rules"`
		}
		b, _ := json.Marshal(u.Object)
		if err := json.Unmarshal(b, &r); err != nil {
			t.Fatal(err)
		}
		for _, rule := range r.Rules {
			for _, g := range rule.APIGroups {
				for _, res := range rule.Resources {
					for _, v := range rule.Verbs {
						out = append(out, u.GetNamespace()+" "+g+"/"+res+" "+v)
					}
				}
			}
		}
	}
	return out
}

func hasRule(t *testing.T, objs []*unstructured.Unstructured, want string) {
	t.Helper()
	if got := rules(t, objs); !slices.Contains(got, want) {
		t.Errorf("the RBAC lacks %q: %q", want, got)
	}
}

// The main ways to install the chart. Each renders, lints, and is
// accepted by the apiserver (TestDryRun); the checks say what each must
// render.
var valueSets = []valueSet{
	{"default", flags(), func(t *testing.T, objs []*unstructured.Unstructured) {
		replicas(t, objs, 1)
		pdb(t, objs, false)
		// The default config is deploy/base's.
		base, err := os.ReadFile(filepath.Join("..", "base", "config.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		var cm corev1.ConfigMap
		if err := yaml.UnmarshalStrict(base, &cm); err != nil {
			t.Fatal(err)
		}
		var want, got map[string]any
		if err := yaml.Unmarshal([]byte(cm.Data["config.yaml"]), &want); err != nil {
			t.Fatal(err)
		}
		if err := yaml.Unmarshal([]byte(configText(t, objs)), &got); err != nil {
			t.Fatal(err)
		}
		if gb, wb := mustJSON(got), mustJSON(want); gb != wb {
			t.Errorf("the default config is not deploy/base/config.yaml's:\n%s\nwant\n%s", gb, wb)
		}
		cfg := podConfig(t, objs)
		if !cfg.LeaderElection.Enabled {
			t.Error("the default config runs without leader election")
		}
		dep, c := deployment(t, objs)
		sc := dep.Spec.Template.Spec.SecurityContext
		if sc == nil || sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot || c.SecurityContext == nil ||
			c.SecurityContext.ReadOnlyRootFilesystem == nil || !*c.SecurityContext.ReadOnlyRootFilesystem {
			t.Errorf("the pod is not non-root with a read-only root filesystem: %+v %+v", sc, c.SecurityContext)
		}
		if c.LivenessProbe == nil || c.ReadinessProbe == nil || c.ReadinessProbe.HTTPGet.Path != "/readyz" {
			t.Errorf("probes: liveness %+v readiness %+v", c.LivenessProbe, c.ReadinessProbe)
		}
		if c.Resources.Limits.Memory().IsZero() {
			t.Error("no memory limit")
		}
		hasRule(t, objs, "informer-host coordination.k8s.io/leases create")
		for _, kind := range []string{"ServiceMonitor", "ClusterPlugin", "Plugin", "Secret"} {
			if slices.ContainsFunc(objs, func(u *unstructured.Unstructured) bool { return u.GetKind() == kind }) {
				t.Errorf("the default values render a %s", kind)
			}
		}
	}},
	{"leader election, two replicas", flags("--set", "replicas=2"), func(t *testing.T, objs []*unstructured.Unstructured) {
		replicas(t, objs, 2)
		pdb(t, objs, true)
		cfg := podConfig(t, objs)
		if !cfg.LeaderElection.Enabled || cfg.Sharding.Enabled {
			t.Errorf("leaderElection %+v, sharding %+v; want leader election alone", cfg.LeaderElection, cfg.Sharding)
		}
	}},
	{"sharding, three replicas", flags("--set", "replicas=3", "--set", "mode=sharding"), func(t *testing.T, objs []*unstructured.Unstructured) {
		replicas(t, objs, 3)
		pdb(t, objs, true)
		cfg := podConfig(t, objs)
		if !cfg.Sharding.Enabled || cfg.LeaderElection.Enabled {
			t.Errorf("sharding %+v, leaderElection %+v; want sharding alone", cfg.Sharding, cfg.LeaderElection)
		}
		// What package shard does with the members' Leases.
		for _, verb := range []string{"get", "list", "create", "update", "delete"} {
			hasRule(t, objs, "informer-host coordination.k8s.io/leases "+verb)
		}
	}},
	{"plugins from resources", valuesFile(`
plugins:
  clusterPlugins:
    - name: pod-logger
      spec:
        source: {oci: registry.example.com/informer-host/pod-logger:v1, refreshInterval: 2m}
        bindings: [{resource: pods}]
  plugins:
    - name: labeler
      namespace: informer-host
      spec:
        source: {configMap: {name: labeler, key: labeler.wasm}}
        serviceAccountName: labeler
        bindings: [{resource: pods}]
`), func(t *testing.T, objs []*unstructured.Unstructured) {
		// Not strictly: the module's fields (bindings, ...) are read
		// from the spec by config.ParseModule, not typed here; the
		// CRD's schema checks them in the dry run.
		var cp v1alpha1.ClusterPlugin
		var p v1alpha1.Plugin
		for name, out := range map[string]any{"ClusterPlugin/pod-logger": &cp, "Plugin/labeler": &p} {
			kind, n, _ := strings.Cut(name, "/")
			u := find(objs, kind, n)
			if u == nil {
				t.Fatalf("no %s among %v", name, kinds(objs))
			}
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, out); err != nil {
				t.Fatalf("%s: %v", name, err)
			}
		}
		if cp.Spec.Source.OCI == "" || cp.GetNamespace() != "" {
			t.Errorf("ClusterPlugin %+v", cp)
		}
		if p.Spec.Source.ConfigMap == nil || p.Spec.ServiceAccountName != "labeler" || p.GetNamespace() != "informer-host" {
			t.Errorf("Plugin %+v", p)
		}
		if bindings, _, _ := unstructured.NestedSlice(find(objs, "Plugin", "labeler").Object, "spec", "bindings"); len(bindings) != 1 {
			t.Errorf("the Plugin's bindings are %v; the spec is passed whole", bindings)
		}
	}},
	{"registry credentials and trust roots", registryValues, func(t *testing.T, objs []*unstructured.Unstructured) {
		var s corev1.Secret
		typed(t, find(objs, "Secret", "informer-host-registry"), &s)
		if s.Type != corev1.SecretTypeDockerConfigJson || !json.Valid(s.Data[".dockerconfigjson"]) {
			t.Errorf("the registry Secret: type %s, .dockerconfigjson %q", s.Type, s.Data[".dockerconfigjson"])
		}
		// config.Parse checks that verify.keys, trustedRoot and
		// dockerConfig name files the pod has.
		cfg := podConfig(t, objs)
		if cfg.Plugins.DockerConfig == "" {
			t.Error("the config names no dockerConfig")
		}
		_, c := deployment(t, objs)
		if !slices.ContainsFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool {
			return m.Name == "sources" && m.MountPath == "/var/cache/informer-host-sources" && !m.ReadOnly
		}) {
			t.Errorf("plugins.sourceCache is not on a writable volume of its own: %+v", c.VolumeMounts)
		}
	}},
	{"image volume", flags("--set", "pluginsVolume.image.reference=registry.example.com/informer-host/plugins:v1"), func(t *testing.T, objs []*unstructured.Unstructured) {
		dep, c := deployment(t, objs)
		cfg := podConfig(t, objs)
		i := slices.IndexFunc(dep.Spec.Template.Spec.Volumes, func(v corev1.Volume) bool { return v.Name == "plugins" })
		if i < 0 || dep.Spec.Template.Spec.Volumes[i].Image == nil || dep.Spec.Template.Spec.Volumes[i].ConfigMap != nil {
			t.Fatalf("the plugins volume is not an image volume alone: %+v", dep.Spec.Template.Spec.Volumes)
		}
		if img := dep.Spec.Template.Spec.Volumes[i].Image; img.Reference != "registry.example.com/informer-host/plugins:v1" || img.PullPolicy != corev1.PullIfNotPresent {
			t.Errorf("the image volume is %+v", img)
		}
		if !slices.ContainsFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool {
			return m.Name == "plugins" && m.MountPath == cfg.PluginDir() && m.ReadOnly
		}) {
			t.Errorf("the image is not mounted read-only at the plugin directory %s: %+v", cfg.PluginDir(), c.VolumeMounts)
		}
	}},
	{"ServiceMonitor", flags("--set", "metrics.serviceMonitor.enabled=true", "--set", "metrics.serviceMonitor.labels.release=prometheus"), func(t *testing.T, objs []*unstructured.Unstructured) {
		sm := find(objs, "ServiceMonitor", "informer-host")
		if sm == nil {
			t.Fatalf("no ServiceMonitor among %v", kinds(objs))
		}
		if sm.GetLabels()["release"] != "prometheus" {
			t.Errorf("the ServiceMonitor's labels %v lack the one asked for", sm.GetLabels())
		}
		var svc corev1.Service
		typed(t, find(objs, "Service", "informer-host"), &svc)
		sel, _, _ := unstructured.NestedStringMap(sm.Object, "spec", "selector", "matchLabels")
		for k, v := range sel {
			if svc.Labels[k] != v {
				t.Errorf("the ServiceMonitor selects %s=%s, which the Service lacks (%v)", k, v, svc.Labels)
			}
		}
		eps, _, _ := unstructured.NestedSlice(sm.Object, "spec", "endpoints")
		if len(eps) != 1 || eps[0].(map[string]any)["port"] != svc.Spec.Ports[0].Name || eps[0].(map[string]any)["path"] != "/metrics" {
			t.Errorf("the ServiceMonitor's endpoints %v do not scrape the Service's port %s at /metrics", eps, svc.Spec.Ports[0].Name)
		}
	}},
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// valuesFile returns the flags of a values file holding text.
func valuesFile(text string) func(t *testing.T, ns string) []string {
	return func(t *testing.T, _ string) []string {
		f := filepath.Join(t.TempDir(), "values.yaml")
		if err := os.WriteFile(f, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return []string{"-f", f}
	}
}

// registryValues: a plugin pulled from a registry with credentials,
// verified against a key (made here) or a keyless identity under a
// trusted root, its RBAC generated for the config (the chart refuses to
// ship its default's for another config).
func registryValues(t *testing.T, ns string) []string {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	pub := filepath.Join(t.TempDir(), "cosign.pub")
	if err := os.WriteFile(pub, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}), 0o644); err != nil {
		t.Fatal(err)
	}
	args := append(valuesFile(`
config:
  plugins:
    sourceCache: /var/cache/informer-host-sources
    dockerConfig: registry/config.json
    default:
      verify:
        required: true
        keys: [trust/cosign.pub]
        identities:
          - {issuer: https://token.actions.githubusercontent.com, subject: https://github.com/example/plugins/.github/workflows/release.yaml@refs/heads/main}
        trustedRoot: trust/trusted_root.json
    modules:
      - file: pod-logger.wasm
        source: oci://registry.example.com/informer-host/pod-logger:v1
        refreshInterval: 2m
registry:
  dockerConfigJson: '{"auths":{"registry.example.com":{"auth":"dXNlcjp0b2tlbg=="}}}'
trust:
  trustedRoot: '{"mediaType":"application/vnd.dev.sigstore.trustedroot+json;version=0.1"}'
`)(t, ns), "--set-file", `trust.keys.cosign\.pub=`+pub)
	return append(args, "--set-file", "rbac.manifest="+generatedRBAC(t, ns, args...))
}

func TestTemplate(t *testing.T) {
	for _, vs := range valueSets {
		t.Run(vs.name, func(t *testing.T) { vs.check(t, render(t, "informer-host", vs.args(t, "informer-host")...)) })
	}
}

// What the chart refuses, and that the refusal says what to do.
func TestTemplateRefuses(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"an unknown mode", []string{"--set", "mode=both"}, `mode: "both" is neither leaderElection nor sharding`},
		{"a mode block in config", []string{"--set", "config.sharding.enabled=true"}, "leave leaderElection and sharding out"},
		{"another config with the shipped RBAC", []string{"--set", "config.resources[0].name=pods2"}, "--set-file rbac.manifest=rbac.yaml"},
		{"credentials and nowhere to read them", []string{"--set", "registry.existingSecret=creds", "--set", "rbac.create=false"}, "config.plugins.dockerConfig names no file"},
		{"a Plugin without a namespace", []string{"--set", "plugins.plugins[0].name=x", "--set", "plugins.plugins[0].spec.source.https=https://example.com/x.wasm"}, "a Plugin is a team's, in its namespace"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := renderText(t, "informer-host", tc.args...)
			if err == nil {
				t.Fatalf("helm template %v rendered:\n%s", tc.args, out)
			}
			if !strings.Contains(out, tc.want) {
				t.Errorf("helm template %v: %s; want it to say %q", tc.args, out, tc.want)
			}
		})
	}
}

// Every value set's objects are accepted by the real apiserver in a
// server-side dry run (apply, dryRun=All, strict field validation, so a
// misspelt field is an error, not dropped), after the chart's CRDs and
// the ServiceMonitor's are installed.
func TestDryRun(t *testing.T) {
	env.Require(t)
	ctx := context.Background()
	crds := installCRDs(t)
	dyn := dynamic.NewForConfigOrDie(env.Config)
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(discovery.NewDiscoveryClientForConfigOrDie(env.Config)))
	for _, vs := range valueSets {
		t.Run(vs.name, func(t *testing.T) {
			ns := env.Namespace(t)
			objs := render(t, ns, vs.args(t, ns)...)
			for _, u := range objs {
				if u.GetKind() == "CustomResourceDefinition" {
					if !crds[u.GetName()] {
						t.Errorf("the chart renders CRD %s, which its crds/ lacks", u.GetName())
					}
					continue
				}
				// A Plugin the values put in informer-host goes into the
				// test's namespace.
				if u.GetKind() == "Plugin" {
					u.SetNamespace(ns)
				}
				m, err := mapper.RESTMapping(u.GroupVersionKind().GroupKind(), u.GroupVersionKind().Version)
				if err != nil {
					mapper.Reset()
					if m, err = mapper.RESTMapping(u.GroupVersionKind().GroupKind(), u.GroupVersionKind().Version); err != nil {
						t.Errorf("%s %s: %v (the chart's crds/ has %d CRDs: are deploy/crds/ copied there?)", u.GetKind(), u.GetName(), err, len(crds))
						continue
					}
				}
				var r dynamic.ResourceInterface = dyn.Resource(m.Resource)
				if u.GetNamespace() != "" {
					r = dyn.Resource(m.Resource).Namespace(u.GetNamespace())
				}
				b, err := json.Marshal(u.Object)
				if err != nil {
					t.Fatal(err)
				}
				force := true
				if _, err := r.Patch(ctx, u.GetName(), types.ApplyPatchType, b, metav1.PatchOptions{
					DryRun: []string{metav1.DryRunAll}, FieldManager: "helm-test", Force: &force, FieldValidation: "Strict",
				}); err != nil {
					t.Errorf("the apiserver refuses %s %s: %v", u.GetKind(), u.GetName(), err)
				}
			}
		})
	}
}

var crdOnce sync.Once

// installCRDs creates the chart's CRDs and the ServiceMonitor CRD of
// testdata (a minimal one of the Prometheus Operator's group and kind)
// and waits until they are served; it returns the chart's by name.
func installCRDs(t *testing.T) map[string]bool {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(chart, "crds", "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	var objs []*unstructured.Unstructured
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, u := range decode(t, string(b)) {
			names[u.GetName()] = true
			objs = append(objs, u)
		}
	}
	b, err := os.ReadFile(filepath.Join("testdata", "servicemonitor-crd.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	objs = append(objs, decode(t, string(b))...)
	crdOnce.Do(func() {
		ctx := context.Background()
		gvr := schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
		r := dynamic.NewForConfigOrDie(env.Config).Resource(gvr)
		for _, u := range objs {
			b, _ := json.Marshal(u.Object)
			force := true
			if _, err := r.Patch(ctx, u.GetName(), types.ApplyPatchType, b, metav1.PatchOptions{FieldManager: "helm-test", Force: &force}); err != nil {
				t.Fatalf("CRD %s: %v", u.GetName(), err)
			}
		}
		for _, u := range objs {
			testenv.Eventually(t, "CRD "+u.GetName()+" to be established", func() bool {
				cur, err := r.Get(ctx, u.GetName(), metav1.GetOptions{})
				if err != nil {
					return false
				}
				conds, _, _ := unstructured.NestedSlice(cur.Object, "status", "conditions")
				for _, c := range conds {
					if m, _ := c.(map[string]any); m["type"] == "Established" && m["status"] == "True" {
						return true
					}
				}
				return false
			})
		}
	})
	return names
}

// Credentials in a Secret that exists: the chart makes none and projects
// that one's .dockerconfigjson where config.plugins.dockerConfig points,
// relative to the config's folder whether the path is written relative or
// absolute; a path outside that folder is refused.
func TestRegistryExistingSecret(t *testing.T) {
	for _, path := range []string{"registry/config.json", "/etc/informer-host/registry/config.json"} {
		objs := render(t, "informer-host", "--set", "registry.existingSecret=creds", "--set", "config.plugins.dockerConfig="+path, "--set", "rbac.create=false")
		if s := find(objs, "Secret", "informer-host-registry"); s != nil {
			t.Errorf("dockerConfig %s: the chart renders a Secret beside the existing one", path)
		}
		dep, _ := deployment(t, objs)
		var items []corev1.KeyToPath
		for _, v := range dep.Spec.Template.Spec.Volumes {
			if v.Name != "config" || v.Projected == nil {
				continue
			}
			for _, src := range v.Projected.Sources {
				if src.Secret != nil && src.Secret.Name == "creds" {
					items = src.Secret.Items
				}
			}
		}
		if want := []corev1.KeyToPath{{Key: ".dockerconfigjson", Path: "registry/config.json"}}; !slices.Equal(items, want) {
			t.Errorf("dockerConfig %s: Secret creds is projected as %+v, want %+v", path, items, want)
		}
	}
	out, err := renderText(t, "informer-host", "--set", "registry.existingSecret=creds", "--set", "config.plugins.dockerConfig=/var/run/creds.json", "--set", "rbac.create=false")
	if err == nil || !strings.Contains(out, "name a path relative to it") {
		t.Errorf("dockerConfig outside /etc/informer-host: %v\n%s; want it refused", err, out)
	}
}
