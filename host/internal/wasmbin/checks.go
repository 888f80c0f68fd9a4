package wasmbin

import (
	"errors"
	"fmt"
	"strings"
)

// Termination checks, injected into the module instead of compiled in by
// wazero.
//
// A call deadline needs a way to stop guest code that never returns. wazero
// offers one (RuntimeConfig.WithCloseOnContextDone): it compiles an indirect
// call to a check at every loop header, and starts a goroutine per call to
// watch the call's context. Both cost: the goroutine about 0.8 µs and three
// allocations per call, paid by every event of every plugin, and the checks
// make loops up to 24 times slower. And loop headers are not enough:
// recursion without a loop (f calling itself twice, 2^60 calls on a
// shallow stack) and one bulk instruction over gigabytes run without ever
// reaching one.
//
// Instrument changes the module so that it checks for itself, cheaply,
// everywhere guest code can run long. It adds three mutable i32 globals,
// $stop (exported, 0), $budget (CheckBudget) and $tmp, and a tick at every
// function entry and after every `loop` instruction:
//
//	$budget -= 1
//	if $budget == 0 {
//	    drop(memory.grow(0))   ;; an exit to Go: see below
//	    $budget = CheckBudget
//	    if $stop { unreachable }
//	}
//
// Bulk instructions are charged by size instead of 1: memory.init one unit
// per 64 bytes, table.init/copy/fill/grow one per 8 elements (the size is
// on top of the stack; $tmp keeps it while the charge is computed), and a
// charge that takes the budget to zero or below runs the same slow path.
// memory.fill and memory.copy, the two that can cover all of a 4 GiB
// memory in one instruction, are replaced by calls of two added functions
// that do the same in 64 KiB pieces, each charged before it runs (copying
// back to front when the destination is above the source, as memmove
// does, and doing a range out of bounds in one piece, so it traps before
// writing anything, as the instruction does). memory.init's source is a
// data segment of the module, so its length is bounded by the module's.
//
// The fast path is a load, a subtraction, a store and a branch, where
// wazero's check leaves the compiled code for Go on every iteration. Every
// CheckBudget units the guest exits to Go: memory.grow is implemented by a
// call into Go (a zero delta changes nothing), and Go code is where the Go
// runtime can preempt a goroutine. That exit is essential: compiled wasm
// cannot be preempted, so a guest running without it would hold its
// thread through a garbage collector's stop-the-world, which would then
// wait for it, with every other goroutine (the watchdog that would stop it
// included), until it returns. Host calls are Go code and can be
// preempted; WASI calls that take a size (random_get, fd_write) end the
// call themselves once it is killed (instance.go, output.go).
//
// A start section is removed and its function exported, for the engine to
// call after instantiation, under the start timeout (the section would run
// inside InstantiateModule, before the engine can reach the globals).
//
// To stop a call, the watchdog sets $stop to 1 (api.MutableGlobal.Set,
// from its own goroutine: abi/RATIONALE.md, Deadlines, shows in wazero's
// code why that write reaches the running guest); the guest traps at its
// next exit to Go and the call returns.
//
// Everything added goes at the end of its index space (globals, types,
// functions, exports), so no index of the module changes; but an invalid
// module whose indexes run past its own would address what was added.
// The engine therefore validates the original with wazero first
// (Engine.validateOriginal) and refuses what wazero refuses.
//
// Only the code section's instructions are decoded. Anything the decoder
// does not know (an opcode of a proposal wazero does not run either, such
// as threads or GC, or a malformed body) makes Instrument fail, and the
// module is refused: there is no fallback to wazero's checks, which stop
// neither recursion nor bulk instructions. Custom sections holding DWARF
// (".debug_*") are dropped, because the code offsets they record move;
// the name section, which stack traces use, is kept (function indexes do
// not change).

