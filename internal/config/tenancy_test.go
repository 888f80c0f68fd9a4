package config

import (
	"strings"
	"testing"
	"time"
)

func TestTenancyProblems(t *testing.T) {
	cases := []struct {
		name  string
		lines []string
		want  []string
	}{
		{"namespace not a label", []string{"tenancy:", "  ceilings:", "  - namespaces: [Team_A]"},
			[]string{`config.yaml:8: tenancy.ceilings[0].namespaces[0]: "Team_A" is not a namespace name`}},
		{"no namespaces", []string{"tenancy:", "  ceilings:", "  - resources: [pods]"},
			[]string{`config.yaml:8: tenancy.ceilings[0].namespaces: required`}},
		{"namespace in two ceilings", []string{"tenancy:", "  ceilings:", "  - namespaces: [team-a]", "  - namespaces: [team-b, team-a]"},
			[]string{`config.yaml:9: tenancy.ceilings[1].namespaces[1]: namespace "team-a" already has a ceiling (line 8)`}},
		{"star twice", []string{"tenancy:", "  ceilings:", "  - namespaces: ['*']", "  - namespaces: ['*']"},
			[]string{`config.yaml:9: tenancy.ceilings[1].namespaces[0]: namespace "*" already has a ceiling (line 8)`}},
		{"resource not configured", []string{"tenancy:", "  ceilings:", "  - namespaces: [team-a]", "    resources: [secrets]"},
			[]string{`config.yaml:9: tenancy.ceilings[0].resources[0]: resource "secrets" is not configured (configured: pods)`}},
		{"write without verbs", []string{"tenancy:", "  ceilings:", "  - namespaces: [team-a]", "    writes: [{resource: v1/configmaps}]"},
			[]string{`config.yaml:9: tenancy.ceilings[0].writes[0].verbs: required`}},
		{"write bad form", []string{"tenancy:", "  ceilings:", "  - namespaces: [team-a]", "    writes: [{resource: V1/x/y/z, verbs: [apply]}]"},
			[]string{`config.yaml:9: tenancy.ceilings[0].writes[0].resource: "V1/x/y/z" is not "group/version/resource"`}},
		{"write with namespaces", []string{"tenancy:", "  ceilings:", "  - namespaces: [team-a]",
			"    writes: [{resource: pods, verbs: [patch], namespaces: [team-b]}]"},
			[]string{`config.yaml:9: tenancy.ceilings[0].writes[0].namespaces: a ceiling's writes name no namespaces`}},
		{"unknown upstream", []string{"tenancy:", "  ceilings:", "  - namespaces: [team-a]", "    upstreams: [hooks]"},
			[]string{`config.yaml:9: tenancy.ceilings[0].upstreams[0]: unknown upstream "hooks"`}},
		{"bounds", []string{"tenancy:", "  ceilings:", "  - namespaces: [team-a]", "    maxPlugins: 0", "    maxMemoryPages: 70000",
			"    maxBufferSize: -1", "    maxCallTimeout: 0s", "    writesQPS: 0", "    writesBurst: 0"},
			[]string{
				`config.yaml:9: tenancy.ceilings[0].maxPlugins: 0 is out of range`,
				`config.yaml:10: tenancy.ceilings[0].maxMemoryPages: 70000 is out of range`,
				`config.yaml:11: tenancy.ceilings[0].maxBufferSize: -1 is out of range`,
				`config.yaml:12: tenancy.ceilings[0].maxCallTimeout: must be greater than 0`,
				`config.yaml:13: tenancy.ceilings[0].writesQPS: 0 is out of range`,
				`config.yaml:14: tenancy.ceilings[0].writesBurst: 0 is out of range`,
			}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse("config.yaml", []byte(withHead(tc.lines...)))
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error lacks %q:\n%v", w, err)
				}
			}
		})
	}
}

func TestTenancyDefaults(t *testing.T) {
	c, err := Parse("config.yaml", []byte(withHead("upstreams: [{name: hooks, url: 'https://hooks.example'}]",
		"tenancy:", "  ceilings:",
		"  - namespaces: [team-a, team-b]", "    resources: [pods]", "    writes: [{resource: pods, verbs: [patch], subresources: [status]}]",
		"    upstreams: [hooks]",
		"  - namespaces: ['*']", "    maxPlugins: 2", "    maxCallTimeout: 100ms", "    writesQPS: 0.5")))
	if err != nil {
		t.Fatal(err)
	}
	a := c.Tenancy.Ceilings[0]
	if a.MaxPlugins != 5 || a.MaxMemoryPages != 256 || a.MaxBufferSize != 1000 || a.MaxCallTimeout.Duration != time.Second ||
		a.WritesQPS != 5 || a.WritesBurst != 10 {
		t.Errorf("defaults = %+v", a)
	}
	star := c.Tenancy.Ceilings[1]
	if star.MaxPlugins != 2 || star.MaxCallTimeout.Duration != 100*time.Millisecond || star.WritesQPS != 0.5 || star.WritesBurst != 10 {
		t.Errorf("set values lost: %+v", star)
	}
	for ns, want := range map[string]int{"team-a": 0, "team-b": 0, "other": 1} {
		if got := c.Tenancy.CeilingIndex(ns); got != want {
			t.Errorf("CeilingIndex(%s) = %d, want %d", ns, got, want)
		}
	}
	c.Tenancy.Ceilings = c.Tenancy.Ceilings[:1]
	if got := c.Tenancy.CeilingIndex("other"); got != -1 {
		t.Errorf("a namespace no ceiling names got ceiling %d", got)
	}
}
