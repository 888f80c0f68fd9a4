package config

import (
	"testing"
	"time"
)

func TestStateGrantProblems(t *testing.T) {
	cases := []struct {
		name string
		in   string
		want string
	}{
		{"maxBytes in words", withHead("plugins:", "  modules:", "  - file: a.wasm", "    grants:", "      state: {maxBytes: lots}"),
			`config.yaml:10: plugins.modules[0].grants.state.maxBytes: cannot use "lots" as a size`},
		{"maxBytes zero", withHead("plugins:", "  default:", "    grants:", "      state:", "        maxBytes: 0"),
			`config.yaml:10: plugins.default.grants.state.maxBytes: 0 is out of range; use a size from 1 to 1Gi (default 1Mi)`},
		{"maxKeys negative", withHead("plugins:", "  modules:", "  - file: a.wasm", "    grants:", "      state:", "        maxKeys: -1"),
			`config.yaml:11: plugins.modules[0].grants.state.maxKeys: -1 is out of range; must be between 1 and 10000000`},
		{"unknown field", withHead("plugins:", "  default:", "    grants:", "      state: {maxbytes: 1Mi}"),
			`config.yaml:9: unknown field "maxbytes" in plugins.default.grants.state; did you mean "maxBytes"?`},
		{"flush interval zero", withHead("plugins:", "  state:", "    flushInterval: 0s"),
			`config.yaml:8: plugins.state.flushInterval: 0s is out of range; use a duration from 1ms to 1m0s (default 1s)`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) { wantProblem(t, tc.in, tc.want) })
	}
}

func TestStateGrantMerge(t *testing.T) {
	c, err := Parse("/etc/ih/config.yaml", []byte(withHead(
		"plugins:",
		"  state: {path: state.db, keepOnRemove: true, flushInterval: 200ms}",
		"  default:",
		"    grants:",
		"      state: {maxBytes: 64Ki}",
		"  modules:",
		"  - file: own.wasm", // replaces the default's grant as a whole
		"    grants:",
		"      state: {maxKeys: 5}",
		"  - file: inherits.wasm",
		"    limits: {memoryPages: 10}",
	)))
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		file      string
		wantBytes int64
		wantKeys  int
	}{
		{"own.wasm", int64(DefaultStateMaxBytes), 5},
		{"inherits.wasm", 64 << 10, DefaultStateMaxKeys},
		{"unnamed.wasm", 64 << 10, DefaultStateMaxKeys},
	}
	for _, tc := range cases {
		g := c.SettingsFor(tc.file).Grants.State
		if g == nil {
			t.Fatalf("%s: not granted", tc.file)
		}
		if b, k := g.Limits(); b != tc.wantBytes || k != tc.wantKeys {
			t.Errorf("%s: quota %d bytes %d keys, want %d, %d", tc.file, b, k, tc.wantBytes, tc.wantKeys)
		}
	}
	if got := c.StatePath(); got != "/etc/ih/state.db" {
		t.Errorf("StatePath %q", got)
	}
	if !c.Plugins.State.KeepOnRemove || c.StateFlushInterval() != 200*time.Millisecond {
		t.Errorf("plugins.state: %+v", c.Plugins.State)
	}
	bare, err := Parse("config.yaml", []byte(withHead()))
	if err != nil {
		t.Fatal(err)
	}
	if g := bare.SettingsFor("x.wasm").Grants.State; g != nil {
		t.Fatalf("state granted by default: %+v", g)
	}
}