const (
	// StopExport and StartExport are the names Instrument gives the
	// flag and the start function's export, unless the module already
	// uses them (Instrumented.Stop and Start have the names chosen).
	StopExport  = "informer_host.stop"
	StartExport = "informer_host.start"
	// CheckBudget is how many budget units run between exits to Go. A
	// unit is a function entry, a loop iteration or bulkUnit bytes of a
	// bulk instruction; an exit costs about 100 ns. A killed call or a
	// garbage collection waits for at most this many units.
	CheckBudget = 1000
	// bulkShift: a bulk memory instruction is charged one unit per
	// 1<<bulkShift bytes (64: about as long as a loop iteration takes),
	// a table instruction one per 1<<tableShift elements (8 bytes each).
	bulkShift  = 6
	tableShift = 3
	// bulkChunk is the piece memory.fill and memory.copy are cut into, so
	// that one instruction over gigabytes still exits to Go every
	// bulkChunk bytes (compiled code fills and copies through Go's
	// memmove, called directly, which the runtime cannot preempt).
	bulkChunk = 64 << 10
)

// ErrUninstrumentable is wrapped by Instrument's errors.
var ErrUninstrumentable = errors.New("cannot inject termination checks")

// SectionRank is the position a known section must take in a module (0
// for a custom section, which may go anywhere).
func SectionRank(id byte) int {
	switch id {
	case 1, 2, 3, 4, 5:
		return int(id)
	case 13: // tag
		return 6
	case 6:
		return 7
	case 7:
		return 8
	case 8:
		return 9
	case 9:
		return 10
	case 12: // data count
		return 11
	case 10:
		return 12
	case 11:
		return 13
	}
	return 0 // custom
}

// Section is one section of a module: its id and its body.
type Section struct {
	ID   byte
	Body []byte
}

// Sections splits wasm, past its 8-byte header, into its sections.
func Sections(wasm []byte) ([]Section, error) {
	if len(wasm) < 8 {
		return nil, errors.New("truncated module")
	}
	var out []Section
	r := &Reader{b: wasm, pos: 8}
	for r.pos < len(r.b) && r.err == nil {
		id := r.Byte()
		out = append(out, Section{id, r.Bytes(r.U32())})
	}
	return out, r.err
}

// AppendSection appends the section id with body to out.
func AppendSection(out []byte, id byte, body []byte) []byte {
	out = append(out, id)
	out = append(out, uleb(uint64(len(body)))...)
	return append(out, body...)
}

// RewriteVersion names what Instrument makes of a module. The engine
// keeps rewritten modules on disk by the original's sha256 under it
// (with a fingerprint of Instrument's output for a reference module, a
// tripwire): raise it with any change to what Instrument writes.
const RewriteVersion = 1

// Instrumented is a module with injected termination checks.
type Instrumented struct {
	Wasm []byte
	// Loops is the number of loops instrumented (function entries and
	// bulk instructions are checked too).
	Loops int
	// Stop and Start are the export names of the flag and of the start
	// function ("" without one): StopExport and StartExport unless the
	// module already uses those names.
	Stop, Start string
}

// moduleCounts is what Instrument needs to know of a module before it
// changes it.
type moduleCounts struct {
	importedFuncs, definedFuncs     uint32
	importedGlobals, definedGlobals uint32
	types                           uint32
	start                           uint32
	hasStart, hasMemory             bool
	exports                         map[string]bool
}

