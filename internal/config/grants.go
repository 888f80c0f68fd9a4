package config

import (
	"slices"
	"sort"
	"strings"
)

// Capability names, as a module's imports request them (abi.CapabilityOf)
// and as grants give them.
const (
	CapabilityCache   = "cache"
	CapabilityState   = "state"
	CapabilityMetrics = "metrics"
)

// Index names a cache grant may ask for. Lookups by namespace need none:
// every informer has client-go's namespace index.
const (
	// IndexOwner indexes objects by the uid of each of their
	// ownerReferences ("objects owned by uid U").
	IndexOwner = "owner"
)

// IndexControllerOwner indexes a controller's children by the primary
// the host applied them for (their owner annotation, without its uid).
// No grant asks for it: every resource a controller owns gets it, so a
// reconcile finds its primary's children by index instead of listing
// all of them. The host hands the pipeline its function.
const IndexControllerOwner = "controller.informer-host.io/owner"

// knownIndexes are the index names a cache grant accepts.
var knownIndexes = []string{IndexOwner}

// Grants are the capabilities the operator gives a plugin beyond reading
// its own events. Everything is denied unless granted. In a module entry
// each capability's grant replaces plugins.default's grant for that
// capability as a whole (a module that lists cache grants gets exactly
// those); a capability the module leaves out is inherited.
type Grants struct {
	// Cache lists the configured resources the plugin may read from the
	// informer caches (cache_get, cache_list, cache_index). nil: not set
	// here (inherited); an empty list (cache: []) grants nothing, which
	// lets a module drop a default grant.
	Cache []CacheGrant `yaml:"cache" json:"cache,omitempty"`
	// State grants a key-value store that survives the plugin's restarts
	// and reloads (state_*); nil = not granted. Merged over the default
	// by its presence in YAML (setGrantState), like the other settings.
	State *StateGrant `yaml:"state" json:"state,omitempty"`
	// Metrics lets the plugin declare and update its own metrics
	// (metric_*); a mapping, even empty ("metrics: {}"), grants it.
	// "metrics:" with no value is null, which here as everywhere in the
	// file means absent: not granted. Picked like State.
	Metrics *MetricsGrant `yaml:"metrics" json:"metrics,omitempty"`

	// Capabilities II (grants_act.go). nil = not granted here.

	// Writes lets the plugin create, patch, apply and delete objects.
	Writes *WritesGrant `yaml:"writes" json:"writes,omitempty"`
	// Events lets the plugin record Kubernetes Events.
	Events *EventsGrant `yaml:"events" json:"events,omitempty"`
	// HTTP lets the plugin call the named upstreams.
	HTTP *HTTPGrant `yaml:"http" json:"http,omitempty"`
	// Impersonate gives the plugin's writes and Events its own identity;
	// nil = the daemon's credentials.
	Impersonate *Impersonation `yaml:"impersonate" json:"impersonate,omitempty"`
	// DryRun sends every write with dryRun=All and logs it (and logs
	// Events instead of recording them); for trying a plugin on a
	// production cluster. nil = not set here (inherited), default false.
	DryRun *bool `yaml:"dryRun" json:"dryRun,omitempty"`
}

// CacheGrant lets a plugin read one configured resource's cache.
type CacheGrant struct {
	Resource string `yaml:"resource" json:"resource"` // a Resource.Name; required
	// Indexes the plugin may look objects up by, beyond namespace:
	// "owner" (ownerReferences uid). The host adds an index to a
	// resource's informers only when some grant asks for it.
	Indexes []string `yaml:"indexes" json:"indexes,omitempty"`
}

// over returns g with every capability g does not set taken from base.
// Each capability is one line: state and metrics grants add theirs here.
func (g Grants) over(base Grants) Grants {
	if g.Cache == nil {
		g.Cache = base.Cache
	}
	return g
}

// clone copies g's slices so a SettingsFor result cannot change the Config.
func (g Grants) clone() Grants {
	if g.Cache != nil {
		cs := make([]CacheGrant, len(g.Cache))
		for i, c := range g.Cache {
			c.Indexes = append([]string(nil), c.Indexes...)
			cs[i] = c
		}
		g.Cache = cs
	}
	if g.State != nil {
		st := *g.State
		g.State = &st
	}
	if g.Metrics != nil {
		m := *g.Metrics
		g.Metrics = &m
	}
	g = g.cloneWrites()
	if g.Events != nil {
		e := *g.Events
		g.Events = &e
	}
	if g.HTTP != nil {
		h := *g.HTTP
		h.Upstreams = append([]string(nil), h.Upstreams...)
		g.HTTP = &h
	}
	return g
}

