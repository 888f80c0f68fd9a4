package state

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	bolt "go.etcd.io/bbolt"
)

// TestCorruptionsReported: damage the checks exist for, each of which the
// store before them loaded silently (as empty state, wrong values or an
// older commit).
func TestCorruptionsReported(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "real.db")
	s, _ := open(t, path)
	b := s.Bucket("a.wasm", Quota{})
	mustSet(t, b, "first", "value-of-the-first-key")
	mustSet(t, b, "other", "value-of-the-other-key")
	if err := s.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	mustSet(t, b, "first", "value-of-the-first-two")
	mustSet(t, s.Bucket("gone.wasm", Quota{}), "k", "v")
	if err := s.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	s.Drop("gone.wasm")
	if err := s.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	// boltEdit returns the file after f changed it through bbolt: damage
	// that leaves bbolt's own structure sound.
	boltEdit := func(f func(tx *bolt.Tx) error) []byte {
		cp := filepath.Join(t.TempDir(), "edit.db")
		if err := os.WriteFile(cp, data, 0o600); err != nil {
			t.Fatal(err)
		}
		db, err := bolt.Open(cp, 0o600, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := db.Update(f); err != nil {
			t.Fatal(err)
		}
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
		d, err := os.ReadFile(cp)
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	ps := os.Getpagesize()
	m0, _ := readMeta(data, 0, 0)
	m1, _ := readMeta(data, uint64(ps), 1)
	newest := 0
	if m1.txid > m0.txid {
		newest = ps
	}
	at := func(s string) int {
		i := bytes.LastIndex(data, []byte(s))
		if i < 0 {
			t.Fatalf("%q not in the file", s)
		}
		return i
	}
	edit := func(f func(d []byte) []byte) []byte { return f(append([]byte(nil), data...)) }
	tests := []struct {
		name, reason string
		data         []byte
	}{
		{"empty file", "empty", []byte{}},
		{"a value's byte changed", "checksum", edit(func(d []byte) []byte { d[at("first-two")] ^= 1; return d })},
		{"a key's byte changed", "checksum", edit(func(d []byte) []byte {
			i := at("value-of-the-other-key") - 12 - len("other") // the key, before the record's header
			d[i] ^= 1
			return d
		})},
		{"two keys' records swapped", "checksum", edit(func(d []byte) []byte {
			i, j := at("value-of-the-first-two")-12, at("value-of-the-other-key")-12
			n := 12 + len("value-of-the-first-two")
			a := append([]byte(nil), d[i:i+n]...)
			copy(d[i:], d[j:j+n])
			copy(d[j:], a)
			return d
		})},
		{"the newest commit's meta damaged", "meta page", edit(func(d []byte) []byte { d[newest+16+48] ^= 1; return d })},
		{"truncated", "truncated", data[:3*ps]},
		{"a dropped plugin's index entry lost", "entries lost", boltEdit(func(tx *bolt.Tx) error {
			return tx.Bucket([]byte(metaBucket)).Bucket([]byte(metaIndex)).Delete([]byte("gone.wasm"))
		})},
		{"a plugin's key lost", "keys lost", boltEdit(func(tx *bolt.Tx) error {
			return tx.Bucket([]byte("a.wasm")).Delete([]byte("other"))
		})},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "state.db")
			if err := os.WriteFile(path, tc.data, 0o600); err != nil {
				t.Fatal(err)
			}
			var gotPath, gotAside string
			var gotReason error
			var logs bytes.Buffer
			s, err := Open(context.Background(), Options{Path: path, Logger: slog.New(slog.NewTextHandler(&logs, nil)),
				OnCorrupt: func(p, aside string, reason error) { gotPath, gotAside, gotReason = p, aside, reason }})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close(context.Background())
			if s.CorruptFiles() != 1 || gotPath != path || gotReason == nil || !strings.Contains(gotReason.Error(), tc.reason) {
				t.Fatalf("not reported as %q: %d corrupt, OnCorrupt(%q, %q, %v); logs: %s", tc.reason, s.CorruptFiles(), gotPath, gotAside, gotReason, &logs)
			}
			if kept, err := os.ReadFile(gotAside); err != nil || !bytes.Equal(kept, tc.data) || !strings.HasPrefix(gotAside, path+".corrupt-") {
				t.Fatalf("moved aside to %q: %v", gotAside, err)
			}
			if !strings.Contains(logs.String(), "level=ERROR") || !strings.Contains(logs.String(), gotAside) {
				t.Fatalf("not logged at error level with where the file went: %s", &logs)
			}
			if len(s.Names()) != 0 || !s.Persistent() {
				t.Fatalf("after the corrupt file: buckets %v, persistent %v", s.Names(), s.Persistent())
			}
		})
	}
}

