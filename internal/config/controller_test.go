package config

import (
	"reflect"
	"strings"
	"testing"
)

// withControllerHead is a valid file with three resources (lines 1-13)
// and a module a.wasm whose settings start on line 16.
func withControllerHead(lines ...string) string {
	return doc(append([]string{
		"apiVersion: informer-host/v1", // 1
		"resources:",                   // 2
		"- name: cronjobs",             // 3
		"  group: batch",               // 4
		"  version: v1",                // 5
		"  resource: cronjobs",         // 6
		"- name: jobs",                 // 7
		"  group: batch",               // 8
		"  version: v1",                // 9
		"  resource: jobs",             // 10
		"- name: configmaps",           // 11
		"  version: v1",                // 12
		"  resource: configmaps",       // 13
		"plugins:",                     // 14
		"  modules:",                   // 15
		"  - file: a.wasm",             // 16
	}, lines...)...)
}

// writes grants everything controller mode needs on cronjobs and jobs.
var writes = []string{
	"    grants:",
	"      writes:",
	"        resources:",
	"        - {resource: cronjobs, verbs: [patch, apply]}",
	"        - {resource: batch/v1/jobs, verbs: [apply, delete]}",
}

func TestControllerProblems(t *testing.T) {
	cases := []struct {
		name string
		in   []string
		want []string // every one a line prefix of the error
	}{
		{"bindings too", []string{
			"    bindings: [{resource: jobs}]", // 17
			"    controller: {for: cronjobs}",  // 18
		}, []string{`config.yaml:17: plugins.modules[0].bindings: controller mode derives its bindings from controller.for/owns/watches; remove bindings`}},
		{"unknown resources, all reported", []string{
			"    controller:",                         // 17
			"      for: cronjob",                      // 18
			"      owns: [job]",                       // 19
			"      watches:",                          // 20
			"      - {resource: secrets, label: a/b}", // 21
		}, []string{
			`config.yaml:18: plugins.modules[0].controller.for: controller.for names resource "cronjob" is not a configured resource (configured: configmaps, cronjobs, jobs)`,
			`config.yaml:19: plugins.modules[0].controller.owns[0]: owns names resource "job" is not a configured resource`,
			`config.yaml:21: plugins.modules[0].controller.watches[0].resource: watch names resource "secrets" is not a configured resource`,
		}},
		{"owns the primary", []string{"    controller: {for: cronjobs, owns: [cronjobs]}"},
			[]string{`config.yaml:17: plugins.modules[0].controller.owns[0]: "cronjobs" is the primary resource (for)`}},
		{"for missing", []string{"    controller: {owns: [jobs]}"},
			[]string{`config.yaml:17: plugins.modules[0].controller.for: required: the name of a configured resource`}},
		{"duplicate owns", []string{"    controller: {for: cronjobs, owns: [jobs, jobs]}"},
			[]string{`config.yaml:17: plugins.modules[0].controller.owns[1]: duplicate "jobs" (first at line 17)`}},
		{"watch without mapping", []string{
			"    controller:",
			"      for: cronjobs",
			"      watches:",
			"      - resource: configmaps", // 20
		}, []string{`config.yaml:20: plugins.modules[0].controller.watches[0]: no mapping: set exactly one of label, annotation, field, map or referencedBy`}},
		{"watch with two mappings", []string{
			"    controller:",
			"      for: cronjobs",
			"      watches:",
			"      - resource: configmaps",
			"        label: example.com/src",
			"        map: 'object.metadata.name'", // 22
		}, []string{`config.yaml:22: plugins.modules[0].controller.watches[0].map: a watch has exactly one mapping, and this one also sets label`}},
		{"bad label key and field", []string{
			"    controller:",
			"      for: cronjobs",
			"      watches:",
			"      - {resource: configmaps, label: 'not a key'}",  // 20
			"      - {resource: configmaps, field: 'spec..name'}", // 21
		}, []string{
			`config.yaml:20: plugins.modules[0].controller.watches[0].label: "not a key" is not a label key`,
			`config.yaml:21: plugins.modules[0].controller.watches[1].field: `,
		}},
		{"CEL that does not compile", []string{
			"    controller:",
			"      for: cronjobs",
			"      filter: 'object.metadata.name =='", // 19
			"      watches:",                          // 20
			"      - {resource: configmaps, map: 'object.metadata.name +'}",     // 21
			"      - {resource: configmaps, referencedBy: 'object.spec.x > 1'}", // 22
		}, []string{
			`config.yaml:19: plugins.modules[0].controller.filter: `,
			`config.yaml:21: plugins.modules[0].controller.watches[0].map: `,
			`config.yaml:22: plugins.modules[0].controller.watches[1].referencedBy: returns bool, not a string or a list of strings`,
		}},
		{"bad finalizer and onRemove", []string{
			"    controller:",
			"      for: cronjobs",
			"      finalizer: 'Clean Up!'", // 19
			"      onRemove: drop",         // 20
		}, []string{
			`config.yaml:19: plugins.modules[0].controller.finalizer: "Clean Up!" is not a finalizer name`,
			`config.yaml:20: plugins.modules[0].controller.onRemove: unknown onRemove "drop"; expected "keep"`,
		}},
		{"onRemove without finalizer", []string{"    controller: {for: cronjobs, onRemove: release}"},
			[]string{`config.yaml:17: plugins.modules[0].controller.onRemove: says what happens to the finalizer, but controller.finalizer is not set`}},
		{"no writes grant", []string{
			"    controller:",
			"      for: cronjobs",
			"      owns: [jobs]",                // 19
			"      finalizer: example.com/done", // 20
		}, []string{
			`config.yaml:19: plugins.modules[0].controller.owns[0]: the host does this as the plugin's identity, but grants.writes does not allow apply, delete on "jobs"`,
			`config.yaml:20: plugins.modules[0].controller.finalizer: the host does this as the plugin's identity, but grants.writes does not allow patch on "cronjobs"; add {resource: cronjobs, verbs: [patch]}`,
		}},
		{"grant missing a verb", append([]string{
			"    controller:",
			"      for: cronjobs",
			"      owns: [jobs, configmaps]", // 19
		}, writes...), []string{
			`config.yaml:19: plugins.modules[0].controller.owns[1]: the host does this as the plugin's identity, but grants.writes does not allow apply, delete on "configmaps"`,
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse("config.yaml", []byte(withControllerHead(tc.in...)))
			if err == nil {
				t.Fatalf("Parse succeeded, want problems:\n%s", strings.Join(tc.want, "\n"))
			}
			for _, w := range tc.want {
				if !containsLinePrefix(err.Error(), w) {
					t.Errorf("got\n%s\nwant a line starting with\n%s", indent(err.Error()), w)
				}
			}
		})
	}
}

