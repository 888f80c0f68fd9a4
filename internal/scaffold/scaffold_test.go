package scaffold

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestWrite(t *testing.T) {
	if got := strings.Join(Languages(), ","); got != "assemblyscript,c,go,rust,wat" {
		t.Errorf("languages %q", got)
	}
	dir := filepath.Join(t.TempDir(), "p")
	if err := Write(dir, "go", Data{Name: "my-plugin", Repo: "/src/ih"}); err != nil {
		t.Fatal(err)
	}
	mod, err := os.ReadFile(filepath.Join(dir, "go.mod"))
	if err != nil || !strings.Contains(string(mod), "module my-plugin") || !strings.Contains(string(mod), "=> /src/ih") {
		t.Errorf("go.mod: %s %v", mod, err)
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

// The Rust and AssemblyScript projects are the kits' own templates from
// the repository, renamed, with the kit wired in; nothing that building
// the template in place leaves there (build/, node_modules/) is copied.
func TestWriteKits(t *testing.T) {
	repo, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	// A repository whose templates have been built in place.
	built := t.TempDir()
	for f, body := range map[string]string{
		"abi/rust/template/.gitignore":                     "build/\ntarget/\n",
		"abi/rust/template/build.sh":                       "#!/bin/sh\necho build/my-plugin.wasm my_plugin\n",
		"abi/rust/template/build/my-plugin.wasm":           "\x00asm",
		"abi/rust/Cargo.toml":                              "[package]\n",
		"abi/rust/src/lib.rs":                              "// my-plugin stays: the kit is not renamed\n",
		"abi/assemblyscript/template/.gitignore":           "node_modules/\nbuild/\n",
		"abi/assemblyscript/template/package.json":         `{"devDependencies": {"informer-host-as": "file:.."}}`,
		"abi/assemblyscript/template/package-lock.json":    "{}",
		"abi/assemblyscript/template/node_modules/x/a.txt": "x",
	} {
		p := filepath.Join(built, filepath.FromSlash(f))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		lang, repo string
		want       map[string]string // file: a string it must contain
		absent     []string
	}{
		{lang: "rust", repo: repo, want: map[string]string{
			"build.sh":              "--crate-name hello_kit ",
			"Cargo.toml":            `name = "hello-kit"`,
			"plugin.rs":             "hello-kit:",
			"kit/Cargo.toml":        `name = "informer-host"`,
			"kit/src/lib.rs":        "",
			"Makefile":              "./build.sh test",
			"testdata/events.jsonl": `"informerHostEvents":1`,
		}},
		{lang: "rust", repo: built, want: map[string]string{"build.sh": "build/hello-kit.wasm hello_kit", "kit/src/lib.rs": "my-plugin stays"},
			absent: []string{"build"}},
		{lang: "assemblyscript", repo: repo, want: map[string]string{
			"package.json":      `"informer-host-as": "file:` + filepath.ToSlash(filepath.Join(repo, "abi", "assemblyscript")) + `"`,
			"assembly/index.ts": "informer-host-as/assembly",
			"Makefile":          "$(NPM) run --silent build",
		}, absent: []string{"package-lock.json"}},
		{lang: "assemblyscript", repo: built, want: map[string]string{"package.json": "file:" + filepath.ToSlash(built)},
			absent: []string{"package-lock.json", "node_modules"}},
	} {
		dir := filepath.Join(t.TempDir(), "p")
		if err := Write(dir, tc.lang, Data{Name: "hello-kit", Repo: tc.repo}); err != nil {
			t.Fatalf("%s from %s: %v", tc.lang, tc.repo, err)
		}
		for f, want := range tc.want {
			b, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(f)))
			if err != nil || !strings.Contains(string(b), want) {
				t.Errorf("%s from %s: %s lacks %q (%v):\n%s", tc.lang, tc.repo, f, want, err, b)
			}
		}
		for _, f := range tc.absent {
			if _, err := os.Stat(filepath.Join(dir, f)); err == nil {
				t.Errorf("%s from %s: %s copied", tc.lang, tc.repo, f)
			}
		}
		if tc.lang == "rust" {
			if fi, err := os.Stat(filepath.Join(dir, "build.sh")); err != nil || fi.Mode().Perm()&0o100 == 0 {
				t.Errorf("%s from %s: build.sh not executable: %v %v", tc.lang, tc.repo, fi.Mode(), err)
			}
		}
		// The template's name is gone from the template's files.
		filepath.WalkDir(dir, func(p string, e os.DirEntry, err error) error {
			if err != nil || e.IsDir() {
				return err
			}
			b, _ := os.ReadFile(p)
			if !strings.Contains(p, string(filepath.Separator)+"kit"+string(filepath.Separator)) &&
				(strings.Contains(string(b), "my-plugin") || strings.Contains(string(b), "my_plugin")) {
				t.Errorf("%s from %s: %s still says my-plugin", tc.lang, tc.repo, p)
			}
			return nil
		})
	}
	for _, tc := range []struct{ lang, repo, want string }{
		{"rust", "", "give the informer-host source directory (--repo)"},
		{"assemblyscript", t.TempDir(), "is not the informer-host source directory (no abi/assemblyscript/template)"},
		{"rust", filepath.Join(built, "abi"), "(no abi/rust/template)"},
	} {
		dir := filepath.Join(t.TempDir(), "p")
		if err := Write(dir, tc.lang, Data{Name: "hello-kit", Repo: tc.repo}); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s from %q: %v, want %q", tc.lang, tc.repo, err, tc.want)
		}
		if _, err := os.Stat(dir); err == nil {
			t.Errorf("%s from %q: %s created by a failed Write", tc.lang, tc.repo, dir)
		}
	}
}
