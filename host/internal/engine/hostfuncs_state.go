package engine

import (
	"context"
	"encoding/binary"

	"github.com/tetratelabs/wazero/api"

	"github.com/informer-host/informer-host/abi"
)

// StateBucket is a plugin's key-value state (ABI.md §16.2), as the state
// functions reach it. The host adapts its store to it; the engine passes
// the codes through, so a failure the store cannot name (an I/O error)
// is the implementation's to log, as abi.ErrInternal.
//
// The bucket belongs to the host, not to the instance: an instance that
// traps, or the next version of the module, gets the same one. The []byte
// arguments alias the plugin's memory: they are valid only during the
// call and must not be kept.
type StateBucket interface {
	// Get returns key's value, which the caller must not modify, and its
	// version (> 0).
	Get(key []byte) (value []byte, version int64, ok bool)
	// Set stores a copy of value; ifVersion is -1 (any), 0 (only if absent)
	// or the version the key must be at. It returns the new version, or
	// code abi.ErrConflict, ErrQuota, ErrInvalid or ErrInternal.
	Set(key, value []byte, ifVersion int64) (version int64, code int32)
	// Delete removes key; ifVersion is -1 (any) or the version it must be
	// at. It returns 0, or abi.ErrAbsent, ErrConflict, ErrInvalid or
	// ErrInternal.
	Delete(key []byte, ifVersion int64) (code int32)
	// List calls fn with up to limit keys starting with prefix and sorting
	// after after, in byte order, and returns how many.
	List(prefix, after []byte, limit int, fn func(key string) bool) int
}

// capState is the capability name the state functions are denied under.
const capState = "state"

// stateBucket returns the instance's bucket, or nil after reporting the
// denial of function fn.
func (st *callState) stateBucket(fn string) StateBucket {
	if st == nil {
		return nil
	}
	if st.state == nil && st.onDenied != nil {
		st.onDenied(capState, fn)
	}
	return st.state
}

func validStateKey(key []byte) bool { return len(key) > 0 && len(key) <= abi.StateMaxKeyLen }

// state_get(key_ptr, key_len, ptr, len, version_ptr i32) -> i32
func stateGet(ctx context.Context, mod api.Module, stack []uint64) {
	st := stateOf(ctx)
	keyPtr, keyLen, ptr, n, verPtr := uint32(stack[0]), i32(stack[1]), uint32(stack[2]), i32(stack[3]), uint32(stack[4])
	key, ok := region(mod, keyPtr, keyLen)
	if !ok {
		setI32(stack, abi.ErrBounds)
		return
	}
	if _, ok := region(mod, ptr, n); !ok {
		setI32(stack, abi.ErrBounds)
		return
	}
	ver, ok := region(mod, verPtr, 8)
	if !ok {
		setI32(stack, abi.ErrBounds)
		return
	}
	b := st.stateBucket(abi.ImportStateGet)
	if b == nil {
		setI32(stack, abi.ErrDenied)
		return
	}
	if !validStateKey(key) {
		setI32(stack, abi.ErrInvalid)
		return
	}
	v, version, found := b.Get(key)
	if !found {
		setI32(stack, abi.ErrAbsent)
		return
	}
	size := copyOut(mod, ptr, n, v)
	binary.LittleEndian.PutUint64(ver, uint64(version))
	setI32(stack, size)
}

// state_set(key_ptr, key_len, val_ptr, val_len i32, if_version i64) -> i64
func stateSet(ctx context.Context, mod api.Module, stack []uint64) {
	st := stateOf(ctx)
	keyPtr, keyLen, valPtr, valLen, ifVersion := uint32(stack[0]), i32(stack[1]), uint32(stack[2]), i32(stack[3]), int64(stack[4])
	fail := func(code int32) { stack[0] = uint64(int64(code)) }
	key, ok := region(mod, keyPtr, keyLen)
	if !ok {
		fail(abi.ErrBounds)
		return
	}
	val, ok := region(mod, valPtr, valLen)
	if !ok {
		fail(abi.ErrBounds)
		return
	}
	b := st.stateBucket(abi.ImportStateSet)
	if b == nil {
		fail(abi.ErrDenied)
		return
	}
	if !validStateKey(key) || ifVersion < abi.StateAnyVersion {
		fail(abi.ErrInvalid)
		return
	}
	version, code := b.Set(key, val, ifVersion)
	if code != 0 {
		fail(code)
		return
	}
	stack[0] = uint64(version)
}

// state_delete(key_ptr, key_len i32, if_version i64) -> i32
func stateDelete(ctx context.Context, mod api.Module, stack []uint64) {
	st := stateOf(ctx)
	keyPtr, keyLen, ifVersion := uint32(stack[0]), i32(stack[1]), int64(stack[2])
	key, ok := region(mod, keyPtr, keyLen)
	if !ok {
		setI32(stack, abi.ErrBounds)
		return
	}
	b := st.stateBucket(abi.ImportStateDelete)
	if b == nil {
		setI32(stack, abi.ErrDenied)
		return
	}
	if !validStateKey(key) || (ifVersion != abi.StateAnyVersion && ifVersion <= 0) {
		setI32(stack, abi.ErrInvalid)
		return
	}
	if code := b.Delete(key, ifVersion); code != 0 {
		setI32(stack, code)
		return
	}
	setI32(stack, 0)
}

// state_list(prefix_ptr, prefix_len, after_ptr, after_len, max, ptr, len i32) -> i64
func stateList(ctx context.Context, mod api.Module, stack []uint64) {
	st := stateOf(ctx)
	prefixPtr, prefixLen, afterPtr, afterLen := uint32(stack[0]), i32(stack[1]), uint32(stack[2]), i32(stack[3])
	limit, ptr, n := i32(stack[4]), uint32(stack[5]), i32(stack[6])
	fail := func(code int32) { stack[0] = uint64(int64(code)) }
	prefix, ok := region(mod, prefixPtr, prefixLen)
	if !ok {
		fail(abi.ErrBounds)
		return
	}
	after, ok := region(mod, afterPtr, afterLen)
	if !ok {
		fail(abi.ErrBounds)
		return
	}
	if _, ok := region(mod, ptr, n); !ok {
		fail(abi.ErrBounds)
		return
	}
	b := st.stateBucket(abi.ImportStateList)
	if b == nil {
		fail(abi.ErrDenied)
		return
	}
	if limit <= 0 || len(prefix) > abi.StateMaxKeyLen || len(after) > abi.StateMaxKeyLen {
		fail(abi.ErrInvalid)
		return
	}
	if limit > abi.StateMaxList {
		limit = abi.StateMaxList
	}
	// prefix and after alias guest memory, which nothing writes during
	// the listing: the output is built in the scratch buffer first.
	out := st.scratch[:0]
	count := b.List(prefix, after, int(limit), func(k string) bool {
		out = binary.LittleEndian.AppendUint32(out, uint32(len(k)))
		out = append(out, k...)
		return true
	})
	st.scratch = out
	size := copyOut(mod, ptr, n, out)
	if size < 0 {
		fail(size)
		return
	}
	stack[0] = uint64(abi.PackList(uint32(count), uint32(size)))
}
