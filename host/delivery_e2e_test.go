package host

import (
	"fmt"
	"slices"
	"sort"
	"testing"
)

// A burst of updates to a plugin that cannot keep up: in mode every it
// gets each event in order; in mode latest its buffer never holds more
// than one entry per object and it gets the coalesced events; with a small
// cap the oldest events are dropped and counted; a fast plugin beside them
// is not held up.
func TestDeliveryModesUnderABurstToASlowPlugin(t *testing.T) {
	healthy := fixture(t, "healthy")
	var heldEvery, heldLatest, heldCapped <-chan struct{}
	var openEvery, openLatest, openCapped func()
	hs, err := newHarness(t, `
apiVersion: informer-host/v1
resources:
  - {name: cms, version: v1, resource: configmaps, namespaces: [NS]}
plugins:
  directory: DIR
  default:
    bindings: [{resource: cms}]
  modules:
    - {file: every.wasm, delivery: {mode: every}}
    - {file: latest.wasm, delivery: {mode: latest}}
    - {file: capped.wasm, delivery: {mode: every, bufferSize: 10}}
    - {file: fast.wasm}
`, map[string][]byte{"every.wasm": healthy, "latest.wasm": healthy, "capped.wasm": healthy, "fast.wasm": healthy},
		func(hs *harness) {
			heldEvery, openEvery = hs.rec.gate("every.wasm")
			heldLatest, openLatest = hs.rec.gate("latest.wasm")
			heldCapped, openCapped = hs.rec.gate("capped.wasm")
		})
	if err != nil {
		t.Fatal(err)
	}
	// The first event reaches every plugin; the gated ones then hang on
	// to it, as a slow plugin would.
	hot := hs.createCM("hot", map[string]string{"n": "0"})
	<-heldEvery
	<-heldLatest
	<-heldCapped
	const updates = 30
	for i := 1; i <= updates; i++ {
		hot = hs.updateCM(hot, "n", fmt.Sprint(i))
	}
	hs.createCM("a", nil)
	hs.createCM("b", nil)
	hs.deleteCM("a")

	// The fast plugin gets everything while the others are stuck.
	total := 1 + updates + 3
	eventually(t, "the fast plugin to get every event", func() bool { return len(hs.rec.of("fast.wasm")) == total })
	eventually(t, "every.wasm to buffer all the rest", func() bool { return hs.status("every.wasm").Queue.Depth == total-1 })
	eventually(t, "latest.wasm to coalesce", func() bool {
		q := hs.status("latest.wasm").Queue
		// hot's 30 updates merge into one entry, a's add and delete cancel
		// out, b waits: 2 entries for 3 objects.
		return q.Depth == 2 && q.Coalesced == updates-1+1
	})
	eventually(t, "capped.wasm to drop the oldest", func() bool {
		q := hs.status("capped.wasm").Queue
		return q.Depth == 10 && q.Dropped == uint64(total-1-10)
	})

	openEvery()
	openLatest()
	openCapped()
	eventually(t, "every.wasm to catch up", func() bool { return len(hs.rec.of("every.wasm")) == total })
	eventually(t, "latest.wasm to catch up", func() bool { return len(hs.rec.of("latest.wasm")) == 3 })
	eventually(t, "capped.wasm to catch up", func() bool { return len(hs.rec.of("capped.wasm")) == 1+10 })

	if got, want := hs.rec.strings("every.wasm"), hs.rec.strings("fast.wasm"); !slices.Equal(got, want) {
		t.Errorf("mode every:\n got %q\nwant the fast plugin's %q", got, want)
	}
	ns := hs.ns
	latest := hs.rec.of("latest.wasm")
	if got := hs.rec.strings("latest.wasm"); !slices.Equal(got, []string{
		"add " + ns + "/hot ok", "update " + ns + "/hot ok", "add " + ns + "/b ok"}) {
		t.Errorf("mode latest: %q", got)
	} else if latest[1].RV != hot.ResourceVersion {
		t.Errorf("mode latest: the coalesced update carries resourceVersion %s, want the newest %s", latest[1].RV, hot.ResourceVersion)
	}
	fast := hs.rec.strings("fast.wasm")
	if got, want := hs.rec.strings("capped.wasm"), append(fast[:1:1], fast[len(fast)-10:]...); !slices.Equal(got, want) {
		t.Errorf("mode every, bufferSize 10:\n got %q\nwant %q", got, want)
	}
}

// A plugin that traps is restarted with a fresh instance, which receives
// the informer's cache as initial-list adds and then the live events.
func TestRestartedPluginGetsTheCacheAgain(t *testing.T) {
	hs, err := newHarness(t, `
apiVersion: informer-host/v1
resources:
  - {name: cms, version: v1, resource: configmaps, namespaces: [NS]}
plugins:
  directory: DIR
  default:
    bindings: [{resource: cms}]
    limits: {restartBackoff: 10ms, maxConsecutiveFailures: 3}
`, map[string][]byte{"poison.wasm": testPlugin(t, "poison")})
	if err != nil {
		t.Fatal(err)
	}
	hs.createCM("a", nil)
	hs.createCM("b", nil)
	eventually(t, "two adds", func() bool { return len(hs.rec.of("poison.wasm")) == 2 })
	hs.createCM("poison", nil)
	eventually(t, "the restart", func() bool { return hs.status("poison.wasm").Counters.Restarts == 1 })
	hs.createCM("c", nil)
	eventually(t, "the add after the restart", func() bool { return len(hs.rec.of("poison.wasm")) == 7 })

	got := hs.rec.strings("poison.wasm")
	ns := hs.ns
	replay := slices.Clone(got[3:6])
	sort.Strings(replay)
	if !slices.Equal(got[:3], []string{"add " + ns + "/a ok", "add " + ns + "/b ok", "add " + ns + "/poison trap"}) ||
		!slices.Equal(replay, []string{"add " + ns + "/a initial ok", "add " + ns + "/b initial ok", "add " + ns + "/poison initial ok"}) ||
		got[6] != "add "+ns+"/c ok" {
		t.Errorf("deliveries: %q\nwant a, b, the trap, the replay of a, b and poison as initial-list adds, then c", got)
	}
	st := hs.status("poison.wasm")
	if st.State != StateRunning || st.Counters.Traps != 1 || st.Counters.Restarts != 1 {
		t.Errorf("status: %+v", st)
	}
}
