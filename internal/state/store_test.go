package state

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

func open(t *testing.T, path string) (*Store, *bytes.Buffer) {
	t.Helper()
	var logs bytes.Buffer
	s, err := Open(context.Background(), Options{Path: path, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close(context.Background()) })
	return s, &logs
}

func mustSet(t *testing.T, b *Bucket, k, v string) int64 {
	t.Helper()
	ver, err := b.Set([]byte(k), []byte(v), Any)
	if err != nil {
		t.Fatalf("Set(%q): %v", k, err)
	}
	return ver
}

func TestCompareAndSwap(t *testing.T) {
	s, _ := open(t, "")
	b := s.Bucket("p.wasm", Quota{})
	v1 := mustSet(t, b, "k", "a")
	tests := []struct {
		name    string
		op      func() error
		wantErr error
	}{
		{"create-only on an existing key", func() error { _, err := b.Set([]byte("k"), []byte("x"), 0); return err }, ErrConflict},
		{"set at a stale version", func() error { _, err := b.Set([]byte("k"), []byte("x"), v1+7); return err }, ErrConflict},
		{"delete at a stale version", func() error { return b.Delete([]byte("k"), v1+7) }, ErrConflict},
		{"delete of a missing key at a version", func() error { return b.Delete([]byte("nope"), 1) }, ErrConflict},
		{"delete of a missing key", func() error { return b.Delete([]byte("nope"), Any) }, ErrAbsent},
		{"delete at version 0", func() error { return b.Delete([]byte("k"), 0) }, ErrInvalid},
		{"set at version -2", func() error { _, err := b.Set([]byte("k"), nil, -2); return err }, ErrInvalid},
		{"empty key", func() error { _, err := b.Set(nil, nil, Any); return err }, ErrInvalid},
		{"long key", func() error { _, err := b.Set(make([]byte, MaxKeyLen+1), nil, Any); return err }, ErrInvalid},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.op(); !errors.Is(err, tc.wantErr) {
				t.Fatalf("got %v, want %v", err, tc.wantErr)
			}
		})
	}
	if v, ver, _ := b.Get([]byte("k")); string(v) != "a" || ver != v1 {
		t.Fatalf("failed operations changed the key: %q@%d", v, ver)
	}
	v2, err := b.Set([]byte("k"), []byte("b"), v1)
	if err != nil || v2 <= v1 {
		t.Fatalf("set at the current version: %d, %v", v2, err)
	}
	if err := b.Delete([]byte("k"), v2); err != nil {
		t.Fatal(err)
	}
	// A key deleted and created again never gets an old version back (no A-B-A).
	v3, err := b.Set([]byte("k"), []byte("a"), 0)
	if err != nil || v3 <= v2 {
		t.Fatalf("recreate: %d, %v", v3, err)
	}
}

func TestQuota(t *testing.T) {
	s, _ := open(t, "")
	b := s.Bucket("p.wasm", Quota{MaxBytes: 20, MaxKeys: 2})
	mustSet(t, b, "a", "123456789") // 10 bytes
	if _, err := b.Set([]byte("b"), []byte("1234567890"), Any); !errors.Is(err, ErrQuota) || !strings.Contains(err.Error(), "maxBytes") {
		t.Fatalf("over the byte quota: %v", err)
	}
	mustSet(t, b, "b", "12345678") // 19 bytes
	if _, err := b.Set([]byte("c"), nil, Any); !errors.Is(err, ErrQuota) || !strings.Contains(err.Error(), "maxKeys") {
		t.Fatalf("over the key quota: %v", err)
	}
	// Lowered quota: shrinking writes and deletes still work.
	b = s.Bucket("p.wasm", Quota{MaxBytes: 5, MaxKeys: 1})
	mustSet(t, b, "a", "1")
	if _, err := b.Set([]byte("a"), []byte("12"), Any); !errors.Is(err, ErrQuota) {
		t.Fatalf("growing past a lowered quota: %v", err)
	}
	if err := b.Delete([]byte("b"), Any); err != nil {
		t.Fatal(err)
	}
	if n, k := b.Usage(); n != 2 || k != 1 {
		t.Fatalf("usage %d bytes %d keys, want 2, 1", n, k)
	}
}

func TestListPages(t *testing.T) {
	s, _ := open(t, "")
	b := s.Bucket("p.wasm", Quota{})
	for _, k := range []string{"ns/b", "ns/a", "other", "ns/c", "n", "ns/d"} {
		mustSet(t, b, k, "v")
	}
	var got []string
	var after []byte
	for {
		var page []string
		n := b.List([]byte("ns/"), after, 3, func(k string) bool { page = append(page, k); return true })
		got = append(got, page...)
		if n < 3 {
			break
		}
		after = []byte(page[len(page)-1])
	}
	if want := "ns/a ns/b ns/c ns/d"; strings.Join(got, " ") != want {
		t.Fatalf("listed %q, want %q", got, want)
	}
}

