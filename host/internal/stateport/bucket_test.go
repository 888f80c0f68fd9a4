package stateport

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/informer-host/informer-host/abi"
	"github.com/informer-host/informer-host/internal/state"
)

// Every failure of the real store reaches the engine as the ABI's code,
// and what has no code is logged for the operator and is ERR_INTERNAL.
func TestBucketCodes(t *testing.T) {
	s, err := state.Open(context.Background(), state.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close(context.Background()) })
	var logs bytes.Buffer
	p := New(s.Bucket("codes.wasm", state.Quota{MaxBytes: 16, MaxKeys: 2}), slog.New(slog.NewTextHandler(&logs, nil)))
	v1, code := p.Set([]byte("k"), []byte("v"), abi.StateAnyVersion)
	if code != 0 || v1 <= 0 {
		t.Fatalf("set: version %d, code %d", v1, code)
	}
	cases := []struct {
		name string
		call func() int32
		want int32
	}{
		{"set: create-only on an existing key", func() int32 { _, c := p.Set([]byte("k"), nil, 0); return c }, abi.ErrConflict},
		{"set: stale version", func() int32 { _, c := p.Set([]byte("k"), nil, v1+1); return c }, abi.ErrConflict},
		{"set: over the byte quota", func() int32 { _, c := p.Set([]byte("k"), make([]byte, 100), abi.StateAnyVersion); return c }, abi.ErrQuota},
		{"set: over the key quota", func() int32 {
			if _, c := p.Set([]byte("k2"), nil, abi.StateAnyVersion); c != 0 {
				return c
			}
			_, c := p.Set([]byte("k3"), nil, abi.StateAnyVersion)
			return c
		}, abi.ErrQuota},
		{"set: empty key", func() int32 { _, c := p.Set(nil, nil, abi.StateAnyVersion); return c }, abi.ErrInvalid},
		{"set: version -2", func() int32 { _, c := p.Set([]byte("k"), nil, -2); return c }, abi.ErrInvalid},
		{"delete: missing key", func() int32 { return p.Delete([]byte("nope"), abi.StateAnyVersion) }, abi.ErrAbsent},
		{"delete: stale version", func() int32 { return p.Delete([]byte("k"), v1+1) }, abi.ErrConflict},
		{"delete: version 0", func() int32 { return p.Delete([]byte("k"), 0) }, abi.ErrInvalid},
		{"delete: at the current version", func() int32 { return p.Delete([]byte("k"), v1) }, 0},
		{"no code for it", func() int32 {
			return p.code(abi.ImportStateSet, fmt.Errorf("reserving versions: %w", errors.New("disk full")))
		}, abi.ErrInternal},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.call(); got != tc.want {
				t.Fatalf("code %d (%s), want %d (%s)", got, abi.ErrorName(got), tc.want, abi.ErrorName(tc.want))
			}
		})
	}
	if got := logs.String(); strings.Count(got, "level=ERROR") != 1 || !strings.Contains(got, "function=state_set") || !strings.Contains(got, "disk full") {
		t.Fatalf("logged %q, want the one failure without a code, with its function and cause", got)
	}
	var keys []string
	p.List(nil, nil, 10, func(k string) bool { keys = append(keys, k); return true })
	if strings.Join(keys, ",") != "k2" {
		t.Fatalf("keys %q, want k2 (k deleted, k3 refused)", keys)
	}
}

// The port costs a state call nothing the store does not: no allocation
// of its own on any path a plugin takes on every event.
func TestBucketAllocatesNothingOfItsOwn(t *testing.T) {
	s, err := state.Open(context.Background(), state.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close(context.Background()) })
	b := s.Bucket("allocs.wasm", state.Quota{})
	p := New(b, slog.New(slog.DiscardHandler))
	key, val := []byte("k"), make([]byte, 100)
	if _, code := p.Set(key, val, abi.StateAnyVersion); code != 0 {
		t.Fatal(abi.ErrorName(code))
	}
	keep := func(string) bool { return true }
	for _, tc := range []struct {
		name          string
		store, ported func()
	}{
		{"get", func() { b.Get(key) }, func() { p.Get(key) }},
		{"set", func() { _, _ = b.Set(key, val, abi.StateAnyVersion) }, func() { p.Set(key, val, abi.StateAnyVersion) }},
		{"set conflict", func() { _, _ = b.Set(key, val, 0) }, func() { p.Set(key, val, 0) }},
		{"list", func() { b.List(nil, nil, 10, keep) }, func() { p.List(nil, nil, 10, keep) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if store, ported := testing.AllocsPerRun(100, tc.store), testing.AllocsPerRun(100, tc.ported); ported != store {
				t.Fatalf("%v allocations through the port, %v on the store", ported, store)
			}
		})
	}
}