// Instrument returns wasm with injected termination checks. wasm must
// have passed Decode and wazero's validation (the engine's
// validateOriginal): the rewriter adds globals, a type and functions, so
// an index out of range in an invalid module could become a valid
// reference to them. Its errors wrap ErrUninstrumentable.
func Instrument(wasm []byte) (*Instrumented, error) {
	fail := func(format string, args ...any) (*Instrumented, error) {
		return nil, fmt.Errorf("%w: %s", ErrUninstrumentable, fmt.Sprintf(format, args...))
	}
	sections, err := Sections(wasm)
	if err != nil {
		return fail("%v", err)
	}

	// Indexes: imports come first in each index space, and everything
	// added goes at the end, so no existing index changes.
	mc := moduleCounts{exports: map[string]bool{}}
	for _, s := range sections {
		sr := &Reader{b: s.Body}
		switch s.ID {
		case 1:
			mc.types = sr.U32()
		case 2:
			n := sr.U32()
			for i := uint32(0); i < n && sr.err == nil; i++ {
				sr.Name()
				sr.Name()
				switch kind := sr.Byte(); kind {
				case ExternFunc:
					sr.U32()
					mc.importedFuncs++
				case ExternTable:
					sr.Byte()
					sr.Limits()
				case ExternMemory:
					sr.Limits()
					mc.hasMemory = true
				case ExternGlobal:
					sr.Byte()
					sr.Byte()
					mc.importedGlobals++
				case ExternTag:
					sr.Byte()
					sr.U32()
				default:
					return fail("import kind 0x%02x", kind)
				}
			}
		case 3:
			mc.definedFuncs = sr.U32()
		case 5:
			mc.hasMemory = sr.U32() > 0
		case 6:
			mc.definedGlobals = sr.U32()
		case 7:
			n := sr.U32()
			for i := uint32(0); i < n && sr.err == nil; i++ {
				mc.exports[sr.Name()] = true
				sr.Byte()
				sr.U32()
			}
		case 8:
			if mc.hasStart {
				return fail("two start sections")
			}
			mc.start, mc.hasStart = sr.U32(), true
		}
		if sr.err != nil {
			return fail("section %d: %v", s.ID, sr.err)
		}
	}
	if !mc.hasMemory {
		return fail("no memory")
	}
	rw := &Instrumented{Stop: freeName(mc.exports, StopExport)}
	if mc.hasStart {
		rw.Start = freeName(mc.exports, StartExport)
	}
	g := newCheckCode(mc.importedGlobals + mc.definedGlobals)
	// The helpers for memory.fill and memory.copy: type (i32 i32 i32) -> (),
	// functions after the module's own.
	helperType := mc.types
	g.fillFunc = mc.importedFuncs + mc.definedFuncs
	g.copyFunc = g.fillFunc + 1
	helpers := [][]byte{g.fillHelper(), g.copyHelper()}

	out := make([]byte, 0, len(wasm)+len(wasm)/16+512)
	out = append(out, wasm[:8]...)
	emit := func(id byte, body []byte) {
		out = append(out, id)
		out = append(out, uleb(uint64(len(body)))...)
		out = append(out, body...)
	}
	// appendVec returns a vector section body with extra entries added.
	appendVec := func(body []byte, extra uint32, entries []byte) []byte {
		n, rest := uint32(0), []byte(nil)
		if body != nil {
			sr := &Reader{b: body}
			n = sr.U32()
			rest = body[sr.pos:]
		}
		b := uleb(uint64(n + extra))
		b = append(b, rest...)
		return append(b, entries...)
	}
	var (
		helperTypeEntry = []byte{0x60, 0x03, 0x7f, 0x7f, 0x7f, 0x00}
		helperFuncs     = append(uleb(uint64(helperType)), uleb(uint64(helperType))...)
		// mut i32 $stop = 0; mut i32 $budget = CheckBudget; mut i32 $tmp = 0
		newGlobals = append(append([]byte{0x7f, 0x01, 0x41, 0x00, 0x0b, 0x7f, 0x01, 0x41}, sleb(CheckBudget)...),
			0x0b, 0x7f, 0x01, 0x41, 0x00, 0x0b)
	)
	exportEntry := func(name string, kind byte, idx uint32) []byte {
		b := append(uleb(uint64(len(name))), name...)
		b = append(b, kind)
		return append(b, uleb(uint64(idx))...)
	}
	newExports := exportEntry(rw.Stop, ExternGlobal, g.stopIdx)
	nExports := uint32(1)
	if mc.hasStart {
		newExports = append(newExports, exportEntry(rw.Start, ExternFunc, mc.start)...)
		nExports++
	}
	var codeHelpers []byte
	for _, h := range helpers {
		codeHelpers = append(codeHelpers, uleb(uint64(len(h)))...)
		codeHelpers = append(codeHelpers, h...)
	}

	// A module without one of the sections that grow gets one, in its
	// place in the section order.
	done := map[byte]bool{}
	missing := func(id byte, body []byte) {
		if !done[id] {
			emit(id, body)
			done[id] = true
		}
	}
	for _, s := range sections {
		rank := SectionRank(s.ID)
		if rank > SectionRank(1) {
			missing(1, appendVec(nil, 1, helperTypeEntry))
		}
		if rank > SectionRank(3) {
			missing(3, appendVec(nil, 2, helperFuncs))
		}
		if rank > SectionRank(6) {
			missing(6, appendVec(nil, 3, newGlobals))
		}
		if rank > SectionRank(7) {
			missing(7, appendVec(nil, nExports, newExports))
		}
		if rank > SectionRank(10) && mc.definedFuncs == 0 {
			missing(10, appendVec(nil, 2, codeHelpers))
		}
		switch s.ID {
		case 0:
			sr := &Reader{b: s.Body}
			if name := sr.Name(); sr.err == nil && strings.HasPrefix(name, ".debug") {
				continue
			}
			emit(0, s.Body)
		case 1:
			missing(1, appendVec(s.Body, 1, helperTypeEntry))
		case 3:
			missing(3, appendVec(s.Body, 2, helperFuncs))
		case 6:
			missing(6, appendVec(s.Body, 3, newGlobals))
		case 7:
			missing(7, appendVec(s.Body, nExports, newExports))
		case 8:
			// Dropped: the engine calls the start function itself.
		case 10:
			body, n, err := g.instrumentCode(s.Body)
			if err != nil {
				return fail("%v", err)
			}
			rw.Loops += n
			emit(10, appendVec(body, 2, codeHelpers))
			done[10] = true
		default:
			emit(s.ID, s.Body)
		}
	}
	missing(1, appendVec(nil, 1, helperTypeEntry))
	missing(3, appendVec(nil, 2, helperFuncs))
	missing(6, appendVec(nil, 3, newGlobals))
	missing(7, appendVec(nil, nExports, newExports))
	if !done[10] {
		if mc.definedFuncs != 0 {
			return fail("functions without a code section")
		}
		missing(10, appendVec(nil, 2, codeHelpers))
	}
	rw.Wasm = out
	return rw, nil
}

