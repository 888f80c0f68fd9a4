//go:build wasip1

// Command pod-phases is a stateful informer-host plugin: it counts pods per
// phase in every namespace and logs the counts of a namespace whenever
// they change.
//
// It handles everything an informer delivers: the adds of the initial list
// (also after a restart of the plugin, when the host replays its cache to
// the fresh instance), updates that move a pod from one phase to another,
// and deletes, including those the watch missed (finalStateUnknown), for
// which it trusts its own record of the pod's phase over the stale object.
//
// Counts are partial until the initial list is in: the plugin stays quiet
// until the host says it has handled all of it (kit.OnSynced), then logs
// every namespace's counts once, and from then on each change.
//
// Configuration (JSON, optional):
//
//	{"logEvery": 1}   log every Nth change of a namespace's counts (default 1)
//
// Build (or `make plugins`):
//
//	GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o build/plugins/pod-phases.wasm ./plugins/examples/pod-phases
package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/informer-host/informer-host/abi/kit"
)

type config struct {
	LogEvery int `json:"logEvery"`
}

type counter struct {
	logEvery int
	synced   bool                      // the initial list is handled: counts are whole
	phaseOf  map[string]string         // pod key -> phase counted for it
	counts   map[string]map[string]int // namespace -> phase -> pods
	changes  map[string]int            // namespace -> changes since the last log
}

func newCounter(logEvery int) *counter {
	return &counter{
		logEvery: logEvery,
		phaseOf:  map[string]string{},
		counts:   map[string]map[string]int{},
		changes:  map[string]int{},
	}
}

// set records that pod key in namespace ns is in phase ("" = gone).
func (c *counter) set(ns, key, phase string) {
	old, had := c.phaseOf[key]
	if had && old == phase {
		return
	}
	m := c.counts[ns]
	if m == nil {
		m = map[string]int{}
		c.counts[ns] = m
	}
	if had {
		if m[old]--; m[old] == 0 {
			delete(m, old)
		}
	}
	if phase == "" {
		delete(c.phaseOf, key)
	} else {
		c.phaseOf[key] = phase
		m[phase]++
	}
	if len(m) == 0 {
		delete(c.counts, ns)
	}
	if !c.synced {
		return // a partial count says nothing yet
	}
	c.changes[ns]++
	if c.changes[ns] >= c.logEvery {
		c.changes[ns] = 0
		kit.Infof("namespace %s: %s", nsName(ns), c.summary(ns))
	}
}

// namespaces returns the namespaces with pods, sorted.
func (c *counter) namespaces() []string {
	nss := make([]string, 0, len(c.counts))
	for ns := range c.counts {
		nss = append(nss, ns)
	}
	sort.Strings(nss)
	return nss
}

func nsName(ns string) string {
	if ns == "" {
		return "(cluster)"
	}
	return ns
}

// summary renders "Pending=1 Running=3" in a stable order.
func (c *counter) summary(ns string) string {
	m := c.counts[ns]
	if len(m) == 0 {
		return "no pods"
	}
	phases := make([]string, 0, len(m))
	for p := range m {
		phases = append(phases, p)
	}
	sort.Strings(phases)
	var b strings.Builder
	for i, p := range phases {
		if i > 0 {
			b.WriteByte(' ')
		}
		fmt.Fprintf(&b, "%s=%d", p, m[p])
	}
	return b.String()
}

func init() {
	var c *counter
	kit.OnInit(func(raw []byte) error {
		cfg := config{LogEvery: 1}
		if len(bytes.TrimSpace(raw)) > 0 {
			dec := json.NewDecoder(bytes.NewReader(raw))
			dec.DisallowUnknownFields()
			if err := dec.Decode(&cfg); err != nil {
				return fmt.Errorf("config: %w", err)
			}
		}
		if cfg.LogEvery < 1 {
			return errors.New("config: logEvery must be at least 1")
		}
		c = newCounter(cfg.LogEvery)
		return nil
	})
	kit.Handle(func(ev *kit.Event) error {
		key, ns := ev.Key(), ev.Namespace()
		switch ev.Type() {
		case kit.Add, kit.Update:
			phase, ok := ev.Get("status.phase")
			if !ok || phase == "" {
				phase = "Unknown"
			}
			c.set(ns, key, phase)
		case kit.Delete:
			c.set(ns, key, "")
		}
		return nil
	})
	kit.OnSynced(func(res kit.Resource) {
		// Once per instance, and again after the host repaired the
		// plugin's view following a buffer overflow.
		c.synced = true
		kit.Infof("initial list of %s handled: %d pods in %d namespaces", res.Name, len(c.phaseOf), len(c.counts))
		for _, ns := range c.namespaces() {
			kit.Infof("namespace %s: %s", nsName(ns), c.summary(ns))
		}
	})
	kit.OnShutdown(func() {
		for _, ns := range c.namespaces() {
			kit.Infof("final: namespace %s: %s", nsName(ns), c.summary(ns))
		}
	})
}

func main() {}
