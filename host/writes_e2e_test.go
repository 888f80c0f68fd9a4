package host

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/informer-host/informer-host/internal/testenv"
)

const writerConfig = `
apiVersion: informer-host/v1
resources:
- {name: configmaps, version: v1, resource: configmaps, namespaces: [NS]}
plugins:
  directory: DIR
  modules:
  - file: writer.wasm
    bindings: [{resource: configmaps, events: [add]}]
    config: {metadata: {labels: {written: "yes"}}}
    limits: {callTimeout: 50ms}
    grants:
      writes:
        resources: [{resource: configmaps, verbs: [patch]}]
        timeout: 5m
`

// A write whose apiserver answers ten times later than the plugin's call
// timeout succeeds: the wait is bounded by the writes timeout, not the
// CPU deadline. Then a host stop while a write waits returns ERR_CANCELED
// to the plugin (its answer, RETRY, is observed), and the call is no
// failure: no timeout, no trap.
func TestWriteSlowerThanCallTimeout(t *testing.T) {
	var proxy *testenv.SlowProxy
	hs, err := newHarness(t, writerConfig, map[string][]byte{"writer.wasm": fixture(t, "writer")}, func(hs *harness) {
		proxy, hs.writesRest = testenv.NewSlowProxy(t, env.Config)
	})
	if err != nil {
		t.Fatal(err)
	}
	proxy.Delay.Store(int64(500 * time.Millisecond)) // 10× callTimeout
	hs.createCM("a", nil)
	labelled := func(name string) bool {
		cm, err := env.Client.CoreV1().ConfigMaps(hs.ns).Get(context.Background(), name, metav1.GetOptions{})
		return err == nil && cm.Labels["written"] == "yes"
	}
	eventually(t, "the slow write to land", func() bool { return labelled("a") })
	eventually(t, "the plugin to log its write", func() bool { return len(hs.logs.lines("plugin=writer.wasm", "wrote")) == 1 })
	if c := hs.status("writer.wasm").Counters; c.Timeouts != 0 || c.Traps != 0 || c.OK != 1 {
		t.Fatalf("counters %+v: the network wait counted against the call timeout", c)
	}

	proxy.Delay.Store(int64(time.Hour))
	before := proxy.Writes.Load()
	hs.createCM("b", nil)
	eventually(t, "the write of b to be held by the apiserver", func() bool { return proxy.Writes.Load() > before })
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	hs.h.Halt(ctx)
	// A failed call would read "add ns/b timeout" (recorder): the
	// plugin returned, with RETRY, which it answers only to ERR_CANCELED.
	got := hs.rec.strings("writer.wasm")
	if last := got[len(got)-1]; last != "add "+hs.ns+"/b retry" {
		t.Fatalf("calls %q; want the held write's call to end with the plugin's RETRY (ERR_CANCELED)", got)
	}
	if labelled("b") {
		t.Fatal("b was written though its write was canceled")
	}
}
