package pluginresource

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/informer-host/informer-host/internal/config"
	"github.com/informer-host/informer-host/internal/nearest"
	"github.com/informer-host/informer-host/internal/pluginapi/v1alpha1"
)

var everything = labels.Everything()

// admit turns one object into its module, or refuses it. running counts
// each namespace's Plugins admitted so far.
func (c *Controller) admit(ctx context.Context, base *config.Config, o *unstructured.Unstructured, reserved map[string]bool, running map[string]int) (config.Module, Admission) {
	ns, name := o.GetNamespace(), o.GetName()
	a := Admission{Kind: v1alpha1.KindClusterPlugin, Namespace: ns, Name: name, UID: o.GetUID(), Generation: o.GetGeneration(),
		Plugin: v1alpha1.PluginName(ns, name)}
	origin := v1alpha1.KindClusterPlugin + " " + name
	if ns != "" {
		a.Kind, origin = v1alpha1.KindPlugin, v1alpha1.KindPlugin+" "+ns+"/"+name
	}
	refuse := func(reason string, msgs []string) (config.Module, Admission) {
		a.Reason, a.Message = reason, strings.Join(msgs, "; ")
		return config.Module{}, a
	}
	spec, _, err := unstructured.NestedMap(o.Object, "spec")
	if err != nil {
		return refuse(v1alpha1.ReasonRefused, []string{"spec: " + err.Error()})
	}
	_, a.VerifyPolicy = spec["verify"]
	if _, ok := base.Module(a.Plugin); ok {
		return refuse(v1alpha1.ReasonNameConflict, []string{fmt.Sprintf(
			"config.yaml's plugins.modules has a plugin called %s, which wins; rename this object or that module", a.Plugin)})
	}
	if reserved[a.Plugin] {
		return refuse(v1alpha1.ReasonNameConflict, []string{fmt.Sprintf(
			"the plugin directory %s has a file called %s, which wins; rename this object or that file", base.PluginDir(), a.Plugin)})
	}
	s, probs := c.settings(spec, ns, base)
	a.Source = config.RedactSource(s.source)
	if len(probs) > 0 {
		return refuse(v1alpha1.ReasonRefused, probs)
	}
	data, err := json.Marshal(s.module)
	if err != nil {
		return refuse(v1alpha1.ReasonRefused, []string{"spec: " + err.Error()})
	}
	m, errs := base.ParseModule(origin, a.Plugin, data)
	if len(errs) > 0 {
		return refuse(v1alpha1.ReasonRefused, messages(errs))
	}
	if ns != "" {
		if c.o.Admit == nil {
			return refuse(v1alpha1.ReasonNotAllowed, []string{"this daemon runs no team's plugins (tenancy.ceilings names no namespace); use a ClusterPlugin"})
		}
		admitted, r := c.o.Admit(ctx, base, ns, s.serviceAccount, m, running[ns])
		if r != nil {
			msgs := messages(r.Problems)
			if len(msgs) == 0 {
				msgs = []string{"refused by the namespace's ceiling"}
			}
			return refuse(r.Reason, msgs)
		}
		m = admitted
		m.Namespace = ns
	}
	a.Admitted = true
	return m, a
}

func messages(errs config.Errors) []string {
	out := make([]string, len(errs))
	for i, p := range errs {
		out[i] = p.Message
	}
	return out
}

// converted is a spec made into a plugins.modules entry.
type converted struct {
	// module is the entry without file, for ParseModule.
	module map[string]any
	// source is its source string (also in module).
	source         string
	serviceAccount string
}

// sourceFields are spec.source's fields that a modules entry has at
// its top level.
var sourceFields = []string{"sha256", "pullPolicy", "refreshInterval", "failurePolicy"}

