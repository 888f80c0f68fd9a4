package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// README's `finalizers release` lines run as written, in README's order,
// against the real apiserver: a config.yaml naming cronjob.wasm as the
// controller of the ConfigMaps of one namespace with a finalizer; one
// ConfigMap being deleted and one not, both held by that finalizer and
// the deleting one by another manager's too. -deleting-only releases the
// first only (which stays, held by the other finalizer), the plain line
// the rest; the other finalizer is never touched. A line run again
// releases nothing more.
func TestREADMEFinalizersRelease(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	var lines [][]string
	inSh := false
	for _, line := range strings.Split(string(readme), "\n") {
		switch trimmed := strings.TrimSpace(line); {
		case strings.HasPrefix(trimmed, "```"):
			inSh = trimmed == "```sh"
		case inSh && strings.HasPrefix(trimmed, "bin/informer-host finalizers "):
			lines = append(lines, strings.Fields(readmeComment.ReplaceAllString(trimmed, ""))[1:])
		}
	}
	if len(lines) < 2 {
		t.Fatalf("README shows %d `finalizers release` lines in sh blocks; want the -deleting-only one and the plain one", len(lines))
	}

	ns := env.Namespace(t)
	dir := t.TempDir()
	if err := env.WriteKubeconfig(filepath.Join(dir, "kubeconfig")); err != nil {
		t.Fatal(err)
	}
	const mine, theirs = "example.com/cleanup", "other.example.com/keep"
	cfg := fmt.Sprintf(`apiVersion: informer-host/v1
kubeconfig: kubeconfig
resources:
  - {name: configmaps, version: v1, resource: configmaps, namespaces: [%s]}
plugins:
  modules:
    - file: cronjob.wasm
      controller: {for: configmaps, finalizer: %s}
      grants:
        writes: {resources: [{resource: configmaps, verbs: [create, patch, apply, delete]}]}
`, ns, mine)
	if err := os.WriteFile(filepath.Join(dir, "config.yaml"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Chdir(dir)

	cms := env.Client.CoreV1().ConfigMaps(ns)
	ctx := context.Background()
	for name, fs := range map[string][]string{"deleting": {mine, theirs}, "live": {mine}} {
		if _, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Finalizers: fs}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		for _, n := range []string{"deleting", "live"} {
			_, _ = cms.Patch(ctx, n, "application/merge-patch+json", []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{})
		}
	})
	if err := cms.Delete(ctx, "deleting", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	finalizers := func(name string) []string {
		cm, err := cms.Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			t.Fatal(err)
		}
		return cm.Finalizers
	}

	ranDeleting, ranAll := false, false
	for _, args := range lines {
		code, out, errOut := run(t, args...)
		if code != 0 {
			t.Fatalf("informer-host %s: exit %d\n%s%s", strings.Join(args, " "), code, out, errOut)
		}
		if slices.Contains(args, "-deleting-only") {
			// The first releases the deleting one; again, there is none left.
			want := "released " + mine + " from 1 objects being deleted of configmaps"
			if ranDeleting {
				want = "released " + mine + " from 0 objects being deleted of configmaps"
			}
			ranDeleting = true
			if !strings.Contains(out, want) {
				t.Errorf("-deleting-only said %q, want %q", out, want)
			}
			if got := finalizers("deleting"); !slices.Equal(got, []string{theirs}) {
				t.Errorf("after -deleting-only the deleting ConfigMap has %q, want only %q", got, theirs)
			}
			if got := finalizers("live"); !slices.Equal(got, []string{mine}) && !ranAll {
				t.Errorf("-deleting-only released a live object: %q", got)
			}
			continue
		}
		ranAll = true
		if got := finalizers("live"); len(got) != 0 {
			t.Errorf("after release the live ConfigMap has %q", got)
		}
		if got := finalizers("deleting"); !slices.Equal(got, []string{theirs}) {
			t.Errorf("the other manager's finalizer went: %q", got)
		}
	}
	if !ranDeleting || !ranAll {
		t.Errorf("README lines ran: -deleting-only %v, plain %v; want both", ranDeleting, ranAll)
	}

	// What an operator gets wrong is named.
	for _, tc := range []struct {
		args []string
		code int
		msg  string
	}{
		{[]string{"finalizers"}, 2, "usage: informer-host finalizers release"},
		{[]string{"finalizers", "release", "-config", "config.yaml"}, 2, "-plugin is required"},
		{[]string{"finalizers", "release", "-config", "config.yaml", "-plugin", "other.wasm"}, 1, `plugin "other.wasm" has no controller.finalizer in config.yaml`},
	} {
		code, _, errOut := run(t, tc.args...)
		if code != tc.code || !strings.Contains(errOut, tc.msg) {
			t.Errorf("informer-host %s: exit %d %q, want %d with %q", strings.Join(tc.args, " "), code, errOut, tc.code, tc.msg)
		}
	}
}
