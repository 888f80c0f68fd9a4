package helm

import (
	"crypto/sha256"
	"encoding/hex"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/informer-host/informer-host/internal/testenv"
)

var update = flag.Bool("update", false, "write the chart's files/rbac-<mode>.yaml and .config.sha256 (make helm-rbac)")

var (
	buildOnce sync.Once
	binDir    string
	buildErr  error
)

// informerHost builds the daemon's command once per test binary and
// returns its path: the RBAC is checked against what the real command
// prints.
func informerHost(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("builds the informer-host command, which -short leaves out")
	}
	buildOnce.Do(func() {
		if binDir, buildErr = os.MkdirTemp("", "informer-host-helm-"); buildErr != nil {
			return
		}
		cmd := exec.Command("go", "build", "-o", binDir+"/", "./cmd/informer-host")
		cmd.Dir = filepath.Join("..", "..")
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return filepath.Join(binDir, "informer-host")
}

// configMap renders the chart's config ConfigMap alone for args (with
// rbac.create=false, so a config the shipped RBAC does not fit renders)
// and writes it to dir/name.
func configMap(t *testing.T, dir, name, ns string, args ...string) string {
	t.Helper()
	out, err := renderText(t, ns, append(args, "--set", "rbac.create=false", "--show-only", "templates/configmap.yaml")...)
	if err != nil {
		t.Fatalf("helm template: %v\n%s", err, out)
	}
	f := filepath.Join(dir, name)
	if err := os.WriteFile(f, []byte(out), 0o644); err != nil {
		t.Fatal(err)
	}
	return f
}

// rbacOf runs `informer-host rbac` in dir on the ConfigMap file there.
func rbacOf(t *testing.T, dir, file string, args ...string) string {
	t.Helper()
	args = append([]string{"rbac", "--config", file, "--config-map-key", "config.yaml"}, args...)
	out, err := run(t, dir, nil, informerHost(t), args...)
	if err != nil {
		t.Fatalf("informer-host %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

// podRBAC is `informer-host rbac`'s output for the config the chart
// renders for args, read where the pod has it: beside the credentials and
// keys it names, which the command checks exist, as the daemon does.
func podRBAC(t *testing.T, ns string, args ...string) string {
	t.Helper()
	file := podView(t, render(t, ns, append(args, "--set", "rbac.create=false")...))
	out, err := run(t, filepath.Dir(file), nil, informerHost(t), "rbac", "--config", file, "--namespace", ns)
	if err != nil {
		t.Fatalf("informer-host rbac --config %s --namespace %s: %v\n%s", file, ns, err, out)
	}
	return out
}

// generatedRBAC is what a user does for a config of their own (README,
// "Install with Helm"): render the config, run `informer-host rbac` on it
// for the release's namespace, and pass the file with --set-file
// rbac.manifest. It returns the file's path.
func generatedRBAC(t *testing.T, ns string, args ...string) string {
	t.Helper()
	dir := t.TempDir()
	out := podRBAC(t, ns, args...)
	f := filepath.Join(dir, "rbac.yaml")
	if err := os.WriteFile(f, []byte(out), 0o644); err != nil {
		t.Fatal(err)
	}
	return f
}

var modes = []string{"leaderElection", "sharding"}

// The RBAC the chart ships for its default config is `informer-host
// rbac`'s output for that config, byte for byte, with the namespace left
// as {{ .Release.Namespace }}, and the hash beside it is of that config.
// `make helm-rbac` (this test with -update) writes them.
func TestShippedRBACIsGenerated(t *testing.T) {
	for _, mode := range modes {
		t.Run(mode, func(t *testing.T) {
			dir := t.TempDir()
			name := "chart-config-" + mode + ".yaml"
			cm := configMap(t, dir, name, "informer-host", "--set", "mode="+mode)
			want := rbacOf(t, dir, name, "--namespace", "{{ .Release.Namespace }}")
			text := configText(t, decode(t, readFile(t, cm)))
			sum := sha256.Sum256([]byte(strings.TrimSuffix(text, "\n")))
			wantSum := hex.EncodeToString(sum[:]) + "\n"
			file := filepath.Join(chart, "files", "rbac-"+mode+".yaml")
			sumFile := filepath.Join(chart, "files", "rbac-"+mode+".config.sha256")
			if *update {
				for f, b := range map[string]string{file: want, sumFile: wantSum} {
					if err := os.WriteFile(f, []byte(b), 0o644); err != nil {
						t.Fatal(err)
					}
				}
			}
			if got := readFile(t, file); got != want {
				t.Errorf("%s is not what `informer-host rbac` prints for the chart's %s config: run `make helm-rbac`. It should be:\n%s", file, mode, want)
			}
			if got := readFile(t, sumFile); got != wantSum {
				t.Errorf("%s is %q, not the sha256 of the chart's %s config (%q): run `make helm-rbac`", sumFile, got, mode, wantSum)
			}
		})
	}
}

func readFile(t *testing.T, f string) string {
	t.Helper()
	b, err := os.ReadFile(f)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// The RBAC objects the chart renders are those `informer-host rbac`
// prints for the config the chart renders, in the release's namespace:
// for every value set (the shipped files, or the user's own through
// rbac.manifest), and for the shipped files in a namespace other than
// the one of the examples, which tpl fills in.
func TestRBACIsInformerHostRBAC(t *testing.T) {
	check := func(t *testing.T, ns string, args []string) {
		objs := render(t, ns, args...)
		want := testenv.RBACObjects(decode(t, podRBAC(t, ns, args...)))
		if len(want) == 0 {
			t.Fatal("informer-host rbac printed no objects")
		}
		if got := testenv.RBACObjects(objs); !reflect.DeepEqual(got, want) {
			t.Errorf("the chart's RBAC in %s:\n%v\nwant what informer-host rbac prints:\n%v", ns, got, want)
		}
	}
	for _, vs := range valueSets {
		t.Run(vs.name, func(t *testing.T) { check(t, "informer-host", vs.args(t, "informer-host")) })
	}
	for _, mode := range modes {
		t.Run(mode+" in another namespace", func(t *testing.T) { check(t, "team-ops", []string{"--set", "mode=" + mode}) })
	}
}
