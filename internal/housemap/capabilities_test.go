package housemap

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/informer-host/informer-host/abi"
	"github.com/informer-host/informer-host/internal/config"
)

// capabilityColumns is the header of README's table of where each
// capability lives; the test reads the cells by these positions.
var capabilityColumns = []string{"capability", "grant", "host functions", "engine", "host adapter", "backend",
	"Go kit", "Rust kit", "AssemblyScript kit", "C header"}

// kitImports are how each kit declares a host function it imports, by
// the file that declares them: the capability table's host functions
// must be declared in every kit.
var kitImports = []struct {
	kit, glob string
	decl      func(fn string) string
}{
	{"Go", "abi/kit/*_wasip1.go", func(fn string) string { return "//go:wasmimport " + abi.ImportModule + " " + fn + "\n" }},
	{"Rust", "abi/rust/src/raw.rs", func(fn string) string { return "pub fn " + fn + "(" }},
	{"AssemblyScript", "abi/assemblyscript/assembly/host.ts", func(fn string) string {
		return fmt.Sprintf("@external(%q, %q)", abi.ImportModule, fn)
	}},
	{"C", "abi/include/informer_host.h", func(fn string) string { return fmt.Sprintf("IH_IMPORT(%q)", fn) }},
}

// abiSection matches the ABI.md section a capability cell cites.
var abiSection = regexp.MustCompile(`§(\d+\.\d+)`)

// README's table of where each capability lives (ABI.md §16, §17) names,
// per capability, its grant, its host functions and the files and
// packages that implement it on both sides of the ABI. Each is checked:
// the grant is a config field, each host function is in the ABI's import
// table (the engine's host module is built from it), belongs to the
// capability and is declared by every kit, each file and package exists,
// and every capability the ABI has is in the table.
func TestCapabilityTable(t *testing.T) {
	lines := section(t, readFile(t, "README.md"), "### Where each capability lives")
	var header []string
	for _, l := range lines {
		if strings.HasPrefix(l, "|") {
			for _, c := range strings.Split(strings.Trim(l, "|"), "|") {
				header = append(header, strings.TrimSpace(c))
			}
			break
		}
	}
	if !slices.Equal(header, capabilityColumns) {
		t.Fatalf("README.md, Where each capability lives: the table's columns are %q, want %q", header, capabilityColumns)
	}
	rows := table(lines)
	abiDoc := readFile(t, "abi/ABI.md")
	imports := map[string]bool{}
	for _, f := range abi.Imports() {
		imports[f.Name] = true
	}
	kitSources := map[string]string{}
	for _, k := range kitImports {
		files, err := filepath.Glob(filepath.Join(root, k.glob))
		if err != nil || len(files) == 0 {
			t.Fatalf("%s kit: no %s", k.kit, k.glob)
		}
		var all strings.Builder
		for _, f := range files {
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			all.Write(b)
		}
		kitSources[k.kit] = all.String()
	}

	seen := map[string]bool{}
	for _, r := range rows {
		if len(r) != len(capabilityColumns) {
			t.Errorf("README.md, Where each capability lives: row %q has %d cells, want %d", r, len(r), len(capabilityColumns))
			continue
		}
		spans := codeSpans(r[0])
		if len(spans) != 1 {
			t.Errorf("capability cell %q: want the capability's name in backquotes", r[0])
			continue
		}
		capability := spans[0]
		seen[capability] = true
		t.Run(capability, func(t *testing.T) {
			if m := abiSection.FindStringSubmatch(r[0]); m == nil {
				t.Errorf("capability cell %q: cite its ABI.md section (§N.M)", r[0])
			} else if !strings.Contains(abiDoc, "\n### "+m[1]+" ") {
				t.Errorf("ABI.md has no section %s, which the table cites for %s", m[1], capability)
			}
			for _, g := range codeSpans(r[1]) {
				if err := configKey(reflect.TypeFor[config.PluginSettings](), g); err != nil {
					t.Errorf("grant %s: not a key of a module's settings in config.yaml: %v", g, err)
				}
			}
			fns := codeSpans(r[2])
			for _, fn := range fns {
				switch {
				case !imports[fn]:
					t.Errorf("host function %s is not in the ABI's import table (abi.Imports)", fn)
				case abi.CapabilityOf(fn) != capability:
					t.Errorf("host function %s belongs to capability %q (abi.CapabilityOf), not %q", fn, abi.CapabilityOf(fn), capability)
				}
				for _, k := range kitImports {
					if !strings.Contains(kitSources[k.kit], k.decl(fn)) {
						t.Errorf("host function %s: the %s kit does not declare it in %s (%s)", fn, k.kit, k.glob, strings.TrimSpace(k.decl(fn)))
					}
				}
			}
			for name := range imports {
				if abi.CapabilityOf(name) == capability && !slices.Contains(fns, name) {
					t.Errorf("host function %s of capability %s is missing from its row", name, capability)
				}
			}
			for i := 3; i < len(r); i++ {
				paths := codeSpans(r[i])
				if len(paths) == 0 {
					t.Errorf("%s: no %s named", capability, capabilityColumns[i])
				}
				for _, p := range paths {
					if !exists(p) {
						t.Errorf("%s: %s %s does not exist", capability, capabilityColumns[i], p)
					}
				}
			}
		})
	}
	for name := range imports {
		if c := abi.CapabilityOf(name); c != "" && !seen[c] {
			t.Errorf("capability %s (host function %s) has no row in README.md's Where each capability lives", c, name)
		}
	}
}

// configKey checks that the dotted path names a field of t by its YAML
// name, through nested structs and pointers.
func configKey(t reflect.Type, path string) error {
	for _, key := range strings.Split(path, ".") {
		for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice {
			t = t.Elem()
		}
		if t.Kind() != reflect.Struct {
			return fmt.Errorf("%s: %s is not a mapping", key, t)
		}
		f, ok := yamlField(t, key)
		if !ok {
			return fmt.Errorf("%s has no field %q", t, key)
		}
		t = f.Type
	}
	return nil
}

// yamlField finds the field of t whose YAML name is key, looking into
// inlined structs.
func yamlField(t reflect.Type, key string) (reflect.StructField, bool) {
	for i := range t.NumField() {
		f := t.Field(i)
		name, opts, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if strings.Contains(opts, "inline") {
			if g, ok := yamlField(f.Type, key); ok {
				return g, true
			}
			continue
		}
		if name == key {
			return f, true
		}
	}
	return reflect.StructField{}, false
}
