package kittest_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/informer-host/informer-host/abi"
	"github.com/informer-host/informer-host/abi/kit"
	"github.com/informer-host/informer-host/abi/kit/kittest"
)

var phases = kit.Gauge("kittest_pods", "pods by phase", "phase")

// handler is a plugin's logic: it counts pods per phase in state and a
// gauge, reads the pod's node from the cache, and drops pods without a
// phase.
func handler(ev *kit.Event) error {
	phase, ok := ev.Get("status.phase")
	if !ok {
		return kit.Drop(errors.New("no phase"))
	}
	node, _ := ev.Get("spec.nodeName")
	if n, err := kit.Cache().Get("nodes", "", node); err == nil {
		zone, _ := n.Get(`metadata.labels["zone"]`)
		kit.Infof("%s on %s in %s", ev.Key(), node, zone)
	}
	st := kit.State()
	v, _, _ := st.Get("phase/" + phase)
	v = append(v, 'x')
	if _, err := st.Set("phase/"+phase, v); err != nil {
		return err
	}
	return phases.Set(float64(len(v)), phase)
}

func TestFakeHost(t *testing.T) {
	kit.Handle(handler)
	h := kittest.New(t)
	h.Cache("nodes", `{"metadata":{"name":"n1","labels":{"zone":"a"}}}`)
	pod := `{"metadata":{"name":"web","namespace":"shop"},"spec":{"nodeName":"n1"},"status":{"phase":"Running"}}`
	if r := h.Add("pods", pod); r.Code != kittest.OK {
		t.Fatal(r)
	}
	if r := h.Update("pods", pod, pod); r.Code != kittest.OK {
		t.Fatal(r)
	}
	if r := h.Add("pods", `{"metadata":{"name":"x","namespace":"shop"}}`); r.Code != kittest.Drop || r.Message != "no phase" {
		t.Errorf("pod without phase: %v", r)
	}
	if v, _ := h.State("phase/Running"); v != "xx" {
		t.Errorf("state %q", v)
	}
	if v := h.Metric("kittest_pods", "Running"); v != 2 {
		t.Errorf("gauge %v", v)
	}
	if logs := strings.Join(h.Logs(), "\n"); !strings.Contains(logs, "INFO shop/web on n1 in a") {
		t.Errorf("logs %q", logs)
	}
	// A second host starts empty, and the metric is declared with it.
	h2 := kittest.New(t)
	if r := h2.Add("pods", pod); r.Code != kittest.OK {
		t.Fatal(r)
	}
	if v := h2.Metric("kittest_pods", "Running"); v != 1 {
		t.Errorf("second host's gauge %v", v)
	}
}

var deniedCounter = kit.Counter("kittest_denied_total", "updates of a plugin without grants.metrics", "phase")

// A denied cache read, state call or metric update names the call and
// what it was called on, and still matches ErrDenied; a miss and a
// conflict stay the bare sentinels a plugin compares against.
func TestCapabilityErrorsNameTheCall(t *testing.T) {
	for _, tc := range []struct {
		name string
		deny string
		call func() error
		text string
		is   error
	}{
		{"cache get of an ungranted resource", "", func() error {
			_, err := kit.Cache().Get("secrets", "shop", "token")
			return err
		}, "cache_get secrets shop/token: ERR_DENIED", kit.ErrDenied},
		{"cache list denied", "cache", func() error {
			_, err := kit.Cache().List("pods", "shop", "app=web")
			return err
		}, "cache_list pods in shop -l app=web: ERR_DENIED", kit.ErrDenied},
		{"cache list with a bad selector", "", func() error {
			_, err := kit.Cache().List("pods", "", "app in (")
			return err
		}, "cache_list pods -l app in (: ERR_INVALID", kit.HostError(abi.ErrInvalid)},
		{"owned denied", "cache", func() error {
			_, err := kit.Cache().Owned("pods", "u-1")
			return err
		}, "cache_index pods owner=u-1: ERR_DENIED", kit.ErrDenied},
		{"state get denied", "state", func() error {
			_, _, err := kit.State().Get("phase/Running")
			return err
		}, `state_get "phase/Running": ERR_DENIED`, kit.ErrDenied},
		{"state set denied", "state", func() error {
			_, err := kit.State().Set("k", []byte("v"))
			return err
		}, `state_set "k": ERR_DENIED`, kit.ErrDenied},
		{"state delete denied", "state", func() error {
			return kit.State().Delete("k")
		}, `state_delete "k": ERR_DENIED`, kit.ErrDenied},
		{"state list denied", "state", func() error {
			_, err := kit.State().List("phase/", "", 10)
			return err
		}, `state_list prefix "phase/" after "": ERR_DENIED`, kit.ErrDenied},
		{"metric declaration denied", "metrics", func() error {
			return deniedCounter.Add(1, "Running")
		}, "metric_declare kittest_denied_total: ERR_DENIED", kit.ErrDenied},
		{"metric update with a missing label value", "", func() error {
			return deniedCounter.Add(1)
		}, "metric_add kittest_denied_total: ERR_INVALID: 0 label values for 1 label keys", kit.HostError(abi.ErrInvalid)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := kittest.New(t)
			h.Cache("pods", `{"metadata":{"name":"web","namespace":"shop"}}`)
			if tc.deny != "" {
				h.Deny(tc.deny)
			}
			err := tc.call()
			var ce *kit.CallError
			if !errors.As(err, &ce) || err.Error() != tc.text || !errors.Is(err, tc.is) {
				t.Errorf("error %v (%T), want a *kit.CallError %q matching %v", err, err, tc.text, tc.is)
			}
		})
	}
}

