package kit

import (
	"encoding/binary"
	"errors"
	"strconv"

	"github.com/informer-host/informer-host/abi"
)

// Errors of the state functions (ABI.md §16.2). Test them with errors.Is.
var (
	// ErrNoKey: Get or Delete of a key that does not exist.
	ErrNoKey = errors.New("no such state key")
	// ErrConflict: SetIfVersion or DeleteIfVersion found another version.
	ErrConflict error = HostError(abi.ErrConflict)
	// ErrQuota: the write would take the plugin past grants.state.
	ErrQuota error = HostError(abi.ErrQuota)
)

// stateAPI is the state part of the import module; tests replace it.
type stateAPI interface {
	get(key string, buf []byte, version *int64) int32
	set(key string, value []byte, ifVersion int64) int64
	del(key string, ifVersion int64) int32
	list(prefix, after string, max int32, buf []byte) int64
}

// StateStore is the plugin's key-value state, kept by the host across the
// plugin's traps, restarts and reloads (and host restarts, if the operator
// set plugins.state.path). Every key has a version that changes on every
// write, for compare-and-swap. Use it only from the plugin's callbacks.
type StateStore struct{ h stateAPI }

// State returns the plugin's state.
func State() StateStore { return StateStore{h: stateHost} }

// stateErr is the error of a state call of fn on call that returned
// code. A missing key and a compare-and-swap conflict are what a plugin
// expects on every event, so they stay the bare ErrNoKey and ErrConflict,
// costing no allocation; anything else (a denial, the quota, an invalid
// key) is a *CallError naming the call. The host sets no result message
// for the state functions (ABI.md §17 only), so none is read.
func stateErr(fn, call string, code int64) error {
	switch code {
	case int64(abi.ErrAbsent):
		return ErrNoKey
	case int64(abi.ErrConflict):
		return ErrConflict
	}
	return &CallError{Func: fn, Call: call, Code: int32(code)}
}

// Get returns key's value (a fresh slice) and its version.
func (s StateStore) Get(key string) (value []byte, version int64, err error) {
	buf := make([]byte, 256)
	for {
		n := s.h.get(key, buf, &version)
		if n < 0 {
			return nil, 0, stateErr(abi.ImportStateGet, strconv.Quote(key), int64(n))
		}
		if int(n) <= len(buf) {
			return buf[:n], version, nil
		}
		buf = make([]byte, n)
	}
}

// Set stores value under key, whatever its version, and returns the new
// version.
func (s StateStore) Set(key string, value []byte) (int64, error) {
	return s.SetIfVersion(key, value, abi.StateAnyVersion)
}

// SetIfVersion stores value only if key is at version (0: only if key does
// not exist), else fails with ErrConflict. It returns the new version.
func (s StateStore) SetIfVersion(key string, value []byte, version int64) (int64, error) {
	r := s.h.set(key, value, version)
	if r < 0 {
		return 0, stateErr(abi.ImportStateSet, strconv.Quote(key), r)
	}
	return r, nil
}

// Delete removes key (ErrNoKey if it does not exist).
func (s StateStore) Delete(key string) error { return s.DeleteIfVersion(key, abi.StateAnyVersion) }

// DeleteIfVersion removes key only if it is at version, else fails with
// ErrConflict.
func (s StateStore) DeleteIfVersion(key string, version int64) error {
	if r := s.h.del(key, version); r < 0 {
		return stateErr(abi.ImportStateDelete, strconv.Quote(key), int64(r))
	}
	return nil
}

// List returns up to max keys (at most abi.StateMaxList) that start with
// prefix and sort after after, in byte order. To page, pass the last key
// returned as after; fewer than max keys means there are no more.
func (s StateStore) List(prefix, after string, max int) ([]string, error) {
	if max > abi.StateMaxList {
		max = abi.StateMaxList
	}
	buf := make([]byte, 4096)
	for {
		r := s.h.list(prefix, after, int32(max), buf)
		count, size, code := abi.UnpackList(r)
		if code != 0 {
			return nil, stateErr(abi.ImportStateList, "prefix "+strconv.Quote(prefix)+" after "+strconv.Quote(after), int64(code))
		}
		if int(size) > len(buf) {
			buf = make([]byte, size)
			continue
		}
		keys := make([]string, 0, count)
		for b := buf[:size]; len(b) >= 4; {
			n := binary.LittleEndian.Uint32(b)
			if uint64(n) > uint64(len(b)-4) {
				break // not the host's encoding; keep what was whole
			}
			keys = append(keys, string(b[4:4+n]))
			b = b[4+n:]
		}
		return keys, nil
	}
}
