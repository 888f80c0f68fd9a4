package host

import (
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/informer-host/informer-host/host/internal/delivery"
	"github.com/informer-host/informer-host/internal/config"
)

func convergenceFor(maxRetries, parkAfter int) *convergence {
	return newConvergence(slog.New(slog.DiscardHandler), &counters{},
		config.Delivery{MaxRetries: maxRetries, RetryBackoff: config.NewDuration(5 * time.Millisecond), MaxRetryBackoff: config.NewDuration(1000 * time.Second)},
		config.Limits{ParkAfter: parkAfter, StablePeriod: config.NewDuration(10 * time.Minute)})
}

// An object's retries back off exponentially (client-go's per-item
// limiter) and are never given up on unless maxRetries says so.
func TestConvergenceRetryBackoff(t *testing.T) {
	k := delivery.Key{Resource: "cms", Namespace: "ns", Name: "a"}
	for _, tc := range []struct {
		name       string
		maxRetries int
		calls      int
		giveUpAt   int // the call that gives up; -1: none
	}{
		{"unlimited by default", config.UnlimitedRetries, 40, -1},
		{"explicit maxRetries", 3, 4, 3},
		{"never retry", 0, 1, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := convergenceFor(tc.maxRetries, 3)
			var prev time.Duration
			for i := range tc.calls {
				delay, giveUp := c.retryAfter(k)
				if giveUp != (i == tc.giveUpAt) {
					t.Fatalf("call %d: giveUp %v, want it only at call %d", i, giveUp, tc.giveUpAt)
				}
				if giveUp {
					c.giveUp(k, "RETRY: rate limited", time.Now())
					break
				}
				want := min(5*time.Millisecond<<i, 1000*time.Second)
				if i >= 30 {
					want = 1000 * time.Second
				}
				if delay < want || delay < prev {
					t.Fatalf("call %d: delay %v after %v; want at least %v, growing", i, delay, prev, want)
				}
				prev = delay
			}
			_, gaveUp := c.report()
			if n := len(gaveUp); (tc.giveUpAt >= 0) != (n == 1) {
				t.Fatalf("given up: %+v", gaveUp)
			}
			if tc.giveUpAt >= 0 && (gaveUp[0].Name != "a" || gaveUp[0].LastError != "RETRY: rate limited") {
				t.Errorf("given up: %+v", gaveUp)
			}
			if tc.giveUpAt >= 0 {
				// Given up means forgotten: the object's next change starts
				// from the first delay.
				if d, giveUp := c.retryAfter(k); (tc.maxRetries > 0 && (giveUp || d != 5*time.Millisecond)) || (tc.maxRetries == 0 && !giveUp) {
					t.Errorf("after giving up: delay %v, giveUp %v", d, giveUp)
				}
			}
		})
	}
}

// An object that fails parkAfter times is parked for at least the stable
// period; handed again with the same state, one more failure parks it
// again; a change starts a fresh count; a success forgets it.
func TestConvergenceParksPoisonObjects(t *testing.T) {
	k := delivery.Key{Resource: "cms", Namespace: "ns", Name: "poison"}
	c := convergenceFor(config.UnlimitedRetries, 3)
	now := time.Unix(1000, 0)
	for i := 1; i <= 3; i++ {
		c.handing(k, "5")
		parked, until, n := c.failed(k, "5", "wasm error: unreachable", now)
		if n != i || parked != (i == 3) {
			t.Fatalf("failure %d: parked %v, count %d", i, parked, n)
		}
		if parked && until.Before(now.Add(10*time.Minute)) {
			t.Errorf("parked until %v: want at least the stable period", until)
		}
	}
	parked, _ := c.report()
	if len(parked) != 1 || parked[0].Name != "poison" || parked[0].Failures != 3 || !strings.Contains(parked[0].LastError, "unreachable") {
		t.Fatalf("parked %+v", parked)
	}
	c.handing(k, "5") // its backoff ended: handed again, the same state
	if p, _ := c.report(); len(p) != 0 {
		t.Errorf("still listed as parked while handed: %+v", p)
	}
	if parked, _, n := c.failed(k, "5", "again", now); !parked || n != 4 {
		t.Errorf("the same state failing again: parked %v, count %d; want parked at once", parked, n)
	}
	c.handing(k, "6") // it changed
	if parked, _, n := c.failed(k, "6", "new state", now); parked || n != 1 {
		t.Errorf("a changed object: parked %v, count %d; want a fresh count", parked, n)
	}
	c.forget(k)
	if parked, _, n := c.failed(k, "6", "x", now); parked || n != 1 {
		t.Errorf("after a success: parked %v, count %d", parked, n)
	}
	never := convergenceFor(config.UnlimitedRetries, 0)
	for range 10 {
		if parked, _, _ := never.failed(k, "5", "x", now); parked {
			t.Fatal("parkAfter 0 parked an object")
		}
	}
}

// The failure streak that sets the restart delay and quarantines a
// plugin ends only after the stable period without a failure: failures
// close together add up however many calls succeed in between.
func TestFailureStreakEndsOnlyWhenStable(t *testing.T) {
	l := config.Limits{MaxConsecutiveFailures: 5, StablePeriod: config.NewDuration(10 * time.Minute)}
	for _, tc := range []struct {
		name       string
		gaps       []time.Duration // before each failure after the first
		wantN      []int
		quarantine bool
	}{
		{"a minute apart", []time.Duration{time.Minute, time.Minute, time.Minute, time.Minute}, []int{1, 2, 3, 4, 5}, true},
		{"stable in between", []time.Duration{11 * time.Minute, 10 * time.Minute, 20 * time.Minute, time.Hour}, []int{1, 1, 1, 1, 1}, false},
		{"stable once", []time.Duration{time.Second, 10 * time.Minute, time.Second, time.Second}, []int{1, 2, 1, 2, 3}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := &PluginSlot{}
			now := time.Unix(1000, 0)
			var got []int
			var quarantine bool
			for i := range len(tc.gaps) + 1 {
				if i > 0 {
					now = now.Add(tc.gaps[i-1])
				}
				var n int
				n, quarantine = s.failedLocked(l, now)
				got = append(got, n)
			}
			if !slices.Equal(got, tc.wantN) || quarantine != tc.quarantine {
				t.Errorf("streak %v, quarantine %v; want %v, %v", got, quarantine, tc.wantN, tc.quarantine)
			}
		})
	}
	if d := restartDelay(config.Limits{RestartBackoff: config.NewDuration(time.Second), MaxRestartBackoff: config.NewDuration(time.Minute)}, 4); d != 8*time.Second {
		t.Errorf("restart delay after 4 failures %v, want 8s", d)
	}
}
