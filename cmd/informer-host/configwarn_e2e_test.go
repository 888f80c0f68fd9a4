package main

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/informer-host/informer-host/internal/config"
	"github.com/informer-host/informer-host/internal/daemon"
	"github.com/informer-host/informer-host/internal/testenv"
)

// misnamedConfig names resources the apiserver does not serve as
// written, next to ones it does, and a module entry no file matches.
// Its lines are what the tests expect the warnings to point at.
const misnamedConfig = `apiVersion: informer-host/v1
kubeconfig: kubeconfig
resources:
  - {name: pods, version: v1, resource: pod}
  - {name: deploys, version: v1, resource: deployments}
  - {name: cms, version: v1, resource: confgimaps}
  - {name: secrets, version: v1, resource: secrets}
  - {name: deps, group: apps, version: v1, kind: Deploymnet}
plugins:
  directory: plugins
  modules:
    - file: good.wasm
    - file: god.wasm
server:
  address: "off"
`

const watchedAsThat = " It is watched as that; write it so, since the RBAC rules generated from this file name the resource as written"

// misnamed writes misnamedConfig and a plugin directory holding
// good.wasm into a directory of the test's own, with a kubeconfig for
// the test's control plane; it returns the config file's path.
func misnamed(t *testing.T) string {
	t.Helper()
	dir := env.DaemonDir(t, map[string][]byte{"good.wasm": testenv.WAT(t, "../../host/testdata/fixtures/healthy.wat")})
	path := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(path, []byte(misnamedConfig), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// The warnings both validate and run give for misnamedConfig, each
// behind "<file>:<line>: ".
func misnamedWarnings(cfgPath string) []string {
	plugins := filepath.Join(filepath.Dir(cfgPath), "plugins")
	return []string{
		// Matched all the same by the RESTMapper, and watched.
		`4: warning: resources[0].resource: the apiserver serves no resource "pod" in v1; did you mean pods (v1)?` + watchedAsThat,
		`5: warning: resources[1].resource: the apiserver serves no resource "deployments" in v1; did you mean deployments (apps/v1)?` + watchedAsThat,
		// Pending.
		`6: warning: resources[2].resource: the apiserver serves no resource "confgimaps" in v1; did you mean configmaps (v1)?`,
		`8: warning: resources[4].kind: the apiserver serves no kind "Deploymnet" in apps/v1; did you mean Deployment (apps/v1)?`,
		`13: warning: plugins.modules[1].file: no file "god.wasm" in the plugin directory ` + plugins + `; nearest there: good.wasm. Fix the name here or put the module there: until then these settings apply to no plugin`,
	}
}

// validate --kubeconfig resolves every resource through the pipeline's
// discovery and, for one not served, suggests the nearest served names
// at the entry's line; a modules entry no file matches is warned about
// with the nearest file names. Both are warnings: exit 0.
func TestValidateWarnsAboutMisnamedEntries(t *testing.T) {
	env.Require(t)
	cfgPath := misnamed(t)
	var stdout, stderr bytes.Buffer
	code := Main(context.Background(), []string{"validate", "--config", cfgPath, "--kubeconfig", filepath.Join(filepath.Dir(cfgPath), "kubeconfig"),
		"--start-timeout", "5s"}, &stdout, &stderr)
	if code != 0 {
		t.Errorf("exit code %d, want 0; stderr %q", code, stderr.String())
	}
	out := stdout.String()
	for _, want := range misnamedWarnings(cfgPath) {
		if !strings.Contains(out, cfgPath+":"+want+"\n") {
			t.Errorf("validate output lacks %q:\n%s", cfgPath+":"+want, out)
		}
	}
	for _, want := range []string{": 1 of 5 resources served\n", "good.wasm: ok\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("validate output lacks %q:\n%s", want, out)
		}
	}
	if n := strings.Count(out, "warning:"); n != 5 {
		t.Errorf("%d warnings, want 5:\n%s", n, out)
	}

	// Without --kubeconfig no cluster is asked; --plugin-dir checks the
	// entries against another directory.
	other := t.TempDir()
	if err := os.WriteFile(filepath.Join(other, "god.wasm"), testenv.WAT(t, "../../host/testdata/fixtures/healthy.wat"), 0o644); err != nil {
		t.Fatal(err)
	}
	stdout.Reset()
	if code := Main(context.Background(), []string{"validate", "--config", cfgPath, "--plugin-dir", other}, &stdout, &stderr); code != 0 {
		t.Errorf("--plugin-dir: exit code %d, want 0; stderr %q", code, stderr.String())
	}
	want := cfgPath + `:12: warning: plugins.modules[0].file: no file "good.wasm" in the plugin directory ` + other +
		`; nearest there: god.wasm. Fix the name here or put the module there: until then these settings apply to no plugin` + "\n"
	if out := stdout.String(); !strings.Contains(out, want) || strings.Count(out, "warning:") != 1 || !strings.Contains(out, "god.wasm: ok\n") {
		t.Errorf("--plugin-dir output, want the one warning %q:\n%s", want, out)
	}
}

// run says the same at start, in its log, and says it again for an
// entry that still matches nothing once the plugin directory changes; an
// entry the change matched is not warned about again. A reload says what
// is still wrong with the new file.
func TestRunWarnsAboutMisnamedEntries(t *testing.T) {
	env.Require(t)
	cfgPath := misnamed(t)
	cfg, err := config.Load(cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	logs := runDaemon(t, cfg)
	// In the log, each problem is a quoted attribute: file:line and
	// message, without validate's "warning: ".
	logged := func(want string) int {
		return len(logs.Lines(`problem="` + strings.ReplaceAll(cfgPath+":"+strings.Replace(want, "warning: ", "", 1), `"`, `\"`) + `"`))
	}
	for _, want := range misnamedWarnings(cfgPath) {
		if n := logged(want); n != 1 {
			t.Errorf("run logged %d times, want once: %s", n, want)
		}
	}

	// A new file near the entry: it still matches nothing, and is said
	// again, with the new nearest name.
	plugins := filepath.Join(filepath.Dir(cfgPath), "plugins")
	if err := os.WriteFile(filepath.Join(plugins, "gold.wasm"), testenv.WAT(t, "../../host/testdata/fixtures/healthy.wat"), 0o644); err != nil {
		t.Fatal(err)
	}
	again := `13: warning: plugins.modules[1].file: no file "god.wasm" in the plugin directory ` + plugins +
		`; nearest there: gold.wasm, good.wasm (gold.wasm has no entry of its own, so it runs with plugins.default). Fix the name here or put the module there: until then these settings apply to no plugin`
	testenv.Eventually(t, "the entry that still matches nothing to be warned about again", func() bool { return logged(again) == 1 })

	// The file the entry names: nothing is left to say.
	if err := os.WriteFile(filepath.Join(plugins, "god.wasm"), testenv.WAT(t, "../../host/testdata/fixtures/healthy.wat"), 0o644); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, "god.wasm to load", func() bool { return len(logs.Lines("plugin loaded", "plugin=god.wasm")) == 1 })
	if n := len(logs.Lines("plugins.modules entry matches no file")); n != 2 {
		t.Errorf("%d warnings about modules entries, want 2 (at start, and after gold.wasm)", n)
	}

	// A reload with a new entry no file matches: said for it, and the
	// resources are said again, since the file changed and they did not.
	text := strings.Replace(misnamedConfig, "    - file: god.wasm\n", "    - file: god.wasm\n    - file: goldd.wasm\n", 1)
	if err := os.WriteFile(cfgPath+".tmp", []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(cfgPath+".tmp", cfgPath); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, "the config to reload", func() bool { return len(logs.Lines("config reloaded")) == 1 })
	reloaded := `14: warning: plugins.modules[2].file: no file "goldd.wasm" in the plugin directory ` + plugins +
		`; nearest there: gold.wasm, god.wasm, good.wasm (gold.wasm has no entry of its own, so it runs with plugins.default). Fix the name here or put the module there: until then these settings apply to no plugin`
	if n := logged(reloaded); n != 1 {
		t.Errorf("after the reload, logged %d times, want once: %s", n, reloaded)
	}
	for _, want := range misnamedWarnings(cfgPath)[:4] {
		if n := logged(want); n != 2 {
			t.Errorf("logged %d times, want twice (at start and on the reload): %s", n, want)
		}
	}
}

// runDaemon runs the daemon on cfg until the test ends, and returns its
// log once everything runs. The daemon stopping with an error fails the
// test.
func runDaemon(t *testing.T, cfg *config.Config) *testenv.LogBuffer {
	t.Helper()
	logs := &testenv.LogBuffer{}
	ctx, cancel := context.WithCancel(context.Background())
	started := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- daemon.Run(ctx, daemon.Options{Config: cfg, Logger: slog.New(slog.NewTextHandler(logs, nil)),
			DrainTimeout: 10 * time.Second, Started: func(*daemon.Daemon) { close(started) }})
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("run: %v", err)
		}
		if t.Failed() {
			t.Logf("daemon log:\n%s", strings.Join(logs.Lines(), "\n"))
		}
	})
	select {
	case <-started:
	case err := <-done:
		t.Fatalf("run returned early: %v", err)
	}
	return logs
}
