package config

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"gopkg.in/yaml.v3"
)

// A plugin object's spec (internal/pluginresource) is read here exactly
// as Load reads a plugins.modules entry: the same strict decoder with its
// "did you mean" hints, the same validation, the same defaults, except
// that plugins.default does not apply (a spec is complete in itself).
//
// ParseModule reads the fields of a plugins.modules entry except file.
// The spec's own source, verify and serviceAccountName are not among
// them: the caller converts spec.source into source, sha256, pullPolicy,
// refreshInterval and failurePolicy, spec.verify into verify (keys as
// files it wrote), and drops serviceAccountName, before calling. Problem
// messages name the spec's fields as the object has them
// (spec.source.sha256, spec.verify.publicKeys[0]).

// specFields renames a module entry's path, as decode and validate
// report it, to the spec's field it came from.
var specFields = []struct{ module, spec string }{
	{"plugins.modules[0].sha256", "spec.source.sha256"},
	{"plugins.modules[0].pullPolicy", "spec.source.pullPolicy"},
	{"plugins.modules[0].refreshInterval", "spec.source.refreshInterval"},
	{"plugins.modules[0].failurePolicy", "spec.source.failurePolicy"},
	{"plugins.modules[0].verify.keys", "spec.verify.publicKeys"},
	{"plugins.modules[0]", "spec"},
}

// ParseModule reads settings (JSON or YAML: the fields of a
// plugins.modules entry except file) as the module of the plugin called
// name, validated against c's resources and upstreams, with the built-in
// defaults filled in. Problems have File origin (such as "Plugin
// team-a/labeler"), Line 0, and a Message starting with the spec's path
// ("spec.bindings[0].resource: ...").
func (c *Config) ParseModule(origin, name string, settings []byte) (Module, Errors) {
	fail := func(format string, args ...any) (Module, Errors) {
		return Module{}, Errors{{File: origin, Message: fmt.Sprintf(format, args...)}}
	}
	if !isWasmBaseName(name) {
		return fail("metadata.name: the plugin's name %q must be a plain file name ending in \".wasm\"", name)
	}
	body := &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map"}
	if len(strings.TrimSpace(string(settings))) > 0 {
		var doc yaml.Node
		if err := yaml.Unmarshal(settings, &doc); err != nil {
			return fail("spec: %v", strings.TrimPrefix(err.Error(), "yaml: "))
		}
		switch n := doc.Content; {
		case len(n) == 0 || isNull(n[0]):
		case n[0].Kind != yaml.MappingNode:
			return fail("spec: expected an object, got %s", describeNode(n[0]))
		default:
			body = n[0]
		}
	}
	for i := 0; i+1 < len(body.Content); i += 2 {
		if body.Content[i].Value == "file" {
			return fail("spec.file: not a field of a plugin object; the plugin's name comes from the object's")
		}
	}
	// The entry is written out as a config document of its own, in block
	// style so that every key has its own line: decode finds a problem's
	// path by its line.
	str := func(v string) *yaml.Node { return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: v} }
	entry := &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map", Content: append([]*yaml.Node{str("file"), str(name)}, body.Content...)}
	root := &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map", Content: []*yaml.Node{
		str("apiVersion"), str(APIVersion),
		str("plugins"), {Kind: yaml.MappingNode, Tag: "!!map", Content: []*yaml.Node{
			str("modules"), {Kind: yaml.SequenceNode, Tag: "!!seq", Content: []*yaml.Node{entry}},
		}},
	}}
	blockStyle(root)
	data, err := yaml.Marshal(root)
	if err != nil {
		return fail("spec: %v", err)
	}
	parsed, p := decode(origin, data)
	if p.root == nil {
		return Module{}, specProblems(origin, p.list)
	}
	m := &parsed.Plugins.Modules[0]
	mp := path{"plugins", "modules", 0}
	names := make(map[string]int, len(c.Resources))
	for _, r := range c.Resources {
		names[r.Name] = 0
	}
	validateSettings(p, mp, &m.PluginSettings, names, true)
	validateModuleSource(p, mp, m)
	if ref, err := ParseSource(m.Source, ""); err == nil && ref.Scheme == SchemeFile && !filepath.IsAbs(ref.Path) {
		p.add(mp.key("source"), "a file:// source of a plugin object must be an absolute path on the daemon's disk")
	}
	upstreams := make(map[string]int, len(c.Upstreams))
	for _, u := range c.Upstreams {
		upstreams[u.Name] = 0
	}
	validateHTTPGrant(p, mp, m.Grants.HTTP, upstreams)
	alone := &Config{Resources: c.Resources, Plugins: Plugins{Modules: parsed.Plugins.Modules}}
	validateRestartBackoff(p, alone)
	validateControllerGrants(p, alone)
	if len(p.list) > 0 {
		return Module{}, specProblems(origin, p.list)
	}
	builtin := resolveSettings(PluginSettings{}, 0, PluginSettings{}, 0)
	m.PluginSettings = resolveSettings(m.PluginSettings, fieldsSet(m.PluginSettings, p, mp), builtin, allFields)
	m.applySourceDefaults(c, p, mp)
	return *m, nil
}

// blockStyle clears the flow style JSON's mappings and lists come with.
func blockStyle(n *yaml.Node) {
	if n.Kind == yaml.MappingNode || n.Kind == yaml.SequenceNode {
		n.Style = 0
	}
	for _, c := range n.Content {
		blockStyle(c)
	}
}

// specProblems restates problems found in the synthetic document as
// problems of the spec: no line (the object has none worth showing), and
// the spec's paths.
func specProblems(origin string, list Errors) Errors {
	list.sort()
	out := make(Errors, 0, len(list))
	for _, pr := range list {
		msg := pr.Message
		// unknownField words it "unknown field "x" in <parent>; ...".
		if rest, ok := strings.CutPrefix(msg, "unknown field "); ok {
			if q, after, ok := strings.Cut(rest, " in "); ok {
				parent, hint, _ := strings.Cut(after, ";")
				field := strings.Trim(q, `"`)
				msg = parent + "." + field + ": unknown field"
				if hint != "" {
					msg += ";" + hint
				}
			}
		}
		for _, f := range specFields {
			msg = strings.ReplaceAll(msg, f.module, f.spec)
		}
		if !strings.HasPrefix(msg, "spec") {
			msg = "spec: " + msg
		}
		out = append(out, Problem{File: origin, Message: msg})
	}
	return out
}

// WithModules returns a copy of c with extra (modules resolved as
// ParseModule returns them) appended to plugins.modules, and the
// resources' indexes recomputed for their cache grants. c is not changed.
func (c *Config) WithModules(extra []Module) *Config {
	out := *c
	out.Resources = slices.Clone(c.Resources)
	out.Plugins.Modules = append(slices.Clone(c.Plugins.Modules), extra...)
	out.ResolveIndexes()
	return &out
}
