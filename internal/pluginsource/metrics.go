package pluginsource

import "github.com/prometheus/client_golang/prometheus"

var (
	descPulls = prometheus.NewDesc("informer_host_plugin_source_pulls_total",
		"Attempts to bring a sourced plugin in step with its source, by result: pulled (a new version loaded), "+
			"unchanged (the source names the running version), cached (started from the source cache), failed, "+
			"unloaded (a running version the current verify policy does not verify was unloaded, under verify.required).",
		[]string{"plugin", "result"}, nil)
	descDegraded = prometheus.NewDesc("informer_host_plugin_source_degraded",
		"1 while the plugin's last attempt at its source failed (the last good version, if any, keeps running).",
		[]string{"plugin"}, nil)
	descNoGood = prometheus.NewDesc("informer_host_plugin_source_running",
		"1 when the host runs a version of the plugin from its source, 0 while it has no good version.",
		[]string{"plugin"}, nil)
)

// Describe implements prometheus.Collector. The labels are the configured
// sourced plugins' names and five results: bounded by the config.
func (m *Manager) Describe(ch chan<- *prometheus.Desc) {
	ch <- descPulls
	ch <- descDegraded
	ch <- descNoGood
}

// Collect implements prometheus.Collector.
func (m *Manager) Collect(ch chan<- prometheus.Metric) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for name, st := range m.status {
		for _, r := range []string{"pulled", "unchanged", "cached", "failed", "unloaded"} {
			ch <- prometheus.MustNewConstMetric(descPulls, prometheus.CounterValue, float64(m.pulls[name][r]), name, r)
		}
		ch <- prometheus.MustNewConstMetric(descDegraded, prometheus.GaugeValue, b2f(st.Degraded), name)
		ch <- prometheus.MustNewConstMetric(descNoGood, prometheus.GaugeValue, b2f(st.RunningDigest != ""), name)
	}
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
