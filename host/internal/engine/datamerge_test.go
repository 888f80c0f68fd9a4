package engine

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/tetratelabs/wazero"
)

// TestMergeData: merged modules leave memory exactly as the originals
// do, and modules mergeData may not touch come back unchanged.
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
			orig := assemble(t, tc.wat)
			m := mergeData(orig)
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

// TestManyDataSegmentsCostNothingPerInstance: a module with Go's layout of
// data (thousands of small segments) costs each instance no Go heap for
// them. wazero keeps a slice header per segment per instance: 24 bytes x
// 20,000 segments here, 944 KB for each instance of a small Go plugin.
func TestManyDataSegmentsCostNothingPerInstance(t *testing.T) {
	var wat strings.Builder
	wat.WriteString(`(module (memory (export "memory") 16) (func (export "informer_host_abi_v1"))
		(func (export "ih_handle") (param i32) (result i32) (i32.const 0))`)
	for i := 0; i < 20000; i++ {
		fmt.Fprintf(&wat, ` (data (i32.const %d) "seg%05d")`, 1024+i*20, i)
	}
	wat.WriteString(")")
	e := newEngine(t, Options{})
	for _, lim := range []Limits{{MemoryPages: 64}, {MemoryPages: 64, CallTimeout: generous}} {
		m, err := e.Load(context.Background(), "segments.wasm", assemble(t, wat.String()), lim)
		if err != nil {
			t.Fatal(err)
		}
		const n = 10
		before := liveHeap()
		for k := 0; k < n; k++ {
			i := instantiate(t, m, InstanceOptions{})
			if b, _ := i.mod.Memory().Read(1024+19999*20, 8); string(b) != "seg19999" {
				t.Fatalf("last segment reads %q", b)
			}
		}
		if per := (liveHeap() - before) / n; per > 64<<10 {
			t.Errorf("deadline %v: each instance of a module of 20,000 data segments holds %d KiB of Go heap; want the segments merged", lim.CallTimeout, per>>10)
		}
	}
}
