package host

import (
	"bytes"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// A module is read into one buffer of its size: growing a buffer by
// doubling (io.ReadAll) allocates about twice a multi-megabyte module,
// garbage that lands at a load's peak.
func TestReadModuleAllocatesItsSizeOnce(t *testing.T) {
	const size = 4 << 20
	path := filepath.Join(t.TempDir(), "big.wasm")
	if err := os.WriteFile(path, make([]byte, size), 0o644); err != nil {
		t.Fatal(err)
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	b, err := readModule(path, 64<<20)
	runtime.ReadMemStats(&after)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) != size {
		t.Fatalf("read %d bytes, want %d", len(b), size)
	}
	if got := after.TotalAlloc - before.TotalAlloc; got > size+size/8 {
		t.Errorf("reading a %d-byte module allocated %d bytes, want at most %d", size, got, size+size/8)
	}
}

// A file longer than its Stat said (it grew after the check; /proc's
// files say 0 bytes) is still read whole, and still only to the limit.
func TestReadModuleReadsPastTheStatSize(t *testing.T) {
	const path = "/proc/self/status" // a regular file whose size reads 0
	b, err := readModule(path, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(b, []byte("Name:")) || len(b) < 100 {
		t.Fatalf("read %q, want the whole of %s", b, path)
	}
	if _, err := readModule(path, 10); err == nil || !strings.Contains(err.Error(), "grown since it was checked") {
		t.Fatalf("a file past the limit: %v, want it refused as grown", err)
	}
}
