package wasmbin

import (
	"bytes"
	"context"
	"testing"

	"github.com/tetratelabs/wazero"

	"github.com/informer-host/informer-host/internal/testenv"
)

// TestMergeData: merged modules leave memory exactly as the originals
// do, and modules MergeData may not touch come back unchanged.
func TestMergeData(t *testing.T) {
	for _, tc := range []struct {
		name, wat string
		merged    bool // want fewer segments
		failing   bool // instantiation fails (out of bounds), both ways
	}{
		{"gaps", `(module (memory (export "memory") 1)
			(data (i32.const 0) "ab") (data (i32.const 4) "cd") (data (i32.const 400) "ef") (data (i32.const 402) "gh"))`, true, false},
		{"gap written by an earlier segment", `(module (memory (export "memory") 1)
			(data (i32.const 10) "XY") (data (i32.const 0) "a") (data (i32.const 20) "b"))`, false, false},
		{"later segment overwrites", `(module (memory (export "memory") 1)
			(data (i32.const 0) "aaaa") (data (i32.const 6) "bb") (data (i32.const 2) "ZZ"))`, true, false},
		{"passive", `(module (memory (export "memory") 1)
			(data (i32.const 0) "ab") (data "cd") (data (i32.const 4) "ef"))`, false, false},
		{"data count", `(module (memory (export "memory") 1)
			(data (i32.const 0) "ab") (data (i32.const 4) "ef")
			(func (export "f") (data.drop 0)))`, false, false},
		{"out of bounds", `(module (memory (export "memory") 1)
			(data (i32.const 65530) "ab") (data (i32.const 65534) "cdef"))`, true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			orig := testenv.WATText(t, tc.wat)
			m := MergeData(orig)
			if changed := !bytes.Equal(m, orig); changed != tc.merged {
				t.Fatalf("changed = %v, want %v", changed, tc.merged)
			}
			a, errA := memoryAfterInstantiation(t, orig)
			b, errB := memoryAfterInstantiation(t, m)
			if (errA != nil) != tc.failing || (errB != nil) != tc.failing {
				t.Fatalf("instantiation errors: original %v, merged %v; want failing=%v", errA, errB, tc.failing)
			}
			if !bytes.Equal(a, b) {
				t.Errorf("memory differs after merging:\n original %q\n merged   %q", trimZeros(a), trimZeros(b))
			}
		})
	}
}

func memoryAfterInstantiation(t *testing.T, wasm []byte) ([]byte, error) {
	ctx := context.Background()
	rt := wazero.NewRuntime(ctx)
	defer rt.Close(ctx)
	mod, err := rt.InstantiateWithConfig(ctx, wasm, wazero.NewModuleConfig().WithName(""))
	if err != nil {
		return nil, err
	}
	b, _ := mod.Memory().Read(0, mod.Memory().Size())
	return bytes.Clone(b), nil
}

func trimZeros(b []byte) []byte { return bytes.TrimRight(b, "\x00") }
