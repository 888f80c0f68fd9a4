package engine

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/tetratelabs/wazero"

	"github.com/informer-host/informer-host/host/internal/wasmbin"
	"github.com/informer-host/informer-host/internal/testenv"
)

// The WebAssembly spec test suite as wazero ships it: wast2json output
// (one .json script per .wast, its modules as .wasm files) in
// internal/integration_test/spectest/{v1,v2}/testdata of the module. This
// file reads it; spectest_test.go runs it.

// specScript is one wast2json script.
type specScript struct {
	SourceFile string        `json:"source_filename"`
	Commands   []specCommand `json:"commands"`
}

type specCommand struct {
	Type       string      `json:"type"`
	Line       int         `json:"line"`
	Name       string      `json:"name"`     // module, register: the module's $name
	Filename   string      `json:"filename"` // module and assert_* on modules
	As         string      `json:"as"`       // register
	Action     specAction  `json:"action"`
	Expected   []specValue `json:"expected"`
	ModuleType string      `json:"module_type"` // "binary" or "text"
	Text       string      `json:"text"`
}

type specAction struct {
	Type   string      `json:"type"` // invoke or get
	Module string      `json:"module"`
	Field  string      `json:"field"`
	Args   []specValue `json:"args"`
}

// specValue is a value as wast2json writes it: decimal bit patterns as
// strings, "nan:canonical" or "nan:arithmetic" for expected NaNs, v128 as
// a list of lanes, references as "null" or a number (no value at all: any
// reference).
type specValue struct {
	Type     string `json:"type"`
	LaneType string `json:"lane_type"`
	Value    any    `json:"value"`
}

// specWord is one uint64 of wazero's value encoding (a v128 takes two),
// compared under mask: NaN patterns and "any reference" compare only some
// bits, or none.
type specWord struct{ bits, mask uint64 }

func (w specWord) matches(v uint64) bool { return v&w.mask == w.bits }

// words encodes v as wazero passes it to and from functions.
func (v specValue) words() ([]specWord, error) {
	if v.Type == "v128" {
		lanes, ok := v.Value.([]any)
		width := map[string]int{"i8": 8, "i16": 16, "i32": 32, "i64": 64, "f32": 32, "f64": 64}[v.LaneType]
		if !ok || width == 0 || len(lanes)*width != 128 {
			return nil, fmt.Errorf("v128 value %v of lane type %q", v.Value, v.LaneType)
		}
		w := [2]specWord{}
		for i, l := range lanes {
			s, _ := l.(string)
			lane, err := scalarWord(v.LaneType, s)
			if err != nil {
				return nil, err
			}
			half, shift := (i*width)/64, uint((i*width)%64)
			w[half].bits |= lane.bits << shift
			w[half].mask |= lane.mask << shift
		}
		return w[:], nil
	}
	switch s := v.Value.(type) {
	case nil:
		if v.Type == "funcref" || v.Type == "externref" {
			return []specWord{{}}, nil // any reference
		}
	case string:
		w, err := scalarWord(v.Type, s)
		return []specWord{w}, err
	}
	return nil, fmt.Errorf("value %v of type %q", v.Value, v.Type)
}

// scalarWord encodes one scalar (or one v128 lane) of type t.
func scalarWord(t, s string) (specWord, error) {
	bits := map[string]uint{"i8": 8, "i16": 16, "i32": 32, "f32": 32, "i64": 64, "f64": 64, "funcref": 64, "externref": 64}[t]
	if bits == 0 {
		return specWord{}, fmt.Errorf("value type %q", t)
	}
	all := uint64(1)<<bits - 1
	if bits == 64 {
		all = ^uint64(0)
	}
	switch {
	case s == "nan:canonical" && t == "f32":
		return specWord{0x7fc00000, 0x7fffffff}, nil
	case s == "nan:arithmetic" && t == "f32":
		return specWord{0x7fc00000, 0x7fc00000}, nil
	case s == "nan:canonical" && t == "f64":
		return specWord{0x7ff8000000000000, 0x7fffffffffffffff}, nil
	case s == "nan:arithmetic" && t == "f64":
		return specWord{0x7ff8000000000000, 0x7ff8000000000000}, nil
	case s == "null":
		return specWord{0, all}, nil
	}
	var u uint64
	var err error
	if strings.HasPrefix(s, "-") {
		var i int64
		i, err = strconv.ParseInt(s, 10, int(bits))
		u = uint64(i) & all
	} else {
		u, err = strconv.ParseUint(s, 10, int(bits))
	}
	if err != nil {
		return specWord{}, fmt.Errorf("%s value %q: %v", t, s, err)
	}
	if t == "externref" {
		// wazero's externref is an opaque pointer, 0 being null, so
		// "ref.extern 0" is passed as 1 (as wazero's own harness does).
		u++
	}
	return specWord{u, all}, nil
}

