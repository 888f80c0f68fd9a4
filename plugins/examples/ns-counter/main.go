//go:build wasip1

// Command ns-counter exports the number of pods per namespace and phase as
// plugin metrics (ABI.md §16.3): a gauge
// informer_host_plugin_metric_pods{plugin, namespace, phase} on the host's
// /metrics. It needs the metrics grant:
//
//	modules:
//	  - file: ns-counter.wasm
//	    bindings: [{resource: pods}]
//	    grants: {metrics: {}, state: {}}
//
// Counts are rebuilt from what the host delivers: after a trap, a restart
// or a reload the host replays its cache to the fresh instance, and the
// plugin publishes nothing until that initial list is handled
// (kit.OnSynced), so the gauges keep showing the previous instance's
// values (the host keeps them: the declaration is unchanged) and then jump
// to the rebuilt, whole counts. At that point every phase of every
// namespace the plugin knows is set, zeros included, so a phase that
// emptied while the plugin was down reads 0.
//
// A namespace whose pods all went while the plugin was down is not in the
// replay at all, so the plugin keeps, in its state (ABI.md §16.2, kept by
// the host across traps, restarts and reloads), the namespaces it has
// exported: once synced it sets every phase of those no longer counted to
// 0 and forgets them. So it also needs the state grant:
//
//	grants: {metrics: {}, state: {}}
//
// Configuration (JSON, optional), for tests of the above:
//
//	{"crashOn": "<annotation>"}   exit (a trap) on an update of a pod carrying that annotation
//	{"holdOn": "<annotation>"}    exit on an add or update of a pod carrying it: the plugin
//	                              stays down (every restart traps in its replay) while one does
//
// Build (or `make plugins`):
//
//	GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o build/plugins/ns-counter.wasm ./plugins/examples/ns-counter
package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"strings"

	"github.com/informer-host/informer-host/abi"
	"github.com/informer-host/informer-host/abi/kit"
)

var pods = kit.Gauge("pods", "Pods by namespace and phase, as the ns-counter plugin counted them.", "namespace", "phase")

// phases are the values of status.phase, plus Unknown for a pod without
// one; every namespace exports all of them.
var phases = []string{"Pending", "Running", "Succeeded", "Failed", "Unknown"}

type pod struct{ ns, phase string }

// exportedPrefix prefixes the state key of every namespace the plugin has
// exported gauges for; the value is empty.
const exportedPrefix = "exported/"

type counter struct {
	synced bool                      // the initial list is handled: counts are whole
	stored map[string]bool           // namespaces known to have an exportedPrefix key
	of     map[string]pod            // pod key -> what was counted for it
	counts map[string]map[string]int // namespace -> phase -> pods
	failed bool                      // an update failed; logged once
}

func (c *counter) publish(ns, phase string) {
	if !c.synced {
		return
	}
	if !c.stored[ns] {
		// Remembered before the gauge is set: a series is never exported
		// without the plugin knowing to zero it later.
		if _, err := kit.State().Set(exportedPrefix+ns, nil); err != nil {
			c.warn("cannot remember exported namespace (is the state capability granted?): %v", err)
		} else {
			c.stored[ns] = true
		}
	}
	if err := pods.Set(float64(c.counts[ns][phase]), ns, phase); err != nil {
		c.warn("cannot export pod counts (is the metrics capability granted?): %v", err)
	}
}

func (c *counter) warn(format string, args ...any) {
	if !c.failed {
		c.failed = true
		kit.Warnf(format, args...)
	}
}

// zeroGone sets every phase of each namespace in the state but no longer
// counted to 0, and forgets it; it runs once the initial list is handled.
func (c *counter) zeroGone() {
	st := kit.State()
	var gone []string
	for after := ""; ; {
		keys, err := st.List(exportedPrefix, after, abi.StateMaxList)
		if err != nil {
			c.warn("cannot list exported namespaces (is the state capability granted?): %v", err)
			return
		}
		for _, k := range keys {
			ns := strings.TrimPrefix(k, exportedPrefix)
			c.stored[ns] = true
			if c.counts[ns] == nil {
				gone = append(gone, ns)
			}
		}
		if len(keys) < abi.StateMaxList {
			break
		}
		after = keys[len(keys)-1]
	}
	for _, ns := range gone {
		for _, p := range phases {
			c.publish(ns, p)
		}
		if err := st.Delete(exportedPrefix + ns); err == nil {
			delete(c.stored, ns)
		}
	}
}

// set records that pod key is in namespace ns and phase ("" = gone).
func (c *counter) set(key, ns, phase string) {
	old, had := c.of[key]
	if had && old.phase == phase {
		return
	}
	if had {
		c.counts[ns][old.phase]--
		c.publish(ns, old.phase)
	}
	if phase == "" {
		delete(c.of, key)
		return
	}
	c.of[key] = pod{ns, phase}
	if c.counts[ns] == nil {
		c.counts[ns] = map[string]int{}
	}
	c.counts[ns][phase]++
	c.publish(ns, phase)
}

func init() {
	c := &counter{of: map[string]pod{}, counts: map[string]map[string]int{}, stored: map[string]bool{}}
	var cfg struct {
		CrashOn string `json:"crashOn"`
		HoldOn  string `json:"holdOn"`
	}
	kit.OnInit(func(raw []byte) error {
		if len(bytes.TrimSpace(raw)) > 0 {
			dec := json.NewDecoder(bytes.NewReader(raw))
			dec.DisallowUnknownFields()
			if err := dec.Decode(&cfg); err != nil {
				return fmt.Errorf("config: %w", err)
			}
		}
		return nil
	})
	kit.Handle(func(ev *kit.Event) error {
		key, ns := ev.Key(), ev.Namespace()
		switch ev.Type() {
		case kit.Add, kit.Update:
			if cfg.CrashOn != "" && ev.Type() == kit.Update && annotated(ev, cfg.CrashOn) ||
				cfg.HoldOn != "" && annotated(ev, cfg.HoldOn) {
				// A kit handler's panic is recovered into an ERROR
				// result; exiting is a trap, which is what a test of
				// restarts needs.
				kit.Errorf("crash requested by an annotation")
				os.Exit(3)
			}
			phase, ok := ev.Get("status.phase")
			if !ok || phase == "" {
				phase = "Unknown"
			}
			c.set(key, ns, phase)
		case kit.Delete:
			c.set(key, ns, "")
		}
		return nil
	})
	kit.OnSynced(func(kit.Resource) {
		c.synced = true
		c.zeroGone()
		for ns := range c.counts {
			for _, p := range phases {
				c.publish(ns, p)
			}
		}
	})
}

func annotated(ev *kit.Event, annotation string) bool {
	_, ok := ev.Get(`metadata.annotations["` + annotation + `"]`)
	return ok
}

func main() {}
