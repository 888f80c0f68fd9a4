package engine

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"

	"github.com/informer-host/informer-host/host/internal/wasmbin"
)

// TestSpecRewriter proves the termination-check rewriter (instrument)
// against a suite nobody here wrote: the WebAssembly spec tests as wazero
// ships them (v1: WebAssembly 1.0, v2: 2.0 with SIMD, bulk memory,
// reference types, multi-value).
//
// Every script runs twice, side by side, in two runtimes configured as
// the engine configures the runtime of injected-check modules: once with
// the spec modules as they are, once with every module instrumented. A
// module without memory gets one on both sides (real plugins always have
// one; instrument refuses a module without). Per file, in subtests:
//
//   - differential: every command gives bit-identical results, or traps
//     of the same kind, on both sides, and the original side also meets
//     the script's expectation (so the comparison is not between two
//     wrong answers); after the script, every instance's memory and
//     exported globals are equal.
//   - invalid: no assert_invalid or binary assert_malformed module, with
//     or without an added memory, compiles after rewriting: either
//     wasmbin.Instrument refuses it or wazero does.
//   - stop: with the stop flag raised, every assert_exhaustion call (an
//     unbounded recursion) ends in the stop trap instead of exhausting the
//     stack, and so do the looping and recursing functions named in
//     specStopCases.
//
// Modules wasmbin.Instrument refuses (ErrUninstrumentable) run unrewritten on the
// instrumented side, as the engine would fall back to wazero's checks;
// their set must be exactly specKnownRefused.
func TestSpecRewriter(t *testing.T) {
	if testing.Short() {
		t.Skip("runs wazero's whole spec suites through the rewriter, a minute of compiling, which -short leaves out")
	}
	ctx := context.Background()
	cache := wazero.NewCompilationCache()
	t.Cleanup(func() { cache.Close(ctx) })
	eng := newEngine(t, Options{})
	tally := &specTally{refused: map[string]string{}, stopCovered: map[string]bool{}, deviations: map[string]bool{}}
	for _, suite := range []struct {
		name     string
		minFiles int // wazero v1.12.0 ships 73 and 148 scripts
	}{{"v1", 70}, {"v2", 140}} {
		dir, err := specSuiteDir(suite.name)
		if err != nil {
			t.Fatal(err)
		}
		scripts, err := filepath.Glob(filepath.Join(dir, "*.json"))
		if err != nil {
			t.Fatal(err)
		}
		if len(scripts) < suite.minFiles {
			t.Fatalf("%s: %d spec scripts, want at least %d: is the suite in %s complete?", suite.name, len(scripts), suite.minFiles, dir)
		}
		tally.add(&tally.files, len(scripts))
		t.Run(suite.name, func(t *testing.T) {
			for _, path := range scripts {
				file := strings.TrimSuffix(filepath.Base(path), ".json")
				t.Run(file, func(t *testing.T) {
					t.Parallel()
					runSpecScript(t, ctx, eng, cache, tally, suite.name, dir, file)
				})
			}
		})
	}
	if tally.ran != tally.files {
		// -run selected some scripts: the checks across all of them
		// below would fail for want of the others.
		t.Logf("ran %d of %d spec scripts: not checking the refused set, deviations and stop cases", tally.ran, tally.files)
		return
	}
	t.Logf("spec suite: %d scripts, %d modules instantiated (%d given a memory, %d loops instrumented), %d commands compared, "+
		"%d invalid/malformed modules checked (%d valid under the engine's features, %d that rewriting alone would have made valid, refused by validation first), "+
		"%d text-format modules not applicable, %d stop checks",
		tally.files, tally.modules, tally.givenMemory, tally.loops, tally.commands, tally.invalid, tally.validAnyway, tally.validAfterRewrite, tally.text, tally.stops)

	var refused []string
	for k, v := range tally.refused {
		refused = append(refused, k+": "+v)
	}
	sort.Strings(refused)
	t.Logf("refused by the rewriter (%d): %s", len(refused), strings.Join(refused, "; "))
	for k := range tally.refused {
		if _, ok := specKnownRefused[k]; !ok {
			t.Errorf("the rewriter refuses spec module %s (%s), which is not in specKnownRefused", k, tally.refused[k])
		}
	}
	for k, why := range specKnownRefused {
		if _, ok := tally.refused[k]; !ok {
			t.Errorf("specKnownRefused lists %s (%s), but the rewriter no longer refuses it: remove it", k, why)
		}
	}
	for k, why := range specDeviations {
		if !tally.deviations[k] {
			t.Errorf("specDeviations lists %s (%s), but the original module now does what the script says: remove it", k, why)
		}
	}
	for _, c := range specStopCases {
		for _, suite := range []string{"v1", "v2"} {
			if key := suite + "/" + c.file + ":" + c.field; !tally.stopCovered[key] {
				t.Errorf("stop case %s did not run: no module of the script exports it", key)
			}
		}
	}
}

