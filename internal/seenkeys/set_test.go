package seenkeys

import (
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/informer-host/informer-host/internal/state"
	"github.com/informer-host/informer-host/internal/testenv"
)

func uidN(i int) string {
	return uuid.NewSHA1(uuid.NameSpaceOID, []byte(fmt.Sprint(i))).String()
}

func TestEncodeDecode(t *testing.T) {
	tests := []struct {
		name string
		keys []Key
	}{
		{"empty", nil},
		{"one cluster-scoped", []Key{{Resource: "nodes", Name: "n1", UID: uidN(1)}}},
		{"names sharing prefixes, namespaces and resources changing", []Key{
			{"cms", "a", "app-1", uidN(1)}, {"cms", "a", "app-10", uidN(2)}, {"cms", "a", "b", uidN(3)},
			{"cms", "b", "app-1", uidN(4)}, {"pods", "b", "app-1", uidN(5)}, {"pods", "b", "app-12", uidN(6)},
		}},
		{"uids that are not UUIDs", []Key{
			{"cms", "a", "x", "not-a-uuid"}, {"cms", "a", "y", ""}, {"cms", "a", "z", "0F8FAD5B-D9CB-469F-A165-70867728950E"},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Decode(Encode(tt.keys))
			if err != nil {
				t.Fatal(err)
			}
			if len(got) == 0 && len(tt.keys) == 0 {
				return
			}
			if !reflect.DeepEqual(got, tt.keys) {
				t.Fatalf("round trip:\n got %v\nwant %v", got, tt.keys)
			}
		})
	}
}

func TestDecodeRefusesCorruptData(t *testing.T) {
	good := Encode([]Key{{"cms", "a", "x", uidN(1)}})
	tests := []struct {
		name string
		data []byte
		want string
	}{
		{"not gzip", []byte("plain"), "not gzip"},
		{"truncated gzip", good[:len(good)-6], "gzip"},
		{"unknown format", gzipOf([]byte{9}), "unknown format"},
		{"truncated key", gzipOf([]byte{formatV1, 0, 3, 'c', 'm'}), "truncated or corrupt"},
		{"prefix longer than the previous name", gzipOf([]byte{formatV1, 0, 1, 'r', 1, 'n', 5, 1, 'x'}), "name prefix"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Decode(tt.data)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Decode = %v, want an error with %q", err, tt.want)
			}
		})
	}
}

func gzipOf(raw []byte) []byte {
	var b bytes.Buffer
	zw := gzip.NewWriter(&b)
	_, _ = zw.Write(raw)
	_ = zw.Close()
	return b.Bytes()
}

func TestSetAddRemove(t *testing.T) {
	s := NewSet()
	a := Key{"cms", "ns", "a", uidN(1)}
	s.Add(a)
	s.Add(a)
	if s.Len() != 1 {
		t.Fatalf("Len = %d after adding one key twice", s.Len())
	}
	if s.Remove(Key{"cms", "ns", "a", uidN(2)}) {
		t.Fatal("Remove with another uid removed the key: a delete of an old incarnation would forget the new one")
	}
	recreated := Key{"cms", "ns", "a", uidN(3)}
	s.Add(recreated)
	if u, _ := s.Get("cms", "ns", "a"); u != recreated.UID || s.Len() != 1 {
		t.Fatalf("after re-add with a new uid: uid %s, len %d", u, s.Len())
	}
	odd := Key{"cms", "ns", "b", "odd"}
	s.Add(odd)
	if u, _ := s.Get("cms", "ns", "b"); u != "odd" {
		t.Fatalf("odd uid kept as %q", u)
	}
	s.Add(Key{"cms", "ns", "b", uidN(4)})
	if u, _ := s.Get("cms", "ns", "b"); u != uidN(4) {
		t.Fatalf("odd uid replaced by a UUID reads %q", u)
	}
	if !s.Remove(recreated) || !s.Remove(Key{"cms", "ns", "b", ""}) || s.Len() != 0 {
		t.Fatalf("Remove left %d keys", s.Len())
	}
	if len(s.byRes) != 0 {
		t.Fatalf("empty set keeps %d resource maps", len(s.byRes))
	}
}

// keys50k is 50,000 keys shaped like a cluster's: 100 namespaces of 500
// objects named like a Deployment's pods.
func keys50k() []Key {
	var keys []Key
	for ns := 0; ns < 100; ns++ {
		for i := 0; i < 500; i++ {
			keys = append(keys, Key{"pods", fmt.Sprintf("team-%03d", ns),
				fmt.Sprintf("web-frontend-7c9d8f6b5-%05x", i*7919), uidN(ns*500 + i)})
		}
	}
	return keys
}

