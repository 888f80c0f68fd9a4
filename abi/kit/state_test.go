package kit

import (
	"encoding/binary"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/informer-host/informer-host/abi"
)

// bucketHost implements the state imports over an in-memory bucket with
// the ABI's size protocol, codes and versions (ABI.md §16), the way the
// engine does over the daemon's store; the store itself is tested where
// it lives, and the kit over it by the example plugins' e2e tests.
type bucketHost struct{ b *memBucket }

type memBucket struct {
	max     int // bytes of keys and values
	version int64
	vals    map[string][]byte
	vers    map[string]int64
}

func newMemBucket(max int) *memBucket {
	return &memBucket{max: max, vals: map[string][]byte{}, vers: map[string]int64{}}
}

func (b *memBucket) size() (n int) {
	for k, v := range b.vals {
		n += len(k) + len(v)
	}
	return n
}

func (h bucketHost) get(key string, buf []byte, version *int64) int32 {
	v, ok := h.b.vals[key]
	if !ok {
		return abi.ErrAbsent
	}
	*version = h.b.vers[key]
	if len(v) <= len(buf) {
		copy(buf, v)
	}
	return int32(len(v))
}

func (h bucketHost) set(key string, value []byte, ifVersion int64) int64 {
	cur, ok := h.b.vers[key]
	switch {
	case ifVersion == abi.StateAnyVersion:
	case ifVersion == 0 && ok, ifVersion > 0 && (!ok || cur != ifVersion):
		return int64(abi.ErrConflict)
	}
	if h.b.size()-len(h.b.vals[key])+len(value)+len(key)-lenIf(ok, key) > h.b.max {
		return int64(abi.ErrQuota)
	}
	h.b.version++
	h.b.vals[key], h.b.vers[key] = append([]byte(nil), value...), h.b.version
	return h.b.version
}

func lenIf(ok bool, key string) int {
	if ok {
		return len(key)
	}
	return 0
}

func (h bucketHost) del(key string, ifVersion int64) int32 {
	cur, ok := h.b.vers[key]
	if !ok {
		return abi.ErrAbsent
	}
	if ifVersion != abi.StateAnyVersion && ifVersion != cur {
		return abi.ErrConflict
	}
	delete(h.b.vals, key)
	delete(h.b.vers, key)
	return 0
}

func (h bucketHost) list(prefix, after string, max int32, buf []byte) int64 {
	keys := make([]string, 0, len(h.b.vals))
	for k := range h.b.vals {
		if strings.HasPrefix(k, prefix) && k > after {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	if max > 0 && len(keys) > int(max) {
		keys = keys[:max]
	}
	var out []byte
	for _, k := range keys {
		out = binary.LittleEndian.AppendUint32(out, uint32(len(k)))
		out = append(out, k...)
	}
	if len(out) <= len(buf) {
		copy(buf, out)
	}
	return abi.PackList(uint32(len(keys)), uint32(len(out)))
}

func TestState(t *testing.T) {
	s := StateStore{h: bucketHost{newMemBucket(1 << 16)}}

	if _, _, err := s.Get("missing"); !errors.Is(err, ErrNoKey) {
		t.Fatalf("Get missing: %v", err)
	}
	big := make([]byte, 1000) // past Get's first buffer
	v1, err := s.Set("big", big)
	if err != nil {
		t.Fatal(err)
	}
	if got, ver, err := s.Get("big"); err != nil || len(got) != 1000 || ver != v1 {
		t.Fatalf("Get big: %d bytes @%d, %v", len(got), ver, err)
	}
	if _, err := s.SetIfVersion("big", nil, v1+1); !errors.Is(err, ErrConflict) {
		t.Fatalf("stale SetIfVersion: %v", err)
	}
	if _, err := s.SetIfVersion("big", nil, 0); !errors.Is(err, ErrConflict) {
		t.Fatalf("create-only on an existing key: %v", err)
	}
	if _, err := s.Set("huge", make([]byte, 1<<16)); !errors.Is(err, ErrQuota) {
		t.Fatalf("over quota: %v", err)
	}
	if err := s.DeleteIfVersion("big", v1); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete("big"); !errors.Is(err, ErrNoKey) {
		t.Fatalf("Delete missing: %v", err)
	}
	var want []string
	for i := range 30 {
		k := fmt.Sprintf("ns/%02d", i)
		want = append(want, k)
		if _, err := s.Set(k, nil); err != nil {
			t.Fatal(err)
		}
	}
	var got []string
	after := ""
	for {
		page, err := s.List("ns/", after, 7)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, page...)
		if len(page) < 7 {
			break
		}
		after = page[len(page)-1]
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("listed %v", got)
	}
	// Off wasip1 there is no host: denied.
	if _, err := State().Set("k", nil); !errors.Is(err, ErrDenied) {
		t.Fatalf("no host: %v", err)
	}
}
