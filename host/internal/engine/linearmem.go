package engine

import (
	"context"
	"errors"
	"sync/atomic"

	"github.com/tetratelabs/wazero/experimental"
)

// Linear memory outside the Go heap (RATIONALE.md, "Linear
// memory is mapped, not allocated").
//
// wazero's default linear memory is a Go []byte that memory.grow
// replaces with a larger copy. In a host of many plugins that costs
// twice: every grow leaves the old buffer as garbage, and every live
// buffer counts towards the Go heap, so the collector lets the heap grow
// by as much again (GOGC=100) before it collects. A Go plugin's 4-7 MiB
// of memory cost the process two to three times that.
//
// A mapped memory reserves the plugin's whole limit of address space at
// instantiation, without access and without commit charge (PROT_NONE),
// and memory.grow makes the next pages accessible in place: nothing is
// copied, the base never moves, the kernel backs a page only once the
// guest touches it, and the Go collector neither scans nor paces on it.
// Instance.Close unmaps it.
//
// Unmapping is the one new hazard: an access after it is a fault that
// kills the process, where a Go buffer would have stayed valid until
// collected. wazero frees a memory when its module is closed, which can
// happen while a call runs on another goroutine (Engine.Close closes every
// runtime). So the memory counts the calls inside it (enter/leave around
// every call into the instance, instantiation included) and is unmapped
// by whichever of Free and the last leave comes second. Host functions
// may alias guest memory only during their call (region); none keeps a
// slice of it past the call, which the guest would overwrite anyway.

// errMemoryReleased is a call into an instance whose memory is gone: its
// module was closed under it (by Engine.Close).
var errMemoryReleased = errors.New("instance memory was released (engine closed)")

// mappedMemory is one instance's linear memory. state counts the calls
// inside it (low bits) and carries memFreed once wazero has freed it and
// memUnmapped once it is unmapped.
type mappedMemory struct {
	reserved  []byte // the whole reservation, max bytes
	committed uint64 // bytes made accessible; only wazero's grow, on the calling goroutine
	state     atomic.Int64
}

const (
	memFreed    = int64(1) << 40
	memUnmapped = int64(1) << 41
	memCalls    = memFreed - 1
)

// enter records a call into the memory; false if it is freed.
func (m *mappedMemory) enter() bool {
	for {
		s := m.state.Load()
		if s&memFreed != 0 {
			return false
		}
		if m.state.CompareAndSwap(s, s+1) {
			return true
		}
	}
}

// leave ends a call; the last call out of a freed memory unmaps it.
func (m *mappedMemory) leave() {
	if s := m.state.Add(-1); s&memCalls == 0 && s&memFreed != 0 {
		m.unmap()
	}
}

// Reallocate implements experimental.LinearMemory: memory.grow.
func (m *mappedMemory) Reallocate(size uint64) []byte {
	if size > uint64(len(m.reserved)) {
		return nil
	}
	if size > m.committed {
		if err := protect(m.reserved[m.committed:size]); err != nil {
			return nil // the guest's memory.grow fails: out of memory
		}
		m.committed = size
	}
	return m.reserved[:size:size]
}

// Free implements experimental.LinearMemory: wazero closed the module.
func (m *mappedMemory) Free() {
	if s := m.state.Add(memFreed); s&memCalls == 0 {
		m.unmap()
	}
}

func (m *mappedMemory) unmap() {
	for {
		s := m.state.Load()
		if s&memUnmapped != 0 {
			return
		}
		if m.state.CompareAndSwap(s, s|memUnmapped) {
			break
		}
	}
	_ = unmap(m.reserved)
}

// memoryAllocator gives one instantiation its mapped memory and keeps it
// for the Instance. A module without memory leaves mem nil.
type memoryAllocator struct{ mem *mappedMemory }

// Allocate implements experimental.MemoryAllocator. A reservation that
// fails (address space exhausted) falls back to a Go buffer the size of
// the limit; cap is wazero's suggestion, the module's initial size.
func (a *memoryAllocator) Allocate(_, max uint64) experimental.LinearMemory {
	b, err := reserve(max)
	if err != nil {
		return &heapMemory{max: max}
	}
	a.mem = &mappedMemory{reserved: b}
	a.mem.state.Store(1) // the instantiation is the first call inside it
	return a.mem
}

// withMappedMemory arranges for the instantiation under ctx to map its
// memory, where that is safe and supported.
func withMappedMemory(ctx context.Context, cls *class) (context.Context, *memoryAllocator) {
	if !mappedMemorySupported || cls.key.deadline {
		// A class with deadline closes its modules from wazero's own
		// goroutine when a call's context ends (WithCloseOnContextDone),
		// mid-call; only the comparison modes use it.
		return ctx, nil
	}
	a := &memoryAllocator{}
	return experimental.WithMemoryAllocator(ctx, a), a
}

// heapMemory is the fallback: a Go buffer that grows by copying, as
// wazero's own.
type heapMemory struct {
	buf []byte
	max uint64
}

func (h *heapMemory) Reallocate(size uint64) []byte {
	if size > h.max {
		return nil
	}
	if size > uint64(cap(h.buf)) {
		nb := make([]byte, size, max(size, min(h.max, 2*uint64(cap(h.buf)))))
		copy(nb, h.buf)
		h.buf = nb
	}
	h.buf = h.buf[:size]
	return h.buf
}

func (h *heapMemory) Free() { h.buf = nil }
