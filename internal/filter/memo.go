package filter

import (
	"sync"
	"sync/atomic"
	"unsafe"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/informer-host/informer-host/event"
)

// memo remembers evaluation results so that filters sharing a program
// evaluate it once per object state (state predicates) or once per event
// (event predicates), however many plugins ask and from however many
// goroutines.
//
// Why keyed by object identity: every plugin is its own informer listener,
// so each builds its own event.Event, but client-go hands all of them
// the same *Unstructured for the same notification. The pointer identifies
// the notification; the event struct does not.
//
// Why the pointer is not enough, and not held: holding it would keep up to
// MemoSize objects alive after the informer dropped them (ConfigMaps of a
// megabyte each), and an address alone, once its object is freed, may be
// reused by another object. weak.Pointer solves both, but making one looks
// the object up in a per-span list of specials, linearly and under a lock:
// with every cached object carrying one, that costs more than the
// evaluation it saves. So a key is the address (for the hash and the quick
// check) plus the object's uid and resourceVersion, which name one stored
// state of one object: a recycled address cannot match unless it holds the
// same state of the same object, decoded by the same resource's informer,
// which then is the same content. Objects without a resourceVersion (not
// from an apiserver) are not memoized.
//
// Why a fixed table of slots, each holding the latest entry that hashed
// there: it bounds memory without any eviction bookkeeping, and a lookup is
// one atomic load. A collision costs a re-evaluation, never a wrong answer,
// because entries carry their full key.
type memo struct {
	slots []atomic.Pointer[memoEntry]
	mask  uint64
}

// objectID identifies one state of one object, see memo.
type objectID struct {
	addr uintptr
	uid  string
	rv   string
}

// identify returns u's objectID, and false if u cannot be memoized. A nil
// object has the zero ID.
func identify(u *unstructured.Unstructured) (objectID, bool) {
	if u == nil {
		return objectID{}, true
	}
	md, _ := u.Object["metadata"].(map[string]any)
	rv, _ := md["resourceVersion"].(string)
	if rv == "" {
		return objectID{}, false
	}
	uid, _ := md["uid"].(string)
	// The address is only compared and hashed, never turned back into a
	// pointer.
	return objectID{addr: uintptr(unsafe.Pointer(u)), uid: uid, rv: rv}, true
}

type memoKey struct {
	prog uint64
	// res separates resources even when they share an informer (and so
	// object pointers): they may differ in transform.
	res *event.ResourceRef
	// typ and old are set only for event predicates (programs that read
	// type or oldObject).
	typ event.EventType
	obj objectID
	old objectID
}

type memoEntry struct {
	key  memoKey
	once sync.Once
	res  evalResult
}

// evalResult is what one evaluation of a program says.
type evalResult struct {
	match bool
	err   error
}

func newMemo(size int) *memo {
	n := 1
	for n < size {
		n <<= 1
	}
	return &memo{slots: make([]atomic.Pointer[memoEntry], n), mask: uint64(n - 1)}
}

// entry returns the entry for key, creating it if its slot holds another
// key. Callers run the evaluation through entry.once, so that goroutines
// that get the same entry evaluate once and wait for each other.
func (m *memo) entry(key *memoKey) *memoEntry {
	slot := &m.slots[key.hash()&m.mask]
	e := slot.Load()
	if e != nil && e.key == *key {
		return e
	}
	ne := &memoEntry{key: *key}
	if slot.CompareAndSwap(e, ne) {
		return ne
	}
	// Someone else filled the slot meanwhile, perhaps with this key.
	if e = slot.Load(); e != nil && e.key == *key {
		return e
	}
	return ne // unshared: correct, just not memoized
}

// hash mixes the identities in the key; uid and resourceVersion are left
// to the equality check, the addresses already spread keys well.
func (k *memoKey) hash() uint64 {
	h := uint64(k.obj.addr)>>3 ^ k.prog*0x9E3779B9
	h ^= (uint64(k.old.addr) >> 3) * 31
	h ^= (uint64(uintptr(unsafe.Pointer(k.res))) >> 3) * 17
	h ^= uint64(k.typ) * 7
	// Fibonacci hashing moves entropy into the high bits; fold them down
	// to the low bits the mask keeps.
	h *= 0x9E3779B97F4A7C15
	return h ^ h>>29
}
