package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/flowcontrol"

	"github.com/informer-host/informer-host/bench/benchenv"
)

// Case 11: many plugins in one daemon. M ConfigMaps exist in a
// namespace; for each plugin count P (the first is the baseline, 10 in a
// full run) the daemon runs P plugins, a third each Go (twofields), Rust
// (noop-rs) and C (noop-c), every copy with a nonce of its own so that
// each is a module the compilation cache has not seen (as P distinct
// plugins would be, and not one module compiled once and shared). Per P:
//
//   - cold start: a fresh compilation cache, daemon started to every
//     plugin running, synced and having handled the M objects; the
//     daemon's peak (VmHWM) over it, compilations included;
//   - warm start: the same again on the filled cache; then, settled
//     (settledMemory), VmRSS and VmHWM;
//   - a steady update rate (U merge patches at R/s over the objects):
//     the latency p99 seen by the first plugin (the Go one, recording
//     each event's entry as case 3 does), the daemon's CPU per update
//     (all P plugins) and per delivery (per update per plugin), and
//     VmHWM after.
//
// The baseline is the first count of the same run: the report gives each
// count's ratio to it and the marginal cost of one more plugin between
// consecutive counts (where it bends).

type scaleRun struct {
	Plugins  int     `json:"plugins"`
	Objects  int     `json:"objects"`
	Cold     float64 `json:"coldS"`
	ColdPeak float64 `json:"coldPeakMiB"`
	Warm     float64 `json:"warmS"`
	RSS      float64 `json:"rssMiB"`
	Peak     float64 `json:"peakMiB"` // settled after the warm start
	UpdPeak  float64 `json:"updatePeakMiB"`
	Updates  int     `json:"updates"`
	Rate     int     `json:"ratePerS"`
	P50      float64 `json:"p50Ms"`
	P99      float64 `json:"p99Ms"`
	CPU      float64 `json:"cpuMsPerUpdate"`   // the daemon's, all plugins
	CPUDeliv float64 `json:"cpuUsPerDelivery"` // per update per plugin
	Missing  int     `json:"missingRecords"`
}

// scaleKits are the plugins case 11 cycles through: Go, Rust, C.
var scaleKits = []string{"twofields", "noop-rs", "noop-c"}

// parseCounts reads the case's plugin counts, "/"-separated ("10/50/200":
// -set already splits on commas).
func parseCounts(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, "/") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return nil, fmt.Errorf("scalePlugins: %q is not a positive plugin count (want e.g. 10/50/200)", f)
		}
		out = append(out, n)
	}
	return out, nil
}

func (h *e2e) scale(n int, counts string, updates, rate int, settle time.Duration) ([]scaleRun, error) {
	ps, err := parseCounts(counts)
	if err != nil {
		return nil, err
	}
	for _, k := range scaleKits {
		if _, err := benchenv.Build(k); err != nil {
			return nil, err
		}
	}
	ns, err := h.namespace("scale")
	if err != nil {
		return nil, err
	}
	h.logf("case 11: creating %d ConfigMaps", n)
	cms := h.client.CoreV1().ConfigMaps(ns)
	if err := parallel(n, 8, func(i int) error {
		_, err := cms.Create(context.Background(), configMap(ns, fmt.Sprintf("s-%05d", i), "c", i), metav1.CreateOptions{})
		return err
	}); err != nil {
		return nil, err
	}
	var out []scaleRun
	seq := 0 // update numbers run on across counts: every record key is new
	for _, p := range ps {
		h.logf("case 11: %d plugins, %d ConfigMaps", p, n)
		r, err := h.scaleRun(ns, n, p, updates, rate, settle, &seq)
		if err != nil {
			return out, fmt.Errorf("%d plugins: %w", p, err)
		}
		h.logf("case 11: %d plugins: cold %.1f s (peak %.0f MiB), warm %.1f s; RSS %.0f MiB (peak %.0f, %.0f after updates); p50/p99 %.1f/%.1f ms at %d/s; %.3f ms CPU/update, %.1f µs/delivery",
			p, r.Cold, r.ColdPeak, r.Warm, r.RSS, r.Peak, r.UpdPeak, r.P50, r.P99, rate, r.CPU, r.CPUDeliv)
		out = append(out, r)
	}
	return out, nil
}