// CacheGrant returns the grant for resource, if there is one.
func (g Grants) CacheGrant(resource string) (CacheGrant, bool) {
	for _, c := range g.Cache {
		if c.Resource == resource {
			return c, true
		}
	}
	return CacheGrant{}, false
}

// Granted lists the capabilities g gives, sorted.
func (g Grants) Granted() []string {
	var out []string
	if len(g.Cache) > 0 {
		out = append(out, CapabilityCache)
	}
	if g.State != nil {
		out = append(out, CapabilityState)
	}
	if g.Metrics != nil {
		out = append(out, CapabilityMetrics)
	}
	if g.Writes != nil && len(g.Writes.Resources) > 0 {
		out = append(out, CapabilityWrites)
	}
	if g.Events != nil {
		out = append(out, CapabilityEvents)
	}
	if g.HTTP != nil {
		out = append(out, CapabilityHTTP)
	}
	sort.Strings(out)
	return out
}

// HasIndex reports whether the grant asks for index.
func (c CacheGrant) HasIndex(index string) bool { return slices.Contains(c.Indexes, index) }

// validateGrants checks the grants under sp against the configured
// resources (names, with their lines).
func validateGrants(p *problems, sp path, g *Grants, names map[string]int, complete bool) {
	gp := sp.key("grants")
	seen := map[string]int{}
	for i := range g.Cache {
		c := &g.Cache[i]
		cp := gp.key("cache").index(i)
		rp := cp.key("resource")
		switch {
		case c.Resource == "":
			p.add(rp, "required: the name of a configured resource the plugin may read from the cache")
		default:
			if _, ok := names[c.Resource]; !ok && complete {
				p.add(rp, "cache grant names resource %q, which the config does not watch; "+
					"cache reads are served from the informers of configured resources only, so add it under resources (%s)",
					c.Resource, knownNames(names))
			}
			if first, dup := seen[c.Resource]; dup {
				p.add(rp, "duplicate cache grant for resource %q (first at line %d); list all its indexes in one grant", c.Resource, first)
			} else {
				seen[c.Resource] = p.line(rp)
			}
		}
		idx := map[string]bool{}
		for j, name := range c.Indexes {
			ip := cp.key("indexes").index(j)
			switch {
			case !slices.Contains(knownIndexes, name):
				p.add(ip, "unknown index %q; known: %s (lookups by namespace need no index)", name, strings.Join(knownIndexes, ", "))
			case idx[name]:
				p.add(ip, "duplicate index %q", name)
			}
			idx[name] = true
		}
	}
}

// resourceIndexes returns, per resource name, the indexes some cache
// grant (in plugins.default or a module) asks for, and
// IndexControllerOwner for the resources a controller owns, sorted.
func resourceIndexes(c *Config) map[string][]string {
	out := map[string][]string{}
	add := func(g Grants) {
		for _, cg := range g.Cache {
			for _, ix := range cg.Indexes {
				if !slices.Contains(out[cg.Resource], ix) {
					out[cg.Resource] = append(out[cg.Resource], ix)
				}
			}
		}
	}
	owns := func(ctl *Controller) {
		if ctl == nil {
			return
		}
		for _, r := range ctl.Owns {
			if !slices.Contains(out[r], IndexControllerOwner) {
				out[r] = append(out[r], IndexControllerOwner)
			}
		}
	}
	add(c.Plugins.Default.Grants)
	owns(c.Plugins.Default.Controller)
	for _, m := range c.Plugins.Modules {
		add(m.Grants)
		owns(m.Controller)
	}
	for _, l := range out {
		sort.Strings(l)
	}
	return out
}

// ResolveIndexes sets every resource's Indexes from the config's cache
// grants. Load and Parse call it; a Config built in code calls it after
// setting grants, before handing Resources to an informer pipeline.
func (c *Config) ResolveIndexes() {
	ix := resourceIndexes(c)
	for i := range c.Resources {
		c.Resources[i].Indexes = ix[c.Resources[i].Name]
	}
}
