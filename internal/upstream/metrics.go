package upstream

import (
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/informer-host/informer-host/abi"
)

// metrics are the Set's Prometheus metrics, per plugin and upstream.
// Labels are file and upstream names from config.yaml and fixed words, so
// cardinality is bounded by the config.
type metrics struct {
	requests *prometheus.CounterVec
	latency  *prometheus.HistogramVec
}

func newMetrics() *metrics {
	return &metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "informer_host_plugin_http_requests_total",
			Help: "HTTP requests plugins made to upstreams, by result: the status class (2xx..5xx) or the error code's name (timeout, unavailable, too_large, rate_limited, canceled).",
		}, []string{"plugin", "upstream", "result"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "informer_host_plugin_http_request_seconds",
			Help:    "Time of plugins' HTTP requests to upstreams, from the request to the whole response body (errors included).",
			Buckets: prometheus.ExponentialBuckets(100e-6, 4, 10),
		}, []string{"plugin", "upstream"}),
	}
}

func (m *metrics) observe(plugin, upstream string, code int32, d time.Duration) {
	m.requests.WithLabelValues(plugin, upstream, result(code)).Inc()
	m.latency.WithLabelValues(plugin, upstream).Observe(d.Seconds())
}

func (m *metrics) forget(plugin string) {
	m.requests.DeletePartialMatch(prometheus.Labels{"plugin": plugin})
	m.latency.DeletePartialMatch(prometheus.Labels{"plugin": plugin})
}

// result is the result label of a Do outcome.
func result(code int32) string {
	switch {
	case code >= 100 && code < 600:
		return strconv.Itoa(int(code/100)) + "xx"
	case code == abi.ErrTimeout:
		return "timeout"
	case code == abi.ErrTooLarge:
		return "too_large"
	case code == abi.ErrCanceled:
		return "canceled"
	case code == abi.ErrRateLimited:
		return "rate_limited"
	}
	return "unavailable"
}

// Describe implements prometheus.Collector.
func (s *Set) Describe(ch chan<- *prometheus.Desc) {
	s.metrics.requests.Describe(ch)
	s.metrics.latency.Describe(ch)
}

// Collect implements prometheus.Collector.
func (s *Set) Collect(ch chan<- prometheus.Metric) {
	s.metrics.requests.Collect(ch)
	s.metrics.latency.Collect(ch)
}
