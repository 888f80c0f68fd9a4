package main

import (
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

// For each language, from the real binary alone: `new` writes a project,
// which is then moved (cp -r) to a directory that knows nothing of where
// it was written or of this repository, where `make` builds it and `make
// test` passes (its native tests, then the replay) with the binary found
// on PATH and Go offline (no GOFLAGS, no workspace, no module proxy).
// Then the built plugins load in the daemon against the control plane
// and handle a created object.
func TestNewBuildReplayRun(t *testing.T) {
	env.Require(t)
	work := t.TempDir()
	bin, projectEnv := buildForProjects(t, work)
	plugins := filepath.Join(work, "plugins")
	for _, d := range []string{plugins, filepath.Join(work, "written"), filepath.Join(work, "moved")} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	langs := []string{"go", "c", "wat", "assemblyscript", "rust"}
	for _, lang := range langs {
		name := "hello-" + lang
		written := filepath.Join(work, "written", name)
		if out, err := exec.Command(bin, "new", "--lang", lang, "--dir", written, name).CombinedOutput(); err != nil {
			t.Fatalf("new --lang %s: %v\n%s", lang, err, out)
		}
		if out, err := exec.Command("cp", "-r", written, filepath.Join(work, "moved")).CombinedOutput(); err != nil {
			t.Fatalf("cp: %v\n%s", err, out)
		}
		if err := os.RemoveAll(written); err != nil {
			t.Fatal(err)
		}
		dir := filepath.Join(work, "moved", name)
		out := makeAndTest(t, dir, projectEnv)
		if !strings.Contains(string(out), "PASS") {
			t.Errorf("%s: make test's replay lacks PASS:\n%s", lang, out)
		}
		if lang == "go" && !strings.Contains(string(out), "ok  \t"+name) {
			t.Errorf("go: make test ran no go test:\n%s", out)
		}
		b, err := os.ReadFile(filepath.Join(dir, name+".wasm"))
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

// buildForProjects builds the informer-host binary into work/bin and
// returns it with the environment a project's make runs in: the binary
// found on PATH and Go offline (no GOFLAGS, no workspace, no module
// proxy), as on an author's machine outside this repository.
func buildForProjects(t *testing.T, work string) (bin string, projectEnv []string) {
	t.Helper()
	dir := filepath.Join(work, "bin")
	bin = filepath.Join(dir, "informer-host")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Fatal(err)
	}
	// The binary's own directory and Go's come first; the rest of PATH
	// is the system's tools (make, cp, clang, wat2wasm, rustc, node).
	path := strings.Join([]string{dir, filepath.Dir(goBin), "/usr/local/bin", "/usr/bin", "/bin"}, string(os.PathListSeparator))
	projectEnv = []string{"PATH=" + path, "HOME=" + os.Getenv("HOME"), "GOFLAGS=", "GOWORK=off", "GOPROXY=off"}
	for _, v := range []string{"GOCACHE", "TMPDIR"} {
		if s, ok := os.LookupEnv(v); ok {
			projectEnv = append(projectEnv, v+"="+s)
		}
	}
	return bin, projectEnv
}

// makeAndTest runs make, then make test, in the project dir with env and
// returns what make test printed.
func makeAndTest(t *testing.T, dir string, env []string) string {
	t.Helper()
	var out []byte
	// The first run builds the default target, the module.
	for _, args := range [][]string{{"-C", dir}, {"-C", dir, "test"}} {
		mk := exec.Command("make", args...)
		mk.Env = env
		var err error
		if out, err = mk.CombinedOutput(); err != nil {
			t.Fatalf("%s: %v\n%s", strings.Join(mk.Args, " "), err, out)
		}
	}
	return string(out)
}
