package host

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/informer-host/informer-host/host/internal/engine"
)

// handledOK reports whether plugin answered OK to an event of each of
// the named ConfigMaps.
func (hs *harness) handledOK(plugin string, names ...string) bool {
	ok := map[string]bool{}
	for _, d := range hs.rec.of(plugin) {
		if d.Failure == 0 && d.Code == engine.CodeOK {
			ok[d.Key] = true
		}
	}
	for _, n := range names {
		if !ok[hs.ns+"/"+n] {
			return false
		}
	}
	return true
}

func cmNames(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s%d", prefix, i)
	}
	return out
}

// cmsHarness runs plugins on the test's ConfigMaps: every plugin is bound
// to them, and tail (YAML under plugins, indented as plugins.default's
// fields) adds settings and modules.
func cmsHarness(t *testing.T, tail string, plugins map[string][]byte) *harness {
	hs, err := newHarness(t, `
apiVersion: informer-host/v1
resources:
  - {name: cms, version: v1, resource: configmaps, namespaces: [NS]}
plugins:
  directory: DIR
  default:
    bindings: [{resource: cms}]
`+tail, plugins)
	if err != nil {
		t.Fatal(err)
	}
	return hs
}

// poisonHarness runs poisonall.wasm with the given limits.
func poisonHarness(t *testing.T, limits string) *harness {
	return cmsHarness(t, "    limits: "+limits+"\n", map[string][]byte{"poisonall.wasm": testPlugin(t, "poisonall")})
}

// A plugin that traps on one object among many, on every event of it
// (a restart's replay included), ends with that object parked after
// limits.parkAfter failures, reported in its status and metrics, and
// every other object handled; it is not quarantined and restarts no more
// (a restart's replay passes the parked object over). A change of the
// object hands it to the plugin again at once.
func TestPoisonObjectIsParked(t *testing.T) {
	hs := poisonHarness(t, "{restartBackoff: 10ms}")
	const p = "poisonall.wasm"
	hs.createMany("ok", 20)
	poison := hs.createCM("poison", nil)
	hs.createMany("more", 20)
	others := append(cmNames("ok", 20), cmNames("more", 20)...)
	eventually(t, "the other objects handled, the poison object parked, the plugin running", func() bool {
		st := hs.status(p)
		return hs.handledOK(p, others...) && len(st.Parked) == 1 && st.State == StateRunning && st.Counters.Restarts == 3
	})
	st := hs.status(p)
	if pk := st.Parked[0]; pk.Name != "poison" || pk.Namespace != hs.ns || pk.Resource != "cms" || pk.Failures != 3 ||
		!strings.Contains(pk.LastError, "unreachable") || pk.Until.Before(time.Now().Add(5*time.Minute)) {
		t.Errorf("parked %+v; want poison after 3 failures, with its trap, until at least the stable period from now", pk)
	}
	if st.State != StateRunning || st.Counters.Traps != 3 || st.Counters.Restarts != 3 {
		t.Errorf("state %s, traps %d, restarts %d; want running after 3 traps and 3 restarts", st.State, st.Counters.Traps, st.Counters.Restarts)
	}
	if v := hs.metric("informer_host_plugin_parked", p); v != 1 {
		t.Errorf("informer_host_plugin_parked %v, want 1", v)
	}
	if n := len(hs.logs.lines("plugin="+p, "object parked", "poison")); n != 1 {
		t.Errorf("%d log lines on parking, want 1", n)
	}

	// The plugin keeps serving; nothing hands it the poison object again.
	hs.createCM("late", nil)
	eventually(t, "an object created later handled", func() bool { return hs.handledOK(p, "late") })
	if st := hs.status(p); st.Counters.Traps != 3 || st.State != StateRunning || len(st.Parked) != 1 {
		t.Errorf("after more events: state %s, traps %d, parked %+v", st.State, st.Counters.Traps, st.Parked)
	}

	// A change unparks it: handed again without waiting out its backoff.
	hs.updateCM(poison, "k", "v")
	eventually(t, "the changed poison object handed again", func() bool { return hs.status(p).Counters.Traps >= 4 })
}

