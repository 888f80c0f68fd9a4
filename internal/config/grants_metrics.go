package config

// MetricsGrant lets a plugin export metrics of its own on the host's
// /metrics (ABI.md §16.3).
type MetricsGrant struct {
	// MaxSeries caps the series the plugin's metrics may hold; updates
	// that would create more are dropped and counted in
	// informer_host_plugin_metrics_dropped_total. Default DefaultMaxSeries.
	MaxSeries int `yaml:"maxSeries" json:"maxSeries,omitempty"`
	// MaxBytes caps what the plugin's metrics add to a /metrics response
	// (names, label keys and values, help, as the text format writes
	// them); a declaration or a new series past it gets ERR_QUOTA.
	// Default DefaultMetricsMaxBytes.
	MaxBytes Size `yaml:"maxBytes" json:"maxBytes,omitempty"`
}

const (
	// DefaultMaxSeries is a plugin's series cap when its grant names none.
	DefaultMaxSeries = 1000
	// MaxMaxSeries bounds maxSeries: each series costs the host a few
	// hundred bytes and every scrape carries it.
	MaxMaxSeries = 100000
	// DefaultMetricsMaxBytes is a plugin's metrics byte budget when its
	// grant names none.
	DefaultMetricsMaxBytes Size = 1 << 20
	// MinMetricsMaxBytes and MaxMetricsMaxBytes bound maxBytes: below the
	// minimum a plugin cannot declare its 128 metrics; every scrape holds
	// the sum of the budgets in memory, once per concurrent scrape.
	MinMetricsMaxBytes Size = 16 << 10
	MaxMetricsMaxBytes Size = 64 << 20
)

// metricsGrantAt is where a settings mapping's metrics grant is written.
func metricsGrantAt(sp path) path { return sp.key("grants").key("metrics") }

func validateMetricsGrant(p *problems, sp path, g *MetricsGrant) {
	if g == nil {
		return
	}
	gp := metricsGrantAt(sp)
	inRange(p, gp.key("maxSeries"), g.MaxSeries, 1, MaxMaxSeries)
	if p.present(gp.key("maxBytes")) && (g.MaxBytes < MinMetricsMaxBytes || g.MaxBytes > MaxMetricsMaxBytes) {
		p.add(gp.key("maxBytes"), "%s is out of range; use a size from %s to %s (default %s)",
			g.MaxBytes, MinMetricsMaxBytes, MaxMetricsMaxBytes, DefaultMetricsMaxBytes)
	}
}

// resolved returns a copy of g with the defaults filled in, or nil.
func (g *MetricsGrant) resolved() *MetricsGrant {
	if g == nil {
		return nil
	}
	out := *g
	if out.MaxSeries == 0 {
		out.MaxSeries = DefaultMaxSeries
	}
	if out.MaxBytes == 0 {
		out.MaxBytes = DefaultMetricsMaxBytes
	}
	return &out
}