// freeName returns name, or name with a suffix if the module already
// exports it.
func freeName(taken map[string]bool, name string) string {
	for i := 2; taken[name]; i++ {
		name = fmt.Sprintf("%s.%d", strings.TrimRight(name, ".0123456789"), i)
	}
	taken[name] = true
	return name
}

// checkCode builds the injected instructions for one module.
type checkCode struct {
	stopIdx, budgetIdx, tmpIdx uint32
	stop, budget, tmp          []byte // their LEB128 encodings
	fillFunc, copyFunc         uint32
}

func newCheckCode(globals uint32) *checkCode {
	g := &checkCode{stopIdx: globals, budgetIdx: globals + 1, tmpIdx: globals + 2}
	g.stop, g.budget, g.tmp = uleb(uint64(g.stopIdx)), uleb(uint64(g.budgetIdx)), uleb(uint64(g.tmpIdx))
	return g
}

// slow is the exit to Go and the look at the flag, run when the budget is
// spent:
//
//	drop(memory.grow(0))   ;; an exit to Go
//	$budget = CheckBudget
//	if $stop { unreachable }
func (g *checkCode) slow(b []byte) []byte {
	b = append(b, 0x41, 0x00, 0x40, 0x00, 0x1a) // i32.const 0; memory.grow 0; drop
	b = append(b, 0x41)
	b = append(b, sleb(CheckBudget)...)
	b = append(b, 0x24)
	b = append(b, g.budget...)
	b = append(b, 0x23)
	b = append(b, g.stop...)
	return append(b, 0x04, 0x40, 0x00, 0x0b) // if; unreachable; end
}