// settings converts spec (the object's own copy) into a plugins.modules
// entry: spec.source becomes source and its pull settings, spec.verify's
// inline keys become files, serviceAccountName is taken out. The rest is
// left for ParseModule to judge. Problems start with the spec's path.
func (c *Controller) settings(spec map[string]any, ns string, base *config.Config) (converted, []string) {
	var probs []string
	bad := func(format string, args ...any) { probs = append(probs, fmt.Sprintf(format, args...)) }
	out := converted{module: spec}
	if out.module == nil {
		out.module = map[string]any{}
	}
	m := out.module

	sa, hasSA := m["serviceAccountName"]
	delete(m, "serviceAccountName")
	out.serviceAccount, _ = sa.(string)
	switch {
	case ns != "" && out.serviceAccount == "":
		bad("spec.serviceAccountName: required: the ServiceAccount of namespace %s whose identity the plugin's writes, Events and ConfigMap reads are made as", ns)
	case ns == "" && hasSA:
		bad("spec.serviceAccountName: a ClusterPlugin acts as its grants.impersonate says, as a config.yaml module does; remove serviceAccountName")
	}
	if g, ok := m["grants"].(map[string]any); ok && ns != "" {
		if _, ok := g["impersonate"]; ok {
			bad("spec.grants.impersonate: a Plugin acts as its spec.serviceAccountName; remove grants.impersonate")
		}
	}
	for _, k := range append([]string{"file"}, sourceFields...) {
		if _, ok := m[k]; !ok {
			continue
		}
		if k == "file" {
			bad("spec.file: unknown field; the plugin's name is the object's")
		} else {
			bad("spec.%s: unknown field; it belongs under spec.source", k)
		}
	}

	src, _ := m["source"].(map[string]any)
	delete(m, "source")
	out.source, probs = sourceString(src, ns, probs)
	if out.source != "" {
		m["source"] = out.source
	}
	for _, k := range sourceFields {
		if v, ok := src[k]; ok {
			m[k] = v
		}
	}

	if v, ok := m["verify"]; ok {
		delete(m, "verify")
		verify, vprobs := c.verify(v, base)
		probs = append(probs, vprobs...)
		if verify != nil {
			m["verify"] = verify
		}
	}
	return out, probs
}

// sourceString makes spec.source into a config source string.
func sourceString(src map[string]any, ns string, probs []string) (string, []string) {
	bad := func(format string, args ...any) { probs = append(probs, fmt.Sprintf(format, args...)) }
	str := func(k string) (string, bool) {
		v, ok := src[k]
		if !ok {
			return "", false
		}
		s, isStr := v.(string)
		if !isStr {
			bad("spec.source.%s: expected a string", k)
		}
		return s, true
	}
	for k := range src {
		switch k {
		case "oci", "https", "file", "configMap", "sha256", "pullPolicy", "refreshInterval", "failurePolicy":
		default:
			if near := suggestField(k, "oci", "https", "file", "configMap", "sha256", "pullPolicy", "refreshInterval", "failurePolicy"); near != "" {
				bad("spec.source.%s: unknown field; did you mean %q?", k, near)
			} else {
				bad("spec.source.%s: unknown field", k)
			}
		}
	}
	var kinds []string
	out := ""
	if v, ok := str("oci"); ok {
		kinds = append(kinds, "oci")
		out = config.SchemeOCI + "://" + strings.TrimPrefix(v, config.SchemeOCI+"://")
	}
	if v, ok := str("https"); ok {
		kinds = append(kinds, "https")
		if !strings.HasPrefix(v, "https://") {
			bad("spec.source.https: %q is not an https:// URL", config.RedactSource(v))
		}
		out = v
	}
	if v, ok := str("file"); ok {
		kinds = append(kinds, "file")
		if ns != "" {
			bad("spec.source.file: only a ClusterPlugin may read the daemon's disk; use oci, https or configMap")
		} else if !filepath.IsAbs(v) {
			bad("spec.source.file: %q must be an absolute path on the daemon's disk", v)
		}
		out = config.SchemeFile + "://" + v
	}
	if v, ok := src["configMap"]; ok {
		kinds = append(kinds, "configMap")
		cm, _ := v.(map[string]any)
		get := func(k string) string { s, _ := cm[k].(string); return s }
		cmNS, cmName, key := get("namespace"), get("name"), get("key")
		switch {
		case ns != "" && cmNS == "":
			cmNS = ns
		case ns != "" && cmNS != ns:
			bad("spec.source.configMap.namespace: a Plugin reads ConfigMaps of its own namespace %s only", ns)
		case ns == "" && cmNS == "":
			bad("spec.source.configMap.namespace: required for a ClusterPlugin")
		}
		if cmName == "" {
			bad("spec.source.configMap.name: required")
		}
		if key == "" {
			bad("spec.source.configMap.key: required: the binaryData key holding the module")
		}
		out = "configmap://" + cmNS + "/" + cmName + "/" + key
	}
	if len(kinds) != 1 {
		allowed := "oci, https, configMap or file"
		if ns != "" {
			allowed = "oci, https or configMap"
		}
		if len(kinds) == 0 {
			bad("spec.source: required: one of %s", allowed)
		} else {
			bad("spec.source: sets %s; set exactly one of %s", strings.Join(kinds, " and "), allowed)
		}
		return "", probs
	}
	return out, probs
}

