package host

import (
	"context"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// A host that loaded plugins, delivered events, restarted an instance,
// reloaded a version, watched its directory and stopped leaves no
// goroutine behind. Connections client-go keeps to the apiserver for reuse
// are not the host's.
func TestStopLeavesNoGoroutines(t *testing.T) {
	ignore := []goleak.Option{goleak.IgnoreCurrent(),
		goleak.IgnoreTopFunction("net/http.(*persistConn).readLoop"),
		goleak.IgnoreTopFunction("net/http.(*persistConn).writeLoop"),
		goleak.IgnoreAnyFunction("net/http.(*http2ClientConn).readLoop"),
		goleak.IgnoreAnyFunction("golang.org/x/net/http2.(*ClientConn).readLoop"),
	}
	// Cleanups run last in, first out: this one runs after the harness's.
	t.Cleanup(func() { goleak.VerifyNone(t, ignore...) })

	poison, counter := testPlugin(t, "poison"), testPlugin(t, "counter")
	hs, err := newHarness(t, `
apiVersion: informer-host/v1
resources:
  - {name: cms, version: v1, resource: configmaps, namespaces: [NS]}
plugins:
  directory: DIR
  default:
    bindings: [{resource: cms, filter: 'object.metadata.name != "ignored"'}]
    limits: {restartBackoff: 10ms}
`, map[string][]byte{"poison.wasm": poison, "counter.wasm": counter})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		_ = hs.h.Watch(ctx, fastWatch)
	}()
	hs.createCM("a", nil)
	hs.createCM("poison", nil)
	eventually(t, "a restart", func() bool { return hs.status("poison.wasm").Counters.Restarts == 1 })
	replace(t, hs.dir, "counter.wasm", variant(counter, 1))
	eventually(t, "a reload", func() bool { return hs.status("counter.wasm").Counters.Reloads == 1 })
	cancel()
	<-watched

	stopCtx, stop := context.WithTimeout(context.Background(), time.Minute)
	defer stop()
	hs.h.Stop(stopCtx)
	hs.p.Stop()
}
