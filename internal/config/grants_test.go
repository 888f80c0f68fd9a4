package config

import (
	"reflect"
	"testing"
)

func TestGrantProblems(t *testing.T) {
	cases := []struct {
		name string
		in   string
		want string
	}{
		{"resource not watched", withHead("plugins:", "  modules:", "  - file: a.wasm", "    grants:", "      cache:", "      - resource: deployments"),
			`config.yaml:11: plugins.modules[0].grants.cache[0].resource: cache grant names resource "deployments", which the config does not watch; cache reads are served from the informers of configured resources only, so add it under resources (configured: pods)`},
		{"resource missing", withHead("plugins:", "  default:", "    grants:", "      cache:", "      - indexes: [owner]"),
			`config.yaml:10: plugins.default.grants.cache[0].resource: required: the name of a configured resource`},
		{"unknown index", withHead("plugins:", "  default:", "    grants:", "      cache:", "      - resource: pods", "        indexes: [owner, label]"),
			`config.yaml:11: plugins.default.grants.cache[0].indexes[1]: unknown index "label"; known: owner (lookups by namespace need no index)`},
		{"duplicate index", withHead("plugins:", "  default:", "    grants:", "      cache:", "      - resource: pods", "        indexes: [owner, owner]"),
			`config.yaml:11: plugins.default.grants.cache[0].indexes[1]: duplicate index "owner"`},
		{"duplicate grant", withHead("plugins:", "  default:", "    grants:", "      cache:", "      - resource: pods", "      - resource: pods"),
			`config.yaml:11: plugins.default.grants.cache[1].resource: duplicate cache grant for resource "pods" (first at line 10)`},
		{"unknown capability", withHead("plugins:", "  default:", "    grants:", "      cash: []"),
			`config.yaml:9: unknown field "cash" in plugins.default.grants; did you mean "cache"?`},
		{"grant not a list", withHead("plugins:", "  default:", "    grants:", "      cache: pods"),
			`config.yaml:9: plugins.default.grants.cache: expected a list, got string "pods"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse("config.yaml", []byte(tc.in))
			if err == nil {
				t.Fatal("no error")
			}
			if !containsLinePrefix(err.Error(), tc.want) {
				t.Errorf("missing problem\n  want: %s\n  got:\n%s", tc.want, indent(err.Error()))
			}
		})
	}
}

func TestGrantMerge(t *testing.T) {
	in := doc(
		"apiVersion: informer-host/v1",
		"resources:",
		"- {name: pods, version: v1, resource: pods}",
		"- {name: rs, group: apps, version: v1, resource: replicasets}",
		"- {name: cms, version: v1, resource: configmaps}",
		"plugins:",
		"  default:",
		"    grants:",
		"      cache: [{resource: cms}]",
		"  modules:",
		"  - file: inherits.wasm",
		"    limits: {memoryPages: 10}",
		"  - file: replaces.wasm",
		"    grants:",
		"      cache:",
		"      - {resource: pods, indexes: [owner]}",
		"      - {resource: rs}",
		"  - file: drops.wasm",
		"    grants: {cache: []}",
	)
	c, err := Parse("config.yaml", []byte(in))
	if err != nil {
		t.Fatal(err)
	}
	cms := []CacheGrant{{Resource: "cms"}}
	for file, want := range map[string][]CacheGrant{
		"unnamed.wasm":  cms,
		"inherits.wasm": cms,
		"replaces.wasm": {{Resource: "pods", Indexes: []string{"owner"}}, {Resource: "rs"}},
		"drops.wasm":    {},
	} {
		got := c.SettingsFor(file).Grants.Cache
		if len(got) != len(want) || (len(want) > 0 && !reflect.DeepEqual(got, want)) {
			t.Errorf("%s: cache grants %+v, want %+v", file, got, want)
		}
	}
	if g := c.SettingsFor("replaces.wasm").Grants; !reflect.DeepEqual(g.Granted(), []string{CapabilityCache}) {
		t.Errorf("Granted() = %v", g.Granted())
	}
	if g := c.SettingsFor("drops.wasm").Grants; len(g.Granted()) != 0 {
		t.Errorf("drops.wasm: Granted() = %v, want none", g.Granted())
	}
	// The owner index exists only where a grant asks for it.
	for _, r := range c.Resources {
		want := []string(nil)
		if r.Name == "pods" {
			want = []string{IndexOwner}
		}
		if !reflect.DeepEqual(r.Indexes, want) {
			t.Errorf("resource %s: indexes %v, want %v", r.Name, r.Indexes, want)
		}
	}
	// SettingsFor hands out copies.
	s := c.SettingsFor("replaces.wasm")
	s.Grants.Cache[0].Indexes[0] = "x"
	if c.SettingsFor("replaces.wasm").Grants.Cache[0].Indexes[0] != IndexOwner {
		t.Error("SettingsFor result aliases the config")
	}
}

// A controller's owned resources carry IndexControllerOwner without any
// grant, so its reconciles find a primary's children by index; the
// primary and resources no controller owns do not pay for it.
func TestControllerOwnsIndex(t *testing.T) {
	in := doc(
		"apiVersion: informer-host/v1",
		"resources:",
		"- {name: pods, version: v1, resource: pods}",
		"- {name: cms, version: v1, resource: configmaps}",
		"- {name: secrets, version: v1, resource: secrets}",
		"plugins:",
		"  modules:",
		"  - file: ctl.wasm",
		"    grants:",
		"      cache: [{resource: pods, indexes: [owner]}]",
		"      writes:",
		"        resources:",
		"        - {resource: pods, verbs: [apply, delete]}",
		"        - {resource: secrets, verbs: [apply, delete]}",
		"    controller: {for: cms, owns: [pods, secrets]}",
	)
	c, err := Parse("config.yaml", []byte(in))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][]string{
		"pods":    {IndexControllerOwner, IndexOwner},
		"secrets": {IndexControllerOwner},
	}
	for _, r := range c.Resources {
		if !reflect.DeepEqual(r.Indexes, want[r.Name]) {
			t.Errorf("resource %s: indexes %v, want %v", r.Name, r.Indexes, want[r.Name])
		}
	}
}