// verify makes spec.verify into a config verify policy: each inline key
// is written to KeyDir (named by its sha256, so a key is written once
// however many objects name it) and named by its path; keyless
// identities are checked against pluginResources.trustedRoot.
func (c *Controller) verify(v any, base *config.Config) (map[string]any, []string) {
	var probs []string
	bad := func(format string, args ...any) { probs = append(probs, fmt.Sprintf(format, args...)) }
	spec, ok := v.(map[string]any)
	if !ok {
		if v != nil {
			bad("spec.verify: expected an object")
		}
		return nil, probs
	}
	out := map[string]any{}
	for k, x := range spec {
		switch k {
		case "required", "identities":
			out[k] = x
		case "publicKeys":
			list, ok := x.([]any)
			if !ok {
				bad("spec.verify.publicKeys: expected a list of PEM public keys")
				continue
			}
			keys := make([]any, 0, len(list))
			for i, k := range list {
				s, _ := k.(string)
				file, err := c.writeKey(s)
				if err != nil {
					bad("spec.verify.publicKeys[%d]: %v", i, err)
					continue
				}
				keys = append(keys, file)
			}
			out["keys"] = keys
		default:
			bad("spec.verify.%s: unknown field; a plugin object's verify has required, publicKeys and identities", k)
		}
	}
	if tr := base.PluginResources.TrustedRoot; tr != "" {
		out["trustedRoot"] = base.ResolvePath(tr)
	}
	return out, probs
}

// writeKey writes one PEM key under KeyDir, unless it is there, and
// returns its path.
func (c *Controller) writeKey(key string) (string, error) {
	if b, _ := pem.Decode([]byte(key)); b == nil {
		return "", fmt.Errorf("not a PEM public key (-----BEGIN PUBLIC KEY----- ... -----END PUBLIC KEY-----)")
	}
	if c.o.KeyDir == "" {
		return "", fmt.Errorf("this daemon has no directory to keep keys in (plugins.sourceCache)")
	}
	sum := sha256.Sum256([]byte(key))
	file := filepath.Join(c.o.KeyDir, "sha256-"+hex.EncodeToString(sum[:])+".pem")
	if _, err := os.Stat(file); err == nil {
		return file, nil
	}
	if err := os.MkdirAll(c.o.KeyDir, 0o755); err != nil {
		return "", fmt.Errorf("cannot keep the key: %w", err)
	}
	tmp, err := os.CreateTemp(c.o.KeyDir, ".key-*")
	if err != nil {
		return "", fmt.Errorf("cannot keep the key: %w", err)
	}
	_, werr := tmp.WriteString(key)
	cerr := tmp.Close()
	if err := firstErr(werr, cerr); err != nil {
		_ = os.Remove(tmp.Name())
		return "", fmt.Errorf("cannot keep the key: %w", err)
	}
	// A rename, so the verifier never reads half a key.
	if err := os.Rename(tmp.Name(), file); err != nil {
		_ = os.Remove(tmp.Name())
		return "", fmt.Errorf("cannot keep the key: %w", err)
	}
	return file, nil
}

func firstErr(errs ...error) error {
	for _, e := range errs {
		if e != nil {
			return e
		}
	}
	return nil
}

// suggestField returns the known field nearest to a misspelt one.
func suggestField(name string, known ...string) string {
	if near := nearest.Names(name, known, 1); len(near) > 0 {
		return near[0]
	}
	return ""
}
