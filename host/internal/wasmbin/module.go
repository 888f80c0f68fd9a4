package wasmbin

import (
	"errors"
	"fmt"
	"strconv"

	"github.com/informer-host/informer-host/abi"
)

// The module reader: what the ABI check needs of a module (its types,
// imports, functions and exports), decoded before anything is compiled,
// so a refusal costs microseconds instead of a compile and lists every
// problem at once. It reads only the type, import, function and export
// sections; wazero validates the whole module when it compiles it.

// The external kinds of imports and exports.
const (
	ExternFunc   = 0
	ExternTable  = 1
	ExternMemory = 2
	ExternGlobal = 3
	ExternTag    = 4
)

// ExternName is the name of external kind k, as messages show it.
func ExternName(k byte) string {
	switch k {
	case ExternFunc:
		return "function"
	case ExternTable:
		return "table"
	case ExternMemory:
		return "memory"
	case ExternGlobal:
		return "global"
	case ExternTag:
		return "tag"
	}
	return "kind " + strconv.Itoa(int(k))
}

// Import is one entry of the import section.
type Import struct {
	Module, Name string
	Kind         byte
	TypeIdx      uint32 // for functions
}

// Export is one entry of the export section.
type Export struct {
	Name  string
	Kind  byte
	Index uint32
}

// Module is what Decode learns about a module.
type Module struct {
	Types    []abi.Signature
	Imports  []Import
	Funcs    []uint32 // type index of each defined function
	Exports  []Export
	HasStart bool // a start section: runs at instantiation
}

// FuncSig returns the signature of function index idx (imports first).
func (m *Module) FuncSig(idx uint32) (abi.Signature, bool) {
	var nImported uint32
	for _, im := range m.Imports {
		if im.Kind == ExternFunc {
			if nImported == idx {
				return m.TypeSig(im.TypeIdx)
			}
			nImported++
		}
	}
	i := idx - nImported
	if idx < nImported || uint64(i) >= uint64(len(m.Funcs)) {
		return abi.Signature{}, false
	}
	return m.TypeSig(m.Funcs[i])
}

// TypeSig returns the signature of type index t.
func (m *Module) TypeSig(t uint32) (abi.Signature, bool) {
	if uint64(t) >= uint64(len(m.Types)) {
		return abi.Signature{}, false
	}
	return m.Types[t], true
}

// Export returns the export named name.
func (m *Module) Export(name string) (Export, bool) {
	for _, e := range m.Exports {
		if e.Name == name {
			return e, true
		}
	}
	return Export{}, false
}

// Reader is a bounds-checked cursor over a wasm binary. Every read checks
// the remaining length, so malformed input yields an error (Err), never a
// panic; after the first error every read returns zero.
type Reader struct {
	b   []byte
	pos int
	err error
}

// NewReader returns a Reader at the start of b (a section's body, say).
func NewReader(b []byte) *Reader { return &Reader{b: b} }

// Err is the first error the reader met, or nil.
func (r *Reader) Err() error { return r.err }

func (r *Reader) fail(format string, args ...any) {
	if r.err == nil {
		r.err = fmt.Errorf("at byte %d: %s", r.pos, fmt.Sprintf(format, args...))
	}
}

// Byte reads one byte.
func (r *Reader) Byte() byte {
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

// U32 reads an unsigned LEB128 of at most 5 bytes.
func (r *Reader) U32() uint32 {
	v := r.u64(5)
	if v > 0xffffffff {
		r.fail("LEB128 value out of u32 range")
	}
	return uint32(v)
}

func (r *Reader) u64(maxBytes int) uint64 {
	var v uint64
	for i := 0; i < maxBytes; i++ {
		c := r.Byte()
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

// Bytes reads n bytes, which alias the reader's input.
func (r *Reader) Bytes(n uint32) []byte {
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

// Name reads a name: its length, then its bytes.
func (r *Reader) Name() string { return string(r.Bytes(r.U32())) }

func (r *Reader) valType() abi.ValType {
	t := r.Byte()
	switch t {
	case 0x7f, 0x7e, 0x7d, 0x7c, 0x7b, 0x70, 0x6f:
		return abi.ValType(t)
	}
	r.fail("unsupported value type 0x%02x", t)
	return 0
}

// Limits reads a table's or memory's limits (of any flags wazero knows),
// which the rewriter and the reader only skip.
func (r *Reader) Limits() {
	flags := r.Byte()
	if flags > 0x07 {
		r.fail("invalid limits flags 0x%02x", flags)
		return
	}
	r.u64(10) // min (u64 for memory64)
	if flags&1 != 0 {
		r.u64(10) // max
	}
}

// Decode decodes the sections of wasm that the ABI check needs. A non-nil
// error means the bytes are not a usable wasm module at all.
func Decode(wasm []byte) (*Module, error) {
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
	info := &Module{}
	r := &Reader{b: wasm, pos: 8}
	for r.pos < len(r.b) && r.err == nil {
		id := r.Byte()
		size := r.U32()
		body := r.Bytes(size)
		if r.err != nil {
			return nil, fmt.Errorf("truncated WebAssembly module: section %d (%d bytes) runs past the end of the file (%d bytes)", id, size, len(wasm))
		}
		s := NewReader(body)
		switch id {
		case 1: // type
			n := s.U32()
			for i := uint32(0); i < n && s.err == nil; i++ {
				if form := s.Byte(); form != 0x60 {
					s.fail("type %d: unsupported type form 0x%02x", i, form)
					break
				}
				var sig abi.Signature
				np := s.U32()
				for j := uint32(0); j < np && s.err == nil; j++ {
					sig.Params = append(sig.Params, s.valType())
				}
				nr := s.U32()
				for j := uint32(0); j < nr && s.err == nil; j++ {
					sig.Results = append(sig.Results, s.valType())
				}
				info.Types = append(info.Types, sig)
			}
		case 2: // import
			n := s.U32()
			for i := uint32(0); i < n && s.err == nil; i++ {
				im := Import{Module: s.Name(), Name: s.Name(), Kind: s.Byte()}
				switch im.Kind {
				case ExternFunc:
					im.TypeIdx = s.U32()
				case ExternTable:
					s.Byte() // reference type
					s.Limits()
				case ExternMemory:
					s.Limits()
				case ExternGlobal:
					s.valType()
					s.Byte() // mutability
				case ExternTag:
					s.Byte() // attribute
					s.U32()  // type index
				default:
					s.fail("import %d: unknown kind 0x%02x", i, im.Kind)
				}
				info.Imports = append(info.Imports, im)
			}
		case 3: // function
			n := s.U32()
			for i := uint32(0); i < n && s.err == nil; i++ {
				info.Funcs = append(info.Funcs, s.U32())
			}
		case 7: // export
			n := s.U32()
			for i := uint32(0); i < n && s.err == nil; i++ {
				info.Exports = append(info.Exports, Export{Name: s.Name(), Kind: s.Byte(), Index: s.U32()})
			}
		case 8:
			info.HasStart = true
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
