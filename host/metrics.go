package host

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/informer-host/informer-host/host/internal/engine"
	"github.com/informer-host/informer-host/internal/pluginmetrics"
)

// metrics are the host's Prometheus metrics. Counters and gauges are read
// from the plugin slots when scraped (a Collector), so the event path only
// pays for the two histograms. Labels are the plugin's file name and fixed
// words: never an object's name, so cardinality is bounded by the number
// of plugin files.
type metrics struct {
	wait, handle, filter *prometheus.HistogramVec
	// denied counts capability calls refused with ERR_DENIED.
	denied *prometheus.CounterVec
}

// latencyBuckets span 10µs to ~10s: a no-op Wasm call is microseconds, a
// Go plugin decoding a Pod hundreds of microseconds, a deadline a second.
var latencyBuckets = prometheus.ExponentialBuckets(10e-6, 4, 11)

func newMetrics() *metrics {
	return &metrics{
		wait: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "informer_host_plugin_queue_wait_seconds", Help: "Time an event waited in the plugin's buffer before the plugin was called.",
			Buckets: latencyBuckets,
		}, []string{"plugin"}),
		handle: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "informer_host_plugin_handle_seconds", Help: "Time the plugin spent handling one event (one ih_handle call).",
			Buckets: latencyBuckets,
		}, []string{"plugin"}),
		filter: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "informer_host_filter_decide_seconds", Help: "Time a binding's filter took to decide on one event (memo hits included).",
			Buckets: prometheus.ExponentialBuckets(100e-9, 4, 10),
		}, []string{"plugin"}),
		denied: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "informer_host_plugin_denied_total", Help: "Host function calls refused with ERR_DENIED because the capability (or the resource or index) is not granted to the plugin.",
		}, []string{"plugin", "capability"}),
	}
}

// slotObservers are a slot's histogram children, looked up once per slot
// rather than once per event.
type slotObservers struct {
	wait, handle, filter prometheus.Observer
}

func (m *metrics) forSlot(name string) slotObservers {
	return slotObservers{wait: m.wait.WithLabelValues(name), handle: m.handle.WithLabelValues(name), filter: m.filter.WithLabelValues(name)}
}

func (m *metrics) forget(name string) {
	m.wait.DeleteLabelValues(name)
	m.handle.DeleteLabelValues(name)
	m.filter.DeleteLabelValues(name)
	m.denied.DeletePartialMatch(prometheus.Labels{"plugin": name})
}

var (
	descEvents = prometheus.NewDesc("informer_host_plugin_events_total",
		"Events the plugin handled, by result: ok, retry, drop, error (the plugin's answers), trap, timeout, memory, abi (failures), retry_exhausted (objects given up on after delivery.maxRetries).",
		[]string{"plugin", "result"}, nil)
	descDelivered = prometheus.NewDesc("informer_host_plugin_events_delivered_total",
		"ih_handle calls that returned a result.", []string{"plugin"}, nil)
	descDepth = prometheus.NewDesc("informer_host_plugin_buffer_depth",
		"Events waiting in the plugin's buffer, retries included.", []string{"plugin"}, nil)
	descCapacity = prometheus.NewDesc("informer_host_plugin_buffer_capacity",
		"The plugin's buffer cap (delivery.bufferSize): once buffer_depth minus retrying reaches it, each new event drops the oldest.", []string{"plugin"}, nil)
	descBufferDrops = prometheus.NewDesc("informer_host_plugin_buffer_dropped_total",
		"Events dropped because the plugin's buffer was full; the plugin is then repaired from the cache.", []string{"plugin"}, nil)
	descCoalesced = prometheus.NewDesc("informer_host_plugin_buffer_coalesced_total",
		"Events merged into a waiting event of the same object (delivery mode latest).", []string{"plugin"}, nil)
	descRestarts = prometheus.NewDesc("informer_host_plugin_restarts_total",
		"Fresh instances started after a failure.", []string{"plugin"}, nil)
	descSuperseded = prometheus.NewDesc("informer_host_plugin_superseded_total",
		"Events not delivered: replaced by a replay of the cache when a fresh instance started, or older than what the plugin has.", []string{"plugin"}, nil)
	descReloads = prometheus.NewDesc("informer_host_plugin_reloads_total",
		"New versions of the plugin's file, by outcome: swapped or refused.", []string{"plugin", "outcome"}, nil)
	descFiltered = prometheus.NewDesc("informer_host_plugin_filtered_total",
		"Events a binding's filter kept from the plugin, by reason: filtered, unchanged, resync, generation, error.",
		[]string{"plugin", "binding", "reason"}, nil)
	descFilterErrors = prometheus.NewDesc("informer_host_plugin_filter_errors_total",
		"Filter evaluations that failed, whether the event was then delivered (onFilterError open) or not.",
		[]string{"plugin", "binding"}, nil)
	descDegraded = prometheus.NewDesc("informer_host_plugin_degraded",
		"1 from a buffer overflow (events dropped) until the plugin is repaired from the cache, else 0.", []string{"plugin"}, nil)
	descRepairs = prometheus.NewDesc("informer_host_plugin_repairs_total",
		"Repairs from the cache after a buffer overflow, of the plugin's current version.", []string{"plugin"}, nil)
	descReplay = prometheus.NewDesc("informer_host_plugin_replay_depth",
		"Objects waiting to be brought up to date from the cache (initial list, restart, repair).", []string{"plugin"}, nil)
	descRetrying = prometheus.NewDesc("informer_host_plugin_retrying",
		"Objects waiting out a retry's backoff before they are handed to the plugin again, parked ones included.", []string{"plugin"}, nil)
	descParked = prometheus.NewDesc("informer_host_plugin_parked",
		"Objects parked: the plugin failed on each limits.parkAfter times; not handed again until they change or their backoff ends.", []string{"plugin"}, nil)
	descSynced = prometheus.NewDesc("informer_host_plugin_synced",
		"1 once the plugin has handled the initial list of every binding, else 0.", []string{"plugin"}, nil)
	descState = prometheus.NewDesc("informer_host_plugin_state",
		"1 for the plugin's current state (loading, standby, running, restarting, quarantined, failed).", []string{"plugin", "state"}, nil)
)