func TestReopenAfterClose(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	s, _ := open(t, path)
	b := s.Bucket("a.wasm", Quota{})
	v := mustSet(t, b, "count", "41")
	for i := range 20 { // several keys in one flush
		mustSet(t, b, fmt.Sprintf("k%02d", i), fmt.Sprint(i))
	}
	v = max(v, mustSet(t, b, "count", "41")) // the last write of count
	mustSet(t, b, "gone", "x")
	if err := b.Delete([]byte("gone"), Any); err != nil {
		t.Fatal(err)
	}
	mustSet(t, s.Bucket("removed.wasm", Quota{}), "k", "v")
	s.Drop("removed.wasm")
	if err := s.Close(context.Background()); err != nil {
		t.Fatal(err)
	}

	s2, logs := open(t, path)
	if !s2.Persistent() {
		t.Fatalf("reopened store is not persistent: %s", logs)
	}
	if names := fmt.Sprint(s2.Names()); names != "[a.wasm]" {
		t.Fatalf("buckets after reopen: %s", names)
	}
	b2 := s2.Bucket("a.wasm", Quota{})
	if val, ver, ok := b2.Get([]byte("count")); !ok || string(val) != "41" || ver != v {
		t.Fatalf("after reopen: %q@%d %v, want 41@%d", val, ver, ok, v)
	}
	for i := range 20 {
		if val, _, _ := b2.Get([]byte(fmt.Sprintf("k%02d", i))); string(val) != fmt.Sprint(i) {
			t.Fatalf("k%02d = %q after reopen", i, val)
		}
	}
	if _, _, ok := b2.Get([]byte("gone")); ok {
		t.Fatal("deleted key came back")
	}
	// The sequence survives too: versions are not reused after a restart.
	if v2 := mustSet(t, b2, "new", "x"); v2 <= v+1 {
		t.Fatalf("version %d after reopen, want > %d", v2, v+1)
	}
}

func TestCorruptFileStartsEmpty(t *testing.T) {
	tests := []struct {
		name    string
		content []byte
	}{
		{"garbage", bytes.Repeat([]byte("not a bbolt file "), 1000)},
		{"truncated", []byte{0, 1, 2}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "state.db")
			if err := os.WriteFile(path, tc.content, 0o600); err != nil {
				t.Fatal(err)
			}
			s, logs := open(t, path)
			if !strings.Contains(logs.String(), "corrupt") || !strings.Contains(logs.String(), path) {
				t.Fatalf("corruption not reported with the path: %s", logs)
			}
			if len(s.Names()) != 0 {
				t.Fatalf("buckets from a corrupt file: %v", s.Names())
			}
			moved, _ := filepath.Glob(path + ".corrupt-*")
			if len(moved) != 1 {
				t.Fatalf("corrupt file not moved aside: %v", moved)
			}
			// The fresh file works and persists.
			mustSet(t, s.Bucket("a.wasm", Quota{}), "k", "v")
			if err := s.Close(context.Background()); err != nil {
				t.Fatal(err)
			}
			s2, _ := open(t, path)
			if _, _, ok := s2.Bucket("a.wasm", Quota{}).Get([]byte("k")); !ok {
				t.Fatal("fresh file after corruption did not persist")
			}
		})
	}
}

func TestUnopenableFileRunsInMemory(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{
		filepath.Join(t.TempDir(), "missing-dir", "state.db"),
		"/dev/zero", // read to its end, it would fill memory
		fifo,        // opened, it would wait for a writer
	} {
		s, logs := open(t, path)
		if s.Persistent() || !strings.Contains(logs.String(), "memory only") || !strings.Contains(logs.String(), path) {
			t.Fatalf("%s: persistent=%v, logs: %s", path, s.Persistent(), logs)
		}
		mustSet(t, s.Bucket("a.wasm", Quota{}), "k", "v")
		if err := s.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
}

func TestFlushWithoutClose(t *testing.T) {
	// What a SIGKILL after a flush keeps: a second reader of the file sees
	// flushed writes only once they are flushed.
	path := filepath.Join(t.TempDir(), "state.db")
	s, _ := open(t, path)
	mustSet(t, s.Bucket("a.wasm", Quota{}), "k", "v")
	if err := s.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	// Drop the store without Close, as a kill would: copy the file as it is.
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	cp := filepath.Join(t.TempDir(), "copy.db")
	if err := os.WriteFile(cp, data, 0o600); err != nil {
		t.Fatal(err)
	}
	s2, _ := open(t, cp)
	if v, _, ok := s2.Bucket("a.wasm", Quota{}).Get([]byte("k")); !ok || string(v) != "v" {
		t.Fatalf("flushed write not in the file: %q %v", v, ok)
	}
}
