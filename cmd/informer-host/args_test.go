package main

import (
	"flag"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/informer-host/informer-host/internal/ociartifact/registrytest"
	"github.com/informer-host/informer-host/internal/testenv"
)

// Every command takes its flags before, after or between its arguments
// (README shows `pull oci://… -o FILE`), with the same result: each case
// runs with the flags first and with them last, against a registry on
// loopback where it needs one.
func TestFlagsInAnyPosition(t *testing.T) {
	reg := registrytest.GGCR(t)
	dir := t.TempDir()
	wasmFile := filepath.Join(dir, "healthy.wasm")
	if err := os.WriteFile(wasmFile, testenv.WAT(t, "../../host/testdata/fixtures/healthy.wat"), 0o644); err != nil {
		t.Fatal(err)
	}
	ref := "oci://" + reg.Ref("args/healthy:v1")
	if code, _, errOut := run(t, "push", "--insecure", wasmFile, ref); code != 0 {
		t.Fatalf("push: %s", errOut)
	}
	priv, pub := writeKeyPair(t, dir, "cosign")
	tarFile := filepath.Join(dir, "bundle.tar")
	if code, _, errOut := run(t, "bundle", "save", "--insecure", "-o", tarFile, ref); code != 0 {
		t.Fatalf("bundle save: %s", errOut)
	}
	cfg := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(cfg, []byte("apiVersion: informer-host/v1\nresources: [{name: cms, version: v1, resource: configmaps}]\n"), 0o644); err != nil {
		t.Fatal(err)
	}

	cases := []struct {
		command []string
		// flags and args of one run; out is a fresh directory for what
		// the run writes.
		args     func(out string) (flags, positional []string)
		wantCode int
		want     string // in stdout or stderr
	}{
		{[]string{"push"}, func(string) ([]string, []string) {
			return []string{"--insecure", "--annotation", "team=a"}, []string{wasmFile, ref}
		}, 0, "sha256:"},
		{[]string{"pull"}, func(out string) ([]string, []string) {
			return []string{"--insecure", "-o", filepath.Join(out, "x.wasm")}, []string{ref}
		}, 0, "x.wasm"},
		{[]string{"inspect"}, func(string) ([]string, []string) { return []string{"--insecure", "--json"}, []string{ref} }, 0, `"manifestDigest"`},
		{[]string{"inspect"}, func(string) ([]string, []string) { return []string{"--json"}, []string{wasmFile} }, 0, `"loads": true`},
		{[]string{"bundle", "save"}, func(out string) ([]string, []string) {
			return []string{"--insecure", "-o", filepath.Join(out, "b.tar")}, []string{ref}
		}, 0, "1 module(s)"},
		{[]string{"bundle", "load"}, func(out string) ([]string, []string) {
			return []string{"--cache", filepath.Join(out, "cache")}, []string{tarFile}
		}, 0, "healthy"},
		{[]string{"new"}, func(out string) ([]string, []string) {
			return []string{"--lang", "wat", "--dir", filepath.Join(out, "p")}, []string{"p"}
		}, 0, "created"},
		{[]string{"sign"}, func(string) ([]string, []string) { return []string{"--insecure", "--key", priv}, []string{ref} }, 0, "signed"},
		{[]string{"verify"}, func(string) ([]string, []string) { return []string{"--insecure", "--key", pub}, []string{ref} }, 0, "verified"},
		// The commands without arguments name the stray one, not the
		// flags after it.
		{[]string{"validate"}, func(string) ([]string, []string) { return []string{"--config", cfg}, []string{"stray"} }, 2, `unexpected arguments ["stray"]`},
		{[]string{"rbac"}, func(string) ([]string, []string) { return []string{"--config", cfg}, []string{"stray"} }, 2, `unexpected arguments ["stray"]`},
		{[]string{"run"}, func(string) ([]string, []string) { return []string{"--config", cfg}, []string{"stray"} }, 2, `unexpected arguments ["stray"]`},
		{[]string{"record"}, func(string) ([]string, []string) { return []string{"--config", cfg}, []string{"stray"} }, 2, `unexpected arguments ["stray"]`},
		{[]string{"replay"}, func(string) ([]string, []string) { return []string{"--plugin", wasmFile}, []string{"stray"} }, 2, `unexpected arguments ["stray"]`},
	}
	seen := map[string]bool{}
	for _, tc := range cases {
		seen[tc.command[0]] = true
		for _, order := range []string{"flags first", "flags last"} {
			t.Run(strings.Join(tc.command, " ")+"/"+order, func(t *testing.T) {
				flags, positional := tc.args(t.TempDir())
				args := slices.Concat(tc.command, flags, positional)
				if order == "flags last" {
					args = slices.Concat(tc.command, positional, flags)
				}
				code, out, errOut := run(t, args...)
				if code != tc.wantCode || !strings.Contains(out+errOut, tc.want) {
					t.Errorf("informer-host %s: exit %d, want %d with %q:\n%s%s", strings.Join(args, " "), code, tc.wantCode, tc.want, out, errOut)
				}
			})
		}
	}
	// A command added to Main without a case here would not be checked.
	for _, c := range []string{"run", "validate", "rbac", "replay", "record", "inspect", "new", "push", "pull", "bundle", "verify", "sign"} {
		if !seen[c] {
			t.Errorf("no case for %s", c)
		}
	}
}

