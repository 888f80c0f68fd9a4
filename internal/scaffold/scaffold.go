package scaffold

import (
	"bytes"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"text/template"
)

//go:embed all:templates
var templates embed.FS

// Data is what templates see.
type Data struct {
	// Name is the project's name, also its module's file name
	// (Name + ".wasm").
	Name string
	// Repo is the informer-host source directory: the Go kit's module
	// (a replace directive), the C header (abi/include), the Rust and
	// AssemblyScript kits and their templates (kits.go).
	Repo string
}

// Languages lists the languages with a template, sorted.
func Languages() []string {
	entries, _ := fs.ReadDir(templates, "templates")
	var out []string
	for _, e := range entries {
		if e.IsDir() {
			out = append(out, e.Name())
		}
	}
	sort.Strings(out)
	return out
}

var validName = regexp.MustCompile(`^[a-z][a-z0-9-]{0,62}$`)

// Write creates dir (which must not exist) with lang's template for d.
func Write(dir, lang string, d Data) error {
	if !validName.MatchString(d.Name) {
		return fmt.Errorf("name %q: use lower case letters, digits and dashes, starting with a letter", d.Name)
	}
	root := path.Join("templates", lang)
	if _, err := fs.Stat(templates, root); err != nil {
		return fmt.Errorf("no template for language %q (have %s)", lang, strings.Join(Languages(), ", "))
	}
	k, isKit := kitOf(lang)
	if isKit {
		if err := k.check(d.Repo); err != nil {
			return err
		}
	}
	if _, err := os.Stat(dir); err == nil {
		return fmt.Errorf("%s exists; choose another name or directory", dir)
	} else if !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	if err := writeTemplates(dir, root, d); err != nil {
		return err
	}
	if isKit {
		return k.write(dir, d.Repo, d)
	}
	return nil
}

// writeTemplates writes the embedded templates under root into dir.
func writeTemplates(dir, root string, d Data) error {
	return fs.WalkDir(templates, root, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel := strings.TrimPrefix(strings.TrimPrefix(p, root), "/")
		rel = strings.ReplaceAll(rel, "_name_", d.Name)
		out := filepath.Join(dir, filepath.FromSlash(rel))
		if e.IsDir() {
			return os.MkdirAll(out, 0o755)
		}
		b, err := templates.ReadFile(p)
		if err != nil {
			return err
		}
		if strings.HasSuffix(out, ".tmpl") {
			out = strings.TrimSuffix(out, ".tmpl")
			t, err := template.New(rel).Delims("{{", "}}").Parse(string(b))
			if err != nil {
				return fmt.Errorf("template %s: %w", p, err)
			}
			var buf bytes.Buffer
			if err := t.Execute(&buf, d); err != nil {
				return fmt.Errorf("template %s: %w", p, err)
			}
			b = buf.Bytes()
		}
		return os.WriteFile(out, b, 0o644)
	})
}
