package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Case 6r: a restart does not stall the informer. As case 6, a
// healthy Go plugin's latency at 100 changes a second, but in a namespace
// of many objects (20 of them changing), next to no sibling or to a
// sibling restarted once a second: it traps on its first event, waits out
// a 1 s restart backoff, and every restart hands it the informer's whole
// store again. Re-registering the sibling's informer listener to replay
// the store, as the host once did, blocks client-go's distribution of
// events to every listener of the informer while it lists the store
// (blockDeltas); the host now replays from the store to the sibling's own
// queue, and the informer's listeners stay as they are.

// restartSiblings: the healthy plugin alone, and next to the restarting
// sibling, in the same namespace.
var restartSiblings = []string{"restart-none", "restart"}

func (h *e2e) restartIsolation(runs int, d time.Duration, cold int) ([]isolationRun, error) {
	ns, err := h.namespace("restart")
	if err != nil {
		return nil, err
	}
	cms := h.client.CoreV1().ConfigMaps(ns)
	const objects = 20
	err = parallel(objects+cold, 8, func(i int) error {
		name := fmt.Sprintf("iso-%02d", i)
		if i >= objects {
			name = fmt.Sprintf("cold-%05d", i)
		}
		_, err := cms.Create(context.Background(), configMap(ns, name, "0", i), metav1.CreateOptions{})
		return err
	})
	if err != nil {
		return nil, err
	}
	healthy, trap := mustWasm("twofields"), mustWasm("trap-wat")
	seq := 0
	var out []isolationRun
	for r := 0; r < runs; r++ {
		for j := range restartSiblings {
			sib := restartSiblings[(j+r)%len(restartSiblings)]
			h.logf("case 6r: run %d/%d: %s, %d objects, %v", r+1, runs, sib, objects+cold, d)
			dir := filepath.Join(h.work, fmt.Sprintf("restart-%d-%s", r, sib))
			if err := os.MkdirAll(dir, 0o755); err != nil {
				return out, err
			}
			if _, err := writeWasm(dir, "healthy.wasm", healthy); err != nil {
				return out, err
			}
			modules := "    - {file: healthy.wasm, config: {fields: [metadata.labels.app, data.seq], record: true}}\n"
			if sib == "restart" {
				if _, err := writeWasm(dir, "sibling.wasm", trap); err != nil {
					return out, err
				}
				modules += "    - {file: sibling.wasm, limits: {restartBackoff: 1s, maxRestartBackoff: 1s, maxConsecutiveFailures: 1000000000}}\n"
			}
			dm, err := h.startDaemon(fmt.Sprintf("restart-%d-%s", r, sib), dir, func(dir, addr string) string {
				return h.daemonConfig(ns, dir, addr, "", modules)
			})
			if err != nil {
				return out, err
			}
			// isolationRun counts a sibling for any name but none and hog.
			isoSib := "none"
			if sib == "restart" {
				isoSib = "trap"
			}
			res, err := h.isolationRun(dm, isoSib, ns, &seq, objects, d)
			_ = dm.stop()
			if err != nil {
				return out, err
			}
			res.run.Sibling = sib
			lat, err := healthyLatencies(dm, res.sent)
			if err != nil {
				return out, err
			}
			res.run.Events, res.run.P50, res.run.P99 = len(lat), percentile(lat, 50), percentile(lat, 99)
			h.logf("case 6r: %s: %d events, p50 %.1f ms, p99 %.1f ms, %.1f restarts/s, daemon %.2f cores",
				sib, res.run.Events, res.run.P50, res.run.P99, res.run.Traps, res.run.HostCPU)
			out = append(out, res.run)
		}
	}
	return out, nil
}
