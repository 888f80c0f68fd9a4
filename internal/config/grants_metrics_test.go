package config

import (
	"strings"
	"testing"
)

func TestMetricsGrant(t *testing.T) {
	for _, tc := range []struct {
		name  string
		lines []string
		want  map[string]int // file -> resolved maxSeries; 0 = not granted
	}{
		{"not granted", []string{"plugins:", "  modules:", "  - file: a.wasm"}, map[string]int{"a.wasm": 0, "x.wasm": 0}},
		{"empty mapping grants with the default", []string{"plugins:", "  modules:", "  - file: a.wasm", "    grants: {metrics: {}}"},
			map[string]int{"a.wasm": DefaultMaxSeries, "x.wasm": 0}},
		{"null is absent, as everywhere", []string{"plugins:", "  modules:", "  - file: a.wasm", "    grants:", "      metrics:"},
			map[string]int{"a.wasm": 0}},
		{"explicit cap", []string{"plugins:", "  modules:", "  - file: a.wasm", "    grants: {metrics: {maxSeries: 5}}"},
			map[string]int{"a.wasm": 5}},
		{"default applies to every module", []string{"plugins:", "  default:", "    grants: {metrics: {maxSeries: 7}}", "  modules:", "  - file: a.wasm"},
			map[string]int{"a.wasm": 7, "x.wasm": 7}},
		{"module replaces the default", []string{"plugins:", "  default:", "    grants: {metrics: {maxSeries: 7}}", "  modules:", "  - file: a.wasm", "    grants: {metrics: {}}"},
			map[string]int{"a.wasm": DefaultMaxSeries, "x.wasm": 7}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Parse("config.yaml", []byte(withHead(tc.lines...)))
			if err != nil {
				t.Fatal(err)
			}
			for file, want := range tc.want {
				g := c.SettingsFor(file).Grants.Metrics
				got := 0
				if g != nil {
					got = g.MaxSeries
				}
				if got != want {
					t.Errorf("%s: maxSeries = %d, want %d", file, got, want)
				}
			}
		})
	}
}

func TestMetricsGrantBudget(t *testing.T) {
	for _, tc := range []struct {
		name, grant string
		want        Size
	}{
		{"default", "{metrics: {}}", DefaultMetricsMaxBytes},
		{"explicit", "{metrics: {maxBytes: 4Mi}}", 4 << 20},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Parse("config.yaml", []byte(withHead("plugins:", "  modules:", "  - file: a.wasm", "    grants: "+tc.grant)))
			if err != nil {
				t.Fatal(err)
			}
			if got := c.SettingsFor("a.wasm").Grants.Metrics.MaxBytes; got != tc.want {
				t.Errorf("maxBytes = %s, want %s", got, tc.want)
			}
		})
	}
}

func TestMetricsGrantProblems(t *testing.T) {
	for _, tc := range []struct {
		name  string
		lines []string
		want  string
	}{
		{"zero", []string{"plugins:", "  modules:", "  - file: a.wasm", "    grants:", "      metrics: {maxSeries: 0}"},
			`config.yaml:10: plugins.modules[0].grants.metrics.maxSeries: 0 is out of range; must be between 1 and 100000`},
		{"too many", []string{"plugins:", "  default:", "    grants:", "      metrics:", "        maxSeries: 100001"},
			`config.yaml:10: plugins.default.grants.metrics.maxSeries: 100001 is out of range`},
		{"unknown field", []string{"plugins:", "  modules:", "  - file: a.wasm", "    grants:", "      metrics: {maxSerie: 3}"},
			`config.yaml:10: unknown field "maxSerie" in plugins.modules[0].grants.metrics; did you mean "maxSeries"?`},
		{"budget too small", []string{"plugins:", "  modules:", "  - file: a.wasm", "    grants:", "      metrics: {maxBytes: 1Ki}"},
			`config.yaml:10: plugins.modules[0].grants.metrics.maxBytes: 1Ki is out of range; use a size from 16Ki to 64Mi (default 1Mi)`},
		{"budget too large", []string{"plugins:", "  modules:", "  - file: a.wasm", "    grants:", "      metrics: {maxBytes: 1Gi}"},
			`config.yaml:10: plugins.modules[0].grants.metrics.maxBytes: 1Gi is out of range`},
		{"not a mapping", []string{"plugins:", "  modules:", "  - file: a.wasm", "    grants:", "      metrics: yes"},
			`config.yaml:10: plugins.modules[0].grants.metrics: expected a mapping`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse("config.yaml", []byte(withHead(tc.lines...)))
			if err == nil {
				t.Fatal("no error")
			}
			if !containsLinePrefix(err.Error(), tc.want) {
				t.Errorf("want %s\ngot:\n%s", tc.want, indent(err.Error()))
			}
			if n := strings.Count(err.Error(), "\n") + 1; n != 1 {
				t.Errorf("got %d problems, want 1:\n%s", n, indent(err.Error()))
			}
		})
	}
}
