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

	"github.com/informer-host/informer-host/abi"
)

//go:embed all:templates
var templates embed.FS

// makefile holds the make rules every language's Makefile.tmpl shares
// ({{template "replay" .}}).
//
//go:embed makefile.tmpl
var makefile string

// Data is what the caller chooses about a project.
type Data struct {
	// Name is the project's name, also its module's file name
	// (Name + ".wasm").
	Name string
}

// view is what templates see: the project and the abi module it is
// written against.
type view struct {
	Data
	// ABIModule and ABIVersion are the Go kit's module and the version
	// a Go project requires (abi.ModuleVersion); GoVersion is the go
	// directive of its go.mod.
	ABIModule, ABIVersion, GoVersion string
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
	goVersion, err := abiGoVersion()
	if err != nil {
		return err
	}
	if _, err := os.Stat(dir); err == nil {
		return fmt.Errorf("%s exists; choose another name or directory", dir)
	} else if !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	v := view{Data: d, ABIModule: abiModule, ABIVersion: abi.ModuleVersion, GoVersion: goVersion}
	if err := writeTemplates(dir, root, v); err != nil {
		return err
	}
	return kitOf(lang).write(dir, d)
}

// writeTemplates writes the embedded templates under root into dir.
func writeTemplates(dir, root string, v view) error {
	shared, err := template.New("makefile.tmpl").Parse(makefile)
	if err != nil {
		return fmt.Errorf("template makefile.tmpl: %w", err)
	}
	return fs.WalkDir(templates, root, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel := strings.TrimPrefix(strings.TrimPrefix(p, root), "/")
		rel = strings.ReplaceAll(rel, "_name_", v.Name)
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
			t, err := shared.Clone()
			if err != nil {
				return err
			}
			if t, err = t.New(rel).Parse(string(b)); err != nil {
				return fmt.Errorf("template %s: %w", p, err)
			}
			var buf bytes.Buffer
			if err := t.Execute(&buf, v); err != nil {
				return fmt.Errorf("template %s: %w", p, err)
			}
			b = buf.Bytes()
		}
		return os.WriteFile(out, b, 0o644)
	})
}
