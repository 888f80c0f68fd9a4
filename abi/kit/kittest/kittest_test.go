package kittest_test

import (
	"errors"
	"strings"
	"testing"

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