// TestFormat0FileLoads: a file written before records had checksums
// loads with its values and versions, and is rewritten in the current
// format so it is checked from then on.
func TestFormat0FileLoads(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		bb, err := tx.CreateBucket([]byte("old.wasm"))
		if err != nil {
			return err
		}
		for k, v := range map[string]struct {
			ver uint64
			val string
		}{"a": {3, "three"}, "b": {7, ""}} {
			if err := bb.Put([]byte(k), append(binary.LittleEndian.AppendUint64(nil, v.ver), v.val...)); err != nil {
				return err
			}
		}
		return bb.SetSequence(9) // a key at version 8 or 9 was deleted
	})
	if err != nil || db.Close() != nil {
		t.Fatal(err)
	}
	for round := range 2 { // as written by the old host, then as rewritten
		s, logs := open(t, path)
		if !s.Persistent() || s.CorruptFiles() != 0 {
			t.Fatalf("round %d: a format-0 file not used: %s", round, logs)
		}
		b := s.Bucket("old.wasm", Quota{})
		if v, ver, ok := b.Get([]byte("a")); !ok || string(v) != "three" || ver != 3 {
			t.Fatalf("round %d: a = %q@%d %v", round, v, ver, ok)
		}
		if v, ver, ok := b.Get([]byte("b")); !ok || string(v) != "" || ver != 7 {
			t.Fatalf("round %d: b = %q@%d %v", round, v, ver, ok)
		}
		if round == 0 {
			if ver := mustSet(t, b, "c", "x"); ver <= 9 {
				t.Fatalf("version %d after a format-0 file whose sequence was 9", ver)
			}
			if err := b.Delete([]byte("c"), Any); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	db, err = bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	_ = db.View(func(tx *bolt.Tx) error {
		if tx.Bucket([]byte(metaBucket)) == nil {
			t.Error("the file was not rewritten in the current format")
		}
		return tx.Bucket([]byte("old.wasm")).ForEach(func(k, v []byte) error {
			if v[7] != recTag {
				t.Errorf("key %q still in format 0", k)
			}
			return nil
		})
	})
}

// TestDroppedBucketVersionsGoOn: a plugin whose state was dropped (its
// file removed) and that comes back starts empty, with versions above
// the old ones, in memory and after a restart.
func TestDroppedBucketVersionsGoOn(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	s, _ := open(t, path)
	v1 := mustSet(t, s.Bucket("p.wasm", Quota{}), "k", "1")
	s.Drop("p.wasm")
	b := s.Bucket("p.wasm", Quota{})
	if _, _, ok := b.Get([]byte("k")); ok {
		t.Fatal("a dropped bucket came back with its keys")
	}
	v2 := mustSet(t, b, "k", "2")
	if v2 <= v1 {
		t.Fatalf("version %d after the drop, the dropped bucket had %d", v2, v1)
	}
	s.Drop("p.wasm")
	if err := s.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	s2, logs := open(t, path)
	if len(s2.Names()) != 0 || s2.CorruptFiles() != 0 {
		t.Fatalf("after reopen: buckets %v; logs: %s", s2.Names(), logs)
	}
	if v3 := mustSet(t, s2.Bucket("p.wasm", Quota{}), "k", "3"); v3 <= v2 {
		t.Fatalf("version %d after a restart, the dropped bucket had %d", v3, v2)
	}
}

// TestReservationFailureHandsOutNoVersion: when the file cannot take a
// reservation, Set fails and changes nothing rather than hand out a
// version a crash could hand out again.
func TestReservationFailureHandsOutNoVersion(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	s, _ := open(t, path)
	b := s.Bucket("p.wasm", Quota{})
	mustSet(t, b, "k", "1")
	// Take the reservation to its end, then make the file refuse writes
	// (bbolt's read-only mode fails every Update with ErrDatabaseReadOnly).
	b.mu.Lock()
	b.seq = b.reserved
	b.mu.Unlock()
	ro, err := bolt.Open(path+".ro", 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	_ = ro.Close()
	ro, err = bolt.Open(path+".ro", 0o600, &bolt.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	rw := s.db.Swap(ro)
	defer func() { s.db.Store(rw) }()
	_, err = b.Set([]byte("k"), []byte("2"), Any)
	if err == nil || !errors.Is(err, bolt.ErrDatabaseReadOnly) || !strings.Contains(err.Error(), "reserving") {
		t.Fatalf("Set past the reservation with a failing file: %v", err)
	}
	if v, _, _ := b.Get([]byte("k")); string(v) != "1" {
		t.Fatalf("the failed Set changed the key to %q", v)
	}
}

// TestOpenBoltSurvivesPanicsAndFaults: bbolt's open, the second line of
// defence behind the file check, turns what bbolt does on a bad file into
// an error: a panic (a freelist page of the wrong type) and a fault on
// its mapping (a freelist page past the end of the file, inside the
// mapping: SIGBUS, fatal without SetPanicOnFault).
func TestOpenBoltSurvivesPanicsAndFaults(t *testing.T) {
	ps := uint64(os.Getpagesize())
	tests := []struct {
		name     string
		freelist uint64
		size     uint64 // of the file, in pages
	}{
		{"freelist page of the wrong type (panic)", 3, 4}, // page 3 is the root leaf
		{"freelist page past the end of the file (fault)", 6, 4},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "state.db")
			db, err := bolt.Open(path, 0o600, nil) // 4 pages: metas, freelist, root
			if err != nil {
				t.Fatal(err)
			}
			if err := db.Close(); err != nil {
				t.Fatal(err)
			}
			data, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			data = append(data[:4*ps], make([]byte, (tc.size-4)*ps)...)[:tc.size*ps]
			for id := range uint64(2) { // both metas, checksums made right
				m := data[id*ps+pageHeaderSize:]
				binary.LittleEndian.PutUint64(m[32:], tc.freelist)
				binary.LittleEndian.PutUint64(m[40:], max(tc.freelist+1, 4))
				h := fnv.New64a()
				h.Write(m[:metaSumLen])
				binary.LittleEndian.PutUint64(m[metaSumLen:], h.Sum64())
			}
			if err := os.WriteFile(path, data, 0o600); err != nil {
				t.Fatal(err)
			}
			db, err = openBolt(path)
			if err == nil {
				_ = db.Close()
				t.Fatal("bbolt opened the file")
			}
			if !isCorrupt(err) {
				t.Fatalf("not a corrupt file: %v", err)
			}
			t.Log(err)
		})
	}
}

