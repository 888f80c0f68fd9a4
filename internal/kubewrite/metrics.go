package kubewrite

import (
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/informer-host/informer-host/abi"
)

// metrics are the Client's Prometheus metrics, per plugin, verb and
// granted resource: labels are file names, the grant's resource strings
// and fixed words, so cardinality is bounded by the config.
type metrics struct {
	writes  *prometheus.CounterVec
	latency *prometheus.HistogramVec
}

func newMetrics() *metrics {
	return &metrics{
		writes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "informer_host_plugin_writes_total",
			Help: "Kubernetes writes plugins sent (k8s_write), by verb (create, patch, apply, delete), granted resource and result: ok or the error code's name (conflict, field_conflict, absent, rate_limited, timeout, ...).",
		}, []string{"plugin", "verb", "resource", "result"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "informer_host_plugin_write_seconds",
			Help:    "Time of plugins' Kubernetes writes, from the call to the apiserver's answer, the wait for the plugin's rate limit included (errors included).",
			Buckets: prometheus.ExponentialBuckets(100e-6, 4, 10),
		}, []string{"plugin", "verb", "resource"}),
	}
}

func (m *metrics) observe(plugin, verb, resource string, code int32, d time.Duration) {
	if verb == "" {
		verb = "unknown"
	}
	m.writes.WithLabelValues(plugin, verb, resource, Result(code)).Inc()
	m.latency.WithLabelValues(plugin, verb, resource).Observe(d.Seconds())
}

// Result is the result label of a code: "ok" for 0, else the code's ABI
// name in lower case without "ERR_" ("field_conflict").
func Result(code int32) string {
	if code >= 0 {
		return "ok"
	}
	if n := abi.ErrorName(code); n != "" {
		return strings.ToLower(strings.TrimPrefix(n, "ERR_"))
	}
	return "unknown"
}

// Forget drops a removed plugin's series.
func (c *Client) Forget(plugin string) {
	c.metrics.writes.DeletePartialMatch(prometheus.Labels{"plugin": plugin})
	c.metrics.latency.DeletePartialMatch(prometheus.Labels{"plugin": plugin})
}

// Describe implements prometheus.Collector.
func (c *Client) Describe(ch chan<- *prometheus.Desc) {
	c.metrics.writes.Describe(ch)
	c.metrics.latency.Describe(ch)
}

// Collect implements prometheus.Collector.
func (c *Client) Collect(ch chan<- prometheus.Metric) {
	c.metrics.writes.Collect(ch)
	c.metrics.latency.Collect(ch)
}
