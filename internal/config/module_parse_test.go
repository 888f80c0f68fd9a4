package config

import (
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
)

const moduleParseBase = `apiVersion: informer-host/v1
resources:
  - {name: pods, version: v1, resource: pods}
  - {name: cms, version: v1, resource: configmaps}
upstreams:
  - {name: api, url: "https://api.example.com"}
`

func parseBase(t *testing.T, extra string) *Config {
	t.Helper()
	c, err := Parse("config.yaml", []byte(moduleParseBase+extra))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// A spec resolves to what the same entry in config.yaml resolves to, when
// config.yaml has no plugins.default; with one, the spec keeps the
// built-in defaults.
func TestParseModuleEqualsTheFilesModule(t *testing.T) {
	for _, tc := range []struct {
		name, yaml, json string
	}{
		{"bindings only",
			`{file: x.wasm, source: "file:///srv/x.wasm", bindings: [{resource: pods}]}`,
			`{"source": "file:///srv/x.wasm", "bindings": [{"resource": "pods"}]}`},
		{"every section",
			`{file: x.wasm, source: "oci://ghcr.io/org/x:v1", failurePolicy: fail-open, refreshInterval: 30s,
  bindings: [{resource: pods, events: [add], filter: "object.metadata.name != 'x'"}, {resource: cms}],
  delivery: {mode: latest, bufferSize: 50, maxRetries: 0, onError: skip},
  limits: {memoryPages: 20, callTimeout: 0s, parkAfter: 0, maxCallTime: 2m},
  config: {greeting: hi, n: [1, 2]},
  grants: {cache: [{resource: cms, indexes: [owner]}], state: {}, events: {}, http: {upstreams: [api]},
    writes: {resources: [{resource: cms, verbs: [create, delete]}]}}}`,
			`{"source": "oci://ghcr.io/org/x:v1", "failurePolicy": "fail-open", "refreshInterval": "30s",
  "bindings": [{"resource": "pods", "events": ["add"], "filter": "object.metadata.name != 'x'"}, {"resource": "cms"}],
  "delivery": {"mode": "latest", "bufferSize": 50, "maxRetries": 0, "onError": "skip"},
  "limits": {"memoryPages": 20, "callTimeout": "0s", "parkAfter": 0, "maxCallTime": "2m"},
  "config": {"greeting": "hi", "n": [1, 2]},
  "grants": {"cache": [{"resource": "cms", "indexes": ["owner"]}], "state": {}, "events": {}, "http": {"upstreams": ["api"]},
    "writes": {"resources": [{"resource": "cms", "verbs": ["create", "delete"]}]}}}`},
		{"controller",
			`{file: x.wasm, source: "file:///srv/x.wasm", controller: {for: pods, owns: [cms]},
  grants: {writes: {resources: [{resource: pods, verbs: [patch]}, {resource: cms, verbs: [create, patch, apply, delete]}]}}}`,
			`{"source": "file:///srv/x.wasm", "controller": {"for": "pods", "owns": ["cms"]},
  "grants": {"writes": {"resources": [{"resource": "pods", "verbs": ["patch"]}, {"resource": "cms", "verbs": ["create", "patch", "apply", "delete"]}]}}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			file := parseBase(t, "plugins:\n  modules:\n    - "+tc.yaml+"\n")
			want, _ := file.Module("x.wasm")
			got, errs := parseBase(t, "").ParseModule("ClusterPlugin x", "x.wasm", []byte(tc.json))
			if len(errs) > 0 {
				t.Fatal(errs)
			}
			if !reflect.DeepEqual(got, *want) {
				t.Errorf("spec resolves to\n%+v\nthe file's entry to\n%+v", got, *want)
			}
		})
	}

	withDefault := parseBase(t, "plugins:\n  default:\n    limits: {memoryPages: 10}\n    grants: {state: {}}\n")
	m, errs := withDefault.ParseModule("ClusterPlugin x", "x.wasm", []byte(`{"source": "file:///srv/x.wasm", "bindings": [{"resource": "pods"}]}`))
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	if m.Limits.MemoryPages != DefaultMemoryPages || m.Grants.State != nil {
		t.Errorf("plugins.default applied to a spec: memoryPages %d, state %v", m.Limits.MemoryPages, m.Grants.State)
	}
}

func TestParseModuleProblems(t *testing.T) {
	c := parseBase(t, "")
	missingKey := filepath.Join(t.TempDir(), "gone.pem")
	for _, tc := range []struct {
		name, json string
		want       []string
	}{
		{"typo", `{"source": "file:///x.wasm", "bindngs": [{"resource": "pods"}]}`,
			[]string{`spec.bindngs: unknown field; did you mean "bindings"?`}},
		{"nested typo", `{"source": "file:///x.wasm", "bindings": [{"resource": "pods"}], "limits": {"memoryPage": 3}}`,
			[]string{`spec.limits.memoryPage: unknown field; did you mean "memoryPages"?`}},
		{"unknown resource", `{"source": "file:///x.wasm", "bindings": [{"resource": "pod"}]}`,
			[]string{`spec.bindings[0].resource: binding refers to resource "pod", which is not configured (configured: cms, pods)`}},
		{"wrong type", `{"source": "file:///x.wasm", "bindings": [{"resource": "pods", "events": "add"}], "limits": {"callTimeout": 5}}`,
			[]string{`spec.bindings[0].events: expected a list of strings, got string "add"`, `spec.limits.callTimeout: 5 is a number; use a duration string like "30s"`}},
		{"out of range", `{"source": "file:///x.wasm", "bindings": [{"resource": "pods"}], "delivery": {"bufferSize": 0}}`,
			[]string{`spec.delivery.bufferSize: 0 is out of range`}},
		{"source fields", `{"source": "https://example.com/x.wasm", "sha256": "nothex", "bindings": [{"resource": "pods"}]}`,
			[]string{`spec.source.sha256: "nothex" is not a sha256 digest`}},
		{"relative file", `{"source": "file://x.wasm", "bindings": [{"resource": "pods"}]}`,
			[]string{`spec.source: a file:// source of a plugin object must be an absolute path`}},
		{"unknown upstream", `{"source": "file:///x.wasm", "bindings": [{"resource": "pods"}], "grants": {"http": {"upstreams": ["other"]}}}`,
			[]string{`spec.grants.http.upstreams[0]: unknown upstream "other"`}},
		{"missing key file", `{"source": "file:///x.wasm", "bindings": [{"resource": "pods"}], "verify": {"keys": ["` + missingKey + `"]}}`,
			[]string{`spec.verify.publicKeys[0]: cannot read`}},
		{"controller without its writes", `{"source": "file:///x.wasm", "controller": {"for": "pods", "owns": ["cms"]}}`,
			[]string{`spec.controller.owns[0]: the host does this as the plugin's identity, but grants.writes does not allow`}},
		{"file", `{"file": "y.wasm", "source": "file:///x.wasm"}`, []string{`spec.file: not a field of a plugin object`}},
		{"not an object", `[1, 2]`, []string{`spec: expected an object, got a list`}},
		{"not JSON", `{"a": `, []string{`spec: `}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, errs := c.ParseModule("Plugin team-a/x", "team-a.x.wasm", []byte(tc.json))
			if len(errs) != len(tc.want) {
				t.Fatalf("got %d problems, want %d:\n%v", len(errs), len(tc.want), errs)
			}
			for i, p := range errs {
				if p.File != "Plugin team-a/x" || p.Line != 0 || !strings.HasPrefix(p.Message, tc.want[i]) {
					t.Errorf("problem %d: %+v, want File %q, Line 0, a message starting %q", i, p, "Plugin team-a/x", tc.want[i])
				}
			}
		})
	}
}

func TestWithModules(t *testing.T) {
	c := parseBase(t, "plugins:\n  modules:\n    - {file: a.wasm, bindings: [{resource: pods}]}\n")
	extra, errs := c.ParseModule("ClusterPlugin b", "b.wasm", []byte(`{"source": "file:///b.wasm", "bindings": [{"resource": "cms"}],
  "grants": {"cache": [{"resource": "pods", "indexes": ["owner"]}]}}`))
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	out := c.WithModules([]Module{extra})
	if names := moduleNames(out); !slices.Equal(names, []string{"a.wasm", "b.wasm"}) {
		t.Errorf("merged modules %v", names)
	}
	if names := moduleNames(c); !slices.Equal(names, []string{"a.wasm"}) {
		t.Errorf("the file's config changed: modules %v", names)
	}
	pods, _ := out.Resource("pods")
	if !slices.Equal(pods.Indexes, []string{IndexOwner}) {
		t.Errorf("merged pods indexes %v, want the extra module's cache grant's", pods.Indexes)
	}
	if pods, _ := c.Resource("pods"); len(pods.Indexes) != 0 {
		t.Errorf("the file's pods indexes changed: %v", pods.Indexes)
	}
	if !out.IsSourced("b.wasm") || len(out.Sourced()) != 1 {
		t.Error("the merged module is not a sourced one")
	}
	if got := out.SettingsFor("b.wasm"); !reflect.DeepEqual(got, extra.PluginSettings) {
		t.Errorf("SettingsFor the merged module: %+v", got)
	}
	if p := out.UnmatchedModules("plugins", nil); len(p) != 1 || !strings.HasPrefix(p[0].String(), "config.yaml:") {
		t.Errorf("the file's modules keep their lines: %v", p)
	}
}

func moduleNames(c *Config) []string {
	var out []string
	for _, m := range c.Plugins.Modules {
		out = append(out, m.File)
	}
	return out
}
