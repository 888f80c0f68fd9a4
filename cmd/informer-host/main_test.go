package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/informer-host/informer-host/internal/testenv"
)

// validate checks every module of the plugin directory too, one line
// each, and exits 1 if any is wrong; a module whose start function never
// returns is reported, not waited for.
func TestValidateModules(t *testing.T) {
	dir := t.TempDir()
	plugins := filepath.Join(dir, "plugins")
	if err := os.Mkdir(plugins, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, b := range map[string][]byte{
		"good.wasm":      testenv.WAT(t, "../../host/testdata/fixtures/healthy.wat"),
		"startloop.wasm": testenv.WAT(t, "../../host/testdata/fixtures/startloop.wat"),
		"garbage.wasm":   []byte("garbage"),
	} {
		if err := os.WriteFile(filepath.Join(plugins, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cfg := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(cfg, []byte("apiVersion: informer-host/v1\nplugins:\n  directory: plugins\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	code := Main(context.Background(), []string{"validate", "--config", cfg, "--start-timeout", "500ms"}, &stdout, &stderr)
	if code != 1 {
		t.Errorf("exit code %d, want 1; stderr %q", code, stderr.String())
	}
	out := stdout.String()
	for _, want := range []string{
		"good.wasm: ok",
		`garbage.wasm: plugin "garbage.wasm": not a WebAssembly module`,
		`startloop.wasm: plugin "startloop.wasm": instantiate: timeout`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("validate output lacks %q:\n%s", want, out)
		}
	}
}

func TestValidate(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(bad, []byte("apiVersion: informer-host/v1\nresources:\n  - name: cms\n    version: v1\n    resource: configmaps\n    colour: blue\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name       string
		args       []string
		wantCode   int
		wantStdout string
		wantStderr string
	}{
		{"shipped config", []string{"validate", "--config", "../../config.yaml"}, 0, "ok", ""},
		{"unknown field", []string{"validate", "--config", bad}, 1, "", bad + `:6: unknown field "colour" in resources[0]`},
		{"missing file", []string{"validate", "--config", filepath.Join(dir, "nope.yaml")}, 1, "", "no such file"},
		{"unknown command", []string{"frobnicate"}, 2, "", `unknown command "frobnicate"`},
		{"version", []string{"version"}, 0, "informer-host ", ""},
		{"unknown server auth", []string{"run", "--server-auth", "basic"}, 2, "", `--server-auth: "basic" is neither none nor kubernetes`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if tc.name == "shipped config" && testing.Short() {
				t.Skip("compiles every shipped plugin, which -short leaves out")
			}
			var stdout, stderr bytes.Buffer
			code := Main(context.Background(), tc.args, &stdout, &stderr)
			if code != tc.wantCode {
				t.Errorf("exit code %d, want %d (stderr %q)", code, tc.wantCode, stderr.String())
			}
			if !strings.Contains(stdout.String(), tc.wantStdout) {
				t.Errorf("stdout %q lacks %q", stdout.String(), tc.wantStdout)
			}
			if !strings.Contains(stderr.String(), tc.wantStderr) {
				t.Errorf("stderr %q lacks %q", stderr.String(), tc.wantStderr)
			}
		})
	}
}

// validate shows, per module, the capabilities it requests (its imports)
// next to those config.yaml grants it, and warns about each requested one
// that is not granted; that is not an error (exit 0).
func TestValidateCapabilities(t *testing.T) {
	dir := t.TempDir()
	plugins := filepath.Join(dir, "plugins")
	if err := os.Mkdir(plugins, 0o755); err != nil {
		t.Fatal(err)
	}
	reader := testenv.WAT(t, "../../host/testdata/plugins/cacheread.wat")
	for name, b := range map[string][]byte{"granted.wasm": reader, "ungranted.wasm": reader, "plain.wasm": testenv.WAT(t, "../../host/testdata/fixtures/healthy.wat")} {
		if err := os.WriteFile(filepath.Join(plugins, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cfg := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(cfg, []byte(`apiVersion: informer-host/v1
resources: [{name: cms, version: v1, resource: configmaps}]
plugins:
  directory: plugins
  modules:
  - {file: granted.wasm, grants: {cache: [{resource: cms}]}}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	if code := Main(context.Background(), []string{"validate", "--config", cfg}, &stdout, &stderr); code != 0 {
		t.Errorf("exit code %d, want 0; stderr %q", code, stderr.String())
	}
	out := stdout.String()
	for _, want := range []string{
		"granted.wasm: ok (requests: cache; granted: cache)\n",
		"ungranted.wasm: ok (requests: cache; granted: none)\n",
		`ungranted.wasm: warning: imports cache functions but is not granted "cache"`,
		"plain.wasm: ok\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("validate output lacks %q:\n%s", want, out)
		}
	}
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, "granted.wasm: warning") || strings.HasPrefix(l, "plain.wasm: warning") {
			t.Errorf("warning for a module that requests nothing ungranted: %s", l)
		}
	}
}
