package engine

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"runtime/metrics"
	"strings"
	"testing"
	"time"

	"github.com/tetratelabs/wazero"

	"github.com/informer-host/informer-host/host/internal/wasmbin"
	"github.com/informer-host/informer-host/internal/testenv"
)

// Every conformance fixture and example plugin takes injected termination
// checks, and the rewritten module compiles.
func TestInstrumentCompiles(t *testing.T) {
	paths, err := filepath.Glob(filepath.Join(fixtureDir, "*.wasm"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("no fixtures: %v", err)
	}
	rt := wazero.NewRuntime(context.Background())
	defer rt.Close(context.Background())
	check := func(name string, wasm []byte) {
		rw, err := wasmbin.Instrument(wasm)
		if err != nil {
			t.Errorf("%s: %v", name, err)
			return
		}
		if _, err := rt.CompileModule(context.Background(), rw.Wasm); err != nil {
			t.Errorf("%s: the rewritten module (%d loops) does not compile: %v", name, rw.Loops, err)
		}
	}
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		check(filepath.Base(p), b)
	}
	if !testing.Short() {
		for _, name := range []string{"pod-logger", "counter-c", "minimal-wat", "creactor"} {
			check(name, examples.get(t, name))
		}
	}
}

// A module using every kind of immediate the decoder knows: block types
// by index, br_table, select with types, call_indirect, bulk memory, table
// and reference instructions, SIMD, and loops inside all of them. With
// injected checks it computes what it computes without, and its loop is
// still stopped by the deadline.
func TestInstrumentDecodesEverything(t *testing.T) {
	wasm := testenv.WATText(t, `
(module
  (type $pair (func (param i32) (result i32 i32)))
  (memory (export "memory") 1)
  (table 2 funcref)
  (elem (i32.const 0) $double $spin)
  (data $d "\01\02\03\04")
  (global $g (mut i64) (i64.const -9000000000))
  (func (export "informer_host_abi_v1"))
  (func $double (param i32) (result i32) (i32.mul (local.get 0) (i32.const 2)))
  (func $spin (param i32) (result i32) (loop $l (br $l)) (i32.const 0))
  (func $split (type $pair) (local.get 0) (i32.const 1))
  (func (export "ih_handle") (param $n i32) (result i32)
    (local $i i32) (local $acc i32) (local $v v128) (local $r funcref)
    (if (i32.eq (local.get $n) (i32.const -1))
      (then (return (call_indirect (param i32) (result i32) (i32.const 0) (i32.const 1)))))
    (memory.init $d (i32.const 100) (i32.const 0) (i32.const 4))
    (memory.copy (i32.const 200) (i32.const 100) (i32.const 4))
    (memory.fill (i32.const 300) (i32.const 7) (i32.const 4))
    (local.set $r (ref.func $double))
    (drop (ref.is_null (local.get $r)))
    (drop (table.get 0 (i32.const 0)))
    (drop (table.size 0))
    (local.set $v (v128.const i32x4 1 2 3 4))
    (local.set $v (i8x16.shuffle 0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 (local.get $v) (local.get $v)))
    (local.set $v (i32x4.replace_lane 2 (local.get $v) (i32.const 10)))
    (v128.store offset=400 (i32.const 0) (local.get $v))
    (local.set $v (v128.load32_lane 1 (i32.const 100) (local.get $v)))
    (global.set $g (i64.add (global.get $g) (i64.const 1)))
    (loop $outer
      (block $b (result i32 i32)
        (call $split (local.get $i))
        (br_table $b $b (i32.const 0)))
      (local.set $acc (i32.add (local.get $acc) (select (result i32) (i32.const 1) (i32.const 2) (i32.add))))
      (local.set $acc (i32.add (local.get $acc) (i32x4.extract_lane 2 (local.get $v))))
      (local.set $acc (i32.add (local.get $acc) (i32.load8_u offset=3 (i32.const 200))))
      (local.set $acc (i32.add (local.get $acc) (i32.trunc_sat_f32_s (f32.const 1.5))))
      (local.set $acc (i32.add (local.get $acc) (call_indirect (param i32) (result i32) (i32.const 1) (i32.const 0))))
      (local.set $i (i32.add (local.get $i) (i32.const 1)))
      (br_if $outer (i32.lt_u (local.get $i) (local.get $n))))
    (local.get $acc))
)`)
	rw, err := wasmbin.Instrument(wasm)
	if err != nil {
		t.Fatal(err)
	}
	if rw.Loops != 2 {
		t.Errorf("instrumented %d loops, want 2", rw.Loops)
	}
	results := map[bool]uint64{}
	for _, wazeroChecks := range []bool{false, true} {
		e := newEngine(t, Options{})
		e.wazeroChecks = wazeroChecks
		m, err := e.Load(context.Background(), "everything.wasm", wasm, Limits{CallTimeout: 200 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { m.Close(context.Background()) })
		if m.c.injected == wazeroChecks {
			t.Fatalf("wazeroChecks=%v: injected=%v", wazeroChecks, m.c.injected)
		}
		i := instantiate(t, m, InstanceOptions{})
		i.stack[0] = 5
		if err := i.call(i.handle); err != nil {
			t.Fatal(err)
		}
		results[wazeroChecks] = i.stack[0]
		i.stack[0] = uint64(0xffffffff) // -1: spin through call_indirect
		err = i.call(i.handle)
		var f *Failure
		if err == nil || !errors.As(i.failure(context.Background(), "ih_handle", err, true), &f) || f.Kind != KindTimeout {
			t.Errorf("wazeroChecks=%v: spin: %v, want a timeout", wazeroChecks, err)
		}
	}
	if results[false] != results[true] || results[false] == 0 {
		t.Errorf("results with injected checks %d, with wazero's %d", results[false], results[true])
	}
}

// A module that already exports the names the rewriter uses gets others,
// and its deadline holds.
func TestInstrumentTakenExportNames(t *testing.T) {
	wasm := testenv.WATText(t, `
(module
  (memory (export "memory") 1)
  (global (export "informer_host.stop") i32 (i32.const 0))
  (func $start)
  (start $start)
  (func (export "informer_host.start"))
  (func (export "informer_host_abi_v1"))
  (func (export "ih_handle") (param i32) (result i32) (loop $l (br $l)) (i32.const 0)))`)
	rw, err := wasmbin.Instrument(wasm)
	if err != nil {
		t.Fatal(err)
	}
	if rw.Stop == wasmbin.StopExport || rw.Start == wasmbin.StartExport || rw.Start == "" {
		t.Errorf("export names %q, %q", rw.Stop, rw.Start)
	}
	e := newEngine(t, Options{})
	m, err := e.Load(context.Background(), "taken.wasm", wasm, Limits{CallTimeout: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close(context.Background())
	if !m.c.injected {
		t.Fatal("no injected checks")
	}
	i := instantiate(t, m, InstanceOptions{})
	_, err = i.Handle(context.Background(), addEvent(pod("ns", "p", "Running")))
	var f *Failure
	if !errors.As(err, &f) || f.Kind != KindTimeout {
		t.Errorf("Handle: %v, want a timeout", err)
	}
}

// With injected checks, instantiation is bounded by the start timeout
// and by the caller's context, as with wazero's checks.
func TestInjectedChecksBoundInstantiation(t *testing.T) {
	e := newEngine(t, Options{StartTimeout: generous})
	m := load(t, e, "initloop", Limits{CallTimeout: time.Second})
	if !m.c.injected {
		t.Fatal("initloop.wasm was not given injected checks")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	// StartTimeout is generous: only the caller's context can end this.
	_, err := m.Instantiate(ctx, InstanceOptions{})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Instantiate with a cancelled context: %v, want the context's error", err)
	}
}

// wasmHeader starts a module: ABI marker, memory, and the ih_handle of
// each guest below.
const wasmHeader = `
  (func (export "informer_host_abi_v1"))`

// unboundedGuests run for ever, each in a way a check after `loop` alone
// does not stop: recursion without a loop, and iterations whose one
// instruction or host call does a lot. Counting guests add one to the
// i32 at address 0 per iteration.
var unboundedGuests = []struct {
	name   string
	counts bool
	wat    string
}{
	{"binary recursion", false, `(module (memory (export "memory") 1)` + wasmHeader + `
  (func $f (param $n i32)
    (if (local.get $n) (then
      (call $f (i32.sub (local.get $n) (i32.const 1)))
      (call $f (i32.sub (local.get $n) (i32.const 1))))))
  (func (export "ih_handle") (param i32) (result i32) (call $f (i32.const 60)) (i32.const 0)))`},
	{"mutual recursion through call_indirect", false, `(module (memory (export "memory") 1)` + wasmHeader + `
  (type $t (func (param i32)))
  (table 2 funcref)
  (elem (i32.const 0) $a $b)
  (func $a (param $n i32)
    (if (local.get $n) (then
      (call_indirect (type $t) (i32.sub (local.get $n) (i32.const 1)) (i32.const 1))
      (call_indirect (type $t) (i32.sub (local.get $n) (i32.const 1)) (i32.const 1)))))
  (func $b (param $n i32) (call_indirect (type $t) (local.get $n) (i32.const 0)))
  (func (export "ih_handle") (param i32) (result i32) (call $a (i32.const 60)) (i32.const 0)))`},
	{"memory.fill of 64 MiB per iteration", true, `(module (memory (export "memory") 1025)` + wasmHeader + `
  (func (export "ih_handle") (param i32) (result i32)
    (loop $l
      (memory.fill (i32.const 64) (i32.const 7) (i32.const 0x4000000))
      (i32.store (i32.const 0) (i32.add (i32.load (i32.const 0)) (i32.const 1)))
      (br $l))
    (i32.const 0)))`},
	{"memory.copy of 32 MiB per iteration", true, `(module (memory (export "memory") 1025)` + wasmHeader + `
  (func (export "ih_handle") (param i32) (result i32)
    (loop $l
      (memory.copy (i32.const 0x2000040) (i32.const 64) (i32.const 0x2000000))
      (i32.store (i32.const 0) (i32.add (i32.load (i32.const 0)) (i32.const 1)))
      (br $l))
    (i32.const 0)))`},
	{"random_get of 48 MiB per iteration", true, `(module
  (import "wasi_snapshot_preview1" "random_get" (func $rg (param i32 i32) (result i32)))
  (memory (export "memory") 769)` + wasmHeader + `
  (func (export "ih_handle") (param i32) (result i32)
    (loop $l
      (drop (call $rg (i32.const 64) (i32.const 0x3000000)))
      (i32.store (i32.const 0) (i32.add (i32.load (i32.const 0)) (i32.const 1)))
      (br $l))
    (i32.const 0)))`},
	{"fd_write of 48 MiB per iteration", true, `(module
  (import "wasi_snapshot_preview1" "fd_write" (func $w (param i32 i32 i32 i32) (result i32)))
  (memory (export "memory") 769)
  (data (i32.const 16) "\40\00\00\00\00\00\00\03")` + wasmHeader + `
  (func (export "ih_handle") (param i32) (result i32)
    (loop $l
      (drop (call $w (i32.const 1) (i32.const 16) (i32.const 1) (i32.const 8)))
      (i32.store (i32.const 0) (i32.add (i32.load (i32.const 0)) (i32.const 1)))
      (br $l))
    (i32.const 0)))`},
	{"fd_write of 4M empty iovecs per iteration", true, `(module
  (import "wasi_snapshot_preview1" "fd_write" (func $w (param i32 i32 i32 i32) (result i32)))
  (memory (export "memory") 513)` + wasmHeader + `
  (func (export "ih_handle") (param i32) (result i32)
    (loop $l
      (drop (call $w (i32.const 1) (i32.const 16) (i32.const 0x400000) (i32.const 8)))
      (i32.store (i32.const 0) (i32.add (i32.load (i32.const 0)) (i32.const 1)))
      (br $l))
    (i32.const 0)))`},
	{"loop", false, `(module (memory (export "memory") 1)` + wasmHeader + `
  (func (export "ih_handle") (param i32) (result i32) (loop $l (br $l)) (i32.const 0)))`},
}

// collectWhile forces garbage collections from this goroutine until done
// yields, and returns what it yielded. Compiled wasm cannot be preempted
// by the Go runtime: a guest that never left it for Go would hold a
// collection's stop-the-world for ever, and every other goroutine (the
// watchdog that would stop it included) with it. runtime.GC returning is
// the proof that it does leave.
func collectWhile[T any](done <-chan T) T {
	for {
		select {
		case v := <-done:
			return v
		default:
			runtime.GC()
		}
	}
}

// Every guest that runs for ever is stopped at its deadline, and garbage
// collections complete while it runs. A guest that counts its iterations
// did fewer than half the wasmbin.CheckBudget (about wasmbin.CheckBudget of them run
// before the budget of ticks alone first looks at the stop flag): how
// much an iteration does does not stretch how long a call overruns.
func TestChecksStopEveryUnboundedGuest(t *testing.T) {
	e := newEngine(t, Options{})
	for _, g := range unboundedGuests {
		t.Run(g.name, func(t *testing.T) {
			m, err := e.Load(context.Background(), "spin.wasm", testenv.WATText(t, g.wat), Limits{CallTimeout: 50 * time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close(context.Background())
			if !m.c.injected {
				t.Fatal("no injected checks")
			}
			i := instantiate(t, m, InstanceOptions{})
			done := make(chan error, 1)
			go func() {
				_, err := i.Handle(context.Background(), addEvent(pod("ns", "p", "Running")))
				done <- err
			}()
			err = collectWhile(done)
			var f *Failure
			if !errors.As(err, &f) || f.Kind != KindTimeout {
				t.Fatalf("Handle: %v, want a timeout", err)
			}
			if g.counts {
				n, _ := i.mod.Memory().ReadUint32Le(0)
				if n >= wasmbin.CheckBudget/2 {
					t.Errorf("stopped after %d iterations, want fewer than %d", n, wasmbin.CheckBudget/2)
				}
			}
		})
	}
}

// A start function that recurses for ever is stopped at the start timeout,
// with a deadline (at Instantiate) and without one (at Load, which runs
// start functions once under checks), while garbage collections complete.
func TestChecksStopRecursiveStartFunction(t *testing.T) {
	wasm := testenv.WATText(t, `(module (memory (export "memory") 1)`+wasmHeader+`
  (func $f (param $n i32)
    (if (local.get $n) (then
      (call $f (i32.sub (local.get $n) (i32.const 1)))
      (call $f (i32.sub (local.get $n) (i32.const 1))))))
  (func $start (call $f (i32.const 60)))
  (start $start)
  (func (export "ih_handle") (param i32) (result i32) (i32.const 0)))`)
	e := newEngine(t, Options{StartTimeout: 50 * time.Millisecond})
	for _, timeout := range []time.Duration{time.Second, 0} {
		done := make(chan error, 1)
		go func() {
			m, err := e.Load(context.Background(), "startrec.wasm", wasm, Limits{CallTimeout: timeout})
			if err == nil {
				defer m.Close(context.Background())
				var i *Instance
				if i, err = m.Instantiate(context.Background(), InstanceOptions{}); err == nil {
					i.Close(context.Background())
				}
			}
			done <- err
		}()
		err := collectWhile(done)
		var f *Failure
		if !errors.As(err, &f) || f.Kind != KindTimeout || f.Phase != "instantiate" {
			t.Errorf("CallTimeout %v: %v, want a timeout of the start function", timeout, err)
		}
	}
}

// The helpers that cut memory.fill and memory.copy into pieces do what
// the instructions do: overlapping copies both ways, sizes that are not a
// multiple of the piece, and an access out of bounds traps without
// writing anything. Memory after each call is compared byte for byte
// with the same module run without checks.
func TestInstrumentBulkHelpersKeepSemantics(t *testing.T) {
	wasm := testenv.WATText(t, `(module (memory (export "memory") 40)`+wasmHeader+`
  (func (export "ih_handle") (param $mode i32) (result i32)
    (local $i i32)
    (loop $l
      (i32.store (local.get $i) (i32.mul (local.get $i) (i32.const 2654435761)))
      (local.set $i (i32.add (local.get $i) (i32.const 4)))
      (br_if $l (i32.lt_u (local.get $i) (i32.const 0x280000))))
    (if (i32.eq (local.get $mode) (i32.const 1)) (then
      (memory.copy (i32.const 100003) (i32.const 3) (i32.const 1000001))
      (memory.copy (i32.const 5) (i32.const 70001) (i32.const 900007))
      (memory.copy (i32.const 1200000) (i32.const 1200000) (i32.const 300000))
      (memory.fill (i32.const 1500001) (i32.const 0xab) (i32.const 300017))
      (memory.fill (i32.const 2000000) (i32.const 0xcd) (i32.const 65536))))
    (if (i32.eq (local.get $mode) (i32.const 2)) (then
      (memory.fill (i32.const 0x260000) (i32.const 1) (i32.const 0x30000))))
    (if (i32.eq (local.get $mode) (i32.const 3)) (then
      (memory.copy (i32.const 0x10) (i32.const 0x260000) (i32.const 0x30000))))
    (if (i32.eq (local.get $mode) (i32.const 4)) (then
      (memory.copy (i32.const 0x260000) (i32.const 0x10) (i32.const 0x30000))))
    (i32.const 0)))`)
	e := newEngine(t, Options{})
	memories := map[bool][][]byte{}
	for _, checked := range []bool{false, true} {
		lim := Limits{}
		if checked {
			lim.CallTimeout = generous
		}
		m, err := e.Load(context.Background(), "bulk.wasm", wasm, lim)
		if err != nil {
			t.Fatal(err)
		}
		defer m.Close(context.Background())
		if m.c.injected != checked {
			t.Fatalf("checked=%v: injected=%v", checked, m.c.injected)
		}
		for mode := uint64(1); mode <= 4; mode++ {
			i := instantiate(t, m, InstanceOptions{})
			i.stack[0] = mode
			err := i.call(i.handle)
			if trap := mode > 1; (err != nil) != trap {
				t.Errorf("checked=%v, mode %d: %v, want a trap: %v", checked, mode, err, trap)
			}
			b, _ := i.mod.Memory().Read(0, i.mod.Memory().Size())
			memories[checked] = append(memories[checked], bytes.Clone(b))
		}
	}
	for k := range memories[false] {
		if !bytes.Equal(memories[false][k], memories[true][k]) {
			t.Errorf("mode %d: memory differs with injected checks", k+1)
		}
	}
}

// Raw module building, for modules wat2wasm refuses to write.
func wasmSection(id byte, entries ...[]byte) []byte {
	body := binary.AppendUvarint(nil, uint64(len(entries)))
	for _, e := range entries {
		body = append(body, e...)
	}
	if id == 8 { // start: one index, not a vector
		body = entries[0]
	}
	return append(append([]byte{id}, binary.AppendUvarint(nil, uint64(len(body)))...), body...)
}

func wasmName(s string) []byte { return append(binary.AppendUvarint(nil, uint64(len(s))), s...) }

// craftedModule is an ABI plugin: types () -> (), (i32) -> (i32) and
// startType; function 0 the ABI marker, 1 ih_handle with handleBody
// (locals included), 2 a start function of startType that returns;
// starts start sections naming function 2.
func craftedModule(handleBody []byte, startType []byte, starts int) []byte {
	b := []byte("\x00asm\x01\x00\x00\x00")
	b = append(b, wasmSection(1, []byte{0x60, 0, 0}, []byte{0x60, 1, 0x7f, 1, 0x7f}, startType)...)
	b = append(b, wasmSection(3, []byte{0}, []byte{1}, []byte{2})...)
	b = append(b, wasmSection(5, []byte{0x00, 0x01})...)
	b = append(b, wasmSection(7,
		append(wasmName("memory"), wasmbin.ExternMemory, 0),
		append(wasmName("informer_host_abi_v1"), wasmbin.ExternFunc, 0),
		append(wasmName("ih_handle"), wasmbin.ExternFunc, 1))...)
	for k := 0; k < starts; k++ {
		b = append(b, wasmSection(8, []byte{2})...)
	}
	body := func(code ...byte) []byte { return append(binary.AppendUvarint(nil, uint64(len(code))), code...) }
	return append(b, wasmSection(10, body(0x00, 0x0b), body(handleBody...), body(0x00, 0x0b))...)
}

// The rewriter adds globals, a type, functions and exports, and drops
// the start section: a module that is invalid as written must not become
// valid by that, and get through to address the checks' own state. Each
// of these is refused with the error wazero gives the original, the one
// a plugin without deadline gets.
func TestInstrumentNeverValidatesInvalidModules(t *testing.T) {
	unit := []byte{0x60, 0, 0}
	for _, tc := range []struct {
		name string
		wasm []byte
	}{
		// loop { global.set 1 (i32.const 1000000) }: $budget once rewritten.
		{"out-of-range global index", craftedModule([]byte{0x00,
			0x03, 0x40, 0x41, 0xc0, 0x84, 0x3d, 0x24, 0x01, 0x0c, 0x00, 0x0b,
			0x41, 0x00, 0x0b}, unit, 0)},
		// loop { global.set 0 (i32.const 0) }: clears $stop once rewritten.
		{"out-of-range global clearing the flag", craftedModule([]byte{0x00,
			0x03, 0x40, 0x41, 0x00, 0x24, 0x00, 0x0c, 0x00, 0x0b,
			0x41, 0x00, 0x0b}, unit, 0)},
		{"start function with parameters", craftedModule([]byte{0x00, 0x41, 0x00, 0x0b},
			[]byte{0x60, 1, 0x7f, 0}, 1)},
		// ref.func 2; drop: declared only by the export the rewriter adds.
		{"undeclared ref.func of the start function", craftedModule([]byte{0x00, 0xd2, 0x02, 0x1a, 0x41, 0x00, 0x0b}, unit, 1)},
		{"two start sections", craftedModule([]byte{0x00, 0x41, 0x00, 0x0b}, unit, 2)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rt := wazero.NewRuntime(context.Background())
			defer rt.Close(context.Background())
			_, want := rt.CompileModule(context.Background(), tc.wasm)
			if want == nil {
				t.Fatal("wazero accepts the module as written")
			}
			if rw, err := wasmbin.Instrument(tc.wasm); err == nil {
				if _, err := rt.CompileModule(context.Background(), rw.Wasm); err == nil {
					t.Log("rewritten, it would be valid")
				}
			}
			e := newEngine(t, Options{})
			var msgs []string
			for _, timeout := range []time.Duration{time.Second, 0} {
				m, err := e.Load(context.Background(), "crafted.wasm", tc.wasm, Limits{CallTimeout: timeout})
				if err == nil {
					m.Close(context.Background())
					t.Fatalf("CallTimeout %v: loaded", timeout)
				}
				if !strings.Contains(err.Error(), want.Error()) {
					t.Errorf("CallTimeout %v: %v, want wazero's %q", timeout, err, want)
				}
				msgs = append(msgs, err.Error())
			}
			if msgs[0] != msgs[1] {
				t.Errorf("with a deadline:\n%s\nwithout:\n%s", msgs[0], msgs[1])
			}
		})
	}
}

// With a CacheDir, modules wazero validated are recorded there (and not
// validated again by the next engine); a module it refused is not.
func TestValidationRecordedInCacheDir(t *testing.T) {
	dir := t.TempDir()
	e := newEngine(t, Options{CacheDir: dir})
	good, bad := fixture(t, "loop"), craftedModule([]byte{0x00, 0x41, 0x00, 0x0b}, []byte{0x60, 1, 0x7f, 0}, 1)
	if e.Validated(good) {
		t.Error("Validated before any load")
	}
	m, err := e.Load(context.Background(), "loop.wasm", good, Limits{CallTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	m.Close(context.Background())
	if _, err := e.Load(context.Background(), "bad.wasm", bad, Limits{CallTimeout: time.Second}); err == nil {
		t.Fatal("loaded an invalid module")
	}
	for wasm, want := range map[*[]byte]bool{&good: true, &bad: false} {
		sum := sha256.Sum256(*wasm)
		_, err := os.Stat(filepath.Join(e.validDir, hex.EncodeToString(sum[:])))
		if recorded := err == nil; recorded != want {
			t.Errorf("recorded %v, want %v", recorded, want)
		}
		if got := e.Validated(*wasm); got != want {
			t.Errorf("Validated %v, want %v", got, want)
		}
	}
	if noDir := newEngine(t, Options{}); noDir.Validated(good) {
		t.Error("Validated without a CacheDir")
	}
}

// The original is validated before the rewritten module is made and
// compiled, not beside them: the validator's lowered code and the
// compiler's working set would otherwise be live at once, the largest
// part of a reload's peak memory. A module wazero refuses therefore
// never reaches the rewriter, whose record in the CacheDir shows that it
// ran.
func TestValidationBeforeCompilation(t *testing.T) {
	dir := t.TempDir()
	e := newEngine(t, Options{CacheDir: dir})
	bad := craftedModule([]byte{0x00, 0x41, 0x00, 0x0b}, []byte{0x60, 1, 0x7f, 0}, 1)
	if _, err := e.Load(context.Background(), "bad.wasm", bad, Limits{CallTimeout: time.Second}); err == nil {
		t.Fatal("loaded an invalid module")
	}
	sum := sha256.Sum256(bad)
	if _, err := os.Stat(filepath.Join(e.rewriteDir, hex.EncodeToString(sum[:]))); err == nil {
		t.Error("the invalid module was rewritten for compilation: validation and compilation overlap")
	}
	good := fixture(t, "loop")
	m, err := e.Load(context.Background(), "loop.wasm", good, Limits{CallTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	m.Close(context.Background())
	sum = sha256.Sum256(good)
	if _, err := os.Stat(filepath.Join(e.rewriteDir, hex.EncodeToString(sum[:]))); err != nil {
		t.Errorf("a valid module left no rewrite record (the test's proof that the rewriter ran): %v", err)
	}
}

// A validation that ran is followed by one collection, so the compile
// after it does not pile its working set on the validator's garbage; a
// module the cache has validated before costs none.
func TestValidationCollectsItsGarbage(t *testing.T) {
	forced := func() uint64 {
		s := []metrics.Sample{{Name: "/gc/cycles/forced:gc-cycles"}}
		metrics.Read(s)
		return s[0].Value.Uint64()
	}
	dir := t.TempDir()
	wasm := fixture(t, "loop")
	for _, tc := range []struct {
		name string
		want uint64
	}{{"cold", 1}, {"validated before", 0}} {
		e := newEngine(t, Options{CacheDir: dir})
		before := forced()
		m, err := e.Load(context.Background(), "loop.wasm", wasm, Limits{CallTimeout: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		if got := forced() - before; got != tc.want {
			t.Errorf("%s: %d forced collections during the load, want %d", tc.name, got, tc.want)
		}
		m.Close(context.Background())
	}
}
