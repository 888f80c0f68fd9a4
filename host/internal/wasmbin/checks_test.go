package wasmbin

import (
	"context"
	"slices"
	"testing"

	"github.com/tetratelabs/wazero"

	"github.com/informer-host/informer-host/internal/testenv"
)

// Unknown opcodes and malformed bodies are refused, never misread.
func TestInstrumentRefusesUnknownCode(t *testing.T) {
	for name, body := range map[string][]byte{
		"atomics":       {0x00, 0xfe, 0x00, 0x0b},
		"gc":            {0x00, 0xfb, 0x00, 0x0b},
		"truncated":     {0x00, 0x41},
		"bad local":     {0x01, 0x01, 0x55, 0x0b},
		"typed ref":     {0x00, 0xd0, 0x63, 0x0b},
		"negative type": {0x00, 0x02, 0x7a, 0x0b},
	} {
		if _, err := scanBody(body, nil); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	at, err := scanBody([]byte{0x00, 0x03, 0x40, 0x0c, 0x00, 0x0b, 0x0b}, nil)
	if want := []edit{{1, 1, editTick}, {3, 3, editTick}}; err != nil || !slices.Equal(at, want) {
		t.Errorf("loop: %v %v, want %v", at, err, want)
	}
}

// Modules without functions of their own (with data or not) still take
// the checks: the helpers get a code section of their own, in its place.
func TestInstrumentModulesWithoutCode(t *testing.T) {
	rt := wazero.NewRuntime(context.Background())
	defer rt.Close(context.Background())
	for _, src := range []string{
		`(module (memory 1))`,
		`(module (memory 1) (data (i32.const 0) "abc"))`,
		`(module (import "m" "f" (func)) (memory 1) (data (i32.const 0) "abc"))`,
	} {
		rw, err := Instrument(testenv.WATText(t, src))
		if err != nil {
			t.Errorf("%s: %v", src, err)
			continue
		}
		if _, err := rt.CompileModule(context.Background(), rw.Wasm); err != nil {
			t.Errorf("%s: the rewritten module does not compile: %v", src, err)
		}
	}
}
