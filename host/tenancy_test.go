package host

import (
	"context"
	"slices"
	"testing"

	"github.com/informer-host/informer-host/abi"
	"github.com/informer-host/informer-host/host/internal/delivery"
)

type countingRecorder struct{ n int }

func (c *countingRecorder) Record(context.Context, map[string]any, string, string, string) (int32, string) {
	c.n++
	return 0, ""
}

// A confined plugin's Events: about an object of its namespace they are
// recorded; about another namespace's, or a cluster-scoped object, they
// are ERR_DENIED and never reach the recorder.
func TestConfinedEvents(t *testing.T) {
	rec := &countingRecorder{}
	c := confinedEvents{rec: rec, ns: "team-a"}
	obj := func(ns string) map[string]any {
		md := map[string]any{"name": "x"}
		if ns != "" {
			md["namespace"] = ns
		}
		return map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": md}
	}
	if code, msg := c.Record(context.Background(), obj("team-a"), "Normal", "R", "m"); code != 0 || rec.n != 1 {
		t.Fatalf("own namespace: %d %s, recorded %d", code, msg, rec.n)
	}
	for _, ns := range []string{"team-b", ""} {
		if code, msg := c.Record(context.Background(), obj(ns), "Normal", "R", "m"); code != abi.ErrDenied || rec.n != 1 {
			t.Errorf("namespace %q: %d %s, recorded %d; want ERR_DENIED, nothing recorded", ns, code, msg, rec.n)
		}
	}
}

func TestKeysInReach(t *testing.T) {
	keys := []delivery.Key{{Resource: "cms", Namespace: "a", Name: "1"}, {Resource: "cms", Namespace: "b", Name: "2"}, {Resource: "nodes", Name: "n"}}
	if got := keysInReach("", slices.Clone(keys)); !slices.Equal(got, keys) {
		t.Errorf("unconfined: %v", got)
	}
	if got := keysInReach("a", slices.Clone(keys)); !slices.Equal(got, keys[:1]) {
		t.Errorf("confined to a: %v", got)
	}
	if got := storeKeysInReach("a", []string{"x", "a/1", "b/2", "n", "ab/3"}, 1); !slices.Equal(got, []string{"x", "a/1"}) {
		t.Errorf("store keys confined to a: %v", got)
	}
}