// tick is the check at every function entry and loop header:
//
//	$budget -= 1
//	if $budget == 0 { slow }
func (g *checkCode) tick() []byte {
	var b []byte
	b = append(b, 0x23)
	b = append(b, g.budget...)
	b = append(b, 0x41, 0x7f, 0x6a) // i32.const -1; i32.add
	b = append(b, 0x24)
	b = append(b, g.budget...)
	b = append(b, 0x23)
	b = append(b, g.budget...)
	b = append(b, 0x45, 0x04, 0x40) // i32.eqz; if
	b = g.slow(b)
	return append(b, 0x0b)
}

// charge appends a charge of the units that push puts on the stack:
//
//	$budget -= units
//	if $budget <= 0 { slow }
//
// After either check the budget is positive again, so tick's test for
// zero stays exact.
func (g *checkCode) charge(b []byte, push ...byte) []byte {
	b = append(b, 0x23)
	b = append(b, g.budget...)
	b = append(b, push...)
	b = append(b, 0x6b, 0x24) // i32.sub; global.set
	b = append(b, g.budget...)
	b = append(b, 0x23)
	b = append(b, g.budget...)
	b = append(b, 0x41, 0x00, 0x4c, 0x04, 0x40) // i32.const 0; i32.le_s; if
	b = g.slow(b)
	return append(b, 0x0b)
}

// chargeTop charges for the size on top of the stack (bulk instructions
// take it last), leaving it there:
//
//	$tmp = size; charge(size >> shift); push $tmp
func (g *checkCode) chargeTop(shift byte) []byte {
	b := append([]byte{0x24}, g.tmp...)
	push := append([]byte{0x23}, g.tmp...)
	b = g.charge(b, append(push, 0x41, shift, 0x76)...) // i32.const shift; i32.shr_u
	b = append(b, 0x23)
	return append(b, g.tmp...)
}

// Locals of the helpers: their parameters.
const (
	hDst = 0
	hSrc = 1 // memory.copy's source; memory.fill's value
	hLen = 2
)

// outOfBounds pushes whether [local a, +len) is outside the memory:
// u64(a) + u64(len) > memory.size << 16.
func outOfBounds(b []byte, a byte) []byte {
	b = append(b, 0x20, a, 0xad, 0x20, hLen, 0xad, 0x7c) // i64(a) + i64(len)
	b = append(b, 0x3f, 0x00, 0xad, 0x42, 16, 0x86)      // i64(memory.size) << 16
	return append(b, 0x56)                               // i64.gt_u
}

// fillHelper is memory.fill(dst, value, len) cut into bulkChunk pieces,
// each charged before it runs:
//
//	if len > chunk {
//	    if out of bounds { memory.fill(dst, value, len) }  ;; traps, writing nothing
//	    do { charge; memory.fill(dst, value, chunk); dst += chunk; len -= chunk } while len > chunk
//	}
//	charge; memory.fill(dst, value, len)
func (g *checkCode) fillHelper() []byte {
	op := func(b []byte, n ...byte) []byte {
		b = append(b, 0x20, hDst, 0x20, hSrc)
		b = append(b, n...)
		return append(b, 0xfc, 0x0b, 0x00)
	}
	return g.chunked(func(b []byte) []byte {
		b = append(b, outOfBounds(nil, hDst)...)
		b = append(b, 0x04, 0x40)
		b = op(b, 0x20, hLen)
		b = append(b, 0x0b)
		b = append(b, 0x03, 0x40) // loop
		b = g.charge(b, append([]byte{0x41}, sleb(bulkChunk>>bulkShift)...)...)
		b = op(b, append([]byte{0x41}, sleb(bulkChunk)...)...)
		b = advance(b, hDst)
		b = shrink(b)
		return loopWhileLong(b)
	}, func(b []byte) []byte { return op(b, 0x20, hLen) })
}