// TestCompactness measures, at 50,000 keys, the bytes per key of a Set
// in memory and of its persisted form, and fails if either grows past
// the figure RATIONALE.md gives with some headroom.
func TestCompactness(t *testing.T) {
	keys := keys50k()
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	s := NewSet()
	for _, k := range keys {
		// The set's own copy of the name, as it outlives the object
		// it came from.
		k.Name = strings.Clone(k.Name)
		s.Add(k)
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	runtime.KeepAlive(s)
	runtime.KeepAlive(keys)
	mem := float64(after.HeapAlloc-before.HeapAlloc) / float64(len(keys))
	disk := float64(len(Encode(s.Keys("")))) / float64(len(keys))
	t.Logf("50,000 keys: %.1f bytes/key in memory, %.1f bytes/key persisted (gzip'd)", mem, disk)
	if mem > 140 {
		t.Errorf("%.1f bytes per key in memory; RATIONALE.md says about 115", mem)
	}
	if disk > 24 {
		t.Errorf("%.1f bytes per key persisted; RATIONALE.md says about 19", disk)
	}
}

func BenchmarkSetMemory(b *testing.B) {
	keys := keys50k()
	b.ReportAllocs()
	for range b.N {
		s := NewSet()
		for _, k := range keys {
			s.Add(k)
		}
	}
	b.ReportMetric(float64(len(Encode(keys)))/float64(len(keys)), "persisted-B/key")
}

// countingBackend counts Saves and keeps the last.
type countingBackend struct {
	saves atomic.Int64
	last  atomic.Pointer[[]byte]
}

func (c *countingBackend) Name() string                                 { return "counting" }
func (c *countingBackend) Load(context.Context, string) ([]byte, error) { return nil, nil }
func (c *countingBackend) Others(context.Context, string) (map[string][]byte, error) {
	return nil, nil
}
func (c *countingBackend) Save(_ context.Context, _ string, data []byte) error {
	c.saves.Add(1)
	c.last.Store(&data)
	return nil
}

func TestStoreDebounces(t *testing.T) {
	ctx := context.Background()
	b := &countingBackend{}
	st := New(Options{Backend: b, FlushInterval: time.Hour})
	set := st.Set(ctx, "p")
	for i := range 1000 {
		set.Add(Key{"cms", "ns", fmt.Sprint(i), uidN(i)})
	}
	if n := b.saves.Load(); n != 0 {
		t.Fatalf("%d saves before the flush interval ended: every change is written, not debounced", n)
	}
	if err := st.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if err := st.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if n := b.saves.Load(); n != 1 {
		t.Fatalf("%d saves for 1000 changes and two flushes; want 1 (an unchanged set is not written again)", n)
	}
	set.Remove(Key{"cms", "ns", "0", ""})
	if err := st.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if n := b.saves.Load(); n != 2 {
		t.Fatalf("Close wrote %d times in all; want the pending change written once", n-1)
	}
	keys, err := Decode(*b.last.Load())
	if err != nil || len(keys) != 999 {
		t.Fatalf("what Close wrote: %d keys, %v", len(keys), err)
	}

	// The flusher writes by itself once the interval ends.
	b2 := &countingBackend{}
	st2 := New(Options{Backend: b2, FlushInterval: 10 * time.Millisecond})
	defer st2.Close(ctx)
	st2.Set(ctx, "p").Add(Key{"cms", "ns", "a", uidN(1)})
	testenv.Eventually(t, "the flusher writes the changed set", func() bool { return b2.saves.Load() == 1 })
}

func TestStateFileBackend(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "state.db")
	open := func() *state.Store {
		st, err := state.Open(ctx, state.Options{Path: path})
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	st := open()
	s := New(Options{Backend: StateFile(st)})
	s.Set(ctx, "p.wasm").Add(Key{"cms", "ns", "a", uidN(1)})
	s.Set(ctx, "q.wasm").Add(Key{"cms", "ns", "b", uidN(2)})
	if err := s.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if err := st.Close(ctx); err != nil {
		t.Fatal(err)
	}

	st = open()
	defer st.Close(ctx)
	s = New(Options{Backend: StateFile(st)})
	defer s.Close(ctx)
	if got := s.Set(ctx, "p.wasm").Keys(""); len(got) != 1 || got[0].Name != "a" || got[0].UID != uidN(1) {
		t.Fatalf("after reopening the state file: %v", got)
	}
	s.Forget("q.wasm")
	if err := s.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if _, ok := st.Lookup(StateBucketPrefix + "q.wasm"); ok {
		t.Fatal("a forgotten plugin's bucket is still in the state file")
	}
	if got := s.Set(ctx, "q.wasm").Len(); got != 0 {
		t.Fatalf("a forgotten plugin's set has %d keys", got)
	}
}

func TestSetMissing(t *testing.T) {
	s := NewSet()
	for i, n := range []string{"gone", "kept", "recreated"} {
		s.Add(Key{"cms", "ns", n, uidN(i)})
	}
	s.Add(Key{"pods", "ns", "other-resource", uidN(9)})
	store := map[string]string{"kept": uidN(1), "recreated": uidN(7)}
	got := s.Missing("cms", func(ns, name string) (string, bool) {
		u, ok := store[name]
		return u, ok
	})
	want := []Key{{"cms", "ns", "gone", uidN(0)}, {"cms", "ns", "recreated", uidN(2)}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Missing = %v, want %v", got, want)
	}
}

// BenchmarkSetAddSame is the cost on every settled update: the key is
// there with the same uid, and nothing changes.
func BenchmarkSetAddSame(b *testing.B) {
	s := NewSet()
	k := Key{"pods", "team-001", "web-frontend-7c9d8f6b5-x2x9z", uidN(1)}
	s.Add(k)
	b.ReportAllocs()
	for range b.N {
		s.Add(k)
	}
}

// With the memory backend a flush encodes nothing: it would be garbage
// and CPU for a backend that keeps nothing (about 10 MB a flush for a
// plugin holding 50,000 keys, every interval while its set changes).
func TestMemoryBackendFlushEncodesNothing(t *testing.T) {
	ctx := context.Background()
	st := New(Options{Backend: Memory(), FlushInterval: time.Hour})
	defer st.Close(ctx)
	set := st.Set(ctx, "p")
	for i := range 20000 {
		set.Add(Key{"cms", "ns", fmt.Sprint(i), uidN(i)})
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	if err := st.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	runtime.ReadMemStats(&after)
	if got := after.TotalAlloc - before.TotalAlloc; got > 64<<10 {
		t.Errorf("a flush to the memory backend allocated %d bytes for 20,000 keys; want next to nothing", got)
	}
	// The set is clean: a later change makes it dirty again, as before.
	if _, _, dirty := set.snapshot(); dirty {
		t.Error("the set is still dirty after a flush to the memory backend")
	}
}
