package config

import "time"

// DefaultStatusInterval is pluginResources.statusInterval's default.
const DefaultStatusInterval = 10 * time.Second

// MinStatusInterval is the least pluginResources.statusInterval: below it
// every replica would update every plugin object about as often as it
// polls, which is the write storm the interval is there to prevent.
const MinStatusInterval = time.Second

// validatePluginResources checks pluginResources.watch and
// statusInterval (trustedRoot is checked where resources read it).
func validatePluginResources(p *problems, r PluginResources) {
	rp := path{"pluginResources"}
	switch r.Watch {
	case "", WatchAuto, WatchOff:
	default:
		p.add(rp.key("watch"), "unknown value %q; use %q (watch Plugin and ClusterPlugin objects once their CRDs are installed) or %q (never)",
			r.Watch, WatchAuto, WatchOff)
	}
	if d := r.StatusInterval; positive(p, rp.key("statusInterval"), d) && d.Set && d.Duration < MinStatusInterval {
		p.add(rp.key("statusInterval"), "%s is too short; use at least %s (default %s): a change of condition is written sooner anyway, this bounds writes of counters only",
			d.Duration, MinStatusInterval, DefaultStatusInterval)
	}
}

func (r *PluginResources) applyDefaults() {
	if r.Watch == "" {
		r.Watch = WatchAuto
	}
	r.StatusInterval = NewDuration(orDefault(r.StatusInterval, DefaultStatusInterval))
}
