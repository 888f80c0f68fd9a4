package engine

import (
	"context"
	"encoding/binary"
	"errors"
	"log/slog"

	"github.com/tetratelabs/wazero/api"

	"github.com/informer-host/informer-host/abi"
	"github.com/informer-host/informer-host/internal/state"
)

// StateBucket is a plugin's key-value state (ABI.md §16.2), as the state
// functions reach it. *state.Bucket implements it; its errors wrap
// state.ErrConflict, ErrQuota, ErrInvalid and ErrAbsent.
//
// The bucket belongs to the host, not to the instance: an instance that
// traps, or the next version of the module, gets the same one.
type StateBucket interface {
	// Get returns key's value, which the caller must not modify, and its
	// version (> 0).
	Get(key []byte) (value []byte, version int64, ok bool)
	// Set stores a copy of value; ifVersion is -1 (any), 0 (only if absent)
	// or the version the key must be at. It returns the new version.
	Set(key, value []byte, ifVersion int64) (int64, error)
	// Delete removes key; ifVersion is -1 (any) or the version it must be at.
	Delete(key []byte, ifVersion int64) error
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

// stateCode maps a bucket's error to the ABI's code.
func (st *callState) stateCode(fn string, err error) int32 {
	switch {
	case errors.Is(err, state.ErrConflict):
		return abi.ErrConflict
	case errors.Is(err, state.ErrQuota):
		return abi.ErrQuota
	case errors.Is(err, state.ErrInvalid):
		return abi.ErrInvalid
	case errors.Is(err, state.ErrAbsent):
		return abi.ErrAbsent
	}
	st.logger.Error("plugin state", slog.String("function", fn), slog.Any("err", err))
	return abi.ErrInternal
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
	version, err := b.Set(key, val, ifVersion)
	if err != nil {
		fail(st.stateCode(abi.ImportStateSet, err))
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
	if err := b.Delete(key, ifVersion); err != nil {
		setI32(stack, st.stateCode(abi.ImportStateDelete, err))
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
