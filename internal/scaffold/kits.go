package scaffold

import (
	"bytes"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/informer-host/informer-host/abi"
)

// A language's kit comes out of the abi module's own files
// (abi.Sources), embedded in this binary: a project is written from the
// binary alone, carries its copy of the kit, and builds where it is moved
// or cloned. The Rust and AssemblyScript projects start from their kit's
// template (abi/rust/template, abi/assemblyscript/template), the one
// `make plugins` builds and tests in the repository (mk/kits.mk), so the
// template a project gets is one that builds. templates/<lang>/ adds what
// every project has whatever its language: the Makefile and testdata.
type kit struct {
	// template is a directory of abi.Sources() whose files the project
	// starts from, with the template's name (my-plugin, and my_plugin
	// where an identifier needs one) replaced by the project's.
	template string
	// copies are more files of abi.Sources(), unchanged.
	copies []copySpec
	// edit adjusts a template file (rel is slash-separated).
	edit func(rel string, b []byte) ([]byte, error)
	// extra writes files that are derived rather than copied.
	extra func(dir string) error
}

// copySpec copies the files of abi.Sources() that pattern (path.Match)
// matches into the project's directory to, except _test.go files and the
// names in skip.
type copySpec struct {
	pattern, to string
	skip        []string
}

// abiModule is the Go kit's module path, which a Go project requires.
const abiModule = "github.com/informer-host/informer-host/abi"

// goVendor is where a Go project's copy of the abi module lives.
const goVendor = "vendor/" + abiModule

// kitOf returns what lang takes from the abi module; a language without a
// kit (WAT) gets the zero kit.
func kitOf(lang string) kit {
	switch lang {
	case "go":
		// The packages a plugin and its test import, vendored: go build
		// then needs neither the network nor a go.sum. sources.go (the
		// embed that these very files come from) is left out, since its
		// patterns name files a plugin's build has no use for.
		copies := []copySpec{
			{pattern: "*.go", to: goVendor, skip: []string{"sources.go"}},
			{pattern: "kit/*.go", to: goVendor + "/kit"},
			{pattern: "kit/kittest/*.go", to: goVendor + "/kit/kittest"},
		}
		return kit{copies: copies, extra: func(dir string) error { return writeModulesTxt(dir, copies) }}
	case "c":
		return kit{copies: []copySpec{{pattern: "include/*.h", to: "include"}}}
	case "rust":
		// kit/ is Cargo.toml's path dependency and build.sh's default.
		return kit{template: "rust/template", copies: []copySpec{
			{pattern: "rust/Cargo.toml", to: "kit"},
			{pattern: "rust/src/*.rs", to: "kit/src"},
		}}
	case "assemblyscript":
		// package.json takes the kit from kit/ (a file: dependency,
		// relative): npm links it into node_modules on the first build.
		// fake/ is the fake host the project's node tests import
		// (informer-host-as/fake/host.mjs).
		return kit{template: "assemblyscript/template", copies: []copySpec{
			{pattern: "assemblyscript/package.json", to: "kit"},
			{pattern: "assemblyscript/assembly/*.ts", to: "kit/assembly"},
			{pattern: "assemblyscript/fake/*.mjs", to: "kit/fake"},
		}, edit: asDependency}
	}
	return kit{}
}

// templateName is the project name the kits' templates use.
const templateName = "my-plugin"

// write copies the kit's template and its other files into dir.
func (k kit) write(dir string, d Data) error {
	src := abi.Sources()
	if k.template != "" {
		rename := strings.NewReplacer(templateName, d.Name, strings.ReplaceAll(templateName, "-", "_"), strings.ReplaceAll(d.Name, "-", "_"))
		err := fs.WalkDir(src, k.template, func(p string, e fs.DirEntry, err error) error {
			if err != nil || e.IsDir() {
				return err
			}
			rel := strings.TrimPrefix(p, k.template+"/")
			b, err := fs.ReadFile(src, p)
			if err != nil {
				return err
			}
			b = []byte(rename.Replace(string(b)))
			if k.edit != nil {
				if b, err = k.edit(rel, b); err != nil {
					return err
				}
			}
			return writeNew(filepath.Join(dir, filepath.FromSlash(rel)), b, modeOf(rel))
		})
		if err != nil {
			return fmt.Errorf("the kit's template %s: %w", k.template, err)
		}
	}
	for _, c := range k.copies {
		names, err := fs.Glob(src, c.pattern)
		if err != nil {
			return err
		}
		if len(names) == 0 {
			return fmt.Errorf("the embedded abi module has no %s: the binary was built without its kit", c.pattern)
		}
		for _, p := range names {
			base := path.Base(p)
			if strings.HasSuffix(base, "_test.go") || contains(c.skip, base) {
				continue
			}
			b, err := fs.ReadFile(src, p)
			if err != nil {
				return err
			}
			if err := writeNew(filepath.Join(dir, filepath.FromSlash(c.to), base), b, modeOf(base)); err != nil {
				return err
			}
		}
	}
	if k.extra != nil {
		return k.extra(dir)
	}
	return nil
}

func contains(list []string, s string) bool {
	for _, l := range list {
		if l == s {
			return true
		}
	}
	return false
}

// modeOf keeps scripts executable: embed.FS has no permission bits.
func modeOf(name string) os.FileMode {
	if strings.HasSuffix(name, ".sh") {
		return 0o755
	}
	return 0o644
}

// writeNew writes a file that must not exist: a kit file that a template
// also has is an error, not a silent overwrite.
func writeNew(p string, b []byte, mode os.FileMode) error {
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if err != nil {
		return err
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// asDependency points package.json's informer-host-as dependency,
// "file:.." in the template (the kit is the template's parent in the
// repository), at the project's copy of the kit.
func asDependency(rel string, b []byte) ([]byte, error) {
	if rel != "package.json" {
		return b, nil
	}
	const dep = `"informer-host-as": "file:.."`
	if !bytes.Contains(b, []byte(dep)) {
		return nil, fmt.Errorf("package.json: no %s to point at the kit", dep)
	}
	return bytes.Replace(b, []byte(dep), []byte(`"informer-host-as": "file:kit"`), 1), nil
}

var goDirective = regexp.MustCompile(`(?m)^go ([0-9.]+)\s*$`)

// abiGoVersion is the go directive of the abi module's go.mod: the
// version a project needs, and the one vendor/modules.txt records.
func abiGoVersion() (string, error) {
	b, err := fs.ReadFile(abi.Sources(), "go.mod")
	if err != nil {
		return "", err
	}
	m := goDirective.FindSubmatch(b)
	if m == nil {
		return "", fmt.Errorf("the embedded abi go.mod has no go directive")
	}
	return string(m[1]), nil
}

// writeModulesTxt writes the manifest that makes go build take the abi
// module from vendor/: the module at abi.ModuleVersion, required
// explicitly (go.mod.tmpl), and the packages the copies hold.
func writeModulesTxt(dir string, copies []copySpec) error {
	goVersion, err := abiGoVersion()
	if err != nil {
		return err
	}
	var b strings.Builder
	fmt.Fprintf(&b, "# %s %s\n## explicit; go %s\n", abiModule, abi.ModuleVersion, goVersion)
	for _, c := range copies {
		b.WriteString(strings.TrimPrefix(c.to, "vendor/") + "\n")
	}
	return writeNew(filepath.Join(dir, "vendor", "modules.txt"), []byte(b.String()), 0o644)
}
