package kit

import (
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/informer-host/informer-host/abi"
)

// metricsAPI is the metric_* imports (ABI.md §16.3). It is separate from
// hostAPI so a host stand-in without metrics need not implement it.
type metricsAPI interface {
	metricDeclare(kind int32, decl []byte) int32
	metricAdd(id int32, v float64, labels []byte) int32
	metricSet(id int32, v float64, labels []byte) int32
	metricObserve(id int32, v float64, labels []byte) int32
}

// Metric is a metric the plugin declared with Counter, Gauge or
// Histogram. It is declared with the host on first use, so it can be a
// package-level variable; a fresh instance (after a trap, a restart or a
// reload) declares it again and, when the declaration is unchanged, gets
// the same metric with its values.
//
// The host exports it as informer_host_plugin_metric_<name> with the
// plugin's file name as label "plugin" and the declared label keys, in
// the order given, taking values in the same order. Updates return nil,
// or a *CallError naming the function and the metric (errors.Is matches
// its code): ERR_DENIED when the operator did not grant metrics,
// ERR_INVALID for a bad declaration, value or label count, ERR_EXISTS when
// another plugin exports the name with another kind or help, ERR_QUOTA
// for a declaration or a new series past the plugin's byte budget (ABI
// v1.3). An update the host drops because the plugin's series cap is
// reached returns ErrDropped.
type Metric struct {
	name string
	kind int32
	decl []byte
	n    int   // label keys
	id   int32 // -1 until declared; a negative code once declaring failed
	// declErr is the error of the failed declaration, made once: every
	// update of the metric returns it.
	declErr error
	buf     []byte
	// hosts is the plugin's hosts count when id was declared: a metric is
	// declared again with a host swapped in later (kit.UseNative).
	hosts int
}

// ErrDropped is returned by an update the host dropped: it would have
// created a series past the plugin's maxSeries (the host counts these).
var ErrDropped = HostError(abi.MetricDropped)

// Counter declares a counter: a value that only goes up. Name and label
// keys follow Prometheus' rules (letters, digits and '_'; not "plugin").
func Counter(name, help string, labels ...string) *Metric {
	return newMetric(abi.MetricCounter, name, help, labels, nil)
}

// Gauge declares a gauge: a value that goes up and down.
func Gauge(name, help string, labels ...string) *Metric {
	return newMetric(abi.MetricGauge, name, help, labels, nil)
}

// Histogram declares a histogram with the given upper bounds (increasing;
// nil selects Prometheus' defaults).
func Histogram(name, help string, buckets []float64, labels ...string) *Metric {
	return newMetric(abi.MetricHistogram, name, help, labels, buckets)
}

func newMetric(kind int32, name, help string, labels []string, buckets []float64) *Metric {
	b := []byte(`{"name":`)
	b = appendJSONString(b, name)
	b = append(b, `,"help":`...)
	b = appendJSONString(b, help)
	b = append(b, `,"labels":[`...)
	for i, l := range labels {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendJSONString(b, l)
	}
	b = append(b, ']')
	if kind == abi.MetricHistogram && len(buckets) > 0 {
		b = append(b, `,"buckets":[`...)
		for i, x := range buckets {
			if i > 0 {
				b = append(b, ',')
			}
			b = strconv.AppendFloat(b, x, 'g', -1, 64)
		}
		b = append(b, ']')
	}
	b = append(b, '}')
	return &Metric{name: name, kind: kind, decl: b, n: len(labels), id: -1 << 16}
}

// appendJSONString appends s as a JSON string.
func appendJSONString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '"' || c == '\\':
			b = append(b, '\\', c)
		case c < 0x20:
			b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&15])
		default:
			b = append(b, c)
		}
	}
	return append(b, '"')
}

// Add adds v to a counter (v >= 0) or a gauge.
func (m *Metric) Add(v float64, labelValues ...string) error {
	return m.update(abi.ImportMetricAdd, metricsAPI.metricAdd, v, labelValues)
}

// Set sets a gauge to v.
func (m *Metric) Set(v float64, labelValues ...string) error {
	return m.update(abi.ImportMetricSet, metricsAPI.metricSet, v, labelValues)
}

// Observe records v in a histogram.
func (m *Metric) Observe(v float64, labelValues ...string) error {
	return m.update(abi.ImportMetricObserve, metricsAPI.metricObserve, v, labelValues)
}

func (m *Metric) update(fn string, op func(metricsAPI, int32, float64, []byte) int32, v float64, values []string) error {
	api, ok := the.host.(metricsAPI)
	if !ok {
		return &CallError{Func: abi.ImportMetricDeclare, Call: m.name, Code: abi.ErrDenied, Message: "the host has no metric imports"}
	}
	if m.id == -1<<16 || m.hosts != the.hosts {
		m.id, m.hosts, m.declErr = api.metricDeclare(m.kind, m.decl), the.hosts, nil
		if m.id < 0 {
			m.declErr = &CallError{Func: abi.ImportMetricDeclare, Call: m.name, Code: m.id}
		}
	}
	if m.id < 0 {
		return m.declErr
	}
	if len(values) != m.n {
		return &CallError{Func: fn, Call: m.name, Code: abi.ErrInvalid,
			Message: strconv.Itoa(len(values)) + " label values for " + strconv.Itoa(m.n) + " label keys"}
	}
	// The host takes the values separated by a zero byte.
	b := m.buf[:0]
	for i, s := range values {
		if strings.IndexByte(s, 0) >= 0 || !utf8.ValidString(s) {
			return &CallError{Func: fn, Call: m.name, Code: abi.ErrInvalid,
				Message: "label value " + strconv.Itoa(i+1) + " is not UTF-8 without zero bytes"}
		}
		if i > 0 {
			b = append(b, 0)
		}
		b = append(b, s...)
	}
	m.buf = b
	switch rc := op(api, m.id, v, b); {
	case rc == abi.MetricDropped:
		return ErrDropped
	case rc < 0:
		return &CallError{Func: fn, Call: m.name, Code: rc}
	}
	return nil
}
