package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Case 5: memory. N ConfigMaps of 1 KiB exist in a namespace; a child
// process lists and watches them, and its resident set size (VmRSS, and
// the peak VmHWM) is read once every handler has seen every object and the
// process has idled for settle. Children: the native baseline (a plain
// dynamic informer with a no-op handler), once with managedFields kept, as
// client-go does by default, and once stripped by the same transform as
// the daemon's (its default: the fair baseline), the daemon with 10 small
// Go plugins, and with 20 (the difference over 10 is what one more plugin
// costs: a single plugin more is lost in the collector's timing), and 10
// separate native processes, each a stripped plain informer (one
// controller per handler; their RSS summed, peers.go). Then, in each run,
// the fair native informer and the daemon with 10 plugins relist once
// (etcd compacted, watches cut; relist.go), for the peak a relist costs.

type memoryRun struct {
	Side    string  `json:"side"`
	Plugins int     `json:"plugins"`
	RSS     float64 `json:"rssMiB"`
	Peak    float64 `json:"peakMiB"`
	// Relist, in a relist run (relist.go), says whose 410 made the side
	// list again: "apiserver" or "proxy"; Lists counts its lists.
	Relist string `json:"relist,omitempty"`
	Lists  int    `json:"lists,omitempty"`
}

func (h *e2e) memory(n, runs int, settle time.Duration, plugins int, sides string) ([]memoryRun, error) {
	ns, err := h.namespace("memory")
	if err != nil {
		return nil, err
	}
	h.logf("case 5: creating %d ConfigMaps", n)
	start := time.Now()
	cms := h.client.CoreV1().ConfigMaps(ns)
	err = parallel(n, 8, func(i int) error {
		_, err := cms.Create(context.Background(), configMap(ns, fmt.Sprintf("m-%05d", i), "c", i), metav1.CreateOptions{})
		return err
	})
	if err != nil {
		return nil, err
	}
	h.logf("case 5: created in %v", time.Since(start).Round(time.Second))
	var out []memoryRun
	configs := []struct {
		side    string
		plugins int
	}{{"native", 0}, {"native-stripped", 0}, {"host", plugins}, {"host", 2 * plugins}, {"controllers", plugins}}
	for r := 0; r < runs; r++ {
		for j := range configs {
			c := configs[(j+r)%len(configs)]
			if !runsSide(sides, c.side, c.plugins) {
				continue
			}
			h.logf("case 5: run %d/%d: %s with %d plugins", r+1, runs, c.side, c.plugins)
			var pid int
			var stop func()
			mem := func() (int64, int64, error) { return procMemory(pid) }
			switch c.side {
			case "controllers":
				var err error
				if mem, stop, err = h.controllersMemory(ns, c.plugins, n); err != nil {
					return out, err
				}
			case "native", "native-stripped":
				var flags []string
				if c.side == "native-stripped" {
					flags = []string{"-strip-managed-fields"}
				}
				nc, err := h.startNative(ns, "noop", 1, flags...)
				if err != nil {
					return out, err
				}
				stop = nc.stop
				if h.profileDir != "" {
					stopSampling := h.logPeak("case 5: "+c.side, nc.cmd.Process.Pid, time.Now())
					stop = func() { stopSampling(); nc.stop() }
				}
				if err := nc.waitCount(uint64(n), 10*time.Minute); err != nil {
					stop()
					return out, err
				}
				pid = nc.cmd.Process.Pid
			default:
				m, err := h.daemonRSS(ns, fmt.Sprintf("memory-%d-%d", c.plugins, r), c.plugins, uint64(n), settle)
				if err != nil {
					return out, err
				}
				h.logf("case 5: %s/%d: RSS %.0f MiB (peak %.0f MiB)", m.Side, m.Plugins, m.RSS, m.Peak)
				out = append(out, m)
				continue
			}
			time.Sleep(settle)
			rss, peak, waited, err := settledMemory(mem)
			if pid != 0 {
				if split, err := procSplit(pid); err == nil {
					h.logf("case 5: %s (settled after %d s more): %v", c.side, waited, split)
				}
			}
			stop()
			if err != nil {
				return out, err
			}
			m := memoryRun{Side: c.side, Plugins: c.plugins, RSS: float64(rss) / (1 << 20), Peak: float64(peak) / (1 << 20)}
			h.logf("case 5: %s/%d: RSS %.0f MiB (peak %.0f MiB)", m.Side, m.Plugins, m.RSS, m.Peak)
			out = append(out, m)
		}
		for _, side := range []struct {
			side    string
			plugins int
		}{{"native-stripped", 0}, {"host", plugins}} {
			h.logf("case 5 relist: run %d/%d: %s with %d plugins", r+1, runs, side.side, side.plugins)
			m, err := h.relistSide(ns, side.side, side.plugins, n, r, settle)
			if err != nil {
				return out, err
			}
			out = append(out, m)
		}
	}
	return out, nil
}

// runsSide reports whether sides (space separated, each a side or
// side/plugins: "native-stripped host/10"; empty: every side) names a
// side: a split of one side at full size need not wait for the others.
func runsSide(sides, side string, plugins int) bool {
	if strings.TrimSpace(sides) == "" {
		return true
	}
	for _, s := range strings.Fields(sides) {
		if s == side || s == fmt.Sprintf("%s/%d", side, plugins) {
			return true
		}
	}
	return false
}
