package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/informer-host/informer-host/internal/testenv"
)

// A controller that writes what it does not find in the cache (a
// ConfigMap copier) replays the writes its live run made: the recording
// gives each event the cache the plugin read, not one already holding the
// results of its own writes. Its replay --compare with the recorded stubs
// makes both writes, uses every stub and passes.
func TestRecordReplayCopier(t *testing.T) {
	ns := env.Namespace(t)
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "plugins"), 0o755); err != nil {
		t.Fatal(err)
	}
	plugin := buildGoPlugin(t, filepath.Join(dir, "plugins", "copier.wasm"), "./testdata/copier")
	testConfig(t, dir, ns, `
resources:
  - {name: cms, version: v1, resource: configmaps, namespaces: [NS]}
plugins:
  directory: plugins
  modules:
  - file: copier.wasm
    bindings: [{resource: cms, events: [add, update]}]
    grants:
      cache: [{resource: cms}]
      writes:
        resources: [{resource: cms, verbs: [create]}]
server:
  address: off
`)
	ctx := context.Background()
	cms := env.Client.CoreV1().ConfigMaps(ns)
	source := func(name string) {
		if _, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"copy": "yes"}},
			Data: map[string]string{"k": name}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	copied := func(name string) func() bool {
		return func() bool {
			_, err := cms.Get(ctx, name+"-copy", metav1.GetOptions{})
			return err == nil
		}
	}
	source("listed")
	rec := startRecord(ctx, t, dir)
	// The record's log line first: the command sets klog's process-wide
	// logger as it starts, which the test's client reads, so the client
	// waits until that has happened (a race otherwise).
	testenv.Eventually(t, "the plugin to copy the listed ConfigMap", rec.logged("copied "+ns+"/listed to listed-copy"))
	testenv.Eventually(t, "the listed ConfigMap copied", copied("listed"))
	source("live")
	testenv.Eventually(t, "the live ConfigMap copied", copied("live"))
	stubs := rec.stop()
	events, err := os.ReadFile(rec.out)
	if err != nil {
		t.Fatal(err)
	}

	var rout, rerr bytes.Buffer
	code := Main(ctx, []string{"replay", "--plugin", plugin, "--events", rec.out, "--stubs", stubs, "--compare", "--cache-dir", ""}, &rout, &rerr)
	text := rout.String()
	if n := strings.Count(text, "    call k8s_write "); n != 2 {
		t.Errorf("the replay made %d writes, the live run 2", n)
	}
	for _, want := range []string{"copied " + ns + "/listed to listed-copy", "copied " + ns + "/live to live-copy", "\nPASS\n"} {
		if !strings.Contains(text, want) {
			t.Errorf("replay lacks %q", want)
		}
	}
	if code != 0 || strings.Contains(text, "unused stubs") {
		t.Errorf("replay --compare: exit %d", code)
	}
	if t.Failed() {
		t.Logf("replay:\n%s%s\nevents:\n%s", text, rerr.String(), events)
	}
}

// buildGoPlugin builds the Go plugin of package pkg into out and returns
// out.
func buildGoPlugin(t *testing.T, out, pkg string) string {
	t.Helper()
	build := exec.Command("go", "build", "-buildmode=c-shared", "-trimpath", "-o", out, pkg)
	build.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm")
	if b, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build %s: %v\n%s", pkg, err, b)
	}
	return out
}