// specKnownRefused is the set of spec modules ("suite/file.wasm") the
// rewriter may refuse, with why. It is empty: instrument decodes every
// instruction of WebAssembly 2.0.
var specKnownRefused = map[string]string{}

// specDeviations are the script commands ("suite/file.wast:line") whose
// expectation the original module does not meet in the engine's runtime
// configuration, with why. Where the original deviates, the instrumented
// module must still behave exactly like it.
var specDeviations = func() map[string]string {
	m := map[string]string{}
	add := func(why string, keys ...string) {
		for _, k := range keys {
			m[k] = why
		}
	}
	// The v1 scripts encode WebAssembly 1.0, the engine runs 2.0.
	add("2.0 (bulk memory) writes element segments in order instead of checking them all first, "+
		"and wazero accepts an out-of-bounds one (see its own harness on linking.wast)",
		"v1/elem.wast:143", "v1/elem.wast:152", "v1/elem.wast:161", "v1/elem.wast:170", "v1/elem.wast:178",
		"v1/elem.wast:186", "v1/elem.wast:195", "v1/elem.wast:203", "v1/elem.wast:212", "v1/elem.wast:220",
		"v1/elem.wast:229", "v1/elem.wast:237",
		"v1/linking.wast:207", "v1/linking.wast:228", "v1/linking.wast:345")
	add("2.0: the segments before the failing one stay written",
		"v1/linking.wast:236", "v1/linking.wast:248", "v1/linking.wast:342", "v1/linking.wast:354")
	add("2.0 (multi-value) allows several results", "v1/func.wast:493", "v1/func.wast:497", "v1/type.wast:53", "v1/type.wast:57")
	add("2.0 (reference types) allows several tables", "v1/imports.wast:318")
	add("2.0 accepts a br_table to labels of different types after unreachable (the stack is polymorphic)", "v1/unreached-invalid.wast:539")
	// wazero deviations from the 2.0 spec.
	add("wazero accepts global.get of an imported mutable global in a constant expression",
		"v2/global.wast:371", "v2/elem.wast:458", "v2/elem.wast:484", "v2/data.wast:470", "v2/data.wast:496")
	return m
}()

// specStopCases are looping or recursing spec functions, with arguments
// that make them run far longer than wasmbin.CheckBudget checks (the loops
// practically forever). With the stop flag raised, each must end in the
// stop trap. during: raise the flag from another goroutine while the call
// runs, rather than before it.
var specStopCases = []struct {
	file, field string
	args        []uint64
	during      bool
}{
	{"loop", "while", []uint64{1 << 40}, true},
	{"loop", "for", []uint64{1 << 40}, false},
	{"loop", "nesting", []uint64{0x47c35000, 0x47c35000}, false}, // f32 100000, 100000
	{"fac", "fac-iter", []uint64{1 << 40}, false},
	{"fac", "fac-iter-named", []uint64{1 << 40}, true},
	{"fac", "fac-opt", []uint64{1 << 40}, false},
	{"fac", "fac-rec", []uint64{20000}, false},       // recursion
	{"fac", "fac-rec-named", []uint64{20000}, false}, // recursion
	{"call", "fib", []uint64{30}, false},             // 1.6 million calls
	{"call", "even", []uint64{100000}, false},        // mutual recursion
	{"call_indirect", "fib-i64", []uint64{30}, false},
	{"call_indirect", "even", []uint64{100000}, false},
}

// specTrapStop is the trap the injected checks raise when the stop flag is
// set.
const specTrapStop = "wasm error: unreachable"