var allStates = []PluginState{StateLoading, StateStandby, StateRunning, StateRestarting, StateQuarantined, StateFailed}

// Describe implements prometheus.Collector.
func (h *Host) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descEvents, descDelivered, descDepth, descCapacity, descBufferDrops, descCoalesced,
		descRestarts, descSuperseded, descReloads, descState, descFiltered, descFilterErrors,
		descDegraded, descRepairs, descReplay, descRetrying, descParked, descSynced, descFinalizerStuck} {
		ch <- d
	}
	h.metrics.wait.Describe(ch)
	h.metrics.handle.Describe(ch)
	h.metrics.filter.Describe(ch)
	h.metrics.denied.Describe(ch)
	describeShard(ch)
	describeState(ch)
	h.reconcileMetrics.Describe(ch)
	for _, c := range h.outbound.collectors() {
		c.Describe(ch)
	}
}

// Collect implements prometheus.Collector.
func (h *Host) Collect(ch chan<- prometheus.Metric) {
	counter := func(d *prometheus.Desc, v uint64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), labels...)
	}
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	st := h.Status()
	collectStuckFinalizers(h, st, ch)
	for _, s := range st {
		p, c := s.File, s.Counters
		for _, r := range []struct {
			result string
			v      uint64
		}{{"ok", c.OK}, {"retry", c.Retries}, {"drop", c.Dropped}, {"error", c.Errors}, {"trap", c.Traps},
			{"timeout", c.Timeouts}, {"memory", c.MemoryFailures}, {"abi", c.ABIFailures}, {"retry_exhausted", c.RetryExhausted}} {
			counter(descEvents, r.v, p, r.result)
		}
		counter(descDelivered, c.Delivered, p)
		ch <- prometheus.MustNewConstMetric(descDepth, prometheus.GaugeValue, float64(s.Queue.Depth), p)
		if s.Queue.Capacity > 0 {
			gauge(descCapacity, float64(s.Queue.Capacity), p)
		}
		counter(descBufferDrops, s.Queue.Dropped, p)
		counter(descCoalesced, s.Queue.Coalesced, p)
		counter(descRestarts, c.Restarts, p)
		gauge(descDegraded, b2f(s.Degraded), p)
		counter(descRepairs, s.Repairs, p)
		gauge(descReplay, float64(s.Queue.Replay), p)
		gauge(descRetrying, float64(s.Queue.Retrying), p)
		gauge(descParked, float64(len(s.Parked)), p)
		gauge(descSynced, b2f(s.Synced), p)
		counter(descSuperseded, c.Superseded, p)
		counter(descReloads, c.Reloads, p, "swapped")
		counter(descReloads, c.ReloadFailures, p, "refused")
		for b, f := range s.Filtered {
			counter(descFiltered, f.Filtered, p, b, "filtered")
			counter(descFiltered, f.Unchanged, p, b, "unchanged")
			counter(descFiltered, f.Resync, p, b, "resync")
			counter(descFiltered, f.Generation, p, b, "generation")
			counter(descFiltered, f.Error, p, b, "error")
			counter(descFilterErrors, f.EvalErrors, p, b)
		}
		for _, st := range allStates {
			v := 0.0
			if s.State == st {
				v = 1
			}
			ch <- prometheus.MustNewConstMetric(descState, prometheus.GaugeValue, v, p, string(st))
		}
	}
	h.metrics.wait.Collect(ch)
	h.metrics.handle.Collect(ch)
	h.metrics.filter.Collect(ch)
	h.metrics.denied.Collect(ch)
	h.collectShard(ch)
	h.reconcileMetrics.Collect(ch)
	h.collectState(ch)
	for _, c := range h.outbound.collectors() {
		c.Collect(ch)
	}
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

func since(t time.Time) float64 { return time.Since(t).Seconds() }

// PluginMetrics is the collector of the metrics plugins declare
// themselves (ABI.md §16.3), to be registered next to the Host.
func (h *Host) PluginMetrics() prometheus.Collector { return h.pluginMetrics }

// metricSet is a new instance's view of the plugin's own metrics, or nil
// (a nil interface, not a nil *View) when the grant is absent. A plugin
// that lost its grant loses the metrics it had.
func (g *generation) metricSet() engine.MetricSet {
	mg := g.settings.Grants.Metrics
	if mg == nil {
		g.slot.h.pluginMetrics.Forget(g.slot.name)
		return nil
	}
	lim := pluginmetrics.Limits{MaxSeries: mg.MaxSeries, MaxBytes: int64(mg.MaxBytes)}
	return g.slot.h.pluginMetrics.PluginLimits(g.slot.name, lim).Instance()
}
