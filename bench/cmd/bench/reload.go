package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync/atomic"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/informer-host/informer-host/bench/benchenv"
)

// Case 4: reload and start.
//
// Reload: one daemon with one plugin file, p.wasm, bound to a namespace
// where a ConfigMap is updated every 10 ms. The harness replaces p.wasm
// (write and rename, as a deployment would) with another module and
// follows the swap in the daemon's log:
//
//	t0        the rename
//	detect    until the load starts: the directory watcher's debounce and
//	          the file-stability wait (200 + 100 ms, fixed in the daemon)
//	compile   engine.Load: validate, inject checks, compile or read the
//	          compiled code from the cache ("plugin loaded" log: compile=)
//	swap      everything after the compile until the new version's
//	          handler is entered for the first time: instantiate, init,
//	          register (the cache replays as initial-list adds), the first
//	          event
//
// "Cold" is content the host has never seen (a new custom section makes
// new bytes without rebuilding); "warm" is content seen before (a
// rollback): compiled code comes from the on-disk cache. The old version
// keeps handling the ConfigMap's updates while the new one compiles; its
// deliveries during the compile are counted and the longest gap between
// two of them is reported.
//
// Start: the daemon started with 10 small Go plugins (distinct content)
// until /readyz answers 200 with every plugin running and synced; cold is
// an empty compilation cache, warm the same plugins again.

type reloadRun struct {
	Plugin  string  `json:"plugin"` // c, go-small, go-k8sapi
	Cache   string  `json:"cache"`  // cold, warm
	Detect  float64 `json:"detectMs"`
	Compile float64 `json:"compileMs"`
	Swap    float64 `json:"swapMs"`
	Total   float64 `json:"totalMs"`
	// The old version during the compile (only when it records: Go):
	// the changes sent during the compile, how many of them it handled,
	// and their delivery latency (sent to handler entered).
	OldSent   int     `json:"oldSent"`
	OldEvents int     `json:"oldEvents"` // -1 when not measured
	OldP99    float64 `json:"oldP99Ms"`
	OldMax    float64 `json:"oldMaxMs"`
}

// reloadControl is the delivery latency of the running version in steady
// state, with no reload going on.
type reloadControl struct {
	Events int     `json:"events"`
	P99    float64 `json:"p99Ms"`
	Max    float64 `json:"maxMs"`
}

type startRun struct {
	Cache   string  `json:"cache"`
	Plugins int     `json:"plugins"`
	Ready   float64 `json:"readyS"`
}

type reloadStep struct {
	plugin, cache string
	wasm          []byte
	t0            time.Time
}

func sha12(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])[:12]
}

