package config

// MetricsGrant lets a plugin export metrics of its own on the host's
// /metrics (ABI.md §16.3).
type MetricsGrant struct {
	// MaxSeries caps the series the plugin's metrics may hold; updates
	// that would create more are dropped and counted in
	// informer_host_plugin_metrics_dropped_total. Default DefaultMaxSeries.
	MaxSeries int `yaml:"maxSeries" json:"maxSeries,omitempty"`
}

const (
	// DefaultMaxSeries is a plugin's series cap when its grant names none.
	DefaultMaxSeries = 1000
	// MaxMaxSeries bounds maxSeries: each series costs the host a few
	// hundred bytes and every scrape carries it.
	MaxMaxSeries = 100000
)

// metricsGrantAt is where a settings mapping's metrics grant is written.
func metricsGrantAt(sp path) path { return sp.key("grants").key("metrics") }

func validateMetricsGrant(p *problems, sp path, g *MetricsGrant) {
	if g == nil {
		return
	}
	inRange(p, metricsGrantAt(sp).key("maxSeries"), g.MaxSeries, 1, MaxMaxSeries)
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
	return &out
}
