package engine

import (
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/informer-host/informer-host/abi"
)

// This file checks a module against ABI v1 before anything is compiled: a
// refusal costs a few microseconds instead of a compile (seconds for a Go
// plugin), and it lists every problem at once rather than the first one
// wazero would trip over. It reads only the type, import, function and
// export sections; wazero validates the whole module when it compiles it.

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

// wasm external kinds.
const (
	externFunc   = 0
	externTable  = 1
	externMemory = 2
	externGlobal = 3
	externTag    = 4
)

func externName(k byte) string {
	switch k {
	case externFunc:
		return "function"
	case externTable:
		return "table"
	case externMemory:
		return "memory"
	case externGlobal:
		return "global"
	case externTag:
		return "tag"
	}
	return "kind " + strconv.Itoa(int(k))
}

type wasmImport struct {
	module, name string
	kind         byte
	typeIdx      uint32 // for functions
}

type wasmExport struct {
	name  string
	kind  byte
	index uint32
}

// moduleInfo is what inspect learns about a module.
type moduleInfo struct {
	types    []abi.Signature
	imports  []wasmImport
	funcs    []uint32 // type index of each defined function
	exports  []wasmExport
	hasStart bool // a start section: runs at instantiation
}

// funcSig returns the signature of function index idx (imports first).
func (m *moduleInfo) funcSig(idx uint32) (abi.Signature, bool) {
	var nImported uint32
	for _, im := range m.imports {
		if im.kind == externFunc {
			if nImported == idx {
				return m.typeSig(im.typeIdx)
			}
			nImported++
		}
	}
	i := idx - nImported
	if idx < nImported || uint64(i) >= uint64(len(m.funcs)) {
		return abi.Signature{}, false
	}
	return m.typeSig(m.funcs[i])
}

func (m *moduleInfo) typeSig(t uint32) (abi.Signature, bool) {
	if uint64(t) >= uint64(len(m.types)) {
		return abi.Signature{}, false
	}
	return m.types[t], true
}

func (m *moduleInfo) export(name string) (wasmExport, bool) {
	for _, e := range m.exports {
		if e.name == name {
			return e, true
		}
	}
	return wasmExport{}, false
}

// reader is a bounds-checked cursor over a wasm binary. Every read checks
// the remaining length, so malformed input yields an error, never a panic.
type reader struct {
	b   []byte
	pos int
	err error
}

func (r *reader) fail(format string, args ...any) {
	if r.err == nil {
		r.err = fmt.Errorf("at byte %d: %s", r.pos, fmt.Sprintf(format, args...))
	}
}

func (r *reader) byte() byte {
	if r.err != nil {
		return 0
	}
	if r.pos >= len(r.b) {
		r.fail("unexpected end of section")
		return 0
	}
	c := r.b[r.pos]
	r.pos++
	return c
}

// u32 reads an unsigned LEB128 of at most 5 bytes.
func (r *reader) u32() uint32 {
	v := r.u64(5)
	if v > 0xffffffff {
		r.fail("LEB128 value out of u32 range")
	}
	return uint32(v)
}

func (r *reader) u64(maxBytes int) uint64 {
	var v uint64
	for i := 0; i < maxBytes; i++ {
		c := r.byte()
		if r.err != nil {
			return 0
		}
		v |= uint64(c&0x7f) << (7 * i)
		if c&0x80 == 0 {
			return v
		}
	}
	r.fail("LEB128 too long")
	return 0
}

func (r *reader) bytes(n uint32) []byte {
	if r.err != nil {
		return nil
	}
	if uint64(n) > uint64(len(r.b)-r.pos) {
		r.fail("length %d runs past the end", n)
		return nil
	}
	s := r.b[r.pos : r.pos+int(n)]
	r.pos += int(n)
	return s
}

func (r *reader) name() string { return string(r.bytes(r.u32())) }

func (r *reader) valType() abi.ValType {
	t := r.byte()
	switch t {
	case 0x7f, 0x7e, 0x7d, 0x7c, 0x7b, 0x70, 0x6f:
		return abi.ValType(t)
	}
	r.fail("unsupported value type 0x%02x", t)
	return 0
}

