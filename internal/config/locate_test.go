package config

import (
	"strings"
	"testing"
)

func TestUnmatchedModules(t *testing.T) {
	cfg, err := Parse("/etc/ih/config.yaml", []byte(`apiVersion: informer-host/v1
resources:
  - {name: pods, version: v1, resource: pods}
plugins:
  modules:
    - file: pod-logger.wasm
      bindings: [{resource: pods}]
    - file: pod-loger.wasm
      bindings: [{resource: pods}]
    - file: audit.wasm
    - file: cm-audit.wasm
`))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		present []string
		want    []string // one problem per entry, each with every substring
	}{
		{"all present", []string{"pod-logger.wasm", "pod-loger.wasm", "audit.wasm", "cm-audit.wasm"}, nil},
		{"a typo next to the file it meant", []string{"pod-logger.wasm", "audit.wasm", "cm-audit.wasm", "pod-logger-v2.wasm"}, []string{
			`/etc/ih/config.yaml:8: plugins.modules[1].file: no file "pod-loger.wasm" in the plugin directory /p; nearest there: pod-logger.wasm, pod-logger-v2.wasm (pod-logger-v2.wasm has no entry of its own, so it runs with plugins.default). Fix the name`,
		}},
		{"the meant file has no entry", []string{"pod-logr.wasm", "pod-logger.wasm", "audit.wasm"}, []string{
			`config.yaml:11: plugins.modules[3].file: no file "cm-audit.wasm" in the plugin directory /p; nearest there: audit.wasm. Fix`,
			`config.yaml:8: plugins.modules[1].file: no file "pod-loger.wasm" in the plugin directory /p; nearest there: pod-logger.wasm, pod-logr.wasm (pod-logr.wasm has no entry of its own, so it runs with plugins.default). Fix`,
		}},
		{"nothing near", []string{"zzz.wasm"}, []string{
			`config.yaml:6: plugins.modules[0].file: no file "pod-logger.wasm" in the plugin directory /p; none is near it; the directory holds zzz.wasm. Fix the name here or put the module there: until then these settings apply to no plugin`,
			`config.yaml:8:`, `config.yaml:10:`, `config.yaml:11:`,
		}},
		{"empty directory", nil, []string{
			`config.yaml:6: plugins.modules[0].file: no file "pod-logger.wasm" in the plugin directory /p; the directory holds no *.wasm files.`,
			`config.yaml:8:`, `config.yaml:10:`, `config.yaml:11:`,
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := cfg.UnmatchedModules("/p", tc.present)
			if len(got) != len(tc.want) {
				t.Fatalf("%d problems, want %d:\n%v", len(got), len(tc.want), got)
			}
			for _, want := range tc.want {
				found := false
				for _, p := range got {
					found = found || strings.Contains(p.String(), want)
				}
				if !found {
					t.Errorf("no problem reads %q:\n%v", want, got)
				}
			}
		})
	}
}

func TestResourceProblem(t *testing.T) {
	cfg, err := Parse("config.yaml", []byte(`apiVersion: informer-host/v1
resources:
  - name: pods
    version: v1
    resource: pod
  - name: widgets
    group: example.com
    version: v1
    kind: Widget
`))
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]string{
		"pods":    "config.yaml:5: resources[0].resource: not served",
		"widgets": "config.yaml:9: resources[1].kind: not served",
		"other":   `config.yaml: resource "other": not served`,
	} {
		if got := cfg.ResourceProblem(name, "not %s", "served").String(); got != want {
			t.Errorf("ResourceProblem(%q) = %q, want %q", name, got, want)
		}
	}
}