func (h *e2e) reload(runs int, withK8sAPI bool, control time.Duration) ([]reloadRun, reloadControl, error) {
	var ctl reloadControl
	ns, err := h.namespace("reload")
	if err != nil {
		return nil, ctl, err
	}
	ctx := context.Background()
	cms := h.client.CoreV1().ConfigMaps(ns)
	if _, err := cms.Create(ctx, configMap(ns, "tick", "0", 0), metav1.CreateOptions{}); err != nil {
		return nil, ctl, err
	}
	dir := filepath.Join(h.work, "reload-plugins")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, ctl, err
	}
	small, c := mustWasm("twofields"), mustWasm("noop-c")
	var k8s []byte
	if withK8sAPI {
		k8s = mustWasm("k8sapi")
	}
	initial := benchenv.WithNonce(small, fmt.Sprintf("reload-init-%d", time.Now().UnixNano()))
	if _, err := writeWasm(dir, "p.wasm", initial); err != nil {
		return nil, ctl, err
	}
	d, err := h.startDaemon("reload", dir, func(dir, addr string) string {
		return h.daemonConfig(ns, dir, addr, `    config: {fields: [metadata.labels.app, data.seq], record: true}`,
			"    - {file: p.wasm}\n")
	})
	if err != nil {
		return nil, ctl, err
	}
	defer func() {
		select {
		case <-d.exited:
		default:
			_ = d.stop()
		}
	}()
	if _, err := d.waitReady(1, 5*time.Minute); err != nil {
		return nil, ctl, err
	}

	// The ticker: a change every 10 ms for the old version to handle.
	stopTick := make(chan struct{})
	tickDone := make(chan struct{})
	var ticks atomic.Int64
	sent := &sentTimes{m: map[string]int64{}}
	go func() {
		defer close(tickDone)
		t := time.NewTicker(10 * time.Millisecond)
		defer t.Stop()
		for k := 1; ; k++ {
			select {
			case <-stopTick:
				return
			case <-t.C:
			}
			patch := fmt.Sprintf(`{"data":{"seq":"%d"}}`, k)
			sent.note(fmt.Sprintf("u:tick:%d", k), time.Now())
			if _, err := cms.Patch(ctx, "tick", types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err == nil {
				ticks.Add(1)
			}
		}
	}()

	// Steady state first: the control for the old version's latency.
	ctlFrom := time.Now()
	time.Sleep(control)
	ctlTo := time.Now()
	var steps []reloadStep
	for r := 0; r < runs; r++ {
		a := benchenv.WithNonce(small, fmt.Sprintf("reload-go-%d-%d", r, time.Now().UnixNano()))
		cc := benchenv.WithNonce(c, fmt.Sprintf("reload-c-%d-%d", r, time.Now().UnixNano()))
		seq := []reloadStep{{"go-small", "cold", a, time.Time{}}, {"c", "cold", cc, time.Time{}}, {"go-small", "warm", a, time.Time{}},
			{"c", "warm", cc, time.Time{}}, {"go-small", "warm", a, time.Time{}}}
		if withK8sAPI {
			kk := benchenv.WithNonce(k8s, fmt.Sprintf("reload-k8s-%d-%d", r, time.Now().UnixNano()))
			seq = append(seq, reloadStep{"go-k8sapi", "cold", kk, time.Time{}}, reloadStep{"go-small", "warm", a, time.Time{}},
				reloadStep{"go-k8sapi", "warm", kk, time.Time{}}, reloadStep{"go-small", "warm", a, time.Time{}})
		}
		for _, st := range seq {
			h.logf("case 4: reload run %d/%d: %s, %s cache", r+1, runs, st.plugin, st.cache)
			// Let the running version settle and handle a few ticks.
			time.Sleep(300 * time.Millisecond)
			if st.t0, err = writeWasm(dir, "p.wasm", st.wasm); err != nil {
				return nil, ctl, err
			}
			if err := waitLoaded(d, sha12(st.wasm), st.t0, 5*time.Minute); err != nil {
				return nil, ctl, err
			}
			steps = append(steps, st)
		}
	}
	time.Sleep(300 * time.Millisecond)
	close(stopTick)
	<-tickDone
	if err := d.stop(); err != nil {
		return nil, ctl, err
	}
	recs, err := d.records()
	if err != nil {
		return nil, ctl, err
	}
	var lat []float64
	for _, r := range recs {
		if t0, ok := sent.m[r.key()]; ok && r.version == sha12(initial) && t0 >= ctlFrom.UnixNano() && t0 < ctlTo.UnixNano() {
			lat = append(lat, float64(r.entered-t0)/1e6)
		}
	}
	ctl = reloadControl{Events: len(lat), P99: percentile(lat, 99), Max: percentile(lat, 100)}
	out, err := analyseReloads(d, initial, steps, sent)
	return out, ctl, err
}

