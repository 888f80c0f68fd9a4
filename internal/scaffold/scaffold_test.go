package scaffold

import (
	"bufio"
	"bytes"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/informer-host/informer-host/abi"
)

func TestWrite(t *testing.T) {
	if got := strings.Join(Languages(), ","); got != "assemblyscript,c,go,rust,wat" {
		t.Errorf("languages %q", got)
	}
	dir := filepath.Join(t.TempDir(), "p")
	if err := Write(dir, "go", Data{Name: "my-plugin"}); err != nil {
		t.Fatal(err)
	}
	for f, want := range map[string]string{
		"go.mod":             "module my-plugin\n\ngo 1.24\n\nrequire github.com/informer-host/informer-host/abi " + abi.ModuleVersion + "\n",
		"vendor/modules.txt": "# github.com/informer-host/informer-host/abi " + abi.ModuleVersion + "\n## explicit; go 1.24\ngithub.com/informer-host/informer-host/abi\ngithub.com/informer-host/informer-host/abi/kit\ngithub.com/informer-host/informer-host/abi/kit/kittest\n",
	} {
		if b, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(f))); err != nil || string(b) != want {
			t.Errorf("%s: %v\n%s\nwant\n%s", f, err, b, want)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "testdata", "events.jsonl")); err != nil {
		t.Error(err)
	}
	for _, tc := range []struct{ dir, lang, name, want string }{
		{dir, "go", "my-plugin", "exists"},
		{dir + "2", "cobol", "x", `no template for language "cobol" (have assemblyscript, c, go, rust, wat)`},
		{dir + "3", "go", "My Plugin", "use lower case letters"},
	} {
		if err := Write(tc.dir, tc.lang, Data{Name: tc.name}); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s %s: %v, want %q", tc.lang, tc.name, err, tc.want)
		}
	}
}

