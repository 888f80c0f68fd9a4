package reconcile

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/util/workqueue"
)

// The values of controller_runtime_reconcile_total's result label, as
// controller-runtime sets them.
const (
	ResultSuccess      = "success"       // OK with no requeue-after
	ResultError        = "error"         // ERROR, a trap, a timeout
	ResultRequeue      = "requeue"       // RETRY: back through the rate limiter
	ResultRequeueAfter = "requeue_after" // OK with a requeue-after
)

// Metrics holds the controller-mode series of every controller plugin
// of a host, under controller-runtime's names and labels (see the
// package documentation). It is a prometheus.Collector: the host
// registers it once; nothing is registered globally.
type Metrics struct {
	reconcileTotal  *prometheus.CounterVec
	reconcileErrors *prometheus.CounterVec
	terminalErrors  *prometheus.CounterVec
	panics          *prometheus.CounterVec
	timeouts        *prometheus.CounterVec
	reconcileTime   *prometheus.HistogramVec
	maxConcurrent   *prometheus.GaugeVec
	activeWorkers   *prometheus.GaugeVec

	depth          *prometheus.GaugeVec
	adds           *prometheus.CounterVec
	latency        *prometheus.HistogramVec
	workDuration   *prometheus.HistogramVec
	unfinished     *prometheus.GaugeVec
	longestRunning *prometheus.GaugeVec
	retries        *prometheus.CounterVec
}

// NewMetrics returns empty metrics.
func NewMetrics() *Metrics {
	ctl := []string{"controller"}
	wq := []string{"name", "controller"}
	return &Metrics{
		reconcileTotal: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "controller_runtime_reconcile_total",
			Help: "Total number of reconciliations per controller",
		}, []string{"controller", "result"}),
		reconcileErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "controller_runtime_reconcile_errors_total",
			Help: "Total number of reconciliation errors per controller",
		}, ctl),
		terminalErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "controller_runtime_terminal_reconcile_errors_total",
			Help: "Total number of terminal reconciliation errors per controller",
		}, ctl),
		panics: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "controller_runtime_reconcile_panics_total",
			Help: "Total number of reconciliation panics per controller",
		}, ctl),
		timeouts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "controller_runtime_reconcile_timeouts_total",
			Help: "Total number of reconciliation timeouts per controller",
		}, ctl),
		reconcileTime: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "controller_runtime_reconcile_time_seconds",
			Help: "Length of time per reconciliation per controller",
			Buckets: []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0,
				1.25, 1.5, 1.75, 2.0, 2.5, 3.0, 3.5, 4.0, 4.5, 5, 6, 7, 8, 9, 10, 15, 20, 25, 30, 40, 50, 60},
			NativeHistogramBucketFactor:     1.1,
			NativeHistogramMaxBucketNumber:  100,
			NativeHistogramMinResetDuration: time.Hour,
		}, ctl),
		maxConcurrent: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "controller_runtime_max_concurrent_reconciles",
			Help: "Maximum number of concurrent reconciles per controller",
		}, ctl),
		activeWorkers: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "controller_runtime_active_workers",
			Help: "Number of currently used workers per controller",
		}, ctl),

		depth: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Subsystem: "workqueue", Name: "depth",
			Help: "Current depth of workqueue by workqueue and priority",
		}, []string{"name", "controller", "priority"}),
		adds: prometheus.NewCounterVec(prometheus.CounterOpts{
			Subsystem: "workqueue", Name: "adds_total",
			Help: "Total number of adds handled by workqueue",
		}, wq),
		latency: workqueueHistogram("queue_duration_seconds",
			"How long in seconds an item stays in workqueue before being requested"),
		workDuration: workqueueHistogram("work_duration_seconds",
			"How long in seconds processing an item from workqueue takes."),
		unfinished: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Subsystem: "workqueue", Name: "unfinished_work_seconds",
			Help: "How many seconds of work has been done that " +
				"is in progress and hasn't been observed by work_duration. Large " +
				"values indicate stuck threads. One can deduce the number of stuck " +
				"threads by observing the rate at which this increases.",
		}, wq),
		longestRunning: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Subsystem: "workqueue", Name: "longest_running_processor_seconds",
			Help: "How many seconds has the longest running " +
				"processor for workqueue been running.",
		}, wq),
		retries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Subsystem: "workqueue", Name: "retries_total",
			Help: "Total number of items added to the workqueue with a non-zero delay (rate-limited requeues, explicit RequeueAfter or AddAfter calls)",
		}, wq),
	}
}

// workqueueHistogram is one of the workqueue's two duration histograms,
// with controller-runtime's buckets: 10ns to 10⁴s, a factor 10 apart.
func workqueueHistogram(name, help string) *prometheus.HistogramVec {
	return prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Subsystem:                       "workqueue",
		Name:                            name,
		Help:                            help,
		Buckets:                         prometheus.ExponentialBuckets(10e-9, 10, 12),
		NativeHistogramBucketFactor:     1.1,
		NativeHistogramMaxBucketNumber:  100,
		NativeHistogramMinResetDuration: time.Hour,
	}, []string{"name", "controller"})
}