// The failure streak is not ended by successes in between: a plugin
// that traps on one object (parking off) while its other objects succeed
// restarts with a growing delay and is quarantined after
// maxConsecutiveFailures, instead of restarting every restartBackoff
// forever.
func TestFailureStreakSurvivesSuccesses(t *testing.T) {
	hs := poisonHarness(t, "{restartBackoff: 10ms, maxConsecutiveFailures: 4, parkAfter: 0}")
	const p = "poisonall.wasm"
	hs.createMany("ok", 20)
	eventually(t, "the objects handled", func() bool { return hs.handledOK(p, cmNames("ok", 20)...) })
	hs.createCM("poison", nil)
	eventually(t, "quarantine", func() bool { return hs.status(p).State == StateQuarantined })
	if c := hs.status(p).Counters; c.Traps != 4 || c.Restarts != 3 {
		t.Errorf("traps %d, restarts %d; want 4 and 3", c.Traps, c.Restarts)
	}
	var delays []string
	for _, l := range hs.logs.lines("plugin="+p, "restarting plugin") {
		for _, f := range strings.Fields(l) {
			if after, ok := strings.CutPrefix(f, "after="); ok {
				delays = append(delays, after)
			}
		}
	}
	if got := strings.Join(delays, " "); got != "10ms 20ms 40ms" {
		t.Errorf("restart delays %q, want 10ms 20ms 40ms: the successes between the traps do not end the streak", got)
	}
}

// A handler's ERROR is retried with backoff until it succeeds, as a
// controller's reconcile error is; an explicit delivery.maxRetries gives
// up (counted, listed, logged); onError: skip gives up on the event at
// once.
func TestErrorIsRetriedWithBackoff(t *testing.T) {
	plugin := testPlugin(t, "errtwice")
	hs := cmsHarness(t, `  modules:
  - file: retry.wasm
  - file: giveup.wasm
    delivery: {maxRetries: 1}
  - file: skip.wasm
    delivery: {onError: skip}
`, map[string][]byte{"retry.wasm": plugin, "giveup.wasm": plugin, "skip.wasm": plugin})
	hs.createCM("errorful", nil)
	for _, tc := range []struct {
		plugin             string
		want               string
		retries, exhausted uint64
		gaveUp             int
	}{
		{"retry.wasm", "add errorful error; add errorful error; add errorful ok", 2, 0, 0},
		{"giveup.wasm", "add errorful error; add errorful error", 1, 1, 1},
		{"skip.wasm", "add errorful error", 0, 0, 0},
	} {
		t.Run(tc.plugin, func(t *testing.T) {
			got := func() string {
				return strings.ReplaceAll(strings.Join(hs.rec.strings(tc.plugin), "; "), hs.ns+"/", "")
			}
			eventually(t, tc.want, func() bool { return got() == tc.want })
			st := hs.status(tc.plugin)
			if c := st.Counters; c.Errors != 2 && tc.plugin != "skip.wasm" || c.Retries != tc.retries || c.RetryExhausted != tc.exhausted {
				t.Errorf("counters %+v", c)
			}
			if len(st.GaveUp) != tc.gaveUp || tc.gaveUp == 1 && st.GaveUp[0].Name != "errorful" {
				t.Errorf("given up %+v", st.GaveUp)
			}
			if tc.exhausted > 0 && len(hs.logs.lines("plugin="+tc.plugin, "gave up on it")) != 1 {
				t.Errorf("giving up not logged once")
			}
		})
	}
	// Nothing more arrives for the given-up and the skipped object.
	hs.createCM("sentinel", nil)
	eventually(t, "a later object handled by every plugin", func() bool {
		return hs.handledOK("retry.wasm", "sentinel") && hs.handledOK("giveup.wasm", "sentinel") && hs.handledOK("skip.wasm", "sentinel")
	})
	if n := len(hs.rec.of("giveup.wasm")); n != 3 {
		t.Errorf("giveup.wasm had %d calls, want 3: %v", n, hs.rec.strings("giveup.wasm"))
	}
}