// specTally counts what every script did, for the summary and the checks
// across scripts.
type specTally struct {
	mu sync.Mutex // guards every field below: scripts run in parallel

	files, ran                           int // scripts found, scripts run
	modules, givenMemory, loops          int // module commands; of them without memory; loops instrumented
	commands, invalid, validAnyway, text int
	// validAfterRewrite: invalid modules that the rewriter alone would
	// have made valid, refused by the engine's validation of the original.
	validAfterRewrite int
	stops             int               // stop checks
	refused           map[string]string // suite/file.wasm: reason
	deviations        map[string]bool   // keys of specDeviations seen
	stopCovered       map[string]bool   // suite/file:field of specStopCases run
}

func (t *specTally) add(n *int, d int) {
	t.mu.Lock()
	*n += d
	t.mu.Unlock()
}

// specPair is one spec module instantiated on both sides.
type specPair struct {
	file    string // the .wasm file
	line    int
	orig    api.Module
	instr   api.Module
	refused bool     // instr runs the original: instrument refused it
	globals []string // exported globals
}

// specRun is one script being run.
type specRun struct {
	t          *testing.T
	ctx        context.Context
	tally      *specTally
	suite, dir string
	script     string
	rtO, rtI   wazero.Runtime
	eng        *Engine // its compile path, for invalid modules

	named map[string]*specPair
	last  *specPair
	all   []*specPair

	differential, invalid, stop []string      // failures, by subtest
	exhaustion                  []specCommand // assert_exhaustion commands, for stopChecks
	exhaustionPairs             []*specPair   // the instance each of them ran on
}

// deviation reports that the original module does not do what the script
// says: a failure, unless specDeviations expects it.
func (r *specRun) deviation(c *specCommand, format string, args ...any) {
	key := fmt.Sprintf("%s/%s.wast:%d", r.suite, r.script, c.Line)
	if _, ok := specDeviations[key]; !ok {
		r.fail(&r.differential, c, "the original does not meet the script (not in specDeviations): "+format, args...)
		return
	}
	r.t.Logf("%s (expected: specDeviations): %s", key, fmt.Sprintf(format, args...))
	r.tally.mu.Lock()
	r.tally.deviations[key] = true
	r.tally.mu.Unlock()
}

func (r *specRun) fail(kind *[]string, c *specCommand, format string, args ...any) {
	*kind = append(*kind, fmt.Sprintf("%s/%s.wast:%d %s: %s", r.suite, r.script, c.Line, c.Type, fmt.Sprintf(format, args...)))
}

func runSpecScript(t *testing.T, ctx context.Context, eng *Engine, cache wazero.CompilationCache, tally *specTally, suite, dir, file string) {
	script, err := readScript(filepath.Join(dir, file+".json"))
	if err != nil {
		t.Fatal(err)
	}
	tally.add(&tally.ran, 1)
	r := &specRun{t: t, ctx: ctx, eng: eng, tally: tally, suite: suite, dir: dir, script: file, named: map[string]*specPair{}}
	// The configuration of the runtime that runs instrumented modules:
	// the class without deadline (compileInjected).
	cfg := runtimeConfig(cache, classKey{pages: MaxMemoryPages})
	r.rtO, r.rtI = wazero.NewRuntimeWithConfig(ctx, cfg), wazero.NewRuntimeWithConfig(ctx, cfg)
	defer r.rtO.Close(ctx)
	defer r.rtI.Close(ctx)

	// The spectest host module (print*, global_*, table, memory), as
	// wazero's harness provides it: a plain module on both sides.
	host, err := os.ReadFile(filepath.Join(dir, "..", "..", "testdata", "spectest.wasm"))
	if err != nil {
		t.Fatal(err)
	}
	hostCfg := wazero.NewModuleConfig().WithName("spectest").WithStartFunctions()
	hO, err := r.rtO.InstantiateWithConfig(ctx, host, hostCfg)
	if err != nil {
		t.Fatal(err)
	}
	hI, err := r.rtI.InstantiateWithConfig(ctx, host, hostCfg)
	if err != nil {
		t.Fatal(err)
	}
	globals, _ := exportsOfKind(host, wasmbin.ExternGlobal)
	// refused: not instrumented, so no stop flag.
	r.all = append(r.all, &specPair{file: "spectest.wasm", orig: hO, instr: hI, refused: true, globals: globals})

	for i := 0; i < len(script.Commands); i++ {
		c := &script.Commands[i]
		switch c.Type {
		case "module":
			// A register right after a module names it, as in wazero's
			// harness (a module's name cannot change after instantiation).
			as := ""
			if i+1 < len(script.Commands) && script.Commands[i+1].Type == "register" {
				as = script.Commands[i+1].As
				i++
			}
			r.module(c, as)
		case "register":
			r.fail(&r.differential, c, "register of %q not right after its module: unsupported", c.As)
		case "assert_return", "action", "assert_trap", "assert_exhaustion":
			r.action(c)
		case "assert_invalid", "assert_malformed":
			r.invalidModule(c)
		case "assert_unlinkable", "assert_uninstantiable":
			r.failingModule(c)
		default:
			r.fail(&r.differential, c, "unknown command type")
		}
	}
	r.compareState()
	r.stopChecks()

	for _, sub := range []struct {
		name  string
		fails []string
	}{{"differential", r.differential}, {"invalid", r.invalid}, {"stop", r.stop}} {
		t.Run(sub.name, func(t *testing.T) {
			for _, f := range sub.fails {
				t.Error(f)
			}
		})
	}
}

