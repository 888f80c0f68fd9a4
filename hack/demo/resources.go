package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"

	corev1 "k8s.io/api/core/v1"
	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/cache"
	"sigs.k8s.io/yaml"

	"github.com/informer-host/informer-host/internal/pluginapi/v1alpha1"
	"github.com/informer-host/informer-host/internal/testenv"
)

const (
	// teamNamespace is the tenant of hack/demo/config.yaml's ceiling;
	// the operator (the demo) creates it, the team's manifest fills it.
	teamNamespace = "team-a"
	// teamModule is the example the team's Plugin runs from a ConfigMap
	// of that name, under the key <teamModule>.wasm (what `kubectl create
	// configmap --from-file=build/plugins/<teamModule>.wasm` makes).
	teamModule = "minimal-wat"
	// clusterPluginName runs clusterPluginModule from a file:// source:
	// a name of its own, as a plugin object's may not be a directory
	// file's (config wins).
	clusterPluginName   = "phases"
	clusterPluginModule = "pod-phases.wasm"
	// fieldManager is the demo's, for what it applies as kubectl would.
	fieldManager = "demo"
)

// installPluginCRDs creates every CRD in dir (deploy/crds) and waits until
// each is established, so the daemon finds them at its start.
func installPluginCRDs(ctx context.Context, env *testenv.Env, dir string) error {
	files, err := filepath.Glob(filepath.Join(dir, "*_*.yaml"))
	if err != nil || len(files) == 0 {
		return fmt.Errorf("no CRDs in %s (the plugin resources' CRDs, deploy/crds; pass --crds): %v", dir, err)
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return err
		}
		crd := &apiextv1.CustomResourceDefinition{}
		if err := yaml.UnmarshalStrict(b, crd); err != nil {
			return fmt.Errorf("%s: %w", f, err)
		}
		if err := installCRD(ctx, env, crd); err != nil {
			return err
		}
	}
	return nil
}

// applyPluginObjects does what README's "Plugins as resources" shows a
// team and an operator doing: team-a's namespace (the operator's, with
// its ceiling in the config), the ConfigMap holding the team's module and
// the team's manifest (teamManifest), then the operator's ClusterPlugin
// running clusterPluginModule from the plugin directory.
func applyPluginObjects(ctx context.Context, env *testenv.Env, pluginDir, teamManifest string) error {
	if _, err := env.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: teamNamespace}}, metav1.CreateOptions{}); err != nil {
		return err
	}
	module, err := os.ReadFile(filepath.Join(pluginDir, teamModule+".wasm"))
	if err != nil {
		return fmt.Errorf("team-a's plugin (run `make plugins`): %w", err)
	}
	if _, err := env.Client.CoreV1().ConfigMaps(teamNamespace).Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: teamModule},
		BinaryData: map[string][]byte{teamModule + ".wasm": module},
	}, metav1.CreateOptions{}); err != nil {
		return err
	}
	say("created configmap %s/%s holding %s.wasm (%d bytes)", teamNamespace, teamModule, teamModule, len(module))

	manifest, err := os.ReadFile(teamManifest)
	if err != nil {
		return fmt.Errorf("team-a's manifest (pass --team-plugin): %w", err)
	}
	objs, err := decodeObjects(manifest)
	if err != nil {
		return fmt.Errorf("%s: %w", teamManifest, err)
	}
	dyn, err := dynamic.NewForConfig(env.Config)
	if err != nil {
		return err
	}
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(discovery.NewDiscoveryClientForConfigOrDie(env.Config)))
	for _, o := range objs {
		m, err := mapper.RESTMapping(o.GroupVersionKind().GroupKind(), o.GroupVersionKind().Version)
		if err != nil {
			return fmt.Errorf("%s: %s %s: %w", teamManifest, o.GetKind(), o.GetName(), err)
		}
		if err := apply(ctx, dyn.Resource(m.Resource).Namespace(o.GetNamespace()), o); err != nil {
			return fmt.Errorf("%s: %w", teamManifest, err)
		}
	}
	say("applied %s (%d objects)", teamManifest, len(objs))

	cp := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": v1alpha1.Group + "/" + v1alpha1.Version,
		"kind":       v1alpha1.KindClusterPlugin,
		"metadata":   map[string]any{"name": clusterPluginName},
		"spec": map[string]any{
			"source":   map[string]any{"file": filepath.Join(pluginDir, clusterPluginModule)},
			"bindings": []any{map[string]any{"resource": "pods"}},
			"config":   map[string]any{"logEvery": int64(5)},
		},
	}}
	if err := apply(ctx, dyn.Resource(v1alpha1.ClusterPluginsGVR), cp); err != nil {
		return err
	}
	say("applied clusterplugin %s (%s from a file:// source)", clusterPluginName, clusterPluginModule)
	return nil
}

// apply applies o server-side, as `kubectl apply --server-side` would.
func apply(ctx context.Context, r dynamic.ResourceInterface, o *unstructured.Unstructured) error {
	b, err := json.Marshal(o)
	if err != nil {
		return err
	}
	force := true
	if _, err := r.Patch(ctx, o.GetName(), types.ApplyPatchType, b, metav1.PatchOptions{FieldManager: fieldManager, Force: &force}); err != nil {
		return fmt.Errorf("%s %s: %w", o.GetKind(), o.GetName(), err)
	}
	return nil
}