// reorderArgs moves flags before the arguments, knowing which flags take
// a value, and leaves everything after "--" an argument.
func TestReorderArgs(t *testing.T) {
	type flagSet struct {
		*flag.FlagSet
		out      *string
		insecure *bool
	}
	newFS := func() flagSet {
		fs := flag.NewFlagSet("test", flag.ContinueOnError)
		return flagSet{fs, fs.String("o", "", ""), fs.Bool("insecure", false, "")}
	}
	cases := []struct {
		in, want []string
	}{
		{[]string{"oci://r/x:v1", "-o", "f"}, []string{"-o", "f", "--", "oci://r/x:v1"}},
		{[]string{"a", "--insecure", "b"}, []string{"--insecure", "--", "a", "b"}},
		{[]string{"a", "--insecure=false", "-o=f"}, []string{"--insecure=false", "-o=f", "--", "a"}},
		// A value that looks like a flag or a terminator is a value.
		{[]string{"-o", "--", "a"}, []string{"-o", "--", "--", "a"}},
		{[]string{"-o", "-x", "a"}, []string{"-o", "-x", "--", "a"}},
		// After "--" everything is an argument, flags too.
		{[]string{"-o", "f", "--", "-weird", "--insecure"}, []string{"-o", "f", "--", "-weird", "--insecure"}},
		// "-" is an argument (stdin, by convention).
		{[]string{"-", "--insecure"}, []string{"--insecure", "--", "-"}},
		// An unknown flag stays a flag, for Parse to report.
		{[]string{"a", "--nope", "b"}, []string{"--nope", "--", "a", "b"}},
		{[]string{"a", "-h"}, []string{"-h", "--", "a"}},
		{nil, []string{"--"}},
	}
	for _, tc := range cases {
		if got := reorderArgs(newFS().FlagSet, tc.in); !slices.Equal(got, tc.want) {
			t.Errorf("reorderArgs(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
	fs := newFS()
	if code, ok := parseOnly(fs.FlagSet, []string{"a", "-o", "f", "--", "--insecure"}, &strings.Builder{}); !ok || code != 0 {
		t.Fatalf("parseOnly: %d %v", code, ok)
	}
	if *fs.out != "f" || *fs.insecure || !slices.Equal(fs.Args(), []string{"a", "--insecure"}) {
		t.Errorf("after parseOnly: -o %q, --insecure %v, args %q", *fs.out, *fs.insecure, fs.Args())
	}
}