func TestControllerDerivesBindings(t *testing.T) {
	c, err := Parse("config.yaml", []byte(withControllerHead(append(append([]string{
		"    controller:",
		"      for: cronjobs",
		"      owns: [jobs]",
		"      finalizer: example.com/done",
		"      watches:",
		"      - {resource: configmaps, label: example.com/src}",
		"      - {resource: jobs, map: '[object.metadata.name]'}",
	}, writes...),
		"  - file: b.wasm",
		"    bindings: [{resource: jobs, events: [add]}]")...)))
	if err != nil {
		t.Fatal(err)
	}
	s := c.SettingsFor("a.wasm")
	all := []string{EventAdd, EventUpdate, EventDelete}
	want := []Binding{{Resource: "cronjobs", Events: all}, {Resource: "jobs", Events: all}, {Resource: "configmaps", Events: all}}
	if !reflect.DeepEqual(s.Bindings, want) {
		t.Errorf("bindings %+v, want %+v", s.Bindings, want)
	}
	if s.Controller == nil || s.Controller.OnRemove != OnRemoveKeep {
		t.Errorf("controller %+v, want onRemove defaulted to keep", s.Controller)
	}
	// A module with bindings of its own does not inherit a controller,
	// and one that has none keeps what it wrote.
	if b := c.SettingsFor("b.wasm"); b.Controller != nil || len(b.Bindings) != 1 {
		t.Errorf("b.wasm: %+v", b)
	}
	// The result is a copy.
	s.Controller.Owns[0] = "x"
	if c.SettingsFor("a.wasm").Controller.Owns[0] != "jobs" {
		t.Error("SettingsFor shares the controller with the Config")
	}
}

func TestControllerInheritedFromDefault(t *testing.T) {
	in := doc(
		"apiVersion: informer-host/v1",
		"resources:",
		"- {name: cronjobs, group: batch, version: v1, resource: cronjobs}",
		"- {name: jobs, group: batch, version: v1, resource: jobs}",
		"plugins:",
		"  default:",
		"    controller: {for: cronjobs}",
		"  modules:",
		"  - file: a.wasm",
		"  - file: b.wasm",
		"    bindings: [{resource: jobs}]",
	)
	c, err := Parse("config.yaml", []byte(in))
	if err != nil {
		t.Fatal(err)
	}
	if a := c.SettingsFor("a.wasm"); a.Controller == nil || a.Controller.For != "cronjobs" || len(a.Bindings) != 1 || a.Bindings[0].Resource != "cronjobs" {
		t.Errorf("a.wasm: %+v", a)
	}
	if b := c.SettingsFor("b.wasm"); b.Controller != nil {
		t.Errorf("b.wasm inherited the controller over its own bindings: %+v", b.Controller)
	}
	// Settings built in code derive bindings the same way.
	code := &Config{Plugins: Plugins{Default: PluginSettings{Controller: &Controller{For: "cronjobs", Owns: []string{"jobs"}}}}}
	if got := code.SettingsFor("x.wasm").Bindings; len(got) != 2 || got[1].Resource != "jobs" {
		t.Errorf("in code: %+v", got)
	}
}
