package kit

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"reflect"
	"testing"

	"github.com/informer-host/informer-host/abi"
	"github.com/informer-host/informer-host/state"
)

// bucketHost implements the state imports over a real state.Bucket, with
// the ABI's size protocol and codes, the way the engine does.
type bucketHost struct{ b *state.Bucket }

func code(err error) int32 {
	switch {
	case errors.Is(err, state.ErrConflict):
		return abi.ErrConflict
	case errors.Is(err, state.ErrQuota):
		return abi.ErrQuota
	case errors.Is(err, state.ErrAbsent):
		return abi.ErrAbsent
	}
	return abi.ErrInvalid
}

func (h bucketHost) get(key string, buf []byte, version *int64) int32 {
	v, ver, ok := h.b.Get([]byte(key))
	if !ok {
		return abi.ErrAbsent
	}
	*version = ver
	if len(v) <= len(buf) {
		copy(buf, v)
	}
	return int32(len(v))
}

func (h bucketHost) set(key string, value []byte, ifVersion int64) int64 {
	v, err := h.b.Set([]byte(key), value, ifVersion)
	if err != nil {
		return int64(code(err))
	}
	return v
}

func (h bucketHost) del(key string, ifVersion int64) int32 {
	if err := h.b.Delete([]byte(key), ifVersion); err != nil {
		return code(err)
	}
	return 0
}

func (h bucketHost) list(prefix, after string, max int32, buf []byte) int64 {
	var out []byte
	n := h.b.List([]byte(prefix), []byte(after), int(max), func(k string) bool {
		out = binary.LittleEndian.AppendUint32(out, uint32(len(k)))
		out = append(out, k...)
		return true
	})
	if len(out) <= len(buf) {
		copy(buf, out)
	}
	return abi.PackList(uint32(n), uint32(len(out)))
}

func TestState(t *testing.T) {
	st, err := state.Open(context.Background(), state.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close(context.Background())
	s := StateStore{h: bucketHost{st.Bucket("p.wasm", state.Quota{MaxBytes: 1 << 16})}}

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
