package config

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestPluginResourcesDefaults(t *testing.T) {
	cases := []struct {
		name, in string
		want     PluginResources
	}{
		{"absent", withHead(), PluginResources{Watch: WatchAuto, StatusInterval: NewDuration(DefaultStatusInterval)}},
		{"set", withHead("pluginResources:", "  watch: off", "  statusInterval: 30s"),
			PluginResources{Watch: WatchOff, StatusInterval: NewDuration(30 * time.Second)}},
		{"least interval", withHead("pluginResources:", "  statusInterval: 1s"),
			PluginResources{Watch: WatchAuto, StatusInterval: NewDuration(time.Second)}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Parse("config.yaml", []byte(tc.in))
			if err != nil {
				t.Fatal(err)
			}
			if c.PluginResources != tc.want {
				t.Errorf("pluginResources = %+v\nwant             %+v", c.PluginResources, tc.want)
			}
		})
	}
}

func TestPluginResourcesProblems(t *testing.T) {
	cases := []struct {
		name, in string
		want     string
	}{
		{"watch", withHead("pluginResources:", "  watch: on"),
			`config.yaml:7: pluginResources.watch: unknown value "on"; use "auto"`},
		{"zero interval", withHead("pluginResources:", "  statusInterval: 0s"),
			`config.yaml:7: pluginResources.statusInterval: must be greater than 0`},
		{"negative interval", withHead("pluginResources:", "  statusInterval: -5s"),
			`config.yaml:7: pluginResources.statusInterval: must not be negative`},
		{"short interval", withHead("pluginResources:", "  statusInterval: 100ms"),
			`config.yaml:7: pluginResources.statusInterval: 100ms is too short; use at least 1s (default 10s)`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse("config.yaml", []byte(tc.in))
			var errs Errors
			if !errors.As(err, &errs) {
				t.Fatalf("error is %T, want Errors: %v", err, err)
			}
			got := err.Error()
			if !containsLinePrefix(got, tc.want) || strings.Count(got, "\n") != 0 {
				t.Errorf("problems:\n%s\nwant exactly one starting %s", indent(got), tc.want)
			}
		})
	}
}
