package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Case 7, failover: two replicas with leader election, each
// with n small Go plugins. The leader is stopped, by SIGTERM (it drains,
// then releases the lease) or by SIGKILL (the lease stays until it
// expires); measured is the time from the signal to the new leader's
// first delivery (any plugin's first ih_handle returned) and to every
// plugin of it having handled the initial list. The standby is warm
// (informers synced, plugins compiled) before each signal.

// failoverRun is one handover.
type failoverRun struct {
	Signal  string  `json:"signal"` // TERM or KILL
	Plugins int     `json:"plugins"`
	Lease   float64 `json:"lease"` // leaseDuration, s
	First   float64 `json:"first"` // s from the signal to the first delivery
	All     float64 `json:"all"`   // s from the signal to every plugin synced
}

// leaderTimings are the lease timings of a run: the defaults (what
// deploy/ runs) in a full run, short ones in a smoke run.
func leaderTimings(smoke bool) (lease, renew, retry time.Duration) {
	if smoke {
		return 2 * time.Second, 1500 * time.Millisecond, 250 * time.Millisecond
	}
	return 15 * time.Second, 10 * time.Second, 2 * time.Second
}

func (h *e2e) failover(runs, n int) ([]failoverRun, error) {
	ns, err := h.namespace("failover")
	if err != nil {
		return nil, err
	}
	const objects = 10
	for i := range objects {
		if _, err := h.client.CoreV1().ConfigMaps(ns).Create(context.Background(), configMap(ns, fmt.Sprintf("cm%d", i), "0", i), metav1.CreateOptions{}); err != nil {
			return nil, err
		}
	}
	dir := filepath.Join(h.work, "failover-plugins")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	small := mustWasm("twofields")
	for i := range n {
		if _, err := writeWasm(dir, fmt.Sprintf("p%d.wasm", i), small); err != nil {
			return nil, err
		}
	}
	lease, renew, retry := leaderTimings(h.smoke)
	seq := 0
	start := func() (*daemon, error) {
		seq++
		return h.startDaemon(fmt.Sprintf("failover-%d", seq), dir, func(dir, addr string) string {
			return h.daemonConfig(ns, dir, addr, "", "    []\n") + fmt.Sprintf(`leaderElection:
  enabled: true
  namespace: %s
  leaseName: bench
  leaseDuration: %s
  renewDeadline: %s
  retryPeriod: %s
`, ns, lease, renew, retry)
		})
	}
	var live []*daemon
	defer func() {
		for _, d := range live {
			_ = d.stop()
		}
	}()
	for range 2 {
		d, err := start()
		if err != nil {
			return nil, err
		}
		live = append(live, d)
	}
	var out []failoverRun
	for r := range runs {
		for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGKILL} {
			leader, standby, err := roles(live, n, 5*time.Minute)
			if err != nil {
				return nil, err
			}
			name := map[syscall.Signal]string{syscall.SIGTERM: "TERM", syscall.SIGKILL: "KILL"}[sig]
			h.logf("case 7: failover run %d/%d, SIG%s to the leader, %d plugins", r+1, runs, name, n)
			t0 := time.Now()
			_ = leader.cmd.Process.Signal(sig)
			first, all, err := waitTakeover(standby, n, objects, t0.Add(lease+5*time.Minute))
			if err != nil {
				return nil, err
			}
			<-leader.exited
			_ = leader.logFile.Close()
			run := failoverRun{Signal: name, Plugins: n, Lease: lease.Seconds(), First: first.Sub(t0).Seconds(), All: all.Sub(t0).Seconds()}
			h.logf("case 7: first delivery after %.2f s, all %d plugins synced after %.2f s", run.First, n, run.All)
			out = append(out, run)
			// A fresh replica replaces the one stopped, as its pod would.
			d, err := start()
			if err != nil {
				return nil, err
			}
			live = []*daemon{standby, d}
		}
	}
	return out, nil
}

// roles waits until one of ds leads (n plugins running, synced) and the
// other is a warm standby (ready, n plugins compiled and held).
func roles(ds []*daemon, n int, limit time.Duration) (leader, standby *daemon, err error) {
	deadline := time.Now().Add(limit)
	for {
		a, b := ds[0], ds[1]
		switch {
		case a.ready(n) && b.standby(n):
			return a, b, nil
		case b.ready(n) && a.standby(n):
			return b, a, nil
		}
		for _, d := range ds {
			select {
			case <-d.exited:
				return nil, nil, fmt.Errorf("informer-host exited: %s", d.tail())
			default:
			}
		}
		if time.Now().After(deadline) {
			return nil, nil, fmt.Errorf("no leader and warm standby after %v:\n%s\n%s", limit, a.tail(), b.tail())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// standby reports whether d is a warm standby: ready, with n plugins held.
func (d *daemon) standby(n int) bool {
	ps, err := d.plugins()
	if err != nil || len(ps) != n {
		return false
	}
	for _, p := range ps {
		if p.State != "standby" {
			return false
		}
	}
	resp, err := httpClient.Get("http://" + d.addr + "/readyz")
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == 200
}

// waitTakeover polls d until one of its plugins has delivered (first) and
// until each has delivered the objects of the initial list (all).
func waitTakeover(d *daemon, n, objects int, deadline time.Time) (first, all time.Time, err error) {
	for {
		got, err := d.delivered()
		now := time.Now()
		if err == nil {
			done := len(got) == n
			for _, c := range got {
				if c > 0 && first.IsZero() {
					first = now
				}
				done = done && c >= uint64(objects)
			}
			if done {
				return first, now, nil
			}
		}
		if now.After(deadline) {
			return first, all, fmt.Errorf("the standby did not take over: delivered %v (%v)\n%s", got, err, d.tail())
		}
		time.Sleep(5 * time.Millisecond)
	}
}