// scaleDir writes p plugins, cycling through scaleKits, each with a nonce
// of its own, and returns their names and the config's modules entries:
// the first plugin records every event's entry.
func scaleDir(dir string, p int) (names []string, modules string, err error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, "", err
	}
	var b strings.Builder
	for i := 0; i < p; i++ {
		kit := scaleKits[i%len(scaleKits)]
		name := fmt.Sprintf("%s-%d.wasm", kit, i)
		wasm := benchenv.WithNonce(mustWasm(kit), fmt.Sprintf("scale-%d-%d-%d", p, i, time.Now().UnixNano()))
		if _, err := writeWasm(dir, name, wasm); err != nil {
			return nil, "", err
		}
		names = append(names, name)
		switch {
		case kit == "twofields":
			fmt.Fprintf(&b, "    - {file: %s, config: {fields: [metadata.labels.app, data.seq], record: %t}}\n", name, i == 0)
		default:
			fmt.Fprintf(&b, "    - {file: %s}\n", name)
		}
	}
	return names, b.String(), nil
}

func (h *e2e) scaleRun(ns string, n, p, updates, rate int, settle time.Duration, seq *int) (scaleRun, error) {
	res := scaleRun{Plugins: p, Objects: n, Updates: updates, Rate: rate}
	dir := filepath.Join(h.work, fmt.Sprintf("scale-%d-plugins", p))
	cache := filepath.Join(h.work, fmt.Sprintf("scale-%d-cache", p))
	names, modules, err := scaleDir(dir, p)
	if err != nil {
		return res, err
	}
	start := func(temp string) (*daemon, float64, error) {
		d, err := h.startDaemon(fmt.Sprintf("scale-%d-%s", p, temp), dir, func(dir, addr string) string {
			cfg := h.daemonConfig(ns, dir, addr, "", modules)
			return strings.Replace(cfg, "compilationCache: "+h.cacheDir, "compilationCache: "+cache, 1)
		})
		if err != nil {
			return nil, 0, err
		}
		if _, err := d.waitReady(p, 20*time.Minute); err != nil {
			_ = d.stop()
			return nil, 0, err
		}
		if err := d.waitDelivered(names, uint64(n), 20*time.Minute); err != nil {
			_ = d.stop()
			return nil, 0, err
		}
		return d, time.Since(d.started).Seconds(), nil
	}

	d, took, err := start("cold")
	if err != nil {
		return res, fmt.Errorf("cold start: %w", err)
	}
	_, peak, err := procMemory(d.cmd.Process.Pid)
	_ = d.stop()
	if err != nil {
		return res, err
	}
	res.Cold, res.ColdPeak = took, float64(peak)/(1<<20)

	d, took, err = start("warm")
	if err != nil {
		return res, fmt.Errorf("warm start: %w", err)
	}
	defer func() {
		select {
		case <-d.exited:
		default:
			_ = d.stop()
		}
	}()
	res.Warm = took
	rss, peak, err := h.settled(d, fmt.Sprintf("case 11: %d plugins", p), uint64(n), settle)
	if err != nil {
		return res, err
	}
	res.RSS, res.Peak = float64(rss)/(1<<20), float64(peak)/(1<<20)

	// The steady rate: U merge patches, paced by one token bucket shared
	// by 4 writers (one slow request does not stall the rate).
	cpu0, err := procCPU(d.cmd.Process.Pid)
	if err != nil {
		return res, err
	}
	var sent sentTimes
	limiter := flowcontrol.NewTokenBucketRateLimiter(float32(rate), 1)
	cms := h.client.CoreV1().ConfigMaps(ns)
	first := *seq
	*seq += updates
	if err := parallel(updates, 4, func(i int) error {
		limiter.Accept()
		name, value := fmt.Sprintf("s-%05d", i%n), fmt.Sprintf("u%d", first+i)
		patch := fmt.Sprintf(`{"data":{"seq":%q}}`, value)
		sent.note("u:"+name+":"+value, time.Now())
		_, err := cms.Patch(context.Background(), name, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
		return err
	}); err != nil {
		return res, fmt.Errorf("updates: %w", err)
	}
	if err := d.waitDelivered(names, uint64(n+updates), 20*time.Minute); err != nil {
		return res, err
	}
	cpu1, err := procCPU(d.cmd.Process.Pid)
	if err != nil {
		return res, err
	}
	_, peak, err = procMemory(d.cmd.Process.Pid)
	if err != nil {
		return res, err
	}
	res.UpdPeak = float64(peak) / (1 << 20)
	res.CPU = float64((cpu1 - cpu0).Microseconds()) / 1000 / float64(updates)
	res.CPUDeliv = res.CPU * 1000 / float64(p)

	if err := d.stop(); err != nil {
		return res, err
	}
	recs, err := d.records()
	if err != nil {
		return res, err
	}
	var lat []float64
	for _, r := range recs {
		if t0, ok := sent.m[r.key()]; ok {
			lat = append(lat, float64(r.entered-t0)/1e6)
		}
	}
	res.Missing = updates - len(lat)
	res.P50, res.P99 = percentile(lat, 50), percentile(lat, 99)
	return res, nil
}
