package engine

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestRewriteCache: a deadline module's rewrite is kept in the cache
// directory and read back by the next engine, which runs it as the first
// did; a record that does not check out is rewritten, not compiled.
func TestRewriteCache(t *testing.T) {
	wasm := fixture(t, "bench")
	ctx := context.Background()
	dir := t.TempDir()
	lim := Limits{MemoryPages: 64, CallTimeout: time.Second}
	load := func() {
		t.Helper()
		e := newEngine(t, Options{CacheDir: dir})
		m, err := e.Load(ctx, "bench.wasm", wasm, lim)
		if err != nil {
			t.Fatal(err)
		}
		defer m.Close(ctx)
		i := instantiate(t, m, InstanceOptions{Config: []byte("n")})
		if _, err := i.Handle(ctx, addEvent(pod("ns", "p", "Running"))); err != nil {
			t.Fatal(err)
		}
		// Compiled with the checks the record carries.
		if !m.c.injected || m.c.stopName == "" {
			t.Fatalf("not injected: %+v", m.c)
		}
	}
	load()
	records, _ := filepath.Glob(filepath.Join(dir, "informer-host-rewritten-*", "*"))
	if len(records) != 1 {
		t.Fatalf("rewrite records %v, want one", records)
	}
	b, err := os.ReadFile(records[0])
	if err != nil {
		t.Fatal(err)
	}
	rw, err := decodeRewritten(b)
	if err != nil {
		t.Fatalf("record does not decode: %v", err)
	}
	want := string(rw.Wasm) // rw aliases b
	load()                  // from the record
	b[len(b)/2] ^= 0xff
	if _, err := decodeRewritten(b); err == nil {
		t.Fatal("an altered record decoded")
	}
	if err := os.WriteFile(records[0], b, 0o644); err != nil {
		t.Fatal(err)
	}
	load() // rewritten again
	again, _ := os.ReadFile(records[0])
	if rw2, err := decodeRewritten(again); err != nil || string(rw2.Wasm) != want || rw2.Stop != rw.Stop || rw2.Start != rw.Start {
		t.Fatalf("the altered record was not replaced by the rewrite: %v", err)
	}
}