// instantiate instantiates a module on both sides, the instrumented side
// with the rewritten module and its start function called after
// instantiation, as the engine does. It returns the pair (orig or instr
// nil where that side failed) and each side's error.
func (r *specRun) instantiate(c *specCommand, as string) (p *specPair, errO, errI error, err error) {
	wasm, err := os.ReadFile(filepath.Join(r.dir, c.Filename))
	if err != nil {
		return nil, nil, nil, err
	}
	wasm, added, err := withMemory(wasm)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("%s: %v", c.Filename, err)
	}
	if added {
		r.tally.add(&r.tally.givenMemory, 1)
	}
	p = &specPair{file: c.Filename, line: c.Line}
	p.globals, _ = exportsOfKind(wasm, wasmbin.ExternGlobal)
	out, loops, ierr := safeInstrument(wasm)
	r.tally.add(&r.tally.loops, loops)
	if ierr != nil {
		if !errors.Is(ierr, wasmbin.ErrUninstrumentable) {
			return nil, nil, nil, fmt.Errorf("%s: instrument: %v", c.Filename, ierr)
		}
		r.tally.mu.Lock()
		r.tally.refused[r.suite+"/"+c.Filename] = ierr.Error()
		r.tally.mu.Unlock()
		out, p.refused = wasm, true
	}
	cfg := wazero.NewModuleConfig().WithName(as).WithStartFunctions()
	p.orig, errO = r.rtO.InstantiateWithConfig(r.ctx, wasm, cfg)
	p.instr, errI = r.rtI.InstantiateWithConfig(r.ctx, out, cfg)
	if errI == nil && !p.refused {
		if fn := p.instr.ExportedFunction(wasmbin.StartExport); fn != nil {
			if _, errI = fn.Call(r.ctx); errI != nil {
				// The original's module is gone too (wazero drops a
				// module whose start traps); free its name.
				if as != "" {
					p.instr.Close(r.ctx)
				}
				p.instr = nil
			}
		}
	}
	return p, errO, errI, nil
}

func (r *specRun) module(c *specCommand, as string) {
	p, errO, errI, err := r.instantiate(c, as)
	if err != nil {
		r.fail(&r.differential, c, "%v", err)
		return
	}
	r.tally.add(&r.tally.modules, 1)
	switch {
	case errO != nil:
		r.fail(&r.differential, c, "%s: the original does not instantiate: %v", c.Filename, errO)
	case errI != nil:
		r.fail(&r.differential, c, "%s: the instrumented module does not instantiate: %v", c.Filename, errI)
	}
	if errO != nil || errI != nil {
		r.last = nil
		return
	}
	r.all = append(r.all, p)
	r.last = p
	if c.Name != "" {
		r.named[c.Name] = p
	}
}

