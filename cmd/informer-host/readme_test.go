package main

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/informer-host/informer-host/internal/ociartifact/registrytest"
	"github.com/informer-host/informer-host/internal/testenv"
)

var (
	readmeComment     = regexp.MustCompile(`\s+#.*$`)
	readmeHost        = regexp.MustCompile(`oci://registry\.example(\.com)?/`)
	readmeShortDigest = regexp.MustCompile(`sha256:[0-9a-f]+…`)
)

// README's registry command lines (push, pull, inspect oci://, bundle,
// sign, verify in its sh blocks) run as written against a registry on
// loopback, in README's order: only the registry's host is the test's,
// absolute paths are under a temporary directory, --insecure is added
// (the registry speaks plain HTTP), and a digest README abbreviates
// (sha256:4f0c…) is the one the push before it printed. Flags stay
// where README puts them (`pull oci://… -o FILE`).
func TestREADMERegistryCommandLines(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	reg := registrytest.GGCR(t)
	dir := t.TempDir()
	wasm := testenv.WAT(t, "../../host/testdata/fixtures/healthy.wat")
	t.Chdir(dir)
	for _, f := range []string{"build/plugins/pod-logger.wasm", "hello.wasm"} {
		if err := os.MkdirAll(filepath.Dir(f), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(f, wasm, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	writeKeyPair(t, ".", "cosign")
	// README signs plugins/my:v1 without showing its push.
	if code, _, errOut := run(t, "push", "--insecure", "hello.wasm", "oci://"+reg.Ref("plugins/my:v1")); code != 0 {
		t.Fatalf("push plugins/my:v1: %s", errOut)
	}

	var ran []string
	lastDigest := ""
	inSh := false
	for n, line := range strings.Split(string(readme), "\n") {
		switch trimmed := strings.TrimSpace(line); {
		case strings.HasPrefix(trimmed, "```"):
			inSh = trimmed == "```sh"
			continue
		case !inSh || !strings.HasPrefix(trimmed, "bin/informer-host "):
			continue
		}
		args := strings.Fields(readmeComment.ReplaceAllString(strings.TrimSpace(line), ""))[1:]
		registry := slices.Contains([]string{"push", "pull", "bundle", "sign", "verify"}, args[0]) ||
			args[0] == "inspect" && strings.HasPrefix(args[len(args)-1], "oci://")
		if !registry {
			continue
		}
		for i, a := range args {
			a = readmeHost.ReplaceAllString(a, "oci://"+reg.Host+"/")
			if lastDigest != "" {
				a = readmeShortDigest.ReplaceAllString(a, lastDigest)
			}
			if filepath.IsAbs(a) {
				a = filepath.Join(dir, a)
			}
			args[i] = a
		}
		if strings.Contains(strings.Join(args, " "), "…") {
			t.Logf("README.md:%d: not run, it abbreviates what it names: %s", n+1, strings.TrimSpace(line))
			continue
		}
		if !(args[0] == "bundle" && args[1] == "load") {
			args = append(args, "--insecure")
		}
		code, out, errOut := run(t, args...)
		if code != 0 {
			t.Errorf("README.md:%d: %s\nran as informer-host %s: exit %d\n%s%s", n+1, strings.TrimSpace(line), strings.Join(args, " "), code, out, errOut)
			continue
		}
		if args[0] == "push" {
			lastDigest = strings.TrimSpace(out)
		}
		ran = append(ran, args[0])
	}
	for _, want := range []string{"push", "pull", "inspect", "bundle", "sign", "verify"} {
		if !slices.Contains(ran, want) {
			t.Errorf("no README line of %s ran (ran: %q); this test looks for them in README's sh blocks", want, ran)
		}
	}
}
