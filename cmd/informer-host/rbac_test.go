package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// deployRBAC is what `make rbac` runs, from the repository's root.
var deployRBAC = []string{"rbac", "--config", "deploy/base/config.yaml", "--config-map-key", "config.yaml"}

// deploy/base/rbac.yaml is exactly what the rbac command prints for
// deploy/base/config.yaml: edit the config, and the RBAC must follow.
func TestDeployRBACIsGenerated(t *testing.T) {
	t.Chdir("../..")
	var stdout, stderr bytes.Buffer
	if code := Main(context.Background(), deployRBAC, &stdout, &stderr); code != 0 {
		t.Fatalf("informer-host %s: exit %d: %s", strings.Join(deployRBAC, " "), code, stderr.String())
	}
	file, err := os.ReadFile(filepath.Join("deploy", "base", "rbac.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(file, stdout.Bytes()) {
		t.Errorf("deploy/base/rbac.yaml is not what deploy/base/config.yaml needs: run `make rbac` "+
			"(informer-host %s > deploy/base/rbac.yaml). It should be:\n%s", strings.Join(deployRBAC, " "), stdout.String())
	}
}

// The shipped config.yaml (kinds named, no cluster at hand) gives its
// RBAC without --kubeconfig: its kind Pod is built in.
func TestRBACOfTheShippedConfig(t *testing.T) {
	t.Chdir("../..")
	var stdout, stderr bytes.Buffer
	if code := Main(context.Background(), []string{"rbac", "--config", "config.yaml"}, &stdout, &stderr); code != 0 {
		t.Fatalf("informer-host rbac --config config.yaml: exit %d: %s", code, stderr.String())
	}
	for _, want := range []string{"kind: Role\nmetadata:\n  name: informer-host\n  namespace: demo\n", "resources: [configmaps, pods]\n    verbs: [get, list, watch]\n"} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, stdout.String())
		}
	}
}

func TestRBACCommand(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	plain := write("plain.yaml", "apiVersion: informer-host/v1\nresources:\n  - {name: cms, version: v1, resource: configmaps, namespaces: [team]}\n"+
		"leaderElection: {enabled: true, namespace: le-ns}\n")
	kind := write("kind.yaml", "apiVersion: informer-host/v1\nresources:\n  - {name: w, group: example.com, version: v1, kind: Widget}\n")
	builtin := write("builtin.yaml", "apiVersion: informer-host/v1\nresources:\n  - {name: eps, version: v1, kind: Endpoints, namespaces: [team]}\n")
	cm := write("cm.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\ndata:\n  config.yaml: |\n    apiVersion: informer-host/v1\n    resources:\n      - {name: cms, version: v1, resource: configmaps}\n")
	tests := []struct {
		name     string
		args     []string
		wantCode int
		stdout   []string // substrings
		stderr   string
	}{
		{"namespaced resource and the lease namespace the file names", []string{"--config", plain, "--namespace", "ih", "--service-account", "sa", "--name", "watcher"}, 0,
			[]string{"kind: Role\nmetadata:\n  name: watcher\n  namespace: team\n", "kind: Role\nmetadata:\n  name: watcher\n  namespace: le-ns\n",
				"subjects:\n  - kind: ServiceAccount\n    name: sa\n    namespace: ih\n"}, ""},
		{"a ConfigMap manifest", []string{"--config", cm, "--config-map-key", "config.yaml"}, 0,
			[]string{"kind: ClusterRole\n", "resources: [configmaps]\n"}, ""},
		{"server auth", []string{"--config", cm, "--config-map-key", "config.yaml", "--server-auth", "kubernetes"}, 0,
			[]string{"resources: [tokenreviews]\n", "resources: [subjectaccessreviews]\n"}, ""},
		{"a kind that is not built in needs its plural", []string{"--config", kind}, 1, nil, `names kind Widget.example.com only, which is not a built-in kind`},
		{"a built-in kind needs no cluster", []string{"--config", builtin}, 0,
			[]string{"kind: Role\nmetadata:\n  name: informer-host\n  namespace: team\n", "resources: [endpoints]\n"}, ""},
		{"a ConfigMap without the key", []string{"--config", cm, "--config-map-key", "other"}, 1, nil, `not a ConfigMap with data key "other"`},
		{"bad server auth", []string{"--config", cm, "--server-auth", "maybe"}, 2, nil, `neither none nor kubernetes`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := Main(context.Background(), append([]string{"rbac"}, tt.args...), &stdout, &stderr)
			if code != tt.wantCode {
				t.Fatalf("exit %d, want %d; stderr %s", code, tt.wantCode, stderr.String())
			}
			for _, s := range tt.stdout {
				if !strings.Contains(stdout.String(), s) {
					t.Errorf("output lacks %q:\n%s", s, stdout.String())
				}
			}
			if !strings.Contains(stderr.String(), tt.stderr) {
				t.Errorf("stderr %q lacks %q", stderr.String(), tt.stderr)
			}
		})
	}
}
