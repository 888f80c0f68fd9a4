package config

import (
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation"
)

// Defaults and bounds of the writes grant (ABI.md §17.1).
const (
	// DefaultWritesQPS and DefaultWritesBurst are a plugin's token bucket
	// when its grant names none: a controller's steady trickle, with room
	// for a burst of reactions to an initial list.
	DefaultWritesQPS   = 5.0
	DefaultWritesBurst = 10
	// MaxWritesQPS and MaxWritesBurst catch typos; the daemon's
	// client-wide limit applies on top anyway.
	MaxWritesQPS   = 1000.0
	MaxWritesBurst = 10000
	// DefaultWritesTimeout bounds one write (its I/O timeout, retries
	// after a 429 included).
	DefaultWritesTimeout = 10 * time.Second
	// MaxWritesTimeout: a longer wait would hold the plugin's queue.
	MaxWritesTimeout = 5 * time.Minute
)

// writeVerbs are the verbs a WriteGrant may list.
var writeVerbs = []string{VerbCreate, VerbPatch, VerbApply, VerbDelete}

// Limits returns the grant's rate and timeout with the defaults filled in.
func (g WritesGrant) Limits() (qps float64, burst int, timeout time.Duration) {
	qps, burst, timeout = g.QPS, g.Burst, g.Timeout.Duration
	if qps <= 0 {
		qps = DefaultWritesQPS
	}
	if burst <= 0 {
		burst = DefaultWritesBurst
	}
	if timeout <= 0 {
		timeout = DefaultWritesTimeout
	}
	return qps, burst, timeout
}

// Allows reports whether the grant lets verb touch subresource ("" = the
// object itself).
func (w WriteGrant) Allows(verb, subresource string) bool {
	return slices.Contains(w.Verbs, verb) && (subresource == "" || slices.Contains(w.Subresources, subresource))
}

// InNamespace reports whether the grant covers namespace ns (every
// namespace when it lists none).
func (w WriteGrant) InNamespace(ns string) bool {
	return len(w.Namespaces) == 0 || slices.Contains(w.Namespaces, ns)
}

// ParseGVR parses a write grant's "group/version/resource" form:
// "v1/configmaps" (core group) or "apps/v1/deployments". ok is false for
// anything else, a configured resource's name included.
func ParseGVR(s string) (gvr schema.GroupVersionResource, ok bool) {
	parts := strings.Split(s, "/")
	switch len(parts) {
	case 2:
		gvr = schema.GroupVersionResource{Version: parts[0], Resource: parts[1]}
	case 3:
		gvr = schema.GroupVersionResource{Group: parts[0], Version: parts[1], Resource: parts[2]}
		if len(validation.IsDNS1123Subdomain(gvr.Group)) > 0 {
			return gvr, false
		}
	default:
		return gvr, false
	}
	if len(validation.IsDNS1123Label(gvr.Version)) > 0 || len(validation.IsDNS1123Label(gvr.Resource)) > 0 {
		return gvr, false
	}
	return gvr, true
}

// ServiceAccountUser returns the user name the apiserver gives the
// ServiceAccount "ns/name": "system:serviceaccount:ns:name".
func (i Impersonation) ServiceAccountUser() string {
	ns, name, _ := strings.Cut(i.ServiceAccount, "/")
	return "system:serviceaccount:" + ns + ":" + name
}

func validateWritesGrant(p *problems, gp path, g *WritesGrant, names map[string]int, complete bool) {
	if g == nil {
		return
	}
	wp := gp.key("writes")
	if len(g.Resources) == 0 {
		p.add(wp.key("resources"), "required: the resources the plugin may write, each with its verbs "+
			"(resources: [{resource: pods, verbs: [apply]}])")
	}
	seen := map[string]int{}
	for i := range g.Resources {
		validateWriteGrant(p, wp.key("resources").index(i), &g.Resources[i], names, complete, seen)
	}
	if p.present(wp.key("qps")) && (g.QPS <= 0 || g.QPS > MaxWritesQPS) {
		p.add(wp.key("qps"), "%g is out of range; use a rate above 0 and at most %g requests a second (default %g)", g.QPS, MaxWritesQPS, DefaultWritesQPS)
	}
	if p.present(wp.key("burst")) {
		inRange(p, wp.key("burst"), g.Burst, 1, MaxWritesBurst)
	}
	if d := g.Timeout; p.present(wp.key("timeout")) && (d.Duration <= 0 || d.Duration > MaxWritesTimeout) {
		p.add(wp.key("timeout"), "%s is out of range; use a duration from 1ms to %s (default %s)", d.Duration, MaxWritesTimeout, DefaultWritesTimeout)
	}
}

