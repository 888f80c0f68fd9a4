package host

import (
	"context"
	"reflect"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/informer-host/informer-host/event"
	"github.com/informer-host/informer-host/host/internal/delivery"
	"github.com/informer-host/informer-host/internal/seenkeys"
)

// The controller loop's side of missed deletes: what its reconciles
// settled is remembered, and after a restart the keys the store lacks,
// or has with another uid, are the primaries to reconcile as absent.
func TestMissedDeletesForTheControllerLoop(t *testing.T) {
	st := seenkeys.New(seenkeys.Options{})
	defer st.Close(context.Background())
	m := &missedDeletes{store: st, plugin: "ctl.wasm"}
	obj := func(uid string) *unstructured.Unstructured {
		u := &unstructured.Unstructured{Object: map[string]any{}}
		u.SetUID(types.UID(uid))
		return u
	}
	key := func(name string) delivery.Key { return delivery.Key{Resource: "crons", Namespace: "ns", Name: name} }
	const (
		u1 = "0f8fad5b-d9cb-469f-a165-70867728950e"
		u2 = "7c9e6679-7425-40de-944b-e07fc1f90ae7"
		u3 = "9a1d1c5e-2c3f-4b7a-8f36-6d4e1c2b3a40"
	)
	m.reconciled(key("gone"), obj(u1))
	m.reconciled(key("kept"), obj(u2))
	m.reconciled(key("recreated"), obj(u3))
	m.reconciled(key("reconciled-absent"), obj(u1))
	m.reconciled(key("reconciled-absent"), nil)
	store := map[string]string{"ns/kept": u2, "ns/recreated": u1}
	got := m.absent("crons", func(k string) (*event.ResourceRef, *unstructured.Unstructured, bool) {
		u, ok := store[k]
		if !ok {
			return nil, nil, false
		}
		return nil, obj(u), true
	})
	if want := []delivery.Key{key("gone"), key("recreated")}; !reflect.DeepEqual(got, want) {
		t.Fatalf("absent = %v, want %v", got, want)
	}
	var none *missedDeletes // opted out
	if got := none.absent("crons", nil); got != nil {
		t.Fatalf("a plugin that opted out has absent keys: %v", got)
	}
}
