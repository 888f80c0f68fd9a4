package state

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// want is what a state file holds: plugin -> key -> value and version.
type want map[string]map[string]wantEntry

type wantEntry struct {
	value   string
	version int64
}

// writeRealFile builds a state file through the store as a host would,
// with what makes bbolt's pages varied: a bucket big enough for branch
// pages, an inline one, a value spanning overflow pages, overwrites and
// deletes over several flushes (so the freelist is in use), and a dropped
// bucket. It returns the file's bytes and what it holds.
func writeRealFile(t testing.TB, dir string) ([]byte, want) {
	t.Helper()
	path := filepath.Join(dir, "real.db")
	s, err := Open(context.Background(), Options{Path: path, FlushInterval: 1 << 40, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	w := want{}
	set := func(plugin, k, v string) {
		ver, err := s.Bucket(plugin, Quota{}).Set([]byte(k), []byte(v), Any)
		if err != nil {
			t.Fatalf("Set(%s, %q): %v", plugin, k, err)
		}
		if w[plugin] == nil {
			w[plugin] = map[string]wantEntry{}
		}
		w[plugin][k] = wantEntry{v, ver}
	}
	flush := func() {
		if err := s.Flush(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	for round := range 3 {
		for i := range 120 {
			set("big.wasm", fmt.Sprintf("ns-%03d/pod-%d", i, i*7), strings.Repeat(fmt.Sprintf("%d.%d;", round, i), 3+i%9))
		}
		set("small.wasm", "n", fmt.Sprint(round))
		set("gone.wasm", "x", "y")
		flush()
	}
	set("small.wasm", "m", "")
	set("large.wasm", "blob", strings.Repeat("0123456789abcdef", 700)) // > 2 pages
	for i := 0; i < 120; i += 3 {
		k := fmt.Sprintf("ns-%03d/pod-%d", i, i*7)
		if err := s.Bucket("big.wasm", Quota{}).Delete([]byte(k), Any); err != nil {
			t.Fatal(err)
		}
		delete(w["big.wasm"], k)
	}
	s.Drop("gone.wasm")
	delete(w, "gone.wasm")
	flush()
	if err := s.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return data, w
}

type corruption struct {
	name string
	data []byte
}

// corruptions returns 160 deterministic corruptions of a file of page
// size ps whose first pages pages are in use (the rest is bbolt's
// preallocation, which no commit reads): the empty file, truncations, bit flips spread over the file, zeroed
// pages, pages overwritten with random bytes or with a copy of another
// page, and small integers written over 8 bytes (a page id or a count
// changed to a plausible value).
func corruptions(data []byte, ps, pages int) []corruption {
	rng := rand.New(rand.NewPCG(1, 2))
	used := pages * ps
	clone := func() []byte { return append([]byte(nil), data...) }
	out := []corruption{{"empty", []byte{}}}
	for _, n := range []int{1, 15, 100, ps - 1, ps, ps + 100, 2*ps - 1, 2 * ps, 3 * ps, 4*ps + 7, len(data) / 2, len(data) - 2*ps, len(data) - ps, len(data) - 1, len(data) - 16} {
		out = append(out, corruption{fmt.Sprintf("truncated to %d", n), data[:n:n]})
	}
	for i := range 60 {
		d := clone()
		off := i*used/60 + rng.IntN(used/60)
		bit := rng.IntN(8)
		d[off] ^= 1 << bit
		out = append(out, corruption{fmt.Sprintf("bit %d of byte %d flipped", bit, off), d})
	}
	for i := range 30 {
		d := clone()
		p := i % pages
		clear(d[p*ps : (p+1)*ps])
		out = append(out, corruption{fmt.Sprintf("page %d zeroed", p), d})
	}
	for range 30 {
		d := clone()
		p := rng.IntN(pages)
		start := p*ps + rng.IntN(ps)
		end := min(start+16+rng.IntN(ps), used)
		for j := start; j < end; j++ {
			d[j] = byte(rng.Uint32())
		}
		out = append(out, corruption{fmt.Sprintf("bytes %d..%d (page %d) random", start, end, p), d})
	}
	for range 14 {
		d := clone()
		from, to := rng.IntN(pages), rng.IntN(pages)
		copy(d[to*ps:(to+1)*ps], data[from*ps:(from+1)*ps])
		out = append(out, corruption{fmt.Sprintf("page %d overwritten by page %d", to, from), d})
	}
	for range 10 {
		d := clone()
		off := rng.IntN(used - 8)
		v := uint64(rng.IntN(pages + 2))
		binary.LittleEndian.PutUint64(d[off:], v)
		out = append(out, corruption{fmt.Sprintf("u64 %d written at byte %d", v, off), d})
	}
	return out
}

// TestCorruptFiles opens 160 corruptions of a real state file: none may
// crash or hang the process, and each either loads exactly what was
// written (the corruption hit bytes no commit uses) or is reported and
// moved aside, with every plugin starting empty. Nothing in between: no
// wrong value, no key lost or come back, no version handed out again.
func TestCorruptFiles(t *testing.T) {
	data, w := writeRealFile(t, t.TempDir())
	ps := os.Getpagesize()
	m0, err0 := readMeta(data, 0, 0)
	m1, err1 := readMeta(data, uint64(ps), 1)
	if err0 != nil || err1 != nil {
		t.Fatal(err0, err1)
	}
	cases := corruptions(data, ps, int(max(m0.pgid, m1.pgid)))
	if len(cases) != 160 {
		t.Fatalf("%d corruptions, want 160", len(cases))
	}
	var reported, intact int
	for i, tc := range cases {
		t.Run(fmt.Sprintf("%03d %s", i, tc.name), func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "state.db")
			if err := os.WriteFile(path, tc.data, 0o600); err != nil {
				t.Fatal(err)
			}
			s, logs := open(t, path)
			moved, _ := filepath.Glob(path + ".corrupt-*")
			if len(moved) > 0 {
				reported++
				if len(moved) != 1 || !strings.Contains(logs.String(), "corrupt") {
					t.Fatalf("moved aside to %v; logs: %s", moved, logs)
				}
				if kept, err := os.ReadFile(moved[0]); err != nil || !bytes.Equal(kept, tc.data) {
					t.Fatalf("the moved file is not the corrupt one (%v)", err)
				}
				if names := s.Names(); len(names) != 0 || !s.Persistent() {
					t.Fatalf("after moving aside: buckets %v, persistent %v", names, s.Persistent())
				}
				return
			}
			intact++
			if got := s.Names(); fmt.Sprint(got) != fmt.Sprint(sortedKeys(w)) {
				t.Fatalf("not reported, but buckets %v, want %v; logs: %s", got, sortedKeys(w), logs)
			}
			for plugin, keys := range w {
				b := s.Bucket(plugin, Quota{})
				if _, n := b.Usage(); n != len(keys) {
					t.Fatalf("not reported, but %s has %d keys, want %d", plugin, n, len(keys))
				}
				var top int64
				for k, e := range keys {
					v, ver, ok := b.Get([]byte(k))
					if !ok || string(v) != e.value || ver != e.version {
						t.Fatalf("not reported, but %s %q = %.20q@%d (%v), want %.20q@%d", plugin, k, v, ver, ok, e.value, e.version)
					}
					top = max(top, ver)
				}
				if v := mustSet(t, b, "after", "x"); v <= top {
					t.Fatalf("%s: version %d handed out again", plugin, v)
				}
			}
		})
	}
	t.Logf("%d corruptions: %d reported and moved aside, %d loaded intact", len(cases), reported, intact)
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
