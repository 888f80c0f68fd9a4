package state

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
)

// FuzzOpenStateFile opens arbitrary bytes as a state file. Whatever the
// bytes, Open returns, the process lives, and the store works: a write
// persists across a close and a reopen, which the second open does not
// find corrupt. The seed corpus (testdata/fuzz/FuzzOpenStateFile, made by
// testdata/fuzzseeds) is a small real file and corruptions of it; plain
// go test runs the seeds, go test -fuzz=FuzzOpenStateFile explores.
func FuzzOpenStateFile(f *testing.F) {
	data, _ := writeRealFile(f, f.TempDir())
	f.Add(data)
	for _, c := range corruptions(data, os.Getpagesize(), len(data)/os.Getpagesize())[:12] {
		f.Add(c.data)
	}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	f.Fuzz(func(t *testing.T, data []byte) {
		path := filepath.Join(t.TempDir(), "state.db")
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		s, err := Open(context.Background(), Options{Path: path, Logger: quiet})
		if err != nil {
			t.Fatal(err)
		}
		if !s.Persistent() {
			t.Fatal("the store did not start a file in place of the given one")
		}
		ver, err := s.Bucket("fuzz.wasm", Quota{}).Set([]byte("k"), []byte("v"), Any)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
		s2, err := Open(context.Background(), Options{Path: path, Logger: quiet})
		if err != nil {
			t.Fatal(err)
		}
		defer s2.Close(context.Background())
		if n := s2.CorruptFiles(); n != 0 {
			t.Fatalf("the file the store wrote is corrupt on reopen (%d)", n)
		}
		if v, got, ok := s2.Bucket("fuzz.wasm", Quota{}).Get([]byte("k")); !ok || string(v) != "v" || got != ver {
			t.Fatalf("after reopen: %q@%d %v, want v@%d", v, got, ok, ver)
		}
	})
}
