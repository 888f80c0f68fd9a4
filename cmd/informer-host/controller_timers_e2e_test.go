package main

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/informer-host/informer-host/internal/controllerwrites"
	"github.com/informer-host/informer-host/internal/seenkeys"
	"github.com/informer-host/informer-host/internal/testenv"
)

// requeueAfter is how long the timer plugin asks for: long enough that a
// timer persisted just before a SIGKILL is still ahead when the next
// daemon (or member) has taken the key over, so it is that daemon's
// timer, re-armed from the annotation, that brings the key back, not its
// replay of the cache.
const requeueAfter = 30 * time.Second

// timerPlugin is host/testdata/plugins/reconciler.wat asking for
// requeueAfter: a key named "requ…" is answered OK with that requeue,
// except on a replay of the cache (a restart's, a handover's), which it
// DROPs; so after a restart or a handover only a timer re-armed from the
// persisted annotation reconciles it again, and each such reconcile
// persists a later due time.
func timerPlugin(t *testing.T) []byte {
	t.Helper()
	src, err := os.ReadFile("../../host/testdata/plugins/reconciler.wat")
	if err != nil {
		t.Fatal(err)
	}
	text := strings.Replace(string(src), "(i64.const 1500)", fmt.Sprintf("(i64.const %d)", requeueAfter.Milliseconds()), 1)
	if text == string(src) {
		t.Fatal("reconciler.wat no longer asks for a requeue of 1500 ms; update timerPlugin")
	}
	return testenv.WATText(t, text)
}

const timerPluginName = "reconciler.wasm"

func timerConfig(ns, tail string) string {
	return fmt.Sprintf(`resources:
  - {name: cms, version: v1, resource: configmaps, namespaces: [%s], labelSelector: role=primary}
plugins:
  directory: plugins
  modules:
    - file: %s
      controller: {for: cms}
      grants:
        writes:
          resources: [{resource: cms, verbs: [patch, apply]}]
      limits: {restartBackoff: 10ms}
%s`, ns, timerPluginName, tail)
}

// dueTimes reads the persisted requeue due time
// (controller.informer-host.io/requeue-at.<plugin>) of each of names;
// a key without one is left out.
func dueTimes(t *testing.T, ns string, names []string) map[string]time.Time {
	t.Helper()
	out := map[string]time.Time{}
	c := cmAPI{t, ns}
	for _, name := range names {
		cm, ok := c.get(name)
		if !ok {
			t.Fatalf("primary %s is gone", name)
		}
		if v, ok := cm.Annotations[controllerwrites.RequeueAnnotation(timerPluginName)]; ok {
			due, err := time.Parse(time.RFC3339, v)
			if err != nil {
				t.Fatalf("%s's annotation %s = %q: %v", name, controllerwrites.RequeueAnnotation(timerPluginName), v, err)
			}
			out[name] = due
		}
	}
	return out
}

// timersFired waits until every key of before has a due time later than
// the one it had: a reconcile answered with requeue-after, which only a
// fired timer brings about (see timerPlugin).
func timersFired(t *testing.T, what, ns string, before map[string]time.Time) {
	t.Helper()
	names := make([]string, 0, len(before))
	for n := range before {
		names = append(names, n)
	}
	waitFor(t, what, func() (bool, string) {
		now := dueTimes(t, ns, names)
		var late []string
		for _, n := range names {
			if !now[n].After(before[n]) {
				late = append(late, fmt.Sprintf("%s (due %s, still %s)", n, before[n].Format(time.RFC3339), now[n].Format(time.RFC3339)))
			}
		}
		slices.Sort(late)
		return len(late) == 0, "timers not fired: " + strings.Join(late, ", ")
	})
}

// ahead fails the test unless every due time is still to come: the
// precondition that the timer, not a replay, is what is tested.
func ahead(t *testing.T, due map[string]time.Time) {
	t.Helper()
	now := time.Now()
	for n, d := range due {
		if !d.After(now) {
			t.Fatalf("%s's timer (due %s) came due before the daemon was killed; the test needs it ahead", n, d.Format(time.RFC3339))
		}
	}
}

func createPrimaries(t *testing.T, ns string, names []string) {
	t.Helper()
	c := cmAPI{t, ns}
	for _, n := range names {
		c.create(n, map[string]string{"role": "primary"}, nil)
	}
}