// decodeObjects reads the objects of a multi-document YAML manifest.
func decodeObjects(manifest []byte) ([]*unstructured.Unstructured, error) {
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(manifest), 4096)
	var out []*unstructured.Unstructured
	for {
		o := &unstructured.Unstructured{}
		if err := dec.Decode(&o.Object); err != nil {
			if errors.Is(err, io.EOF) {
				return out, nil
			}
			return nil, err
		}
		if len(o.Object) > 0 {
			out = append(out, o)
		}
	}
}

// pluginTables prints what `kubectl get plugins -A` and `kubectl get
// clusterplugins` show, from the apiserver's own tables (the CRDs'
// printer columns, as kubectl asks for them): once every object is
// Ready, and again when a row changes or every `every` reports, so a
// person sees READY SOURCE DIGEST VERIFIED PARKED AGE without a kubectl.
type pluginTables struct {
	client *http.Client
	host   string
	every  int
	last   string // the rows last printed, AGE left out
	n      int
}

func newPluginTables(cfg *rest.Config, every int) (*pluginTables, error) {
	c, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, err
	}
	return &pluginTables{client: c, host: strings.TrimSuffix(cfg.Host, "/"), every: every}, nil
}

func (p *pluginTables) report(ctx context.Context) {
	p.n++
	plugins, okP := p.table(ctx, v1alpha1.PluginsGVR, true)
	cluster, okC := p.table(ctx, v1alpha1.ClusterPluginsGVR, false)
	if !okP || !okC {
		return
	}
	key := plugins.key + cluster.key
	ready := len(plugins.notReady)+len(cluster.notReady) == 0
	if p.n%p.every != 0 && (!ready || key == p.last) {
		return
	}
	p.last = key
	say("kubectl get plugins -A")
	for _, l := range plugins.lines {
		say("%s", l)
	}
	say("kubectl get clusterplugins")
	for _, l := range cluster.lines {
		say("%s", l)
	}
	for _, l := range append(plugins.notReady, cluster.notReady...) {
		say("%s", l)
	}
}

type printed struct {
	lines    []string
	key      string   // the rows without AGE: what a change is
	notReady []string // "<kind> <name> is not Ready: <reason>: <message>"
}

// table fetches gvr as a meta.k8s.io Table and lays it out as kubectl
// does (tabwriter, upper-case headers, NAMESPACE first with -A, a
// missing value left empty); ok is false when the table cannot be read
// or has no row.
func (p *pluginTables) table(ctx context.Context, gvr schema.GroupVersionResource, allNamespaces bool) (printed, bool) {
	url := fmt.Sprintf("%s/apis/%s/%s/%s?includeObject=Object", p.host, gvr.Group, gvr.Version, gvr.Resource)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return printed{}, false
	}
	req.Header.Set("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io")
	resp, err := p.client.Do(req)
	if err != nil {
		return printed{}, false
	}
	defer resp.Body.Close()
	var t metav1.Table
	if resp.StatusCode != http.StatusOK || json.NewDecoder(resp.Body).Decode(&t) != nil || len(t.Rows) == 0 {
		return printed{}, false
	}
	var buf, key bytes.Buffer
	w := tabwriter.NewWriter(&buf, 6, 4, 3, ' ', 0)
	var head []string
	age := -1
	if allNamespaces {
		head = append(head, "NAMESPACE")
	}
	for i, c := range t.ColumnDefinitions {
		if c.Priority != 0 {
			continue
		}
		if c.Name == "Age" {
			age = i
		}
		head = append(head, strings.ToUpper(c.Name))
	}
	fmt.Fprintln(w, strings.Join(head, "\t"))
	var notReady []string
	for _, r := range t.Rows {
		var o struct {
			Kind     string            `json:"kind"`
			Metadata metav1.ObjectMeta `json:"metadata"`
			Status   struct {
				Conditions []metav1.Condition `json:"conditions"`
			} `json:"status"`
		}
		_ = json.Unmarshal(r.Object.Raw, &o)
		name := cache.ObjectName{Namespace: o.Metadata.Namespace, Name: o.Metadata.Name}
		if c := meta.FindStatusCondition(o.Status.Conditions, v1alpha1.ConditionReady); c == nil {
			notReady = append(notReady, fmt.Sprintf("%s %s has no status yet (is the daemon running?)", o.Kind, name))
		} else if c.Status != metav1.ConditionTrue {
			notReady = append(notReady, fmt.Sprintf("%s %s is not Ready: %s: %s", o.Kind, name, c.Reason, c.Message))
		}
		var cells []string
		if allNamespaces {
			cells = append(cells, o.Metadata.Namespace)
		}
		for i, c := range r.Cells {
			if i >= len(t.ColumnDefinitions) || t.ColumnDefinitions[i].Priority != 0 {
				continue
			}
			s := ""
			if c != nil {
				s = fmt.Sprint(c)
			}
			if i != age {
				key.WriteString(s + "\t")
			}
			cells = append(cells, s)
		}
		key.WriteString("\n")
		fmt.Fprintln(w, strings.Join(cells, "\t"))
	}
	_ = w.Flush()
	return printed{lines: strings.Split(strings.TrimRight(buf.String(), "\n"), "\n"), key: key.String(), notReady: notReady}, true
}