// copyHelper is memory.copy(dst, src, len) cut into bulkChunk pieces,
// front to back when dst <= src and back to front otherwise, so that no
// piece overwrites source bytes a later piece reads (memmove's rule):
//
//	if len > chunk {
//	    if either range is out of bounds { memory.copy(dst, src, len) }  ;; traps
//	    if dst <= src {
//	        do { charge; memory.copy(dst, src, chunk); dst += chunk; src += chunk; len -= chunk } while len > chunk
//	    } else {
//	        do { charge; len -= chunk; memory.copy(dst+len, src+len, chunk) } while len > chunk
//	    }
//	}
//	charge; memory.copy(dst, src, len)
func (g *checkCode) copyHelper() []byte {
	op := func(b []byte) []byte { return append(b, 0xfc, 0x0a, 0x00, 0x00) }
	chunk := sleb(bulkChunk)
	return g.chunked(func(b []byte) []byte {
		b = append(b, outOfBounds(nil, hDst)...)
		b = append(b, outOfBounds(nil, hSrc)...)
		b = append(b, 0x72, 0x04, 0x40) // i32.or; if
		b = op(append(b, 0x20, hDst, 0x20, hSrc, 0x20, hLen))
		b = append(b, 0x0b)
		b = append(b, 0x20, hDst, 0x20, hSrc, 0x4d, 0x04, 0x40) // dst <=u src; if
		b = append(b, 0x03, 0x40)
		b = g.charge(b, append([]byte{0x41}, sleb(bulkChunk>>bulkShift)...)...)
		b = append(b, 0x20, hDst, 0x20, hSrc, 0x41)
		b = op(append(b, chunk...))
		b = advance(b, hDst)
		b = advance(b, hSrc)
		b = shrink(b)
		b = loopWhileLong(b)
		b = append(b, 0x05) // else
		b = append(b, 0x03, 0x40)
		b = g.charge(b, append([]byte{0x41}, sleb(bulkChunk>>bulkShift)...)...)
		b = shrink(b)
		b = append(b, 0x20, hDst, 0x20, hLen, 0x6a, 0x20, hSrc, 0x20, hLen, 0x6a, 0x41)
		b = op(append(b, chunk...))
		b = loopWhileLong(b)
		return append(b, 0x0b)
	}, func(b []byte) []byte { return op(append(b, 0x20, hDst, 0x20, hSrc, 0x20, hLen)) })
}

// chunked is a helper's body: no locals, `if len > chunk { long }`, then
// the charged instruction for what is left.
func (g *checkCode) chunked(long, last func([]byte) []byte) []byte {
	b := []byte{0x00} // no locals
	b = append(b, 0x20, hLen, 0x41)
	b = append(b, sleb(bulkChunk)...)
	b = append(b, 0x4b, 0x04, 0x40) // i32.gt_u; if
	b = long(b)
	b = append(b, 0x0b)
	b = g.charge(b, 0x20, hLen, 0x41, bulkShift, 0x76) // len >> bulkShift
	b = last(b)
	return append(b, 0x0b)
}

// advance adds bulkChunk to a local.
func advance(b []byte, local byte) []byte {
	b = append(b, 0x20, local, 0x41)
	b = append(b, sleb(bulkChunk)...)
	return append(b, 0x6a, 0x21, local)
}

// shrink takes bulkChunk from len.
func shrink(b []byte) []byte {
	b = append(b, 0x20, hLen, 0x41)
	b = append(b, sleb(bulkChunk)...)
	return append(b, 0x6b, 0x21, hLen)
}

// loopWhileLong closes a loop: br_if 0 (len > chunk); end.
func loopWhileLong(b []byte) []byte {
	b = append(b, 0x20, hLen, 0x41)
	b = append(b, sleb(bulkChunk)...)
	return append(b, 0x4b, 0x0d, 0x00, 0x0b)
}

// edit is one change to a function body found by scanBody.
type edit struct {
	pos, end int // replace fn[pos:end] (end == pos: insert at pos)
	kind     editKind
}

type editKind int

const (
	editTick        editKind = iota // insert tick (function entry, loop header)
	editChargeBulk                  // insert chargeTop(bulkShift): memory.init
	editChargeTable                 // insert chargeTop(tableShift): table.init, copy, fill, grow
	editFill                        // replace memory.fill with a call of the fill helper
	editCopy                        // replace memory.copy with a call of the copy helper
)

