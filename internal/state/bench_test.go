package state

import (
	"context"
	"io"
	"log/slog"
	"path/filepath"
	"testing"
)

// BenchmarkSet is Bucket.Set of a 100-byte value, in memory and with a
// file: the cost of the record's checksum, and, with a file, of the
// version reservations (an fsync'd commit per reserveAhead versions when
// the flusher does not keep up, as here).
func BenchmarkSet(b *testing.B) {
	for _, tc := range []struct{ name, path string }{{"memory", ""}, {"file", filepath.Join(b.TempDir(), "state.db")}} {
		b.Run(tc.name, func(b *testing.B) {
			s, err := Open(context.Background(), Options{Path: tc.path, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close(context.Background())
			bk := s.Bucket("bench.wasm", Quota{})
			key, val := []byte("bench"), make([]byte, 100)
			for b.Loop() {
				if _, err := bk.Set(key, val, Any); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