// waitLoaded waits for the "plugin loaded" (or "plugin reloaded") line of
// version sha after t0.
func waitLoaded(d *daemon, sha string, t0 time.Time, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for time.Now().Before(deadline) {
		lines, err := d.logs()
		if err != nil {
			return err
		}
		for _, l := range lines {
			if loadedMsg(l.Msg) && l.SHA256 == sha && !l.Time.Before(t0.Truncate(time.Millisecond)) {
				return nil
			}
			if strings.Contains(l.Msg, "new version refused") && !l.Time.Before(t0.Truncate(time.Millisecond)) {
				return fmt.Errorf("version %s refused: %s", sha, d.tail())
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("version %s not loaded within %v", sha, limit)
}

func analyseReloads(d *daemon, initial []byte, steps []reloadStep, sent *sentTimes) ([]reloadRun, error) {
	lines, err := d.logs()
	if err != nil {
		return nil, err
	}
	recs, err := d.records()
	if err != nil {
		return nil, err
	}
	byVersion := map[string][]int64{}
	recsOf := map[string][]pluginRecord{}
	for _, r := range recs {
		byVersion[r.version] = append(byVersion[r.version], r.entered)
		recsOf[r.version] = append(recsOf[r.version], r)
	}
	for _, ts := range byVersion {
		sort.Slice(ts, func(i, j int) bool { return ts[i] < ts[j] })
	}
	var out []reloadRun
	for k, st := range steps {
		sha := sha12(st.wasm)
		res := reloadRun{Plugin: st.plugin, Cache: st.cache, OldEvents: -1}
		var loaded *logLine
		for i := range lines {
			l := &lines[i]
			if loadedMsg(l.Msg) && l.SHA256 == sha && !l.Time.Before(st.t0.Truncate(time.Millisecond)) {
				loaded = l
				break
			}
		}
		if loaded == nil {
			return nil, fmt.Errorf("no load of %s", sha)
		}
		// The log's clock has millisecond resolution.
		loadStart := loaded.Time.Add(-time.Duration(loaded.Total))
		compileEnd := loadStart.Add(time.Duration(loaded.Compile))
		first := int64(-1)
		for _, t := range byVersion[sha] {
			if t >= st.t0.UnixNano() {
				first = t
				break
			}
		}
		if first < 0 { // C: its log line on the first event
			for _, l := range lines {
				if l.Msg == "benchfirst" && l.Version == sha && !l.Time.Before(st.t0.Truncate(time.Millisecond)) {
					first = l.Time.UnixNano()
					break
				}
			}
		}
		if first < 0 {
			return nil, fmt.Errorf("version %s (%s) never received an event", sha, st.plugin)
		}
		ms := func(a, b int64) float64 { return float64(b-a) / 1e6 }
		res.Detect = ms(st.t0.UnixNano(), loadStart.UnixNano())
		res.Compile = float64(loaded.Compile) / 1e6
		// The daemon's log times have millisecond resolution, so a swap
		// measured against one (the C plugin's first event) can come out
		// a fraction of a millisecond below zero.
		res.Swap = max(0, ms(compileEnd.UnixNano(), first))
		res.Total = ms(st.t0.UnixNano(), first)
		// The old version during the compile: the changes sent while it
		// compiled, and what became of them.
		prev := initial
		if k > 0 {
			prev = steps[k-1].wasm
		}
		if len(recsOf[sha12(prev)]) > 0 {
			from, to := loadStart.UnixNano(), compileEnd.UnixNano()
			handled := map[string]float64{}
			for _, r := range recsOf[sha12(prev)] {
				if t0, ok := sent.m[r.key()]; ok && t0 >= from && t0 < to {
					handled[r.key()] = float64(r.entered-t0) / 1e6
				}
			}
			var lat []float64
			for key, t0 := range sent.m {
				if t0 < from || t0 >= to {
					continue
				}
				res.OldSent++
				if l, ok := handled[key]; ok {
					lat = append(lat, l)
				}
			}
			res.OldEvents, res.OldP99, res.OldMax = len(lat), percentile(lat, 99), percentile(lat, 100)
		}
		out = append(out, res)
	}
	return out, nil
}

// startup starts the daemon with n small Go plugins of new content on an
// empty cache (cold) and again (warm), runs times.
func (h *e2e) startup(runs, n int) ([]startRun, error) {
	ns, err := h.namespace("start")
	if err != nil {
		return nil, err
	}
	if _, err := h.client.CoreV1().ConfigMaps(ns).Create(context.Background(), configMap(ns, "one", "0", 0), metav1.CreateOptions{}); err != nil {
		return nil, err
	}
	small := mustWasm("twofields")
	var out []startRun
	for r := 0; r < runs; r++ {
		dir := filepath.Join(h.work, fmt.Sprintf("start-plugins-%d", r))
		cache := filepath.Join(h.work, fmt.Sprintf("start-cache-%d", r))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, err
		}
		for i := 0; i < n; i++ {
			if _, err := writeWasm(dir, fmt.Sprintf("p%d.wasm", i), benchenv.WithNonce(small, fmt.Sprintf("start-%d-%d-%d", r, i, time.Now().UnixNano()))); err != nil {
				return nil, err
			}
		}
		for _, temp := range []string{"cold", "warm"} {
			h.logf("case 4: start run %d/%d, %d plugins, %s cache", r+1, runs, n, temp)
			d, err := h.startDaemon(fmt.Sprintf("start-%d-%s", r, temp), dir, func(dir, addr string) string {
				cfg := h.daemonConfig(ns, dir, addr, "", "    []\n")
				return strings.Replace(cfg, "compilationCache: "+h.cacheDir, "compilationCache: "+cache, 1)
			})
			if err != nil {
				return nil, err
			}
			readyAt, err := d.waitReady(n, 5*time.Minute)
			_ = d.stop()
			if err != nil {
				return nil, err
			}
			out = append(out, startRun{Cache: temp, Plugins: n, Ready: readyAt.Sub(d.started).Seconds()})
			h.logf("case 4: ready after %.2f s", readyAt.Sub(d.started).Seconds())
		}
	}
	return out, nil
}

// loadedMsg reports whether msg is the host's log of a version swapped in:
// "plugin loaded" the first time, "plugin reloaded" after.
func loadedMsg(msg string) bool { return msg == "plugin loaded" || msg == "plugin reloaded" }