func TestMissesStayBareSentinels(t *testing.T) {
	h := kittest.New(t)
	h.Cache("pods", `{"metadata":{"name":"web","namespace":"shop"}}`)
	h.SetState("k", "v")
	for _, tc := range []struct {
		name string
		call func() error
		want error
	}{
		{"cache miss", func() error { _, err := kit.Cache().Get("pods", "shop", "gone"); return err }, kit.ErrNoObject},
		{"state miss", func() error { _, _, err := kit.State().Get("gone"); return err }, kit.ErrNoKey},
		{"delete of a missing key", func() error { return kit.State().Delete("gone") }, kit.ErrNoKey},
		{"create of an existing key", func() error { _, err := kit.State().SetIfVersion("k", nil, 0); return err }, kit.ErrConflict},
		{"delete at another version", func() error { return kit.State().DeleteIfVersion("k", 999) }, kit.ErrConflict},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// Identity, not errors.Is: the sentinel itself, nothing built around it.
			if err := tc.call(); err != tc.want {
				t.Errorf("error %v (%T), want the sentinel %v itself", err, err, tc.want)
			}
		})
	}
}

// The fake's granted cache follows the events it delivers, as the host's
// cache holds an event's object when the plugin is called: Add and Update
// put the object in it, Delete takes it out; Uncache takes out what a
// test put in.
func TestEventsUpdateTheCache(t *testing.T) {
	var seen []string
	kit.Handle(func(ev *kit.Event) error {
		_, err := kit.Cache().Get("pods", ev.Namespace(), ev.Name())
		seen = append(seen, ev.Key()+" "+errName(err))
		return nil
	})
	h := kittest.New(t)
	h.GrantCache("pods")
	v1 := `{"metadata":{"name":"web","namespace":"shop","resourceVersion":"1"}}`
	v2 := `{"metadata":{"name":"web","namespace":"shop","resourceVersion":"2"}}`
	h.Add("pods", v1)
	if o, ok := h.CacheObject("pods", "shop", "web"); !ok || o != v1 {
		t.Errorf("after Add: cached %q %v, want the added object", o, ok)
	}
	h.Update("pods", v1, v2)
	if o, ok := h.CacheObject("pods", "shop", "web"); !ok || o != v2 {
		t.Errorf("after Update: cached %q %v, want the new object", o, ok)
	}
	h.Delete("pods", v2)
	if o, ok := h.CacheObject("pods", "shop", "web"); ok {
		t.Errorf("after Delete: still cached %q", o)
	}
	h.SelfWrite("pods", "", v1)
	h.Uncache("pods", "shop", "web")
	if o, ok := h.CacheObject("pods", "shop", "web"); ok {
		t.Errorf("after Uncache: still cached %q", o)
	}
	want := []string{"shop/web found", "shop/web found", "shop/web absent", "shop/web found"}
	if strings.Join(seen, ",") != strings.Join(want, ",") {
		t.Errorf("the handler read %q, want %q", seen, want)
	}
}

func errName(err error) string {
	switch {
	case err == nil:
		return "found"
	case errors.Is(err, kit.ErrNoObject):
		return "absent"
	}
	return err.Error()
}

// An event does not grant the cache of its resource, nor does Uncache:
// the host answers a plugin without a cache grant ERR_DENIED, however
// many events of the resource it is given.
func TestEventsDoNotGrantTheCache(t *testing.T) {
	var seen []string
	kit.Handle(func(ev *kit.Event) error {
		_, err := kit.Cache().Get("pods", ev.Namespace(), ev.Name())
		seen = append(seen, errName(err))
		return nil
	})
	h := kittest.New(t)
	pod := `{"metadata":{"name":"web","namespace":"shop","resourceVersion":"1"}}`
	h.Add("pods", pod)
	h.Uncache("pods", "shop", "other")
	h.Update("pods", pod, pod)
	h.Delete("pods", pod)
	want := "cache_get pods shop/web: ERR_DENIED"
	for i, s := range seen {
		if s != want {
			t.Errorf("call %d read %q, want %q", i, s, want)
		}
	}
}

// A write does not grant the cache of its resource either: a plugin
// granted writes of configmaps but not their cache reads back ERR_DENIED,
// as from the host.
func TestWritesDoNotGrantTheCache(t *testing.T) {
	var read string
	kit.Handle(func(ev *kit.Event) error {
		target := kit.Target{Resource: "configmaps", Namespace: "demo", Name: "made"}
		if _, err := kit.K8s().Apply(target, []byte(`{"apiVersion":"v1","kind":"ConfigMap"}`), false, kit.Preconditions{}); err != nil {
			return err
		}
		_, err := kit.Cache().Get("configmaps", "demo", "made")
		read = errName(err)
		return nil
	})
	h := kittest.New(t)
	if r := h.Add("pods", `{"metadata":{"name":"web","namespace":"shop"}}`); r.Code != kittest.OK {
		t.Fatal(r)
	}
	if want := "cache_get configmaps demo/made: ERR_DENIED"; read != want {
		t.Errorf("read %q, want %q", read, want)
	}
}
