package engine

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
// make loops up to 24 times slower (a Go plugin's JSON decode 4 times).
//
// instrument rewrites the module so that it checks for itself, cheaply.
// It adds two mutable i32 globals, $stop (exported as stopExport, 0) and
// $budget (checkBudget), and after every `loop` instruction:
//
//	$budget -= 1
//	if $budget == 0 {
//	    drop(memory.grow(0))   ;; an exit to Go: see below
//	    $budget = checkBudget
//	    if $stop { unreachable }
//	}
//
// The fast path is a load, a subtraction, a store and a branch per loop
// iteration, where wazero's check leaves the compiled code for Go on
// every iteration. Every checkBudget iterations the guest exits to Go:
// memory.grow is implemented by a call into Go (a zero delta changes
// nothing), and Go code is where the Go runtime can preempt a goroutine.
// That exit is essential: compiled wasm cannot be preempted, so a guest
// looping without it would hold its thread through a garbage collector's
// stop-the-world, which would then wait for it, with every other
// goroutine (the watchdog that would stop it included), until it returns.
//
// A start section is removed and its function exported as startExport,
// for the engine to call after instantiation, under the start timeout (the
// section would run inside InstantiateModule, before the engine can reach
// the globals).
//
// Such a module runs in a runtime without WithCloseOnContextDone, so a call
// costs what a call without deadline costs. To stop a call, the watchdog
// sets $stop to 1 (MutableGlobal.Set writes the instance's global slot,
// which the compiled code reads); the guest traps within checkBudget loop
// iterations and the call returns. Straight-line code cannot run for long,
// and recursion ends in a stack overflow, so loops are the only place a
// check is needed, the same places wazero checks.
//
// Only the code section's instructions are decoded, to find the loops.
// Anything the decoder does not know (an opcode of a proposal wazero does
// not run either, such as threads or GC, or a malformed body) makes
// instrument fail, and the engine falls back to wazero's checks; so does a
// rewritten module that wazero refuses to compile. Custom sections holding
// DWARF (".debug_*") are dropped, because the code offsets they record
// move; the name section, which stack traces use, is kept (function
// indexes do not change).

const (
	stopExport  = "informer_host.stop"
	startExport = "informer_host.start"
	// checkBudget is how many loop iterations run between exits to Go. An
	// exit costs about 100 ns; a killed call or a garbage collection waits
	// for at most this many iterations.
	checkBudget = 1000
)

// errUninstrumentable is wrapped by instrument's errors.
var errUninstrumentable = errors.New("cannot inject termination checks")