// encodeAll encodes values into the uint64 words wazero takes, and the
// masks they compare under.
func encodeAll(vals []specValue) ([]specWord, error) {
	var ws []specWord
	for _, v := range vals {
		w, err := v.words()
		if err != nil {
			return nil, err
		}
		ws = append(ws, w...)
	}
	return ws, nil
}

func plainWords(ws []specWord) []uint64 {
	out := make([]uint64, len(ws))
	for i, w := range ws {
		out[i] = w.bits
	}
	return out
}

// specSuiteDir returns the directory of wazero's spec test suite suite
// ("v1" or "v2"), for the wazero version this module builds with.
func specSuiteDir(suite string) (string, error) {
	const wazeroPath = "github.com/tetratelabs/wazero"
	mod := ""
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", wazeroPath).Output()
	if err == nil {
		mod = strings.TrimSpace(string(out))
	} else {
		// No go command on PATH (a test binary run by hand): where the
		// compiler found wazero's sources, which the binary records.
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			err = fmt.Errorf("%v: %s", err, ee.Stderr)
		}
		if f := runtime.FuncForPC(reflect.ValueOf(wazero.NewRuntime).Pointer()); f != nil {
			if file, _ := f.FileLine(f.Entry()); filepath.IsAbs(file) {
				mod = filepath.Dir(file)
			}
		}
		if mod == "" {
			return "", fmt.Errorf("locate the wazero module (go list -m %s): %w", wazeroPath, err)
		}
	}
	dir := filepath.Join(mod, "internal", "integration_test", "spectest", suite, "testdata")
	if _, err := os.Stat(dir); err != nil {
		return "", fmt.Errorf("wazero's spec test suite: %w (run go mod download %s)", err, wazeroPath)
	}
	return dir, nil
}

func readScript(path string) (*specScript, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var s specScript
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &s, nil
}

// withMemory returns wasm with a memory of one page if it has none (real
// plugins always have one, and the injected checks use memory.grow), and
// whether it added one.
func withMemory(wasm []byte) ([]byte, bool, error) {
	secs, err := wasmbin.Sections(wasm)
	if err != nil {
		return nil, false, err
	}
	memIdx := -1
	for i, s := range secs {
		r := wasmbin.NewReader(s.Body)
		switch s.ID {
		case 2:
			n := r.U32()
			for j := uint32(0); j < n && r.Err() == nil; j++ {
				r.Name()
				r.Name()
				switch kind := r.Byte(); kind {
				case wasmbin.ExternFunc, wasmbin.ExternTag:
					if kind == wasmbin.ExternTag {
						r.Byte()
					}
					r.U32()
				case wasmbin.ExternTable:
					r.Byte()
					r.Limits()
				case wasmbin.ExternMemory:
					return wasm, false, nil
				case wasmbin.ExternGlobal:
					r.Byte()
					r.Byte()
				default:
					return nil, false, fmt.Errorf("import kind 0x%02x", kind)
				}
			}
		case 5:
			if r.U32() > 0 {
				return wasm, false, nil
			}
			memIdx = i
		}
		if r.Err() != nil {
			return nil, false, r.Err()
		}
	}
	mem := wasmbin.Section{ID: 5, Body: []byte{1, 0x00, 1}} // one memory, min 1 page, no max
	out := append([]byte(nil), wasm[:8]...)
	emit := func(s wasmbin.Section) { out = wasmbin.AppendSection(out, s.ID, s.Body) }
	done := false
	for i, s := range secs {
		if !done && (i == memIdx || wasmbin.SectionRank(s.ID) > wasmbin.SectionRank(5)) {
			emit(mem)
			done = true
			if i == memIdx {
				continue
			}
		}
		emit(s)
	}
	if !done {
		emit(mem)
	}
	return out, true, nil
}

