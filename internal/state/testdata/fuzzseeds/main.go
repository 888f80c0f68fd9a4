// Command fuzzseeds writes the seed corpus of state's FuzzOpenStateFile:
// a small real state file and corruptions of it. Run it from the
// repository's root: go run ./state/testdata/fuzzseeds
package main

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"log"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"github.com/informer-host/informer-host/internal/state"
)

func main() {
	dir, err := os.MkdirTemp("", "fuzzseeds")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "state.db")
	s, err := state.Open(context.Background(), state.Options{Path: path, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		log.Fatal(err)
	}
	b := s.Bucket("seed.wasm", state.Quota{})
	for i := range 12 {
		if _, err := b.Set([]byte(fmt.Sprintf("key-%02d", i)), []byte(strings.Repeat("v", i*9)), state.Any); err != nil {
			log.Fatal(err)
		}
	}
	if _, err := s.Bucket("other.wasm", state.Quota{}).Set([]byte("n"), []byte("1"), state.Any); err != nil {
		log.Fatal(err)
	}
	if err := s.Close(context.Background()); err != nil {
		log.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		log.Fatal(err)
	}
	// Only the pages in use: the rest is bbolt's preallocation, zeros.
	ps := int(binary.LittleEndian.Uint32(data[24:]))
	pages := max(binary.LittleEndian.Uint64(data[16+40:]), binary.LittleEndian.Uint64(data[ps+16+40:]))
	data = data[:int(pages)*ps]

	flip := func(off int) []byte {
		d := append([]byte(nil), data...)
		d[off] ^= 0x10
		return d
	}
	val := strings.Index(string(data), strings.Repeat("v", 99))
	seeds := map[string][]byte{
		"valid":            data,
		"value-bit-flip":   flip(val + 40),
		"meta1-bit-flip":   flip(ps + 16 + 20),
		"truncated-1-page": data[:len(data)-ps],
	}
	out := filepath.Join("state", "testdata", "fuzz", "FuzzOpenStateFile")
	if err := os.MkdirAll(out, 0o755); err != nil {
		log.Fatal(err)
	}
	for name, d := range seeds {
		body := fmt.Sprintf("go test fuzz v1\n[]byte(%q)\n", d)
		if err := os.WriteFile(filepath.Join(out, name), []byte(body), 0o644); err != nil {
			log.Fatal(err)
		}
	}
}