func (m *Metrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{
		m.reconcileTotal, m.reconcileErrors, m.terminalErrors, m.panics, m.timeouts,
		m.reconcileTime, m.maxConcurrent, m.activeWorkers,
		m.depth, m.adds, m.latency, m.workDuration, m.unfinished, m.longestRunning, m.retries,
	}
}

// Describe implements prometheus.Collector.
func (m *Metrics) Describe(ch chan<- *prometheus.Desc) {
	for _, c := range m.collectors() {
		c.Describe(ch)
	}
}

// Collect implements prometheus.Collector.
func (m *Metrics) Collect(ch chan<- prometheus.Metric) {
	for _, c := range m.collectors() {
		c.Collect(ch)
	}
}

// ObserveReconcile counts one reconcile call of controller that took d,
// with result one of ResultSuccess, ResultError, ResultRequeue and
// ResultRequeueAfter; ResultError counts as an error too, as in
// controller-runtime.
func (m *Metrics) ObserveReconcile(controller, result string, d time.Duration) {
	m.reconcileTotal.WithLabelValues(controller, result).Inc()
	if result == ResultError {
		m.reconcileErrors.WithLabelValues(controller).Inc()
	}
	m.reconcileTime.WithLabelValues(controller).Observe(d.Seconds())
}

// ObserveTerminalError counts an error that is not retried (DROP with an
// error message); call it besides ObserveReconcile(…, ResultError, …).
func (m *Metrics) ObserveTerminalError(controller string) {
	m.terminalErrors.WithLabelValues(controller).Inc()
}

// ObservePanic counts a trap: the WebAssembly analogue of a reconciler's
// panic, which controller-runtime counts in reconcile_panics_total;
// call it besides ObserveReconcile(…, ResultError, …).
func (m *Metrics) ObservePanic(controller string) {
	m.panics.WithLabelValues(controller).Inc()
}

// ObserveTimeout counts a call stopped at its deadline; call it besides
// ObserveReconcile(…, ResultError, …).
func (m *Metrics) ObserveTimeout(controller string) {
	m.timeouts.WithLabelValues(controller).Inc()
}

// SetMaxConcurrentReconciles sets how many workers controller has.
func (m *Metrics) SetMaxConcurrentReconciles(controller string, n int) {
	m.maxConcurrent.WithLabelValues(controller).Set(float64(n))
}

// WorkerActive marks one of controller's workers busy until the returned
// function is called.
func (m *Metrics) WorkerActive(controller string) (idle func()) {
	g := m.activeWorkers.WithLabelValues(controller)
	g.Inc()
	return g.Dec
}

// Forget removes every series of controller: its plugin is gone. Shut its
// queue down first, or the queue's metrics goroutine may bring some back.
func (m *Metrics) Forget(controller string) {
	l := prometheus.Labels{"controller": controller}
	for _, c := range m.collectors() {
		// Every collector is a metric vector with a controller label.
		c.(interface{ DeletePartialMatch(prometheus.Labels) int }).DeletePartialMatch(l)
	}
}

// provider is the workqueue.MetricsProvider of controller's queue: its
// series carry name and controller, both the plugin's name, as
// controller-runtime's provider sets them.
func (m *Metrics) provider(controller string) workqueue.MetricsProvider {
	return queueMetrics{m: m, controller: controller}
}

type queueMetrics struct {
	m          *Metrics
	controller string
}

func (p queueMetrics) NewDepthMetric(name string) workqueue.GaugeMetric {
	return p.m.depth.WithLabelValues(name, p.controller, "")
}

func (p queueMetrics) NewAddsMetric(name string) workqueue.CounterMetric {
	return p.m.adds.WithLabelValues(name, p.controller)
}

func (p queueMetrics) NewLatencyMetric(name string) workqueue.HistogramMetric {
	return p.m.latency.WithLabelValues(name, p.controller)
}

func (p queueMetrics) NewWorkDurationMetric(name string) workqueue.HistogramMetric {
	return p.m.workDuration.WithLabelValues(name, p.controller)
}

func (p queueMetrics) NewUnfinishedWorkSecondsMetric(name string) workqueue.SettableGaugeMetric {
	return p.m.unfinished.WithLabelValues(name, p.controller)
}

func (p queueMetrics) NewLongestRunningProcessorSecondsMetric(name string) workqueue.SettableGaugeMetric {
	return p.m.longestRunning.WithLabelValues(name, p.controller)
}

func (p queueMetrics) NewRetriesMetric(name string) workqueue.CounterMetric {
	return p.m.retries.WithLabelValues(name, p.controller)
}
