package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Case 5i: idle plugins. 50 small Go plugins bound to a
// resource that does not change (10 ConfigMaps, written once before the
// daemon starts): the daemon's VmRSS with 1 plugin and with 51, once every
// plugin has its initial list and the process has idled for settle. The
// difference over 50 is what an idle plugin costs.

// idlePlugins is how many idle plugins are added to the first one.
const idlePlugins = 50

func (h *e2e) idle(runs int, settle time.Duration) ([]memoryRun, error) {
	ns, err := h.namespace("idle")
	if err != nil {
		return nil, err
	}
	const objects = 10
	cms := h.client.CoreV1().ConfigMaps(ns)
	for i := 0; i < objects; i++ {
		if _, err := cms.Create(context.Background(), configMap(ns, fmt.Sprintf("idle-%02d", i), "0", i), metav1.CreateOptions{}); err != nil {
			return nil, err
		}
	}
	// A first daemon compiles the plugin into the compilation cache: a
	// compile's garbage would stay in the measured process's RSS.
	h.logf("case 5i: warming the compilation cache")
	if _, err := h.daemonRSS(ns, "idle-warm", 1, objects, 0); err != nil {
		return nil, err
	}
	var out []memoryRun
	for r := 0; r < runs; r++ {
		for j, n := range []int{1, 1 + idlePlugins} {
			if r%2 == 1 {
				n = []int{1 + idlePlugins, 1}[j]
			}
			h.logf("case 5i: run %d/%d: %d plugins, idle", r+1, runs, n)
			m, err := h.daemonRSS(ns, fmt.Sprintf("idle-%d-%d", n, r), n, objects, settle)
			if err != nil {
				return out, err
			}
			m.Side = "idle"
			h.logf("case 5i: %d plugins: RSS %.0f MiB (peak %.0f MiB)", n, m.RSS, m.Peak)
			out = append(out, m)
		}
	}
	return out, nil
}

// daemonRSS runs the daemon with n twofields plugins bound to ns, waits
// until each has handled objects objects, settle has passed and (after a
// large initial list) the daemon has collected since, and reads its
// memory once it has stopped moving (settledMemory).
func (h *e2e) daemonRSS(ns, name string, n int, objects uint64, settle time.Duration) (memoryRun, error) {
	dir := filepath.Join(h.work, name+"-plugins")
	names, modules, err := twofieldsDir(dir, n, nil)
	if err != nil {
		return memoryRun{}, err
	}
	d, err := h.startDaemon(name, dir, func(dir, addr string) string {
		return h.daemonConfig(ns, dir, addr, "", modules)
	})
	if err != nil {
		return memoryRun{}, err
	}
	defer func() { _ = d.stop() }()
	stopSampling := func() {}
	if h.profileDir != "" {
		stopSampling = h.logPeak(name, d.cmd.Process.Pid, d.started)
	}
	if _, err := d.waitReady(n, 10*time.Minute); err != nil {
		return memoryRun{}, err
	}
	if err := d.waitDelivered(names, objects, 10*time.Minute); err != nil {
		return memoryRun{}, err
	}
	rss, peak, err := h.settled(d, name, objects, settle)
	stopSampling()
	if err != nil {
		return memoryRun{}, err
	}
	return memoryRun{Side: "host", Plugins: n, RSS: float64(rss) / (1 << 20), Peak: float64(peak) / (1 << 20)}, nil
}

// logPeak samples the process's smaps (with -profile) until the
// returned func is called, then logs the split at its largest RSS.
func (h *e2e) logPeak(name string, pid int, start time.Time) (stop func()) {
	s := samplePeak(pid, start, 150*time.Millisecond)
	return func() {
		p := s()
		h.logf("%s: sampled peak at %.2f s: %v", name, p.At.Seconds(), p.Split)
	}
}

// settled reads the daemon's memory (VmRSS, VmHWM) once its plugins,
// having just synced objects objects, have idled for settle, it has
// collected since (after a large initial list) and its memory has
// stopped moving (settledMemory).
func (h *e2e) settled(d *daemon, name string, objects uint64, settle time.Duration) (rss, peak int64, err error) {
	synced := time.Now()
	time.Sleep(settle)
	if objects > releasedAbove && !d.waitCollected(synced, 30*time.Second) {
		h.logf("%s: no collection within 30 s of every plugin having synced", name)
	}
	rss, peak, waited, err := settledMemory(func() (int64, int64, error) { return procMemory(d.cmd.Process.Pid) })
	if err != nil {
		return 0, 0, err
	}
	d.logSplit(fmt.Sprintf("%s (settled after %d s more)", name, waited))
	return rss, peak, nil
}

// releasedAbove is the initial list's size above which the daemon
// returns its memory to the OS once its plugins have synced it
// (delivery.ReplayKeep, host/memrelease.go).
const releasedAbove = 1024

// twofieldsDir writes n copies of the twofields plugin into dir, and
// returns their names and their config's modules entries. config, when
// not nil, gives module i its own plugin config (flow-style YAML); an
// empty one leaves the module on the defaults.
func twofieldsDir(dir string, n int, config func(i int) string) (names []string, modules string, err error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, "", err
	}
	wasm := mustWasm("twofields")
	var b strings.Builder
	for i := 0; i < n; i++ {
		name := fmt.Sprintf("twofields-%d.wasm", i)
		names = append(names, name)
		if _, err := writeWasm(dir, name, wasm); err != nil {
			return nil, "", err
		}
		var c string
		if config != nil {
			c = config(i)
		}
		if c == "" {
			fmt.Fprintf(&b, "    - {file: %s}\n", name)
		} else {
			fmt.Fprintf(&b, "    - {file: %s, config: %s}\n", name, c)
		}
	}
	return names, b.String(), nil
}