// instrumentCode rewrites a code section: a tick at every function entry
// and loop header, a charge before every bulk instruction.
func (g *checkCode) instrumentCode(sec []byte) ([]byte, int, error) {
	r := &Reader{b: sec}
	n := r.U32()
	out := make([]byte, 0, len(sec)+len(sec)/16)
	out = append(out, uleb(uint64(n))...)
	loops := 0
	tick := g.tick()
	var body []byte
	var edits []edit
	for i := uint32(0); i < n; i++ {
		size := r.U32()
		fn := r.Bytes(size)
		if r.err != nil {
			return nil, 0, fmt.Errorf("function %d: %v", i, r.err)
		}
		var err error
		edits, err = scanBody(fn, edits[:0])
		if err != nil {
			return nil, 0, fmt.Errorf("function %d: %v", i, err)
		}
		body = body[:0]
		prev := 0
		for _, e := range edits {
			body = append(body, fn[prev:e.pos]...)
			switch e.kind {
			case editTick:
				body = append(body, tick...)
				loops++
			case editChargeBulk:
				body = append(body, g.chargeTop(bulkShift)...)
			case editChargeTable:
				body = append(body, g.chargeTop(tableShift)...)
			case editFill:
				body = append(body, 0x10)
				body = append(body, uleb(uint64(g.fillFunc))...)
			case editCopy:
				body = append(body, 0x10)
				body = append(body, uleb(uint64(g.copyFunc))...)
			}
			prev = e.end
		}
		body = append(body, fn[prev:]...)
		out = append(out, uleb(uint64(len(body)))...)
		out = append(out, body...)
		loops-- // the entry tick is not a loop
	}
	if r.pos != len(r.b) {
		return nil, 0, errors.New("code section: trailing bytes")
	}
	return out, loops, nil
}

// scanBody decodes one function body and appends to at the edits it
// needs: a tick after the locals and after each loop instruction (after
// its block type), a charge before or a call instead of each bulk
// instruction.
func scanBody(fn []byte, at []edit) ([]edit, error) {
	r := &Reader{b: fn}
	// Locals: a vector of (count, type).
	nl := r.U32()
	for i := uint32(0); i < nl && r.err == nil; i++ {
		r.U32()
		r.valType()
	}
	at = append(at, edit{pos: r.pos, end: r.pos, kind: editTick})
	for r.pos < len(r.b) && r.err == nil {
		opPos := r.pos
		op := r.Byte()
		switch {
		case op == 0x02 || op == 0x04: // block, if
			r.blockType()
		case op == 0x03: // loop
			r.blockType()
			at = append(at, edit{pos: r.pos, end: r.pos, kind: editTick})
		case op <= 0x01, op == 0x05, op == 0x0b, op == 0x0f, op == 0x1a, op == 0x1b, op == 0xd1:
			// unreachable, nop, else, end, return, drop, select, ref.is_null
		case op == 0x0c || op == 0x0d: // br, br_if
			r.U32()
		case op == 0x0e: // br_table
			n := r.U32()
			for i := uint32(0); i <= n && r.err == nil; i++ {
				r.U32()
			}
		case op == 0x10 || op == 0x12: // call, return_call
			r.U32()
		case op == 0x11 || op == 0x13: // call_indirect, return_call_indirect
			r.U32()
			r.U32()
		case op == 0x1c: // select t*
			n := r.U32()
			for i := uint32(0); i < n && r.err == nil; i++ {
				r.valType()
			}
		case op >= 0x20 && op <= 0x26: // local.*, global.*, table.get/set
			r.U32()
		case op >= 0x28 && op <= 0x3e: // loads and stores
			r.memarg()
		case op == 0x3f || op == 0x40: // memory.size, memory.grow
			r.U32()
		case op == 0x41: // i32.const
			r.sleb(5)
		case op == 0x42: // i64.const
			r.sleb(10)
		case op == 0x43:
			r.Bytes(4)
		case op == 0x44:
			r.Bytes(8)
		case op >= 0x45 && op <= 0xc4: // numeric, conversions, sign extension
		case op == 0xd0: // ref.null
			if t := r.Byte(); t != 0x70 && t != 0x6f {
				r.fail("ref.null of heap type 0x%02x", t)
			}
		case op == 0xd2: // ref.func
			r.U32()
		case op == 0xfc:
			switch r.miscOp() {
			case 8: // memory.init
				at = append(at, edit{pos: opPos, end: opPos, kind: editChargeBulk})
			case 11: // memory.fill
				at = append(at, edit{pos: opPos, end: r.pos, kind: editFill})
			case 10: // memory.copy
				at = append(at, edit{pos: opPos, end: r.pos, kind: editCopy})
			case 12, 14, 15, 17: // table.init, table.copy, table.grow, table.fill
				at = append(at, edit{pos: opPos, end: opPos, kind: editChargeTable})
			}
		case op == 0xfd:
			r.simdOp()
		default:
			r.fail("opcode 0x%02x", op)
		}
	}
	if r.err != nil {
		return nil, r.err
	}
	return at, nil
}