// Requeue timers are persisted on the primary and survive the daemon:
// after a SIGKILL the restarted daemon re-arms them from the annotation
// (they show in /debug/plugins) and fires them; with sharding, the
// member that takes a SIGKILLed member's keys over fires its timers.
func TestControllerRequeueTimersSurvive(t *testing.T) {
	env.Require(t)
	bin := ctlBinary(t)

	t.Run("restart", func(t *testing.T) {
		ns := env.Namespace(t)
		cfg := ctlConfig(t, map[string][]byte{timerPluginName: timerPlugin(t)}, timerConfig(ns, ""))
		names := []string{"requ-a", "requ-b", "requ-c", "requ-d"}
		d := startCtl(t, bin, cfg, 1)
		// A primary in the first daemon's initial list is a replay to
		// timerPlugin, which drops it: no timer, and nothing to survive.
		d.waitReady()
		createPrimaries(t, ns, names)
		var before map[string]time.Time
		waitFor(t, "every key's requeue persisted", func() (bool, string) {
			before = dueTimes(t, ns, names)
			return len(before) == len(names), fmt.Sprintf("%d of %d", len(before), len(names))
		})
		d.kill()
		before = dueTimes(t, ns, names)
		ahead(t, before)

		d = startCtl(t, bin, cfg, 1)
		waitFor(t, "the restarted daemon's re-armed timers in /debug/plugins", func() (bool, string) {
			var got []string
			for _, p := range d.debug().Plugins {
				if p.Controller != nil {
					for _, r := range p.Controller.NextRequeue {
						got = append(got, r.Name)
					}
				}
			}
			for _, n := range names {
				if !slices.Contains(got, n) {
					return false, fmt.Sprintf("nextRequeue %v", got)
				}
			}
			return true, ""
		})
		timersFired(t, "the restarted daemon to fire the persisted timers", ns, before)
	})

	t.Run("handover", func(t *testing.T) {
		ns := env.Namespace(t)
		cfg := ctlConfig(t, map[string][]byte{timerPluginName: timerPlugin(t)}, timerConfig(ns, `sharding:
  enabled: true
  namespace: `+ns+`
  leasePrefix: ctl
  leaseDuration: 2s
  renewDeadline: 1s
  retryPeriod: 200ms
`))
		var names []string
		// 16 keys: the chance that one member owns none is 2 in 65536.
		for i := range 16 {
			names = append(names, fmt.Sprintf("requ-%d", i))
		}
		a := startCtl(t, bin, cfg, 1)
		b := startCtl(t, bin, cfg, 1)
		// Keys made before a member is active in the group reach it as a
		// handover's replay; the test wants them reconciled live first.
		waitFor(t, "both members active in a group of two", func() (bool, string) {
			for _, d := range []*ctlDaemon{a, b} {
				sh := d.debug().Shard
				if sh == nil || !sh.Active || len(sh.Members) != 2 {
					return false, fmt.Sprintf("%+v", sh)
				}
			}
			return true, ""
		})
		createPrimaries(t, ns, names)
		// timersOf is the keys whose timers member d has armed.
		timersOf := func(d *ctlDaemon) []string {
			var out []string
			for _, p := range d.debug().Plugins {
				if p.Controller != nil {
					for _, r := range p.Controller.NextRequeue {
						out = append(out, r.Name)
					}
				}
			}
			slices.Sort(out)
			return out
		}
		var mine []string
		waitFor(t, "both members to hold timers of their own, together all", func() (bool, string) {
			ta, tb := timersOf(a), timersOf(b)
			all := append(slices.Clone(ta), tb...)
			slices.Sort(all)
			all = slices.Compact(all)
			mine = ta
			return len(ta) > 0 && len(tb) > 0 && len(all) == len(names), fmt.Sprintf("a %v, b %v", ta, tb)
		})
		// Kill a while its timers are well ahead: they are due after b
		// has taken the keys over.
		waitFor(t, "a's timers to be at least 15s ahead", func() (bool, string) {
			due := dueTimes(t, ns, mine)
			for n, d := range due {
				if time.Until(d) < 15*time.Second {
					return false, n + " due " + d.Format(time.RFC3339)
				}
			}
			return len(due) == len(mine), ""
		})
		a.kill()
		before := dueTimes(t, ns, mine)
		ahead(t, before)
		waitFor(t, "b to arm a's timers after the handover", func() (bool, string) {
			tb := timersOf(b)
			for _, n := range mine {
				if !slices.Contains(tb, n) {
					return false, fmt.Sprintf("b %v, a had %v", tb, mine)
				}
			}
			return true, ""
		})
		timersFired(t, "b to fire the timers a persisted", ns, before)
	})
}

