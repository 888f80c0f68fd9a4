package config

import (
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"
)

// Defaults of a tenancy ceiling (kubenative.go): small enough that a
// namespace's plugins cannot take a large share of the daemon.
const (
	DefaultCeilingMaxPlugins     = 5
	DefaultCeilingMaxMemoryPages = 256 // 16 MiB
	DefaultCeilingMaxBufferSize  = 1000
	DefaultCeilingMaxCallTimeout = time.Second
	DefaultCeilingWritesQPS      = 5.0
	DefaultCeilingWritesBurst    = 10
	MaxCeilingPlugins            = 1000
	AllNamespaces                = "*" // a ceiling for every namespace no other ceiling names
)

// CeilingIndex returns the index in Ceilings of namespace ns's ceiling:
// the one naming it, else the "*" one; -1 when no ceiling covers ns.
func (t Tenancy) CeilingIndex(ns string) int {
	wild := -1
	for i := range t.Ceilings {
		for _, n := range t.Ceilings[i].Namespaces {
			switch n {
			case ns:
				return i
			case AllNamespaces:
				wild = i
			}
		}
	}
	return wild
}

func validateTenancy(p *problems, c *Config, names map[string]int, complete bool) {
	tp := path{"tenancy", "ceilings"}
	upstreams := map[string]int{}
	for _, u := range c.Upstreams {
		upstreams[u.Name] = 0
	}
	owner := map[string]int{} // namespace → line of the ceiling entry naming it first
	for i := range c.Tenancy.Ceilings {
		ce := &c.Tenancy.Ceilings[i]
		cp := tp.index(i)
		if len(ce.Namespaces) == 0 {
			p.add(cp.key("namespaces"), "required: the namespaces this ceiling is for (team-a) or \"*\" for every namespace no other ceiling names")
		}
		for j, ns := range ce.Namespaces {
			at := cp.key("namespaces").index(j)
			if ns != AllNamespaces {
				if errs := validation.IsDNS1123Label(ns); len(errs) > 0 {
					p.add(at, "%q is not a namespace name: %s", ns, strings.Join(errs, "; "))
					continue
				}
			}
			if first, dup := owner[ns]; dup {
				p.add(at, "namespace %q already has a ceiling (line %d); a namespace gets one ceiling", ns, first)
				continue
			}
			owner[ns] = p.line(at)
		}
		for j, r := range ce.Resources {
			at := cp.key("resources").index(j)
			if _, ok := names[r]; !ok && complete {
				p.add(at, "resource %q is not configured (%s); a tenant's plugin sees only the informers of configured resources", r, knownNames(names))
			}
		}
		dupCheck(p, cp.key("resources"), ce.Resources, func(string) string { return "" })
		seen := map[string]int{}
		for j := range ce.Writes {
			wp := cp.key("writes").index(j)
			validateWriteGrant(p, wp, &ce.Writes[j], names, complete, seen)
			if len(ce.Writes[j].Namespaces) > 0 {
				p.add(wp.key("namespaces"), "a ceiling's writes name no namespaces: a tenant's plugin writes only in its own")
			}
		}
		for j, u := range ce.Upstreams {
			if _, ok := upstreams[u]; !ok {
				p.add(cp.key("upstreams").index(j), "unknown upstream %q (%s)", u, knownUpstreams(upstreams))
			}
		}
		dupCheck(p, cp.key("upstreams"), ce.Upstreams, func(string) string { return "" })
		inRange(p, cp.key("maxPlugins"), ce.MaxPlugins, 1, MaxCeilingPlugins)
		inRange(p, cp.key("maxMemoryPages"), int(ce.MaxMemoryPages), 1, MaxMemoryPages)
		inRange(p, cp.key("maxBufferSize"), ce.MaxBufferSize, 1, MaxBufferSize)
		positive(p, cp.key("maxCallTimeout"), ce.MaxCallTimeout)
		if p.present(cp.key("writesQPS")) && (ce.WritesQPS <= 0 || ce.WritesQPS > MaxWritesQPS) {
			p.add(cp.key("writesQPS"), "%g is out of range; use a rate above 0 and at most %g writes a second (default %g)", ce.WritesQPS, MaxWritesQPS, DefaultCeilingWritesQPS)
		}
		inRange(p, cp.key("writesBurst"), ce.WritesBurst, 1, MaxWritesBurst)
	}
}

func (t *Tenancy) applyDefaults() {
	for i := range t.Ceilings {
		ce := &t.Ceilings[i]
		if ce.MaxPlugins == 0 {
			ce.MaxPlugins = DefaultCeilingMaxPlugins
		}
		if ce.MaxMemoryPages == 0 {
			ce.MaxMemoryPages = DefaultCeilingMaxMemoryPages
		}
		if ce.MaxBufferSize == 0 {
			ce.MaxBufferSize = DefaultCeilingMaxBufferSize
		}
		ce.MaxCallTimeout = NewDuration(orDefault(ce.MaxCallTimeout, DefaultCeilingMaxCallTimeout))
		if ce.WritesQPS == 0 {
			ce.WritesQPS = DefaultCeilingWritesQPS
		}
		if ce.WritesBurst == 0 {
			ce.WritesBurst = DefaultCeilingWritesBurst
		}
	}
}