// failingModule runs assert_unlinkable and assert_uninstantiable: the
// module fails to instantiate on both sides, or (wazero's reading of an
// out-of-bounds table initialisation: see its harness) on neither.
func (r *specRun) failingModule(c *specCommand) {
	p, errO, errI, err := r.instantiate(c, "")
	if err != nil {
		r.fail(&r.differential, c, "%v", err)
		return
	}
	r.tally.add(&r.tally.commands, 1)
	if (errO == nil) != (errI == nil) {
		r.fail(&r.differential, c, "%s: original error %v, instrumented error %v", c.Filename, errO, errI)
	} else if k, l := trapKind(errO), trapKind(errI); strings.HasPrefix(k, "wasm error") && k != l {
		r.fail(&r.differential, c, "%s: the original traps with %q, the instrumented module with %q", c.Filename, k, l)
	}
	if errO == nil && !(c.Type == "assert_uninstantiable" && c.Text == "out of bounds table access") {
		r.deviation(c, "%s: the original instantiates, want %q", c.Filename, c.Text)
	}
	if errO == nil && errI == nil {
		r.all = append(r.all, p) // its state is compared too
	}
}

// invalidModule checks that a module the spec calls invalid or malformed
// does not load after rewriting.
func (r *specRun) invalidModule(c *specCommand) {
	if c.ModuleType == "text" {
		r.tally.add(&r.tally.text, 1) // the text format never reaches the engine
		return
	}
	wasm, err := os.ReadFile(filepath.Join(r.dir, c.Filename))
	if err != nil {
		r.fail(&r.invalid, c, "%v", err)
		return
	}
	r.tally.add(&r.tally.invalid, 1)
	if cm, err := r.rtO.CompileModule(r.ctx, wasm); err == nil {
		// Valid under the features the engine enables (a v1 script's
		// module using what 2.0 allows): nothing to refuse.
		cm.Close(r.ctx)
		r.tally.add(&r.tally.validAnyway, 1)
		r.deviation(c, "%s (%q) compiles unrewritten", c.Filename, c.Text)
		return
	}
	variants := []struct {
		name string
		wasm []byte
	}{{"as is", wasm}}
	// Given a memory, the rewriter cannot refuse it for having none; a
	// module whose only fault was the missing memory is valid then.
	if withMem, added, err := withMemory(wasm); err == nil && added {
		if cm, err := r.rtO.CompileModule(r.ctx, withMem); err != nil {
			variants = append(variants, struct {
				name string
				wasm []byte
			}{"given a memory", withMem})
		} else {
			cm.Close(r.ctx)
		}
	}
	for _, v := range variants {
		// The engine's own path for a module with a deadline: the
		// original validated by wazero, then rewritten and compiled. The
		// rewriter alone may well make such a module valid (it adds
		// globals, functions and exports); that is why the engine
		// validates first, and what this proves.
		cm := &compiled{key: compileKey{sum: sha256.Sum256(v.wasm), class: classKey{pages: MaxMemoryPages, deadline: true}}}
		err := r.eng.compileInjected(r.ctx, c.Filename, cm, v.wasm)
		if err == nil {
			cm.cm.Close(r.ctx)
			r.fail(&r.invalid, c, "%s (%s, %q) loads with injected checks", c.Filename, v.name, c.Text)
			continue
		}
		if errors.Is(err, wasmbin.ErrUninstrumentable) {
			r.fail(&r.invalid, c, "%s (%s): refused by the rewriter, not by wazero's validation: %v", c.Filename, v.name, err)
			continue
		}
		if out, _, ierr := safeInstrument(v.wasm); ierr == nil {
			if icm, cerr := r.rtI.CompileModule(r.ctx, out); cerr == nil {
				icm.Close(r.ctx)
				r.tally.add(&r.tally.validAfterRewrite, 1)
			}
		}
	}
}

