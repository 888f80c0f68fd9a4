package kit_test

import (
	"errors"
	"fmt"
	"reflect"
	"testing"

	"github.com/informer-host/informer-host/abi/kit"
	"github.com/informer-host/informer-host/abi/kit/kittest"
)

// The kit's state calls over kittest's fake host (the ABI's size
// protocol, codes and versions, ABI.md §16.2); the host's store itself is
// tested where it lives, and the kit over it by the example plugins' e2e
// tests.
func TestState(t *testing.T) {
	// Off wasip1, and with no test host installed, there is no host: denied.
	if _, err := kit.State().Set("k", nil); !errors.Is(err, kit.ErrDenied) {
		t.Fatalf("no host: %v", err)
	}
	h := kittest.New(t)
	h.StateMaxBytes = 1 << 16
	s := kit.State()

	if _, _, err := s.Get("missing"); !errors.Is(err, kit.ErrNoKey) {
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
	if _, err := s.SetIfVersion("big", nil, v1+1); !errors.Is(err, kit.ErrConflict) {
		t.Fatalf("stale SetIfVersion: %v", err)
	}
	if _, err := s.SetIfVersion("big", nil, 0); !errors.Is(err, kit.ErrConflict) {
		t.Fatalf("create-only on an existing key: %v", err)
	}
	if _, err := s.Set("huge", make([]byte, 1<<16)); !errors.Is(err, kit.ErrQuota) {
		t.Fatalf("over quota: %v", err)
	}
	if err := s.DeleteIfVersion("big", v1); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete("big"); !errors.Is(err, kit.ErrNoKey) {
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
}