// TestConcurrentWritesAndFlushes: two writers a bucket, past the
// bucket's reservation (so a Set reserves on its own, holding its
// bucket's lock) while other calls flush and drop (taking the store's
// lock, then buckets'). The file as a crash would leave it hands out no
// version again; after Close every key is as last written. Run with
// -race, it also checks the locking.
func TestConcurrentWritesAndFlushes(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	// No flusher: the one flush below leaves most of the reservation in
	// use, so the writers must go past it.
	s, err := Open(context.Background(), Options{Path: path, FlushInterval: 1 << 40, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	const writers, perWriter = 4, reserveAhead * 3 / 4
	type last struct {
		value   string
		version int64
	}
	results := make([]map[string]last, writers)
	var wg sync.WaitGroup
	for w := range writers {
		results[w] = map[string]last{}
		wg.Go(func() {
			b := s.Bucket(fmt.Sprintf("p%d.wasm", w%2), Quota{})
			for i := range perWriter {
				k, v := fmt.Sprintf("w%d-k%d", w, i%16), fmt.Sprint(i)
				ver, err := b.Set([]byte(k), []byte(v), Any)
				if err != nil {
					t.Error(err)
					return
				}
				results[w][k] = last{v, ver}
				switch {
				case w == 0 && i == perWriter/4:
					if err := s.Flush(context.Background()); err != nil {
						t.Error(err)
					}
				case i%5000 == 0:
					s.Drop("scratch.wasm")
				}
			}
		})
	}
	wg.Wait()
	top := map[string]int64{}
	for w, keys := range results {
		for _, l := range keys {
			name := fmt.Sprintf("p%d.wasm", w%2)
			top[name] = max(top[name], l.version)
		}
	}
	if top["p0.wasm"] <= reserveAhead {
		t.Fatalf("the writers stayed within the first reservation (%d)", top["p0.wasm"])
	}
	crash, err := os.ReadFile(path) // what a SIGKILL now would leave
	if err != nil {
		t.Fatal(err)
	}
	crashPath := filepath.Join(t.TempDir(), "crash.db")
	if err := os.WriteFile(crashPath, crash, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{crashPath, path} {
		s2, logs := open(t, p)
		if s2.CorruptFiles() != 0 {
			t.Fatalf("reopen of %s: %s", p, logs)
		}
		for name, v := range top {
			if got := mustSet(t, s2.Bucket(name, Quota{}), "after", "x"); got <= v {
				t.Fatalf("%s: %s: version %d handed out again", p, name, got)
			}
		}
		if err := s2.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	s2, _ := open(t, path)
	for w, keys := range results {
		name := fmt.Sprintf("p%d.wasm", w%2)
		b := s2.Bucket(name, Quota{})
		for k, want := range keys {
			if v, ver, ok := b.Get([]byte(k)); !ok || string(v) != want.value || ver != want.version {
				t.Fatalf("%s %s = %q@%d, want %q@%d", name, k, v, ver, want.value, want.version)
			}
		}
	}
}