func (r *reader) limits() {
	flags := r.byte()
	if flags > 0x07 {
		r.fail("invalid limits flags 0x%02x", flags)
		return
	}
	r.u64(10) // min (u64 for memory64)
	if flags&1 != 0 {
		r.u64(10) // max
	}
}

// inspect decodes the sections of wasm that the ABI check needs. A non-nil
// error means the bytes are not a usable wasm module at all.
func inspect(wasm []byte) (*moduleInfo, error) {
	if len(wasm) < 8 {
		if len(wasm) >= 4 && string(wasm[:4]) == "\x00asm" {
			return nil, errors.New("truncated WebAssembly module: no version")
		}
		return nil, fmt.Errorf("not a WebAssembly module (%d bytes, no \\0asm magic)", len(wasm))
	}
	if string(wasm[:4]) != "\x00asm" {
		return nil, errors.New("not a WebAssembly module (no \\0asm magic number)")
	}
	if v := uint32(wasm[4]) | uint32(wasm[5])<<8 | uint32(wasm[6])<<16 | uint32(wasm[7])<<24; v != 1 {
		if v&0xffff == 0x0d {
			return nil, errors.New("a WebAssembly component, not a core module: the ABI is defined for core modules")
		}
		return nil, fmt.Errorf("unsupported WebAssembly binary version %d", v)
	}
	info := &moduleInfo{}
	r := &reader{b: wasm, pos: 8}
	for r.pos < len(r.b) && r.err == nil {
		id := r.byte()
		size := r.u32()
		body := r.bytes(size)
		if r.err != nil {
			return nil, fmt.Errorf("truncated WebAssembly module: section %d (%d bytes) runs past the end of the file (%d bytes)", id, size, len(wasm))
		}
		s := &reader{b: body}
		switch id {
		case 1: // type
			n := s.u32()
			for i := uint32(0); i < n && s.err == nil; i++ {
				if form := s.byte(); form != 0x60 {
					s.fail("type %d: unsupported type form 0x%02x", i, form)
					break
				}
				var sig abi.Signature
				np := s.u32()
				for j := uint32(0); j < np && s.err == nil; j++ {
					sig.Params = append(sig.Params, s.valType())
				}
				nr := s.u32()
				for j := uint32(0); j < nr && s.err == nil; j++ {
					sig.Results = append(sig.Results, s.valType())
				}
				info.types = append(info.types, sig)
			}
		case 2: // import
			n := s.u32()
			for i := uint32(0); i < n && s.err == nil; i++ {
				im := wasmImport{module: s.name(), name: s.name(), kind: s.byte()}
				switch im.kind {
				case externFunc:
					im.typeIdx = s.u32()
				case externTable:
					s.byte() // reference type
					s.limits()
				case externMemory:
					s.limits()
				case externGlobal:
					s.valType()
					s.byte() // mutability
				case externTag:
					s.byte() // attribute
					s.u32()  // type index
				default:
					s.fail("import %d: unknown kind 0x%02x", i, im.kind)
				}
				info.imports = append(info.imports, im)
			}
		case 3: // function
			n := s.u32()
			for i := uint32(0); i < n && s.err == nil; i++ {
				info.funcs = append(info.funcs, s.u32())
			}
		case 7: // export
			n := s.u32()
			for i := uint32(0); i < n && s.err == nil; i++ {
				info.exports = append(info.exports, wasmExport{name: s.name(), kind: s.byte(), index: s.u32()})
			}
		case 8:
			info.hasStart = true
		}
		if s.err != nil {
			return nil, fmt.Errorf("malformed WebAssembly module: section %d: %w", id, s.err)
		}
	}
	if r.err != nil {
		return nil, fmt.Errorf("malformed WebAssembly module: %w", r.err)
	}
	return info, nil
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
func checkABI(info *moduleInfo, wasi map[string]abi.Signature) (problems, warnings []string) {
	sigOf := func(idx uint32) string {
		if s, ok := info.funcSig(idx); ok {
			return s.String()
		}
		return "(invalid type)"
	}

	// Versions first: a module written for another ABI version fails every
	// other check too, and the version is what its author needs to know.
	otherVersions := map[int][]string{}
	for _, im := range info.imports {
		if n, ok := versionSuffix(im.module, abi.ImportModulePrefix); ok && n != abi.Version {
			otherVersions[n] = appendOnce(otherVersions[n], fmt.Sprintf("imports module %q", im.module))
		}
	}
	_, hasMarker := info.export(abi.MarkerExport)
	for _, ex := range info.exports {
		if n, ok := versionSuffix(ex.name, abi.MarkerExportPrefix); ok && n != abi.Version && !hasMarker {
			otherVersions[n] = appendOnce(otherVersions[n], fmt.Sprintf("exports %s", ex.name))
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
	if _, ok := info.export(abi.ExportStart); ok {
		problems = append(problems, fmt.Sprintf("exports %s, so it is a WASI command; informer-host loads reactors "+
			"and plain modules (clang: -mexec-model=reactor; Go: -buildmode=c-shared)", abi.ExportStart))
	}
	if ex, ok := info.export(abi.ExportMemory); !ok {
		problems = append(problems, fmt.Sprintf("missing required export %q (its linear memory)", abi.ExportMemory))
	} else if ex.kind != externMemory {
		problems = append(problems, fmt.Sprintf("export %q is a %s, want a memory", abi.ExportMemory, externName(ex.kind)))
	}
	for _, f := range abi.Exports() {
		ex, ok := info.export(f.Name)
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
		case ex.kind != externFunc:
			problems = append(problems, fmt.Sprintf("export %s is a %s, want a function %s", f.Name, externName(ex.kind), f.Signature))
		default:
			if got, ok := info.funcSig(ex.index); !ok || !got.Equal(f.Signature) {
				problems = append(problems, fmt.Sprintf("export %s has signature %s, want %s", f.Name, sigOf(ex.index), f.Signature))
			}
		}
	}
	known := map[string]bool{}
	for _, f := range abi.Exports() {
		known[f.Name] = true
	}
	for _, ex := range info.exports {
		if strings.HasPrefix(ex.name, abi.ExportPrefix) && !known[ex.name] {
			warnings = append(warnings, fmt.Sprintf("export %s has the reserved prefix %q but is not part of ABI v%d; it is ignored",
				ex.name, abi.ExportPrefix, abi.Version))
		}
	}

	// Imports.
	hostFns := map[string]abi.Signature{}
	for _, f := range abi.Imports() {
		hostFns[f.Name] = f.Signature
	}
	for _, im := range info.imports {
		if im.kind != externFunc {
			problems = append(problems, fmt.Sprintf("imports %s %q.%q; the host provides only functions "+
				"(a plugin defines and exports its own memory)", externName(im.kind), im.module, im.name))
			continue
		}
		got, ok := info.typeSig(im.typeIdx)
		gotS := "(invalid type)"
		if ok {
			gotS = got.String()
		}
		switch {
		case im.module == abi.ImportModule:
			want, ok := hostFns[im.name]
			if !ok {
				problems = append(problems, fmt.Sprintf("imports %q.%q %s, which ABI v%d does not define", im.module, im.name, gotS, abi.Version))
			} else if !got.Equal(want) {
				problems = append(problems, fmt.Sprintf("imports %q.%q with signature %s, want %s", im.module, im.name, gotS, want))
			}
		case im.module == wasiModule:
			want, ok := wasi[im.name]
			if !ok {
				problems = append(problems, fmt.Sprintf("imports %q.%q %s, which this host does not provide", im.module, im.name, gotS))
			} else if !got.Equal(want) {
				problems = append(problems, fmt.Sprintf("imports %q.%q with signature %s, want %s", im.module, im.name, gotS, want))
			}
		default:
			if n, ok := versionSuffix(im.module, abi.ImportModulePrefix); ok && n != abi.Version {
				continue // reported above, once per version
			}
			p := fmt.Sprintf("imports %q.%q %s, which this host does not provide (it provides modules %q and %q)",
				im.module, im.name, gotS, abi.ImportModule, wasiModule)
			if im.module == "env" && im.name == "abort" {
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