// sectionRank is the position a known section must take in a module.
func sectionRank(id byte) int {
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

type section struct {
	id   byte
	body []byte
}

// instrument returns wasm with injected termination checks, and the number
// of loops it instrumented. wasm must have passed inspect.
func instrument(wasm []byte) ([]byte, int, error) {
	fail := func(format string, args ...any) ([]byte, int, error) {
		return nil, 0, fmt.Errorf("%w: %s", errUninstrumentable, fmt.Sprintf(format, args...))
	}
	if len(wasm) < 8 {
		return fail("truncated module")
	}
	var sections []section
	r := &reader{b: wasm, pos: 8}
	for r.pos < len(r.b) && r.err == nil {
		id := r.byte()
		body := r.bytes(r.u32())
		sections = append(sections, section{id, body})
	}
	if r.err != nil {
		return fail("%v", r.err)
	}

	// Indexes: imported globals come first, so the new global's index is
	// the count of imported and defined globals. The start function, if
	// any, keeps its index and gets an export.
	var importedGlobals, definedGlobals uint32
	start, hasStart, hasMemory := uint32(0), false, false
	for _, s := range sections {
		sr := &reader{b: s.body}
		switch s.id {
		case 2:
			n := sr.u32()
			for i := uint32(0); i < n && sr.err == nil; i++ {
				sr.name()
				sr.name()
				switch kind := sr.byte(); kind {
				case externFunc:
					sr.u32()
				case externTable:
					sr.byte()
					sr.limits()
				case externMemory:
					sr.limits()
					hasMemory = true
				case externGlobal:
					sr.byte()
					sr.byte()
					importedGlobals++
				case externTag:
					sr.byte()
					sr.u32()
				default:
					return fail("import kind 0x%02x", kind)
				}
			}
		case 5:
			hasMemory = sr.u32() > 0
		case 6:
			definedGlobals = sr.u32()
		case 7:
			n := sr.u32()
			for i := uint32(0); i < n && sr.err == nil; i++ {
				if name := sr.name(); name == stopExport || name == startExport {
					return fail("the module already exports %q", name)
				}
				sr.byte()
				sr.u32()
			}
		case 8:
			start, hasStart = sr.u32(), true
		}
		if sr.err != nil {
			return fail("section %d: %v", s.id, sr.err)
		}
	}
	if !hasMemory {
		return fail("no memory")
	}
	stopIdx, budgetIdx := importedGlobals+definedGlobals, importedGlobals+definedGlobals+1
	stop, budget := uleb(uint64(stopIdx)), uleb(uint64(budgetIdx))
	var check []byte
	op := func(b ...byte) { check = append(check, b...) }
	op(0x23)
	op(budget...)        // global.get $budget
	op(0x41, 0x7f, 0x6a) // i32.const -1; i32.add
	op(0x24)
	op(budget...) // global.set $budget
	op(0x23)
	op(budget...)                    // global.get $budget
	op(0x45, 0x04, 0x40)             // i32.eqz; if
	op(0x41, 0x00, 0x40, 0x00, 0x1a) // i32.const 0; memory.grow 0; drop
	op(0x41)
	op(sleb(checkBudget)...) // i32.const checkBudget
	op(0x24)
	op(budget...) // global.set $budget
	op(0x23)
	op(stop...)                // global.get $stop
	op(0x04, 0x40, 0x00, 0x0b) // if; unreachable; end
	op(0x0b)                   // end

	out := make([]byte, 0, len(wasm)+len(wasm)/32+64)
	out = append(out, wasm[:8]...)
	emit := func(id byte, body []byte) {
		out = append(out, id)
		out = append(out, uleb(uint64(len(body)))...)
		out = append(out, body...)
	}
	// mut i32 $stop = 0; mut i32 $budget = checkBudget
	newGlobals := append([]byte{0x7f, 0x01, 0x41, 0x00, 0x0b, 0x7f, 0x01, 0x41}, append(sleb(checkBudget), 0x0b)...)
	exports := func(body []byte) []byte {
		sr := &reader{b: body}
		n := uint32(0)
		if body != nil {
			n = sr.u32()
		}
		extra := uint32(1)
		if hasStart {
			extra = 2
		}
		b := uleb(uint64(n + extra))
		b = append(b, body[sr.pos:]...)
		b = append(b, uleb(uint64(len(stopExport)))...)
		b = append(b, stopExport...)
		b = append(b, externGlobal)
		b = append(b, uleb(uint64(stopIdx))...)
		if hasStart {
			b = append(b, uleb(uint64(len(startExport)))...)
			b = append(b, startExport...)
			b = append(b, externFunc)
			b = append(b, uleb(uint64(start))...)
		}
		return b
	}
	globalsDone, exportsDone := false, false
	loops := 0
	for _, s := range sections {
		rank := sectionRank(s.id)
		// A module without a global or export section gets one, in its
		// place in the section order.
		if rank > sectionRank(6) && !globalsDone {
			emit(6, append(uleb(2), newGlobals...))
			globalsDone = true
		}
		if rank > sectionRank(7) && !exportsDone {
			emit(7, exports(nil))
			exportsDone = true
		}
		switch s.id {
		case 0:
			sr := &reader{b: s.body}
			if name := sr.name(); sr.err == nil && strings.HasPrefix(name, ".debug") {
				continue
			}
			emit(0, s.body)
		case 6:
			sr := &reader{b: s.body}
			sr.u32()
			b := uleb(uint64(definedGlobals + 2))
			b = append(b, s.body[sr.pos:]...)
			emit(6, append(b, newGlobals...))
			globalsDone = true
		case 7:
			emit(7, exports(s.body))
			exportsDone = true
		case 8:
			// Dropped: the engine calls the start function itself.
		case 10:
			body, n, err := instrumentCode(s.body, check)
			if err != nil {
				return fail("%v", err)
			}
			loops += n
			emit(10, body)
		default:
			emit(s.id, s.body)
		}
	}
	if !globalsDone {
		emit(6, append(uleb(2), newGlobals...))
	}
	if !exportsDone {
		emit(7, exports(nil))
	}
	return out, loops, nil
}

// instrumentCode rewrites a code section, inserting check after every
// loop's block type.
func instrumentCode(sec []byte, check []byte) ([]byte, int, error) {
	r := &reader{b: sec}
	n := r.u32()
	out := make([]byte, 0, len(sec)+len(sec)/32)
	out = append(out, uleb(uint64(n))...)
	loops := 0
	var body []byte
	for i := uint32(0); i < n; i++ {
		size := r.u32()
		fn := r.bytes(size)
		if r.err != nil {
			return nil, 0, fmt.Errorf("function %d: %v", i, r.err)
		}
		var at []int
		var err error
		at, err = loopEnds(fn, at[:0])
		if err != nil {
			return nil, 0, fmt.Errorf("function %d: %v", i, err)
		}
		body = body[:0]
		prev := 0
		for _, p := range at {
			body = append(body, fn[prev:p]...)
			body = append(body, check...)
			prev = p
		}
		body = append(body, fn[prev:]...)
		out = append(out, uleb(uint64(len(body)))...)
		out = append(out, body...)
		loops += len(at)
	}
	if r.pos != len(r.b) {
		return nil, 0, errors.New("code section: trailing bytes")
	}
	return out, loops, nil
}

// loopEnds decodes one function body and appends to at the offset just
// after each loop instruction (after its block type).
func loopEnds(fn []byte, at []int) ([]int, error) {
	r := &reader{b: fn}
	// Locals: a vector of (count, type).
	nl := r.u32()
	for i := uint32(0); i < nl && r.err == nil; i++ {
		r.u32()
		r.valType()
	}
	for r.pos < len(r.b) && r.err == nil {
		op := r.byte()
		switch {
		case op == 0x02 || op == 0x04: // block, if
			r.blockType()
		case op == 0x03: // loop
			r.blockType()
			at = append(at, r.pos)
		case op <= 0x01, op == 0x05, op == 0x0b, op == 0x0f, op == 0x1a, op == 0x1b, op == 0xd1:
			// unreachable, nop, else, end, return, drop, select, ref.is_null
		case op == 0x0c || op == 0x0d: // br, br_if
			r.u32()
		case op == 0x0e: // br_table
			n := r.u32()
			for i := uint32(0); i <= n && r.err == nil; i++ {
				r.u32()
			}
		case op == 0x10 || op == 0x12: // call, return_call
			r.u32()
		case op == 0x11 || op == 0x13: // call_indirect, return_call_indirect
			r.u32()
			r.u32()
		case op == 0x1c: // select t*
			n := r.u32()
			for i := uint32(0); i < n && r.err == nil; i++ {
				r.valType()
			}
		case op >= 0x20 && op <= 0x26: // local.*, global.*, table.get/set
			r.u32()
		case op >= 0x28 && op <= 0x3e: // loads and stores
			r.memarg()
		case op == 0x3f || op == 0x40: // memory.size, memory.grow
			r.u32()
		case op == 0x41: // i32.const
			r.sleb(5)
		case op == 0x42: // i64.const
			r.sleb(10)
		case op == 0x43:
			r.bytes(4)
		case op == 0x44:
			r.bytes(8)
		case op >= 0x45 && op <= 0xc4: // numeric, conversions, sign extension
		case op == 0xd0: // ref.null
			if t := r.byte(); t != 0x70 && t != 0x6f {
				r.fail("ref.null of heap type 0x%02x", t)
			}
		case op == 0xd2: // ref.func
			r.u32()
		case op == 0xfc:
			r.miscOp()
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
func (r *reader) blockType() {
	switch b := r.peek(); b {
	case 0x40, 0x7f, 0x7e, 0x7d, 0x7c, 0x7b, 0x70, 0x6f:
		r.pos++
	default:
		if v := r.sleb(5); v < 0 {
			r.fail("block type %d", v)
		}
	}
}

func (r *reader) peek() byte {
	if r.err != nil || r.pos >= len(r.b) {
		r.fail("unexpected end of code")
		return 0
	}
	return r.b[r.pos]
}

// sleb reads a signed LEB128 of at most maxBytes bytes.
func (r *reader) sleb(maxBytes int) int64 {
	var v int64
	for i := 0; i < maxBytes; i++ {
		c := r.byte()
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
func (r *reader) memarg() {
	if align := r.u32(); align&0x40 != 0 {
		r.u32()
	}
	r.u64(10)
}

// miscOp reads the rest of a 0xFC instruction.
func (r *reader) miscOp() {
	switch sub := r.u32(); {
	case sub <= 7: // saturating truncations
	case sub == 8, sub == 10, sub == 12, sub == 14: // memory.init, memory.copy, table.init, table.copy
		r.u32()
		r.u32()
	case sub == 9, sub == 11, sub == 13, sub == 15, sub == 16, sub == 17:
		// data.drop, memory.fill, elem.drop, table.grow, table.size, table.fill
		r.u32()
	default:
		r.fail("opcode 0xfc %d", sub)
	}
}

// simdOp reads the rest of a 0xFD instruction.
func (r *reader) simdOp() {
	switch sub := r.u32(); {
	case sub <= 0x0b, sub == 0x5c, sub == 0x5d: // loads and stores
		r.memarg()
	case sub == 0x0c, sub == 0x0d: // v128.const, i8x16.shuffle
		r.bytes(16)
	case sub >= 0x15 && sub <= 0x22: // extract and replace lane
		r.byte()
	case sub >= 0x54 && sub <= 0x5b: // load and store lane
		r.memarg()
		r.byte()
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
