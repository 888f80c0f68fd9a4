package config

// Grants are the capabilities the operator gives a plugin beyond reading
// its own events (ABI.md §16). Deny by default: a capability not granted
// here makes its host functions return ERR_DENIED. A module's grant for a
// capability replaces plugins.default's grant for it as a whole.
type Grants struct {
	// Metrics lets the plugin declare and update its own metrics; a
	// mapping, even empty ("metrics: {}"), grants it. "metrics:" with no
	// value is null, which here as everywhere in the file means absent:
	// not granted.
	Metrics *MetricsGrant `yaml:"metrics" json:"metrics,omitempty"`
}
