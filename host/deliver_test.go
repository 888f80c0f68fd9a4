package host

import (
	"fmt"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/informer-host/informer-host/event"
	"github.com/informer-host/informer-host/host/internal/delivery"
)

// The worker never takes a plugin back to an older state of an object:
// live events are checked against what the plugin was last given.
func TestPrepareNeverGoesBackwards(t *testing.T) {
	res := &event.ResourceRef{Name: "cms", Version: "v1", Resource: "configmaps", Kind: "ConfigMap"}
	obj := func(uid, rv string) *unstructured.Unstructured {
		u := &unstructured.Unstructured{Object: map[string]any{}}
		u.SetNamespace("ns")
		u.SetName("a")
		u.SetUID(types.UID(uid))
		u.SetResourceVersion(rv)
		return u
	}
	ev := func(typ event.EventType, oldRV, rv string) *event.Event {
		e := &event.Event{Type: typ, Resource: res, Object: obj("u-a", rv)}
		if oldRV != "" {
			e.OldObject = obj("u-a", oldRV)
		}
		return e
	}
	describe := func(e *event.Event) string {
		if e.OldObject != nil {
			return fmt.Sprintf("%s %s %s->%s", e.Type, e.Object.GetName(), e.OldObject.GetResourceVersion(), e.Object.GetResourceVersion())
		}
		return fmt.Sprintf("%s %s %s", e.Type, e.Object.GetName(), e.Object.GetResourceVersion())
	}
	k := delivery.Key{Resource: "cms", Namespace: "ns", Name: "a"}
	recreated := ev(event.EventAdd, "", "9")
	recreated.Object.SetUID("u-other")
	tests := []struct {
		name string
		seen string // resourceVersion the plugin has; "" if it has nothing
		ev   *event.Event
		want string // what is delivered, "" for nothing
	}{
		{"newer add", "5", ev(event.EventAdd, "", "6"), "add a 6"},
		{"repeat of the state it has", "5", ev(event.EventAdd, "", "5"), "add a 5"},
		{"older add", "5", ev(event.EventAdd, "", "4"), ""},
		{"older update", "5", ev(event.EventUpdate, "3", "4"), ""},
		{"resync", "5", ev(event.EventUpdate, "5", "5"), "update a 5->5"},
		{"update of an object it lacks", "", ev(event.EventUpdate, "3", "4"), "add a 4"},
		{"delete of an object it lacks", "", ev(event.EventDelete, "", "4"), ""},
		{"add of the object recreated", "5", recreated, "add a 9"},
		{"delete", "5", ev(event.EventDelete, "", "5"), "delete a 5"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			g := &generation{seen: newCacheView(nil), shard: &shardView{}}
			l := &bindingListener{g: g, binding: "cms", add: true, update: true, delete: true}
			g.byResource = map[string]*bindingListener{"cms": l}
			if tc.seen != "" {
				g.seen.set(k, res, obj("u-a", tc.seen), seenObject{})
			}
			out, _, _, v := g.eventFor(&delivery.Entry{Event: *tc.ev, Key: k})
			got := ""
			if v == hand {
				got = describe(out)
			}
			if got != tc.want {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
	// A delete of an older incarnation than the one the plugin has.
	g := &generation{seen: newCacheView(nil), shard: &shardView{}}
	g.seen.set(k, res, recreated.Object, seenObject{})
	g.byResource = map[string]*bindingListener{"cms": {g: g, binding: "cms", add: true, delete: true}}
	if _, _, _, v := g.eventFor(&delivery.Entry{Event: *ev(event.EventDelete, "", "5"), Key: k}); v == hand {
		t.Error("a delete of the object's previous incarnation was delivered")
	}
}