// validateWriteGrant checks one write grant at rp: a plugin's, or a
// tenancy ceiling's. seen holds the resources named before it.
func validateWriteGrant(p *problems, rp path, w *WriteGrant, names map[string]int, complete bool, seen map[string]int) {
	at := rp.key("resource")
	_, configured := names[w.Resource]
	switch {
	case w.Resource == "":
		p.add(at, "required: a configured resource's name or \"group/version/resource\" (\"v1/configmaps\", \"apps/v1/deployments\")")
	case strings.Contains(w.Resource, "/"):
		if _, ok := ParseGVR(w.Resource); !ok {
			p.add(at, "%q is not \"group/version/resource\" nor \"version/resource\" for the core group "+
				"(lower case, e.g. \"v1/configmaps\", \"apps/v1/deployments\")", w.Resource)
		}
	case !configured && complete:
		p.add(at, "write grant names resource %q, which is neither a configured resource (%s) nor \"group/version/resource\"",
			w.Resource, knownNames(names))
	}
	if w.Resource != "" {
		if first, dup := seen[w.Resource]; dup {
			p.add(at, "duplicate write grant for resource %q (first at line %d); list all its verbs in one grant", w.Resource, first)
		} else {
			seen[w.Resource] = p.line(at)
		}
	}
	if len(w.Verbs) == 0 {
		p.add(rp.key("verbs"), "required: the verbs the plugin may use (%s)", strings.Join(writeVerbs, ", "))
	}
	dupCheck(p, rp.key("verbs"), w.Verbs, func(v string) string {
		if !slices.Contains(writeVerbs, v) {
			return "unknown verb " + quote(v) + "; known: " + strings.Join(writeVerbs, ", ")
		}
		return ""
	})
	dupCheck(p, rp.key("subresources"), w.Subresources, func(s string) string {
		if len(validation.IsDNS1123Label(s)) > 0 {
			return quote(s) + " is not a subresource name (\"status\", \"scale\")"
		}
		return ""
	})
	dupCheck(p, rp.key("namespaces"), w.Namespaces, func(ns string) string {
		if errs := validation.IsDNS1123Label(ns); len(errs) > 0 {
			return quote(ns) + " is not a namespace name: " + strings.Join(errs, "; ")
		}
		return ""
	})
}

func validateImpersonation(p *problems, gp path, i *Impersonation) {
	if i == nil {
		return
	}
	at := gp.key("impersonate").key("serviceAccount")
	ns, name, ok := strings.Cut(i.ServiceAccount, "/")
	switch {
	case i.ServiceAccount == "":
		p.add(at, "required: the ServiceAccount the plugin acts as, \"namespace/name\"")
	case !ok || strings.Contains(name, "/"):
		p.add(at, "%q is not \"namespace/name\"", i.ServiceAccount)
	case len(validation.IsDNS1123Label(ns)) > 0:
		p.add(at, "%q is not a namespace name", ns)
	case len(validation.IsDNS1123Subdomain(name)) > 0:
		p.add(at, "%q is not a ServiceAccount name", name)
	}
}

// dupCheck reports each entry of list that bad finds wrong, and repeats.
func dupCheck(p *problems, at path, list []string, bad func(string) string) {
	seen := map[string]bool{}
	for j, s := range list {
		switch msg := bad(s); {
		case msg != "":
			p.add(at.index(j), "%s", msg)
		case seen[s]:
			p.add(at.index(j), "duplicate %q", s)
		}
		seen[s] = true
	}
}

func quote(s string) string { return "\"" + s + "\"" }

// cloneWrites copies the capabilities II grants g points to.
func (g Grants) cloneWrites() Grants {
	if g.Writes != nil {
		w := *g.Writes
		w.Resources = make([]WriteGrant, len(g.Writes.Resources))
		for i, r := range g.Writes.Resources {
			r.Verbs = slices.Clone(r.Verbs)
			r.Subresources = slices.Clone(r.Subresources)
			r.Namespaces = slices.Clone(r.Namespaces)
			w.Resources[i] = r
		}
		g.Writes = &w
	}
	if g.Impersonate != nil {
		i := *g.Impersonate
		g.Impersonate = &i
	}
	if g.DryRun != nil {
		d := *g.DryRun
		g.DryRun = &d
	}
	return g
}

// DryRunOn reports whether the plugin's writes go with dryRun=All.
func (g Grants) DryRunOn() bool { return g.DryRun != nil && *g.DryRun }
