package engine

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/informer-host/informer-host/abi"
	"github.com/informer-host/informer-host/host/internal/wasmbin"
)

// This file checks a module against ABI v1 before anything is compiled: a
// refusal costs a few microseconds instead of a compile (seconds for a Go
// plugin), and it lists every problem at once rather than the first one
// wazero would trip over. It judges what wasmbin.Decode read of the type,
// import, function and export sections; wazero validates the whole module
// when it compiles it.

// LoadError is returned by Load for a module that is not an ABI v1 plugin.
// Problems lists everything that is wrong, in a stable order.
type LoadError struct {
	Plugin   string
	Problems []string
}

func (e *LoadError) Error() string {
	if len(e.Problems) == 1 {
		return fmt.Sprintf("plugin %q: %s", e.Plugin, e.Problems[0])
	}
	var b strings.Builder
	fmt.Fprintf(&b, "plugin %q: not an informer-host ABI v%d plugin (%d problems):", e.Plugin, abi.Version, len(e.Problems))
	for _, p := range e.Problems {
		b.WriteString("\n  - ")
		b.WriteString(p)
	}
	return b.String()
}

// versionSuffix returns N if s is prefix followed by a decimal number.
func versionSuffix(s, prefix string) (int, bool) {
	if !strings.HasPrefix(s, prefix) {
		return 0, false
	}
	n, err := strconv.Atoi(s[len(prefix):])
	if err != nil || n < 0 || strconv.Itoa(n) != s[len(prefix):] {
		return 0, false
	}
	return n, true
}

// checkABI returns every way info falls short of ABI v1. wasi maps the
// WASI functions the host provides to their signatures.
func checkABI(info *wasmbin.Module, wasi map[string]abi.Signature) (problems, warnings []string) {
	sigOf := func(idx uint32) string {
		if s, ok := info.FuncSig(idx); ok {
			return s.String()
		}
		return "(invalid type)"
	}

	// Versions first: a module written for another ABI version fails every
	// other check too, and the version is what its author needs to know.
	otherVersions := map[int][]string{}
	for _, im := range info.Imports {
		if n, ok := versionSuffix(im.Module, abi.ImportModulePrefix); ok && n != abi.Version {
			otherVersions[n] = appendOnce(otherVersions[n], fmt.Sprintf("imports module %q", im.Module))
		}
	}
	_, hasMarker := info.Export(abi.MarkerExport)
	for _, ex := range info.Exports {
		if n, ok := versionSuffix(ex.Name, abi.MarkerExportPrefix); ok && n != abi.Version && !hasMarker {
			otherVersions[n] = appendOnce(otherVersions[n], fmt.Sprintf("exports %s", ex.Name))
		}
	}
	versions := make([]int, 0, len(otherVersions))
	for n := range otherVersions {
		versions = append(versions, n)
	}
	sort.Ints(versions)
	for _, n := range versions {
		problems = append(problems, fmt.Sprintf("speaks ABI v%d (%s); this host speaks v%d",
			n, strings.Join(otherVersions[n], ", "), abi.Version))
	}

	// Exports.
	if _, ok := info.Export(abi.ExportStart); ok {
		problems = append(problems, fmt.Sprintf("exports %s, so it is a WASI command; informer-host loads reactors "+
			"and plain modules (clang: -mexec-model=reactor; Go: -buildmode=c-shared)", abi.ExportStart))
	}
	if ex, ok := info.Export(abi.ExportMemory); !ok {
		problems = append(problems, fmt.Sprintf("missing required export %q (its linear memory)", abi.ExportMemory))
	} else if ex.Kind != wasmbin.ExternMemory {
		problems = append(problems, fmt.Sprintf("export %q is a %s, want a memory", abi.ExportMemory, wasmbin.ExternName(ex.Kind)))
	}
	for _, f := range abi.Exports() {
		ex, ok := info.Export(f.Name)
		switch {
		case !ok && f.Required:
			if f.Name == abi.MarkerExport && len(versions) > 0 {
				continue // already reported as a version mismatch
			}
			what := ""
			if f.Name == abi.MarkerExport {
				what = ", the ABI v1 marker"
			}
			problems = append(problems, fmt.Sprintf("missing required export %s %s%s", f.Name, f.Signature, what))
		case !ok:
		case ex.Kind != wasmbin.ExternFunc:
			problems = append(problems, fmt.Sprintf("export %s is a %s, want a function %s", f.Name, wasmbin.ExternName(ex.Kind), f.Signature))
		default:
			if got, ok := info.FuncSig(ex.Index); !ok || !got.Equal(f.Signature) {
				problems = append(problems, fmt.Sprintf("export %s has signature %s, want %s", f.Name, sigOf(ex.Index), f.Signature))
			}
		}
	}
	known := map[string]bool{}
	for _, f := range abi.Exports() {
		known[f.Name] = true
	}
	for _, ex := range info.Exports {
		if strings.HasPrefix(ex.Name, abi.ExportPrefix) && !known[ex.Name] {
			warnings = append(warnings, fmt.Sprintf("export %s has the reserved prefix %q but is not part of ABI v%d; it is ignored",
				ex.Name, abi.ExportPrefix, abi.Version))
		}
	}

	// Imports.
	hostFns := map[string]abi.Signature{}
	for _, f := range abi.Imports() {
		hostFns[f.Name] = f.Signature
	}
	for _, im := range info.Imports {
		if im.Kind != wasmbin.ExternFunc {
			problems = append(problems, fmt.Sprintf("imports %s %q.%q; the host provides only functions "+
				"(a plugin defines and exports its own memory)", wasmbin.ExternName(im.Kind), im.Module, im.Name))
			continue
		}
		got, ok := info.TypeSig(im.TypeIdx)
		gotS := "(invalid type)"
		if ok {
			gotS = got.String()
		}
		switch {
		case im.Module == abi.ImportModule:
			want, ok := hostFns[im.Name]
			if !ok {
				problems = append(problems, fmt.Sprintf("imports %q.%q %s, which ABI v%d does not define", im.Module, im.Name, gotS, abi.Version))
			} else if !got.Equal(want) {
				problems = append(problems, fmt.Sprintf("imports %q.%q with signature %s, want %s", im.Module, im.Name, gotS, want))
			}
		case im.Module == wasiModule:
			want, ok := wasi[im.Name]
			if !ok {
				problems = append(problems, fmt.Sprintf("imports %q.%q %s, which this host does not provide", im.Module, im.Name, gotS))
			} else if !got.Equal(want) {
				problems = append(problems, fmt.Sprintf("imports %q.%q with signature %s, want %s", im.Module, im.Name, gotS, want))
			}
		default:
			if n, ok := versionSuffix(im.Module, abi.ImportModulePrefix); ok && n != abi.Version {
				continue // reported above, once per version
			}
			p := fmt.Sprintf("imports %q.%q %s, which this host does not provide (it provides modules %q and %q)",
				im.Module, im.Name, gotS, abi.ImportModule, wasiModule)
			if im.Module == "env" && im.Name == "abort" {
				p += "; AssemblyScript emits this import by default: build with --use abort= (abort traps) or --use abort=<file>/<function> (your own)"
			}
			problems = append(problems, p)
		}
	}
	return problems, warnings
}

func appendOnce(s []string, v string) []string {
	for _, x := range s {
		if x == v {
			return s
		}
	}
	return append(s, v)
}

const wasiModule = "wasi_snapshot_preview1"
