package scaffold

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// A kit language's project starts from the kit's own template
// (abi/<kit>/template), copied out of the informer-host source directory
// (Data.Repo) when the project is created, rather than from a second copy
// embedded here: the template `make plugins` builds and tests in the
// repository (mk/kits.mk) is the one every new project gets, so the two
// cannot drift. templates/<lang>/ adds only what every scaffolded project
// has whatever its language: the Makefile and testdata/events.jsonl.
type kit struct {
	// title names the kit in errors.
	title string
	// template is the kit's template directory, relative to the repo.
	// Its files are copied with the template's name (my-plugin, and
	// my_plugin where an identifier needs one) replaced by the project's;
	// what its .gitignore names (build output, node_modules) is not.
	template string
	// drop lists template files a project must not get.
	drop []string
	// also are more copies, unchanged: repo-relative source to
	// project-relative destination (a file or a directory).
	also [][2]string
	// edit adjusts a copied template file (rel is slash-separated).
	edit func(rel string, b []byte, repo string) ([]byte, error)
}

// kitOf returns the kit behind lang, if lang is a kit language.
func kitOf(lang string) (kit, bool) {
	switch lang {
	case "rust":
		// The kit is copied into kit/ (Cargo.toml's path dependency,
		// build.sh's default): the project then builds without the repo.
		return kit{title: "Rust", template: "abi/rust/template",
			also: [][2]string{{"abi/rust/Cargo.toml", "kit/Cargo.toml"}, {"abi/rust/src", "kit/src"}}}, true
	case "assemblyscript":
		// npm installs the kit from the repo (a file: dependency); the
		// template's lock file pins the template's own "file:.." and is
		// rewritten by the project's first npm install.
		return kit{title: "AssemblyScript", template: "abi/assemblyscript/template",
			drop: []string{"package-lock.json"}, edit: asDependency}, true
	}
	return kit{}, false
}

// templateName is the project name the kits' templates use.
const templateName = "my-plugin"

// check reports what is missing from repo for k, before anything is
// written.
func (k kit) check(repo string) error {
	if repo == "" {
		return fmt.Errorf("the %s kit: give the informer-host source directory (--repo), which has %s", k.title, k.template)
	}
	for _, p := range append([]string{k.template}, alsoSources(k)...) {
		if _, err := os.Stat(filepath.Join(repo, filepath.FromSlash(p))); err != nil {
			return fmt.Errorf("the %s kit: %s is not the informer-host source directory (no %s): give that directory with --repo", k.title, repo, p)
		}
	}
	return nil
}

func alsoSources(k kit) []string {
	var out []string
	for _, a := range k.also {
		out = append(out, a[0])
	}
	return out
}

// write copies the kit's template and its other files from repo into dir.
func (k kit) write(dir, repo string, d Data) error {
	src := filepath.Join(repo, filepath.FromSlash(k.template))
	ignored, err := gitignored(filepath.Join(src, ".gitignore"))
	if err != nil {
		return err
	}
	for _, f := range k.drop {
		ignored[f] = true
	}
	rename := strings.NewReplacer(templateName, d.Name, strings.ReplaceAll(templateName, "-", "_"), strings.ReplaceAll(d.Name, "-", "_"))
	err = copyTree(src, dir, func(rel string) bool { return ignored[rel] }, func(rel string, b []byte) ([]byte, error) {
		b = []byte(rename.Replace(string(b)))
		if k.edit != nil {
			return k.edit(rel, b, repo)
		}
		return b, nil
	})
	if err != nil {
		return err
	}
	for _, a := range k.also {
		if err := copyTree(filepath.Join(repo, filepath.FromSlash(a[0])), filepath.Join(dir, filepath.FromSlash(a[1])), nil, nil); err != nil {
			return err
		}
	}
	return nil
}

// gitignored reads the names a template's .gitignore lists (top-level
// names, as the kits' templates have: "build/", "node_modules/"), which
// are what building the template in the repository leaves there.
func gitignored(file string) (map[string]bool, error) {
	names := map[string]bool{}
	b, err := os.ReadFile(file)
	if errors.Is(err, fs.ErrNotExist) {
		return names, nil
	} else if err != nil {
		return nil, err
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		l := strings.TrimSpace(sc.Text())
		if l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		names[strings.Trim(l, "/")] = true
	}
	return names, sc.Err()
}

// copyTree copies src (a file or a directory) to dst, keeping the files'
// permission bits (build.sh stays executable); skip is given
// slash-separated paths relative to src, edit each file's contents. It
// never overwrites: a kit file that a template also has is an error.
func copyTree(src, dst string, skip func(rel string) bool, edit func(rel string, b []byte) ([]byte, error)) error {
	return filepath.WalkDir(src, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		slash := filepath.ToSlash(rel)
		if skip != nil && slash != "." && skip(slash) {
			if e.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		out := filepath.Join(dst, rel)
		if e.IsDir() {
			return os.MkdirAll(out, 0o755)
		}
		info, err := e.Info()
		if err != nil {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if edit != nil {
			if b, err = edit(slash, b); err != nil {
				return err
			}
		}
		if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
			return err
		}
		f, err := os.OpenFile(out, os.O_WRONLY|os.O_CREATE|os.O_EXCL, info.Mode().Perm())
		if err != nil {
			return fmt.Errorf("copy %s: %w", p, err)
		}
		if _, err := f.Write(b); err != nil {
			f.Close()
			return err
		}
		return f.Close()
	})
}

// asDependency points package.json's informer-host-as dependency, "file:.."
// in the template (the kit is the template's parent), at the kit in repo.
func asDependency(rel string, b []byte, repo string) ([]byte, error) {
	if rel != "package.json" {
		return b, nil
	}
	const dep = `"informer-host-as": "file:.."`
	if !bytes.Contains(b, []byte(dep)) {
		return nil, fmt.Errorf("abi/assemblyscript/template/package.json: no %s to point at the kit", dep)
	}
	abs, err := filepath.Abs(filepath.Join(repo, "abi", "assemblyscript"))
	if err != nil {
		return nil, err
	}
	path, err := json.Marshal("file:" + filepath.ToSlash(abs))
	if err != nil {
		return nil, err
	}
	return bytes.Replace(b, []byte(dep), []byte(`"informer-host-as": `+string(path)), 1), nil
}
