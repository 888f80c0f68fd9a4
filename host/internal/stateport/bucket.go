package stateport

import (
	"errors"
	"log/slog"

	"github.com/informer-host/informer-host/abi"
	"github.com/informer-host/informer-host/internal/state"
)

// Bucket is a plugin's state bucket as the engine's state functions see
// it. Failures the ABI has a code for are returned as that code; any
// other (the store could not reserve versions on disk) is logged to the
// plugin's logger and returned as abi.ErrInternal, since the plugin only
// learns the code.
type Bucket struct {
	b   *state.Bucket
	log *slog.Logger
}

// New returns the port over b, logging to log (the plugin's logger).
func New(b *state.Bucket, log *slog.Logger) *Bucket { return &Bucket{b: b, log: log} }

// Get returns key's value, which the caller must not modify, and its version.
func (p *Bucket) Get(key []byte) ([]byte, int64, bool) { return p.b.Get(key) }

// Set stores a copy of value at ifVersion (state.Bucket.Set) and returns
// the new version, or the ABI code of the failure.
func (p *Bucket) Set(key, value []byte, ifVersion int64) (int64, int32) {
	v, err := p.b.Set(key, value, ifVersion)
	if err != nil {
		return 0, p.code(abi.ImportStateSet, err)
	}
	return v, 0
}

// Delete removes key at ifVersion (state.Bucket.Delete) and returns 0, or
// the ABI code of the failure.
func (p *Bucket) Delete(key []byte, ifVersion int64) int32 {
	if err := p.b.Delete(key, ifVersion); err != nil {
		return p.code(abi.ImportStateDelete, err)
	}
	return 0
}

// List calls fn with up to limit keys with prefix, after after, in byte order.
func (p *Bucket) List(prefix, after []byte, limit int, fn func(key string) bool) int {
	return p.b.List(prefix, after, limit, fn)
}

// code maps an error of function fn's store call to the ABI's code.
func (p *Bucket) code(fn string, err error) int32 {
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
	p.log.Error("plugin state", slog.String("function", fn), slog.Any("err", err))
	return abi.ErrInternal
}
