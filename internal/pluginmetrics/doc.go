// Package pluginmetrics holds the metrics plugins declare and update
// through the metric_* host functions (ABI.md §16.3), and exports them to
// Prometheus next to the host's own.
//
// A Registry is one prometheus.Collector for every plugin. It keeps one Set
// per plugin file; a Set outlives the plugin's instances, so a restarted or
// reloaded plugin that declares a metric again with the same shape (kind,
// help, label keys, buckets) gets the same metric back with its values. A
// declaration with another shape replaces the metric and drops its series;
// Forget drops a removed plugin's Set.
//
// Each instance talks to its Set through a View (Set.Instance), which maps
// the small integer ids the plugin holds to metrics. Ids are per instance,
// so an old instance still running during a reload can never reach a
// metric its successor redeclared. The hot path (View.Add and friends) is
// an id index, a map lookup keyed by the raw label bytes the plugin passed
// (no allocation once a series exists), and an atomic update.
//
// Everything a plugin can make the host hold is bounded: metrics per
// plugin (MaxMetrics), label keys (MaxLabels), label bytes per update
// (MaxLabelBytes), buckets (MaxBuckets), and series per plugin (the grant's
// maxSeries). An update that would create a series past the cap is dropped
// and counted in informer_host_plugin_metrics_dropped_total.
//
// Rule of direction: pluginmetrics imports abi (for the codes) and
// Prometheus; host and host/replay import it.
package pluginmetrics