// Every language's project comes from the binary alone: the kit is copied
// in, wired with relative paths, renamed from the template's my-plugin,
// and no file names where it was written (or this repository).
func TestWriteKits(t *testing.T) {
	vendored := "vendor/github.com/informer-host/informer-host/abi/"
	for _, tc := range []struct {
		lang   string
		want   map[string]string // file: a string it must contain
		absent []string
	}{
		{lang: "go", want: map[string]string{
			"main.go":                           "kit.Handle(handle)",
			"main_test.go":                      "kittest.New(t)",
			"Makefile":                          "GOWORK=off $(GO) test ./...",
			vendored + "abi.go":                 "package abi",
			vendored + "version.go":             `ModuleVersion = "` + abi.ModuleVersion + `"`,
			vendored + "kit/kit.go":             "package kit",
			vendored + "kit/kittest/kittest.go": "package kittest",
		}, absent: []string{vendored + "sources.go", vendored + "abi_test.go", vendored + "kit/kit_test.go", "go.sum"}},
		{lang: "c", want: map[string]string{
			"include/informer_host.h": "IH_ABI_V1_MARKER",
			"Makefile":                "IH_INCLUDE ?= include",
		}},
		{lang: "rust", want: map[string]string{
			"build.sh":              "--crate-name hello_kit ",
			"Cargo.toml":            `informer-host = { path = "kit" }`,
			"plugin.rs":             "hello-kit:",
			"kit/Cargo.toml":        `name = "informer-host"`,
			"kit/src/lib.rs":        "",
			"kit/src/fake.rs":       "",
			"Makefile":              "./build.sh test",
			"testdata/events.jsonl": `"informerHostEvents":1`,
		}},
		{lang: "assemblyscript", want: map[string]string{
			"package.json":         `"informer-host-as": "file:kit"`,
			"assembly/index.ts":    "informer-host-as/assembly",
			"kit/package.json":     `"name": "informer-host-as"`,
			"kit/assembly/host.ts": "",
			"kit/fake/host.mjs":    "export class FakeHost",
			"test/index.test.mjs":  `readFileSync(new URL("../hello-kit.wasm"`,
			"Makefile":             "$(NPM) run --silent build",
			"Makefile\x00test":     "$(NODE) --test test/*.test.mjs",
		}, absent: []string{"package-lock.json", "node_modules", "build"}},
	} {
		parent := t.TempDir()
		dir := filepath.Join(parent, "p")
		if err := Write(dir, tc.lang, Data{Name: "hello-kit"}); err != nil {
			t.Fatalf("%s: %v", tc.lang, err)
		}
		tc.want["Makefile"+"\x00replay"] = "$(if $(STUBS), --stubs $(STUBS))$(if $(CONFIG), --config $(CONFIG))"
		for f, want := range tc.want {
			f, _, _ = strings.Cut(f, "\x00")
			b, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(f)))
			if err != nil || !strings.Contains(string(b), want) {
				t.Errorf("%s: %s lacks %q (%v):\n%s", tc.lang, f, want, err, b)
			}
		}
		for _, f := range tc.absent {
			if _, err := os.Stat(filepath.Join(dir, filepath.FromSlash(f))); err == nil {
				t.Errorf("%s: %s written", tc.lang, f)
			}
		}
		if tc.lang == "rust" {
			if fi, err := os.Stat(filepath.Join(dir, "build.sh")); err != nil || fi.Mode().Perm()&0o100 == 0 {
				t.Errorf("%s: build.sh not executable: %v", tc.lang, err)
			}
		}
		err := filepath.WalkDir(dir, func(p string, e os.DirEntry, err error) error {
			if err != nil || e.IsDir() {
				return err
			}
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			for _, abs := range []string{parent, "/work/"} {
				if bytes.Contains(b, []byte(abs)) {
					t.Errorf("%s: %s names %s: the project would not build where it is moved", tc.lang, p, abs)
				}
			}
			// The kit keeps its own words; the template's name is gone
			// from the project's files.
			inKit := strings.Contains(p, string(filepath.Separator)+"kit"+string(filepath.Separator)) || strings.Contains(p, "vendor")
			if !inKit && (bytes.Contains(b, []byte("my-plugin")) || bytes.Contains(b, []byte("my_plugin"))) {
				t.Errorf("%s: %s still says my-plugin", tc.lang, p)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
}

// The kits' templates are embedded file by file (abi/sources.go), so a
// file added to one must be added there too; what building a template in
// place leaves (its .gitignore) and its lock file (which pins the
// template's own "file:..") are not a project's.
func TestTemplatesEmbedded(t *testing.T) {
	for _, tmpl := range []string{"rust/template", "assemblyscript/template"} {
		root := filepath.Join("..", "..", "abi", filepath.FromSlash(tmpl))
		ignored := map[string]bool{"package-lock.json": true}
		if b, err := os.ReadFile(filepath.Join(root, ".gitignore")); err == nil {
			sc := bufio.NewScanner(bytes.NewReader(b))
			for sc.Scan() {
				if l := strings.Trim(strings.TrimSpace(sc.Text()), "/"); l != "" {
					ignored[l] = true
				}
			}
		}
		err := filepath.WalkDir(root, func(p string, e fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			rel, err := filepath.Rel(root, p)
			if err != nil || rel == "." {
				return err
			}
			if ignored[filepath.ToSlash(rel)] {
				if e.IsDir() {
					return filepath.SkipDir
				}
				return nil
			}
			if e.IsDir() {
				return nil
			}
			if _, err := fs.Stat(abi.Sources(), path.Join(tmpl, filepath.ToSlash(rel))); err != nil {
				t.Errorf("abi/%s/%s is not embedded: add it to abi/sources.go", tmpl, filepath.ToSlash(rel))
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
}

// abi.ModuleVersion, which a Go project requires, is the version the
// daemon requires, the one go.work develops against, and the ABI's latest
// minor version (ABI.md §14.1).
func TestABIModuleVersion(t *testing.T) {
	read := func(f string) string {
		b, err := os.ReadFile(filepath.Join("..", "..", filepath.FromSlash(f)))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	last := func(re, text string) string {
		m := regexp.MustCompile(re).FindAllStringSubmatch(text, -1)
		if len(m) == 0 {
			return ""
		}
		return m[len(m)-1][1]
	}
	abiMD := read("abi/ABI.md")
	changes, _, _ := strings.Cut(abiMD[strings.Index(abiMD, "\n### 14.1 ")+1:], "\n## ")
	for _, tc := range []struct{ where, got, want string }{
		{"go.mod's require", last(`(?m)^\s*github\.com/informer-host/informer-host/abi (v\S+)`, read("go.mod")), abi.ModuleVersion},
		{"go.work's replace", last(`(?m)^replace github\.com/informer-host/informer-host/abi (v\S+) =>`, read("go.work")), abi.ModuleVersion},
		{"ABI.md §14.1's latest version", last(`(?m)^#### (v1\.\d+)\b`, changes) + ".0", abi.ModuleVersion},
	} {
		if tc.got != tc.want {
			t.Errorf("%s is %q, abi.ModuleVersion %q", tc.where, tc.got, tc.want)
		}
	}
}
