package kubewrite

import (
	"context"
	"errors"
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
	// limited and limitWait count the requests that found the plugin's
	// write budget empty, and the time they waited for it: the writes
	// counter says a write failed rate_limited, these say how often the
	// budget held writes back before it came to that.
	limited   *prometheus.CounterVec
	limitWait *prometheus.CounterVec
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
		limited: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "informer_host_plugin_write_rate_limited_total",
			Help: "Requests of a plugin's writes client (its writes, retries and controller mode's fresh reads) that found its rate limit (grants.writes.qps, burst) without a token, by outcome: waited (for a token), refused (at once: the wait would outlast the write's timeout; the write fails rate_limited).",
		}, []string{"plugin", "outcome"}),
		limitWait: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "informer_host_plugin_write_rate_limit_wait_seconds_total",
			Help: "Time a plugin's writes client spent waiting for tokens of its rate limit (grants.writes.qps, burst).",
		}, []string{"plugin"}),
	}
}

// metered is a plugin's Budget as the rate limiter of its writes client,
// counting the requests it held back. The Budget itself stays plain, so
// one bucket shared by several clients counts each client's own waits.
type metered struct {
	*Budget
	waited, refused, seconds prometheus.Counter
}

func (m *metrics) meter(plugin string, b *Budget) *metered {
	return &metered{Budget: b, waited: m.limited.WithLabelValues(plugin, "waited"),
		refused: m.limited.WithLabelValues(plugin, "refused"), seconds: m.limitWait.WithLabelValues(plugin)}
}

// Wait implements flowcontrol.RateLimiter.
func (m *metered) Wait(ctx context.Context) error {
	d, err := m.wait(ctx)
	if rl := (*RateLimitedError)(nil); errors.As(err, &rl) {
		m.refused.Inc()
		return err
	}
	if d > 0 {
		m.waited.Inc()
		m.seconds.Add(d.Seconds())
	}
	return err
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
	c.metrics.limited.DeletePartialMatch(prometheus.Labels{"plugin": plugin})
	c.metrics.limitWait.DeletePartialMatch(prometheus.Labels{"plugin": plugin})
}

// Describe implements prometheus.Collector.
func (c *Client) Describe(ch chan<- *prometheus.Desc) {
	c.metrics.writes.Describe(ch)
	c.metrics.latency.Describe(ch)
	c.metrics.limited.Describe(ch)
	c.metrics.limitWait.Describe(ch)
}

// Collect implements prometheus.Collector.
func (c *Client) Collect(ch chan<- prometheus.Metric) {
	c.metrics.writes.Collect(ch)
	c.metrics.latency.Collect(ch)
	c.metrics.limited.Collect(ch)
	c.metrics.limitWait.Collect(ch)
}
