package engine

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/informer-host/informer-host/internal/testenv"
)

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
		m, err := e.Load(context.Background(), "segments.wasm", testenv.WATText(t, wat.String()), lim)
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
