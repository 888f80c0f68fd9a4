package config

import "time"

// Defaults and bounds of the state capability.
const (
	DefaultStateMaxBytes Size = 1 << 20
	DefaultStateMaxKeys       = 10000
	// MaxStateMaxBytes and MaxStateMaxKeys catch typos: state is held in
	// memory whole, per plugin.
	MaxStateMaxBytes Size = 1 << 30
	MaxStateMaxKeys       = 10_000_000
	// DefaultStateFlushInterval is how often a persistent store writes.
	DefaultStateFlushInterval = time.Second
	// MaxStateFlushInterval bounds what a SIGKILL can lose.
	MaxStateFlushInterval = time.Minute
)

// StateGrant gives a plugin its key-value state, with a quota. Its
// presence grants; zero fields take the defaults.
type StateGrant struct {
	MaxBytes Size `yaml:"maxBytes" json:"maxBytes,omitempty"` // keys plus values, in bytes; default 1Mi
	MaxKeys  int  `yaml:"maxKeys" json:"maxKeys,omitempty"`   // default 10000
}

// Limits returns the grant's quota with defaults filled in.
func (g StateGrant) Limits() (maxBytes int64, maxKeys int) {
	maxBytes, maxKeys = int64(g.MaxBytes), g.MaxKeys
	if maxBytes <= 0 {
		maxBytes = int64(DefaultStateMaxBytes)
	}
	if maxKeys <= 0 {
		maxKeys = DefaultStateMaxKeys
	}
	return maxBytes, maxKeys
}

// StateSettings are the host-wide settings of plugin state (plugins.state).
type StateSettings struct {
	// Path of the file state is kept in across host restarts (bbolt),
	// relative to the config file's directory; "" = memory only.
	Path string `yaml:"path" json:"path,omitempty"`
	// KeepOnRemove keeps a plugin's state when its module file is
	// removed, for a file that comes back; default false (dropped).
	KeepOnRemove bool `yaml:"keepOnRemove" json:"keepOnRemove,omitempty"`
	// FlushInterval is how often writes reach the file and are fsync'd;
	// default 1s. A SIGKILL loses at most this much of the latest writes.
	FlushInterval Duration `yaml:"flushInterval" json:"flushInterval"`
}

// StatePath returns plugins.state.path resolved against the config file's
// directory, or "".
func (c *Config) StatePath() string { return c.ResolvePath(c.Plugins.State.Path) }

// StateFlushInterval returns plugins.state.flushInterval or its default.
func (c *Config) StateFlushInterval() time.Duration {
	if d := c.Plugins.State.FlushInterval.Duration; d > 0 {
		return d
	}
	return DefaultStateFlushInterval
}

func validateStateGrant(p *problems, gp path, g *StateGrant) {
	if g == nil {
		return
	}
	if p.present(gp.key("maxBytes")) && (g.MaxBytes < 1 || g.MaxBytes > MaxStateMaxBytes) {
		p.add(gp.key("maxBytes"), "%s is out of range; use a size from 1 to %s (default %s)", g.MaxBytes, MaxStateMaxBytes, DefaultStateMaxBytes)
	}
	if p.present(gp.key("maxKeys")) {
		inRange(p, gp.key("maxKeys"), g.MaxKeys, 1, MaxStateMaxKeys)
	}
}

func validateStateSettings(p *problems, s StateSettings) {
	sp := path{"plugins", "state"}
	if d := s.FlushInterval; p.present(sp.key("flushInterval")) && (d.Duration <= 0 || d.Duration > MaxStateFlushInterval) {
		p.add(sp.key("flushInterval"), "%s is out of range; use a duration from 1ms to %s (default %s)", d.Duration, MaxStateFlushInterval, DefaultStateFlushInterval)
	}
}