// The self-write flag marks only a live change the plugin's own write
// caused: after a reload, the new version's initial list carries none,
// though the old version's write was each object's last change (a new
// version that skipped flagged events would never look at them).
func TestSelfWriteFlagNotOnTheInitialList(t *testing.T) {
	hs, err := newHarness(t, labelEnforcerConfig, map[string][]byte{"label-enforcer.wasm": example(t, "label-enforcer")}, func(hs *harness) {
		hs.logRate = engine.LogRate{PerSecond: 1e6, Burst: 1e6}
	})
	if err != nil {
		t.Fatal(err)
	}
	const p = "label-enforcer.wasm"
	own := func() int { return len(hs.logs.lines("plugin="+p, "msg=\"own write ")) }
	createPods(t, hs.ns, podNames("web", 20))
	eventually(t, "20 pods labelled, each write's update back flagged", func() bool { return labelledPods(t, hs.ns) == 20 && own() == 20 })
	before := hs.status(p).Counters.Delivered
	hs.write(p, variant(example(t, "label-enforcer"), 1))
	if err := hs.h.Load(context.Background(), filepath.Join(hs.dir, p)); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the new version's initial list handled", func() bool {
		st := hs.status(p)
		return st.Counters.Reloads == 1 && st.Synced && st.Counters.Delivered >= before+20
	})
	if n := own(); n != 20 {
		t.Errorf("%d events flagged as the plugin's own write, want the 20 live ones: the new version's initial list carried the flag", n)
	}
}

// Objects waiting out a retry are not lost across a reload: they are in
// the informer's store, so in the new version's initial list; the old
// version gives them up explicitly, with a count in its log.
func TestReloadHandsRetryingObjectsToTheNewVersion(t *testing.T) {
	wasm := fixture(t, "retry")
	hs := cmsHarness(t, "    delivery: {retryBackoff: 10m}\n", map[string][]byte{"retry.wasm": wasm})
	const p = "retry.wasm"
	hs.createCM("waiting", nil)
	eventually(t, "the object waiting out its retry", func() bool {
		return hs.status(p).Queue.Retrying == 1 && hs.metric("informer_host_plugin_retrying", p) == 1
	})
	hs.write(p, variant(wasm, 1))
	if err := hs.h.Load(context.Background(), filepath.Join(hs.dir, p)); err != nil {
		t.Fatal(err)
	}
	want := "add " + hs.ns + "/waiting initial retry"
	eventually(t, "the new version handed it in its initial list", func() bool {
		return slices.Contains(hs.rec.strings(p), want)
	})
	eventually(t, "the old version's give-up logged with its count", func() bool {
		return len(hs.logs.lines("plugin="+p, "gave up on objects waiting out a retry", "objects=1")) == 1
	})
}

// Writes held back by the plugin's rate limit are retried until they
// land: every Pod of a burst far above the write rate ends labelled, none
// given up on. The I/O timeout (100 ms) is shorter than most waits for a
// token, so those writes get ERR_RATE_LIMITED and the plugin answers
// RETRY: this is the retry path, not the wait inside the call. (With a
// drop limit of 3 retries 100 ms apart, a 300-Pod run labelled 14.)
func TestRateLimitedWritesConverge(t *testing.T) {
	cfg := strings.Replace(labelEnforcerConfig, "        qps: 1000\n        burst: 1000\n", "        qps: 5\n        burst: 1\n        timeout: 100ms\n", 1)
	if cfg == labelEnforcerConfig {
		t.Fatal("the label-enforcer config has no write rate to lower")
	}
	hs, err := newHarness(t, cfg, map[string][]byte{"label-enforcer.wasm": example(t, "label-enforcer")})
	if err != nil {
		t.Fatal(err)
	}
	const p = "label-enforcer.wasm"
	createPods(t, hs.ns, podNames("burst", 40))
	eventually(t, "every pod labelled", func() bool { return labelledPods(t, hs.ns) == 40 })
	if c := hs.status(p).Counters; c.RetryExhausted != 0 || c.Retries == 0 {
		t.Errorf("counters %+v: want retries, none given up", c)
	}
}
