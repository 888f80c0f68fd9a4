package host

import (
	"testing"

	"github.com/informer-host/informer-host/informer"
)

// A restart does not touch the informer's listeners: the
// restarted plugin's cache comes from the store through its own queue, and
// its listener registrations are the ones it had before. Re-registering
// them, as the host once did, took client-go's blockDeltas lock, which
// stops the informer's distribution of events to every listener, the
// restarting plugin's siblings included, while the store is listed.
// bench case 6r measures a sibling's latency next to such restarts.
func TestRestartKeepsListenersRegistered(t *testing.T) {
	hs, err := newHarness(t, `
apiVersion: informer-host/v1
resources:
  - {name: cms, version: v1, resource: configmaps, namespaces: [NS]}
plugins:
  directory: DIR
  default:
    bindings: [{resource: cms}]
    limits: {restartBackoff: 10ms, maxConsecutiveFailures: 100}
`, map[string][]byte{"poison.wasm": testPlugin(t, "poison"), "sibling.wasm": testPlugin(t, "poison")})
	if err != nil {
		t.Fatal(err)
	}
	regs := func() []*informer.Registration {
		s := hs.h.slot("poison.wasm")
		s.mu.Lock()
		g := s.current
		s.mu.Unlock()
		var out []*informer.Registration
		for _, l := range g.bindings {
			out = append(out, l.registration())
		}
		return out
	}
	hs.createCM("a", nil)
	eventually(t, "the add", func() bool { return len(hs.rec.of("poison.wasm")) == 1 })
	before := regs()
	// sibling.wasm traps on poison too: both restart, and each sees the
	// other's events throughout.
	hs.createCM("poison", nil)
	eventually(t, "the restart", func() bool { return hs.status("poison.wasm").Counters.Restarts >= 1 })
	hs.createCM("b", nil)
	eventually(t, "b after the restart", func() bool {
		for _, d := range hs.rec.of("poison.wasm") {
			if d.Key == hs.ns+"/b" {
				return true
			}
		}
		return false
	})
	after := regs()
	if len(before) != 1 || len(after) != 1 || before[0] == nil || before[0] != after[0] {
		t.Errorf("registrations before the restart %p, after %p: want the same one, never re-registered", before, after)
	}
}
