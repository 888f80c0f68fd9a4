package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Case 6: isolation under fire. A healthy Go plugin (two fields, latency
// probe on) shares the daemon with a sibling bound to the same resource:
// none, one that traps on every event (restarted after 10 ms each time, so
// it traps about 100 times a second: every restart replays the cache to
// it, and it traps on the first object), or one that spins on every event
// until its call deadline (the default, 1s) kills it, restarted after
// 10 ms. The harness patches 20 ConfigMaps round robin, 100 changes a
// second, and measures the healthy plugin's delivery latency (write sent
// to handler entered). A control run has no sibling plugin but a separate
// process spinning on one core: what the spinning sibling would cost any
// program on this machine (2 cores, the apiserver and etcd on them too).

type isolationRun struct {
	Sibling  string  `json:"sibling"`
	Events   int     `json:"events"`
	P50      float64 `json:"p50Ms"`
	P99      float64 `json:"p99Ms"`
	Traps    float64 `json:"trapsPerS"`
	Timeouts float64 `json:"timeoutsPerS"`
	// HostCPU is the daemon's CPU use during the measurement, in cores.
	HostCPU float64 `json:"hostCores"`
}

// siblings: none; a plugin that traps; a plugin that spins; and, as a
// control, no sibling plugin but a separate process spinning on one core
// (what a spinning plugin costs the machine, without the host).
var siblings = []string{"none", "trap", "spin", "hog"}

func (h *e2e) isolation(runs int, d time.Duration) ([]isolationRun, error) {
	ns, err := h.namespace("isolation")
	if err != nil {
		return nil, err
	}
	ctx := context.Background()
	cms := h.client.CoreV1().ConfigMaps(ns)
	const objects = 20
	for i := 0; i < objects; i++ {
		if _, err := cms.Create(ctx, configMap(ns, fmt.Sprintf("iso-%02d", i), "0", i), metav1.CreateOptions{}); err != nil {
			return nil, err
		}
	}
	healthy := mustWasm("twofields")
	bad := map[string][]byte{"trap": mustWasm("trap-wat"), "spin": mustWasm("spin-wat")}
	seq := 0
	var out []isolationRun
	for r := 0; r < runs; r++ {
		for j := range siblings {
			sib := siblings[(j+r)%len(siblings)]
			h.logf("case 6: run %d/%d: sibling %s, %v", r+1, runs, sib, d)
			dir := filepath.Join(h.work, fmt.Sprintf("isolation-%d-%s", r, sib))
			if err := os.MkdirAll(dir, 0o755); err != nil {
				return out, err
			}
			if _, err := writeWasm(dir, "healthy.wasm", healthy); err != nil {
				return out, err
			}
			modules := "    - {file: healthy.wasm, config: {fields: [metadata.labels.app, data.seq], record: true}}\n"
			if b := bad[sib]; b != nil {
				if _, err := writeWasm(dir, "sibling.wasm", b); err != nil {
					return out, err
				}
				modules += "    - {file: sibling.wasm, limits: {restartBackoff: 10ms, maxRestartBackoff: 10ms, maxConsecutiveFailures: 1000000000}}\n"
			}
			dm, err := h.startDaemon(fmt.Sprintf("isolation-%d-%s", r, sib), dir, func(dir, addr string) string {
				return h.daemonConfig(ns, dir, addr, "", modules)
			})
			if err != nil {
				return out, err
			}
			res, err := h.isolationRun(dm, sib, ns, &seq, objects, d)
			_ = dm.stop()
			if err != nil {
				return out, err
			}
			lat, err := healthyLatencies(dm, res.sent)
			if err != nil {
				return out, err
			}
			res.run.Events, res.run.P50, res.run.P99 = len(lat), percentile(lat, 50), percentile(lat, 99)
			h.logf("case 6: sibling %s: %d events, p50 %.1f ms, p99 %.1f ms, %.0f traps/s, %.1f timeouts/s, daemon %.2f cores",
				sib, res.run.Events, res.run.P50, res.run.P99, res.run.Traps, res.run.Timeouts, res.run.HostCPU)
			out = append(out, res.run)
		}
	}
	return out, nil
}

// healthyLatencies are the healthy plugin's delivery latencies in a run,
// in ms: handler entered minus write sent.
func healthyLatencies(dm *daemon, sent *sentTimes) ([]float64, error) {
	recs, err := dm.records()
	if err != nil {
		return nil, err
	}
	var lat []float64
	for _, rc := range recs {
		if t0, ok := sent.m[rc.key()]; ok && rc.plugin == "healthy.wasm" {
			lat = append(lat, float64(rc.entered-t0)/1e6)
		}
	}
	return lat, nil
}

type isolationResult struct {
	run  isolationRun
	sent *sentTimes
}

func (h *e2e) isolationRun(dm *daemon, sib, ns string, seq *int, objects int, d time.Duration) (isolationResult, error) {
	res := isolationResult{run: isolationRun{Sibling: sib}, sent: &sentTimes{m: map[string]int64{}}}
	// Ready: the healthy plugin runs and has its initial list; the
	// sibling exists (a trapping one may be restarting at any moment).
	deadline := time.Now().Add(5 * time.Minute)
	for {
		ps, err := dm.plugins()
		ok := err == nil && len(ps) == map[bool]int{true: 1, false: 2}[sib == "none" || sib == "hog"]
		for _, p := range ps {
			if p.File == "healthy.wasm" && (p.State != "running" || !p.Synced) {
				ok = false
			}
		}
		if ok {
			break
		}
		if time.Now().After(deadline) {
			return res, fmt.Errorf("daemon not ready: %v %+v\n%s", err, ps, dm.tail())
		}
		time.Sleep(20 * time.Millisecond)
	}
	if sib == "hog" {
		hog := exec.Command(h.self, "spin")
		if err := hog.Start(); err != nil {
			return res, err
		}
		defer func() { _ = hog.Process.Kill(); _ = hog.Wait() }()
	}
	counters := func() (traps, timeouts uint64) {
		ps, _ := dm.plugins()
		for _, p := range ps {
			if p.File == "sibling.wasm" {
				return p.Counters.Traps, p.Counters.Timeouts
			}
		}
		return 0, 0
	}
	// Let a spinning sibling get going before measuring.
	time.Sleep(time.Second)
	tr0, to0 := counters()
	cpu0, _ := procCPU(dm.cmd.Process.Pid)
	t0 := time.Now()
	ctx := context.Background()
	cms := h.client.CoreV1().ConfigMaps(ns)
	tick := time.NewTicker(10 * time.Millisecond)
	var wg sync.WaitGroup
	for time.Since(t0) < d {
		<-tick.C
		*seq++
		k := *seq
		name := fmt.Sprintf("iso-%02d", k%objects)
		body := fmt.Sprintf(`{"data":{"seq":"%d"}}`, k)
		wg.Add(1)
		go func() {
			defer wg.Done()
			res.sent.note(fmt.Sprintf("u:%s:%d", name, k), time.Now())
			_, _ = cms.Patch(ctx, name, types.MergePatchType, []byte(body), metav1.PatchOptions{})
		}()
	}
	tick.Stop()
	wg.Wait()
	// Deliveries in flight.
	time.Sleep(time.Second)
	tr1, to1 := counters()
	cpu1, _ := procCPU(dm.cmd.Process.Pid)
	secs := time.Since(t0).Seconds()
	res.run.HostCPU = (cpu1 - cpu0).Seconds() / secs
	res.run.Traps, res.run.Timeouts = float64(tr1-tr0)/secs, float64(to1-to0)/secs
	return res, nil
}