// action runs an invoke or get on both sides and compares.
func (r *specRun) action(c *specCommand) {
	p := r.last
	if c.Action.Module != "" {
		p = r.named[c.Action.Module]
	}
	if p == nil {
		r.fail(&r.differential, c, "no module (it failed to instantiate)")
		return
	}
	r.tally.add(&r.tally.commands, 1)
	var resO, resI []uint64
	var errO, errI error
	switch c.Action.Type {
	case "invoke":
		args, err := encodeAll(c.Action.Args)
		if err != nil {
			r.fail(&r.differential, c, "%v", err)
			return
		}
		fO, fI := p.orig.ExportedFunction(c.Action.Field), p.instr.ExportedFunction(c.Action.Field)
		if fO == nil || fI == nil {
			r.fail(&r.differential, c, "no function %q (original %v, instrumented %v)", c.Action.Field, fO != nil, fI != nil)
			return
		}
		resO, errO = fO.Call(r.ctx, plainWords(args)...)
		resI, errI = fI.Call(r.ctx, plainWords(args)...)
	case "get":
		gO, gI := p.orig.ExportedGlobal(c.Action.Field), p.instr.ExportedGlobal(c.Action.Field)
		if gO == nil || gI == nil {
			r.fail(&r.differential, c, "no global %q", c.Action.Field)
			return
		}
		resO, resI = []uint64{gO.Get()}, []uint64{gI.Get()}
	default:
		r.fail(&r.differential, c, "action type %q", c.Action.Type)
		return
	}
	what := fmt.Sprintf("%s %q in %s", c.Action.Type, c.Action.Field, p.file)
	if k, l := trapKind(errO), trapKind(errI); k != l {
		r.fail(&r.differential, c, "%s: the original returns %v (err %q), the instrumented module %v (err %q)", what, resO, k, resI, l)
		return
	}
	if errO == nil && !equalWords(resO, resI, resultTypes(p.orig, c.Action)) {
		r.fail(&r.differential, c, "%s: the original returns %#x, the instrumented module %#x", what, resO, resI)
		return
	}
	// The original against the script, so that equal is also right.
	switch c.Type {
	case "assert_return":
		want, err := encodeAll(c.Expected)
		if err != nil {
			r.fail(&r.differential, c, "%v", err)
			return
		}
		if errO != nil {
			r.deviation(c, "%s: traps (%v), want %v", what, errO, c.Expected)
			return
		}
		ok := len(want) == len(resO)
		for i := 0; ok && i < len(want); i++ {
			ok = want[i].matches(resO[i])
		}
		if !ok {
			r.deviation(c, "%s: both return %#x, want %v", what, resO, c.Expected)
		}
	case "assert_trap", "assert_exhaustion":
		if errO == nil {
			r.deviation(c, "%s: both return %#x, want a trap (%q)", what, resO, c.Text)
		}
		if c.Type == "assert_exhaustion" && !p.refused {
			cc := *c
			cc.Action.Module = ""
			r.exhaustion = append(r.exhaustion, cc)
			r.exhaustionPairs = append(r.exhaustionPairs, p)
		}
	}
}

// resultTypes returns the types of what action returns, a v128 counted
// twice (wazero returns it as two words).
func resultTypes(m api.Module, a specAction) []api.ValueType {
	var ts []api.ValueType
	if a.Type == "get" {
		ts = []api.ValueType{m.ExportedGlobal(a.Field).Type()}
	} else {
		ts = m.ExportedFunction(a.Field).Definition().ResultTypes()
	}
	var out []api.ValueType
	for _, t := range ts {
		out = append(out, t)
		if t == specV128 {
			out = append(out, t)
		}
	}
	return out
}

// equalWords reports whether two sides' values of types ts are the same:
// the same bits, except that a funcref is a pointer into its own runtime,
// so only null or not is comparable.
func equalWords(a, b []uint64, ts []api.ValueType) bool {
	if len(a) != len(b) || len(a) != len(ts) {
		return false
	}
	for i := range a {
		if ts[i] == specFuncref {
			if (a[i] == 0) != (b[i] == 0) {
				return false
			}
		} else if a[i] != b[i] {
			return false
		}
	}
	return true
}

// trapKind is the kind of a wazero error ("wasm error: integer overflow"),
// without the stack trace or the function it happened in.
func trapKind(err error) string {
	if err == nil {
		return ""
	}
	s := err.Error()
	if i := strings.Index(s, "wasm error: "); i >= 0 {
		s = s[i:]
	}
	s, _, _ = strings.Cut(s, "\n")
	return s
}