// exportsOfKind returns the names of wasm's exports of one kind.
func exportsOfKind(wasm []byte, kind byte) ([]string, error) {
	secs, err := wasmbin.Sections(wasm)
	if err != nil {
		return nil, err
	}
	var names []string
	for _, s := range secs {
		if s.ID != 7 {
			continue
		}
		r := wasmbin.NewReader(s.Body)
		n := r.U32()
		for i := uint32(0); i < n && r.Err() == nil; i++ {
			name, k := r.Name(), r.Byte()
			r.U32()
			if k == kind {
				names = append(names, name)
			}
		}
		if r.Err() != nil {
			return nil, r.Err()
		}
	}
	return names, nil
}

// The spec harness's own helpers: a memory is added in its place in the
// section order, and only where there is none; expected values compare
// under the masks the spec means.
func TestSpecHarness(t *testing.T) {
	ctx := context.Background()
	rt := wazero.NewRuntime(ctx)
	defer rt.Close(ctx)
	for _, tc := range []struct {
		name, wat string
		add       bool
	}{
		{"no memory", `(module (global (export "g") i32 (i32.const 7)) (func (export "f") (result i32) (global.get 0)))`, true},
		{"no sections after", `(module (type (func)))`, true},
		{"own memory", `(module (memory 2) (func (export "f")))`, false},
		{"imported memory", `(module (import "env" "m" (memory 1)))`, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wasm := testenv.WATText(t, tc.wat)
			out, added, err := withMemory(wasm)
			if err != nil || added != tc.add {
				t.Fatalf("withMemory: added %v, err %v; want added %v", added, err, tc.add)
			}
			if !added {
				if !bytes.Equal(out, wasm) {
					t.Fatal("changed a module that has a memory")
				}
				return
			}
			cm, err := rt.CompileModule(ctx, out)
			if err != nil {
				t.Fatalf("the module given a memory does not compile: %v", err)
			}
			defer cm.Close(ctx)
			m, err := rt.InstantiateModule(ctx, cm, wazero.NewModuleConfig().WithName(""))
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close(ctx)
			if mem := m.Memory(); mem == nil || mem.Size() != 65536 {
				t.Fatalf("memory %v, want one page", mem)
			}
		})
	}

	for _, tc := range []struct {
		v    specValue
		good []uint64
		bad  []uint64
	}{
		{specValue{Type: "i32", Value: "4294967295"}, []uint64{0xffffffff}, []uint64{0xfffffffe}},
		{specValue{Type: "i32", Value: "-1"}, []uint64{0xffffffff}, []uint64{0x7fffffff}},
		{specValue{Type: "f32", Value: "nan:canonical"}, []uint64{0x7fc00000, 0xffc00000}, []uint64{0x7fc00001, 0x7fa00000}},
		{specValue{Type: "f32", Value: "nan:arithmetic"}, []uint64{0x7fc00000, 0xffc00001}, []uint64{0x7f800001}},
		{specValue{Type: "f64", Value: "nan:canonical"}, []uint64{0x7ff8000000000000}, []uint64{0x7ff8000000000001}},
		{specValue{Type: "f64", Value: "nan:arithmetic"}, []uint64{0xfff8000000000001}, []uint64{0x7ff0000000000001}},
		{specValue{Type: "externref", Value: "0"}, []uint64{1}, []uint64{0}},
		{specValue{Type: "externref", Value: "null"}, []uint64{0}, []uint64{1}},
		{specValue{Type: "funcref"}, []uint64{0, 12345}, nil},
	} {
		ws, err := tc.v.words()
		if err != nil || len(ws) != 1 {
			t.Fatalf("%+v: %v, %d words", tc.v, err, len(ws))
		}
		for _, g := range tc.good {
			if !ws[0].matches(g) {
				t.Errorf("%+v does not match %#x", tc.v, g)
			}
		}
		for _, b := range tc.bad {
			if ws[0].matches(b) {
				t.Errorf("%+v matches %#x", tc.v, b)
			}
		}
	}
	// v128: lanes from the lowest, a NaN pattern per lane.
	ws, err := specValue{Type: "v128", LaneType: "f32", Value: []any{"1", "nan:canonical", "3", "4"}}.words()
	if err != nil || len(ws) != 2 {
		t.Fatalf("v128: %v, %d words", err, len(ws))
	}
	if !ws[0].matches(0xffc00000_00000001) || ws[0].matches(0x7fc00001_00000001) || !ws[1].matches(0x00000004_00000003) {
		t.Errorf("v128 f32 lanes: %#x", ws)
	}
}
