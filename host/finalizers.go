package host

import (
	"context"
	"maps"
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/informer-host/informer-host/internal/config"
)

// A controller's managed finalizer outlives the controller when a config
// reload takes the controller away while its plugin stays: the
// `controller:` block removed (the plugin back in event mode, a sourced
// plugin's entry dropped, whose plugin runs under the defaults until its
// source unloads it), or the finalizer renamed. Nothing would ever take
// the old finalizer off again, so the controller's onRemove decides, as
// for a removed file: release frees the objects once the generation that
// managed it has stopped (it could add the finalizer again until then);
// keep leaves it, with a warning, and the objects being deleted that wait
// on it are counted in informer_host_controller_finalizer_stuck until a
// later config manages that finalizer again or the daemon restarts (its
// config no longer names the finalizer then: `informer-host finalizers
// release` with the old config frees them).

// finalizerHandoff is one reload's end of a managed finalizer.
type finalizerHandoff struct {
	h    *Host
	name string
	ctl  *config.Controller // the controller that managed the finalizer
	old  *generation        // its generation; nil when none runs
	// release frees the objects (onRemove: release with a writes client);
	// nil keeps the finalizer.
	release func(context.Context)
}

// finalizerDropped returns the controller of was whose managed finalizer
// cur does not manage, nil when there is none.
func finalizerDropped(was, cur config.PluginSettings) *config.Controller {
	c := was.Controller
	if c == nil || c.Finalizer == "" {
		return nil
	}
	if n := cur.Controller; n != nil && n.Finalizer == c.Finalizer && n.For == c.For {
		return nil
	}
	return c
}

// handoffFor prepares what becomes of plugin name's managed finalizer if
// the reload from was to cur goes through; nil when cur still manages it.
// Taken before the reload, while the managing generation and its writes
// client are there.
func handoffFor(h *Host, name string, was, cur config.PluginSettings) *finalizerHandoff {
	c := finalizerDropped(was, cur)
	if c == nil {
		return nil
	}
	f := &finalizerHandoff{h: h, name: name, ctl: c}
	h.mu.Lock()
	slot := h.slots[name]
	h.mu.Unlock()
	if slot != nil {
		slot.mu.Lock()
		f.old = slot.current
		slot.mu.Unlock()
	}
	if c.OnRemove == config.OnRemoveRelease {
		f.release = finalizerRelease(h, name, "the controller's finalizer is no longer managed (controller removed or finalizer renamed)")
	}
	return f
}

// settle runs once the reload went through: it waits (until ctx ends)
// for the managing generation to stop, then releases the finalizer or
// keeps it, reported.
func (f *finalizerHandoff) settle(ctx context.Context) {
	h := f.h
	if f.old != nil {
		h.mu.Lock()
		done := h.retiring[f.old]
		h.mu.Unlock()
		if done != nil {
			select {
			case <-done:
			case <-ctx.Done():
			}
		}
	}
	if f.release != nil {
		f.release(ctx)
		return
	}
	h.orphans.add(f.name, f.ctl)
	h.log.Warn("plugin's controller no longer manages its finalizer (controller removed or finalizer renamed); with onRemove: keep "+
		"it stays on the objects and holds those being deleted (informer_host_controller_finalizer_stuck); "+
		"`informer-host finalizers release` with the earlier config frees them",
		"plugin", f.name, "finalizer", f.ctl.Finalizer, "resource", f.ctl.For)
}

// orphanedFinalizers are the finalizers controllers left behind with
// onRemove: keep while their plugins stayed, by plugin and finalizer.
type orphanedFinalizers struct {
	mu sync.Mutex
	m  map[orphanKey]*config.Controller
}

type orphanKey struct{ plugin, finalizer string }

func newOrphanedFinalizers() *orphanedFinalizers {
	return &orphanedFinalizers{m: map[orphanKey]*config.Controller{}}
}

func (o *orphanedFinalizers) add(plugin string, c *config.Controller) {
	o.mu.Lock()
	o.m[orphanKey{plugin, c.Finalizer}] = c
	o.mu.Unlock()
}

// adopted forgets the finalizer plugin's settings s manage again.
func (o *orphanedFinalizers) adopted(plugin string, s config.PluginSettings) {
	if s.Controller == nil || s.Controller.Finalizer == "" {
		return
	}
	o.mu.Lock()
	delete(o.m, orphanKey{plugin, s.Controller.Finalizer})
	o.mu.Unlock()
}

// collect reports informer_host_controller_finalizer_stuck for every
// orphaned finalizer not in emitted (reported already), from the caches.
func (o *orphanedFinalizers) collect(h *Host, emitted map[orphanKey]bool, ch chan<- prometheus.Metric) {
	o.mu.Lock()
	m := maps.Clone(o.m)
	o.mu.Unlock()
	for k, c := range m {
		if !emitted[k] {
			ch <- prometheus.MustNewConstMetric(descFinalizerStuck, prometheus.GaugeValue, float64(stuckOn(h.pipeline, c)), k.plugin, k.finalizer)
		}
	}
}