// compareState compares the memory and exported globals of every instance
// after the script.
func (r *specRun) compareState() {
	end := &specCommand{Type: "end of script", Line: 0}
	for _, p := range r.all {
		if p.orig == nil || p.instr == nil {
			continue
		}
		mO, mI := p.orig.Memory(), p.instr.Memory()
		switch {
		case (mO == nil) != (mI == nil):
			r.fail(&r.differential, end, "%s: memory on one side only", p.file)
		case mO != nil:
			bO, _ := mO.Read(0, mO.Size())
			bI, _ := mI.Read(0, mI.Size())
			if !bytes.Equal(bO, bI) {
				at := 0
				for at < len(bO) && at < len(bI) && bO[at] == bI[at] {
					at++
				}
				r.fail(&r.differential, end, "%s (line %d): memories differ (sizes %d and %d, first at byte %d)", p.file, p.line, len(bO), len(bI), at)
			}
		}
		for _, g := range p.globals {
			gO, gI := p.orig.ExportedGlobal(g), p.instr.ExportedGlobal(g)
			if gO == nil || gI == nil || !equalWords([]uint64{gO.Get()}, []uint64{gI.Get()}, []api.ValueType{gO.Type()}) {
				r.fail(&r.differential, end, "%s (line %d): exported global %q differs", p.file, p.line, g)
			}
		}
	}
}

// stopChecks raises the stop flag of instrumented instances and checks
// that unbounded recursions and long loops end in the stop trap. They run
// after compareState: they change the instances.
func (r *specRun) stopChecks() {
	for i, c := range r.exhaustion {
		p := r.exhaustionPairs[i]
		args, err := encodeAll(c.Action.Args)
		if err != nil {
			r.fail(&r.stop, &c, "%v", err)
			continue
		}
		r.stopCall(&c, p, c.Action.Field, plainWords(args), false)
	}
	for _, sc := range specStopCases {
		if sc.file != r.script {
			continue
		}
		c := &specCommand{Type: "stop " + sc.field}
		var p *specPair
		for _, q := range r.all {
			if q.instr == nil || q.refused {
				continue
			}
			if fn := q.instr.ExportedFunction(sc.field); fn != nil && len(fn.Definition().ParamTypes()) == len(sc.args) {
				p = q
				break
			}
		}
		if p == nil {
			continue // the summary reports cases that never ran
		}
		c.Line = p.line
		r.tally.mu.Lock()
		r.tally.stopCovered[r.suite+"/"+sc.file+":"+sc.field] = true
		r.tally.mu.Unlock()
		r.stopCall(c, p, sc.field, sc.args, sc.during)
	}
}

// stopCall calls field of p's instrumented instance with the stop flag
// raised (before the call, or during it from another goroutine) and
// checks that it ends in the stop trap.
func (r *specRun) stopCall(c *specCommand, p *specPair, field string, args []uint64, during bool) {
	r.tally.add(&r.tally.stops, 1)
	stop, ok := p.instr.ExportedGlobal(wasmbin.StopExport).(api.MutableGlobal)
	if !ok {
		r.fail(&r.stop, c, "%s: no mutable global %q", p.file, wasmbin.StopExport)
		return
	}
	fn := p.instr.ExportedFunction(field)
	if fn == nil {
		r.fail(&r.stop, c, "%s: no function %q", p.file, field)
		return
	}
	if !during {
		stop.Set(1)
	}
	done := make(chan error, 1)
	var res []uint64
	go func() {
		var err error
		res, err = fn.Call(r.ctx, args...)
		done <- err
	}()
	if during {
		stop.Set(1)
	}
	select {
	case err := <-done:
		if k := trapKind(err); k != specTrapStop {
			if err == nil {
				r.fail(&r.stop, c, "%s: %s%v with the stop flag raised returns %#x instead of trapping", p.file, field, args, res)
			} else {
				r.fail(&r.stop, c, "%s: %s%v with the stop flag raised ends in %q, not the stop trap %q", p.file, field, args, k, specTrapStop)
			}
		}
	case <-time.After(generous):
		// The call goes on: the goroutine leaks until the test binary ends.
		r.fail(&r.stop, c, "%s: %s%v with the stop flag raised is still running after %v", p.file, field, args, generous)
		return
	}
	stop.Set(0)
}

// safeInstrument is wasmbin.Instrument turning a panic (on bytes no compiler has
// validated) into a test failure rather than the end of the test binary.
func safeInstrument(wasm []byte) (out []byte, loops int, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("instrument panics: %v", p)
		}
	}()
	rw, err := wasmbin.Instrument(wasm)
	if err != nil {
		return nil, 0, err
	}
	return rw.Wasm, rw.Loops, nil
}

// Value types wazero's api does not name.
const (
	specFuncref api.ValueType = 0x70
	specV128    api.ValueType = 0x7b
)
