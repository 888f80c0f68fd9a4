package wasmbin

import (
	"strings"
	"testing"

	"github.com/informer-host/informer-host/abi"
	"github.com/informer-host/informer-host/internal/testenv"
)

// Decode reads imports, exports and signatures as the ABI check needs
// them, and tells what is not a module at all from a malformed one.
func TestDecode(t *testing.T) {
	wasm := testenv.WATText(t, `(module
  (import "informer_host_v1" "log" (func $log (param i32 i32 i32) (result i32)))
  (memory (export "memory") 1)
  (func (export "ih_handle") (param i32) (result i32) (i32.const 0))
  (func $init)
  (start $init))`)
	m, err := Decode(wasm)
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Imports) != 1 || m.Imports[0].Module != "informer_host_v1" || m.Imports[0].Name != "log" || m.Imports[0].Kind != ExternFunc {
		t.Fatalf("imports %+v", m.Imports)
	}
	ex, ok := m.Export("ih_handle")
	if !ok || ex.Kind != ExternFunc {
		t.Fatalf("ih_handle: %+v %v", ex, ok)
	}
	want := abi.Signature{Params: []abi.ValType{abi.ValType(0x7f)}, Results: []abi.ValType{abi.ValType(0x7f)}}
	if sig, ok := m.FuncSig(ex.Index); !ok || !sig.Equal(want) {
		t.Fatalf("ih_handle signature %v %v, want %v", sig, ok, want)
	}
	if mem, _ := m.Export("memory"); mem.Kind != ExternMemory || !m.HasStart {
		t.Fatalf("memory export %+v, start %v", mem, m.HasStart)
	}

	for _, tc := range []struct {
		name string
		wasm []byte
		want string
	}{
		{"empty", nil, "not a WebAssembly module (0 bytes"},
		{"no magic", []byte("\x7fELF\x02\x01\x01\x00"), "no \\0asm magic number"},
		{"no version", []byte("\x00asm"), "truncated WebAssembly module: no version"},
		{"component", []byte("\x00asm\x0d\x00\x01\x00"), "a WebAssembly component"},
		{"truncated section", wasm[:len(wasm)-3], "truncated WebAssembly module: section"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := Decode(tc.wasm); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want %q", err, tc.want)
			}
		})
	}
	// Every cut of a module is an error or a module, never a panic.
	for n := range len(wasm) {
		_, _ = Decode(wasm[:n])
		_, _ = Instrument(wasm[:n])
		_ = MergeData(wasm[:n])
	}
}
