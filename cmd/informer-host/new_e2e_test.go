package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/informer-host/informer-host/internal/testenv"
)

// For each language: `new` scaffolds a project whose `make` builds and
// whose recorded events replay with exit 0; then the built plugins load
// in the daemon against the control plane and handle a created object.
func TestNewBuildReplayRun(t *testing.T) {
	repo, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	work := t.TempDir()
	plugins := filepath.Join(work, "plugins")
	if err := os.Mkdir(plugins, 0o755); err != nil {
		t.Fatal(err)
	}
	langs := []string{"go", "c", "wat", "assemblyscript", "rust"}
	for _, lang := range langs {
		name := "hello-" + lang
		dir := filepath.Join(work, name)
		var out, errb bytes.Buffer
		if code := Main(context.Background(), []string{"new", "--lang", lang, "--repo", repo, "--dir", dir, name}, &out, &errb); code != 0 {
			t.Fatalf("new --lang %s: exit %d: %s", lang, code, errb.String())
		}
		mk := exec.Command("make", "-C", dir, name+".wasm")
		if b, err := mk.CombinedOutput(); err != nil {
			t.Fatalf("%s: make: %v\n%s", lang, err, b)
		}
		wasm := filepath.Join(dir, name+".wasm")
		out.Reset()
		errb.Reset()
		if code := Main(context.Background(), []string{"replay", "--plugin", wasm, "--events", filepath.Join(dir, "testdata", "events.jsonl")}, &out, &errb); code != 0 {
			t.Errorf("%s: replay exit %d:\n%s%s", lang, code, out.String(), errb.String())
		}
		if !strings.Contains(out.String(), "PASS") {
			t.Errorf("%s: replay output lacks PASS:\n%s", lang, out.String())
		}
		b, err := os.ReadFile(wasm)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(plugins, name+".wasm"), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}

	ns := env.Namespace(t)
	cfg := testConfig(t, work, ns, `
resources:
  - {name: configmaps, version: v1, resource: configmaps, namespaces: [NS]}
plugins:
  directory: plugins
  default:
    bindings: [{resource: configmaps}]
server:
  address: off
`)
	logs := runDaemon(t, cfg)
	if _, err := env.Client.CoreV1().ConfigMaps(ns).Create(context.Background(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "scaffolded"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, lang := range langs {
		testenv.Eventually(t, fmt.Sprintf("hello-%s to log the configmap", lang), func() bool {
			return len(logs.Lines("plugin=hello-"+lang+".wasm", "add ", "scaffolded")) > 0
		})
	}
}