// goneWAT logs "seen=<name>" for every add or update it is handed and
// "missed=<name>" for a delete flagged missed-delete (0x20), the others
// "gone=<name>".
const goneWAT = `(module
  (import "informer_host_v1" "header_read" (func $header_read (param i32 i32) (result i32)))
  (import "informer_host_v1" "log" (func $log (param i32 i32 i32) (result i32)))
  (memory (export "memory") 2)
  (data (i32.const 0) "seen=")
  (data (i32.const 16) "missed=")
  (data (i32.const 32) "gone=")
  (func (export "informer_host_abi_v1"))
  ;; say logs the prefix at pre (plen bytes) and the object's name.
  (func $say (param $pre i32) (param $plen i32)
    (local $n i32)
    (local.set $n (i32.load (i32.const 1084)))
    (memory.copy (i32.const 256) (local.get $pre) (local.get $plen))
    (memory.copy (i32.add (i32.const 256) (local.get $plen)) (i32.add (i32.const 1024) (i32.load (i32.const 1080))) (local.get $n))
    (drop (call $log (i32.const 1) (i32.const 256) (i32.add (local.get $plen) (local.get $n)))))
  (func (export "ih_handle") (param $len i32) (result i32)
    (if (i32.gt_u (local.get $len) (i32.const 60000)) (then (return (i32.const 3))))
    (drop (call $header_read (i32.const 1024) (local.get $len)))
    (if (i32.ne (i32.load8_u (i32.const 1025)) (i32.const 3))
      (then (call $say (i32.const 0) (i32.const 5)) (return (i32.const 0))))
    (if (i32.and (i32.load8_u (i32.const 1026)) (i32.const 0x20))
      (then (call $say (i32.const 16) (i32.const 7)))
      (else (call $say (i32.const 32) (i32.const 5))))
    (i32.const 0)))`

// Event mode: deletes that happened while the daemon was down (SIGKILLed)
// arrive after the restart, flagged missed-delete, for exactly the
// objects deleted meanwhile. The daemon is leader-elected, so it keeps
// the keys it handed in ConfigMaps of its namespace; the test kills it
// only once they hold every key (a delete of a key handed after the last
// write can be missed, as RATIONALE says).
func TestEventModeDeletesWhileDownArrive(t *testing.T) {
	env.Require(t)
	bin := ctlBinary(t)
	ns := env.Namespace(t)
	const plugin = "gone.wasm"
	cfg := ctlConfig(t, map[string][]byte{plugin: testenv.WATText(t, goneWAT)}, fmt.Sprintf(`resources:
  - {name: cms, version: v1, resource: configmaps, namespaces: [%[1]s], labelSelector: gone=yes}
plugins:
  directory: plugins
  modules:
    - {file: %[2]s, bindings: [{resource: cms}]}
leaderElection:
  enabled: true
  namespace: %[1]s
  leaseName: informer-host
  leaseDuration: 2s
  renewDeadline: 1500ms
  retryPeriod: 250ms
`, ns, plugin))
	d := startCtl(t, bin, cfg, 1)
	c := cmAPI{t, ns}
	var names []string
	for i := range 10 {
		names = append(names, fmt.Sprintf("gone-%02d", i))
		c.create(names[i], map[string]string{"gone": "yes"}, nil)
	}
	for _, n := range names {
		testenv.Eventually(t, n+" handed", func() bool { return len(d.logs.Lines(`msg="seen=`+n+`"`)) > 0 })
	}
	backend := seenkeys.ConfigMaps(env.Client.CoreV1(), ns, "leader")
	waitFor(t, "the handed keys written to the daemon's ConfigMaps", func() (bool, string) {
		data, err := backend.Load(context.Background(), plugin)
		if err != nil {
			return false, err.Error()
		}
		keys, err := seenkeys.Decode(data)
		if err != nil {
			return false, err.Error()
		}
		var have []string
		for _, k := range keys {
			have = append(have, k.Name)
		}
		for _, n := range names {
			if !slices.Contains(have, n) {
				return false, fmt.Sprintf("written %v", have)
			}
		}
		return true, ""
	})
	d.kill()
	deleted, kept := names[:6], names[6:]
	for _, n := range deleted {
		c.delete(n)
	}
	d = startCtl(t, bin, cfg, 1)
	for _, n := range deleted {
		testenv.Eventually(t, "the missed delete of "+n, func() bool { return len(d.logs.Lines(`msg="missed=`+n+`"`)) > 0 })
	}
	// The kept ones are handed again (the replay) and never as deleted.
	for _, n := range kept {
		testenv.Eventually(t, n+" replayed", func() bool { return len(d.logs.Lines(`msg="seen=`+n+`"`)) > 0 })
	}
	for _, n := range kept {
		if l := d.logs.Lines(`=` + n + `"`); slices.ContainsFunc(l, func(s string) bool { return !strings.Contains(s, "seen=") }) {
			t.Errorf("%s, which still exists, was handed as deleted: %v", n, l)
		}
	}
	for _, n := range deleted {
		if l := d.logs.Lines(`msg="missed=` + n + `"`); len(l) != 1 {
			t.Errorf("%s's missed delete handed %d times, want once: %v", n, len(l), l)
		}
	}
}