// blockType reads a block type: empty, a value type or a type index.
func (r *Reader) blockType() {
	switch b := r.peek(); b {
	case 0x40, 0x7f, 0x7e, 0x7d, 0x7c, 0x7b, 0x70, 0x6f:
		r.pos++
	default:
		if v := r.sleb(5); v < 0 {
			r.fail("block type %d", v)
		}
	}
}

func (r *Reader) peek() byte {
	if r.err != nil || r.pos >= len(r.b) {
		r.fail("unexpected end of code")
		return 0
	}
	return r.b[r.pos]
}

// sleb reads a signed LEB128 of at most maxBytes bytes.
func (r *Reader) sleb(maxBytes int) int64 {
	var v int64
	for i := 0; i < maxBytes; i++ {
		c := r.Byte()
		if r.err != nil {
			return 0
		}
		v |= int64(c&0x7f) << (7 * i)
		if c&0x80 == 0 {
			if shift := 7 * (i + 1); shift < 64 && c&0x40 != 0 {
				v |= -1 << shift
			}
			return v
		}
	}
	r.fail("LEB128 too long")
	return 0
}

// memarg reads a memory immediate: alignment (with the multi-memory flag,
// a memory index) and offset.
func (r *Reader) memarg() {
	if align := r.U32(); align&0x40 != 0 {
		r.U32()
	}
	r.u64(10)
}

// miscOp reads the rest of a 0xFC instruction and returns its
// sub-opcode.
func (r *Reader) miscOp() uint32 {
	sub := r.U32()
	switch {
	case sub <= 7: // saturating truncations
	case sub == 8, sub == 10, sub == 12, sub == 14: // memory.init, memory.copy, table.init, table.copy
		r.U32()
		r.U32()
	case sub == 9, sub == 11, sub == 13, sub == 15, sub == 16, sub == 17:
		// data.drop, memory.fill, elem.drop, table.grow, table.size, table.fill
		r.U32()
	default:
		r.fail("opcode 0xfc %d", sub)
	}
	return sub
}

// simdOp reads the rest of a 0xFD instruction.
func (r *Reader) simdOp() {
	switch sub := r.U32(); {
	case sub <= 0x0b, sub == 0x5c, sub == 0x5d: // loads and stores
		r.memarg()
	case sub == 0x0c, sub == 0x0d: // v128.const, i8x16.shuffle
		r.Bytes(16)
	case sub >= 0x15 && sub <= 0x22: // extract and replace lane
		r.Byte()
	case sub >= 0x54 && sub <= 0x5b: // load and store lane
		r.memarg()
		r.Byte()
	case sub <= 0xff:
	default:
		r.fail("opcode 0xfd %d", sub)
	}
}

func sleb(v int64) []byte {
	var b []byte
	for {
		c := byte(v & 0x7f)
		v >>= 7
		if (v == 0 && c&0x40 == 0) || (v == -1 && c&0x40 != 0) {
			return append(b, c)
		}
		b = append(b, c|0x80)
	}
}

func uleb(v uint64) []byte {
	var b []byte
	for {
		c := byte(v & 0x7f)
		v >>= 7
		if v != 0 {
			b = append(b, c|0x80)
			continue
		}
		return append(b, c)
	}
}
