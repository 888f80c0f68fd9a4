package tenancy

import (
	"context"
	"fmt"
	"slices"
	"strings"

	authorizationv1 "k8s.io/api/authorization/v1"

	"github.com/informer-host/informer-host/internal/config"
	"github.com/informer-host/informer-host/internal/pluginapi/v1alpha1"
)

// Refusal is why a tenant's module does not run: Reason is the condition
// reason (v1alpha1.ReasonNotAllowed, ReasonOverCeiling, ReasonRefused or
// ReasonForbidden), Problems each name the spec field and what it is over.
type Refusal struct {
	Reason   string
	Problems config.Errors
}

func (r *Refusal) Error() string { return r.Reason + ": " + r.Problems.Error() }

// Admit checks a tenant's module (parsed by config.ParseModule) against
// ns's ceiling and, with rev, the ServiceAccount's own RBAC (list/watch
// each bound and read resource in ns; each granted write verb), and
// confines it: Namespace=ns, every write grant's namespaces=[ns],
// impersonate=ns/serviceAccount, limits capped. running is the number of
// the namespace's plugins admitted before this one (maxPlugins). Nothing
// is partly applied: a refused module does not run at all.
//
// A limit the spec leaves out holds the built-in default after
// ParseModule; a default over the ceiling is lowered to it, any other
// value over it is refused. The plugin's write rate is capped at the
// namespace's budget, which the host enforces for all its plugins
// together.
func Admit(ctx context.Context, cfg *config.Config, rev Reviewer, ns, serviceAccount string, m config.Module, running int) (config.Module, *Refusal) {
	a := admission{cfg: cfg, ns: ns, origin: origin(ns, m.File)}
	ci := cfg.Tenancy.CeilingIndex(ns)
	if ci < 0 {
		a.problem("metadata.namespace", "namespace %q has no tenancy ceiling in %s, so its Plugin objects do not run; "+
			"ask the operator to add it to tenancy.ceilings (or use a ClusterPlugin)", ns, a.file())
		return m, a.refusal(v1alpha1.ReasonNotAllowed)
	}
	ce := cfg.Tenancy.Ceilings[ci]
	a.ceiling = fmt.Sprintf("the ceiling of namespace %s (tenancy.ceilings[%d] in %s)", ns, ci, a.file())

	if m.Grants.Impersonate != nil {
		a.problem("spec.grants.impersonate", "a Plugin may not set it: it acts as its serviceAccountName (%s/%s)", ns, serviceAccount)
	}
	if serviceAccount == "" {
		a.problem("spec.serviceAccountName", "required: the ServiceAccount of namespace %s the plugin acts as", ns)
	}
	if len(a.problems) > 0 {
		return m, a.refusal(v1alpha1.ReasonRefused)
	}

	a.checkCeiling(&m, ce, running)
	if len(a.problems) > 0 {
		return m, a.refusal(v1alpha1.ReasonOverCeiling)
	}
	out := confine(m, ce, ns, serviceAccount)
	if rev != nil {
		if r := a.review(ctx, rev, &out); r != nil {
			return m, r
		}
	}
	return out, nil
}

type admission struct {
	cfg      *config.Config
	ns       string
	origin   string
	ceiling  string
	problems config.Errors
}

func origin(ns, file string) string {
	name := strings.TrimSuffix(strings.TrimPrefix(file, ns+"."), ".wasm")
	return "Plugin " + ns + "/" + name
}

func (a *admission) file() string {
	if a.cfg.File == "" {
		return "the configuration"
	}
	return a.cfg.File
}

func (a *admission) problem(field, format string, args ...any) {
	a.problems = append(a.problems, config.Problem{File: a.origin, Message: field + ": " + fmt.Sprintf(format, args...)})
}

func (a *admission) refusal(reason string) *Refusal {
	return &Refusal{Reason: reason, Problems: a.problems}
}

// boundResources lists every configured resource the module reads, with
// the spec field naming it.
func boundResources(m *config.Module) (fields, names []string) {
	add := func(f, n string) { fields, names = append(fields, f), append(names, n) }
	for i, b := range m.Bindings {
		add(fmt.Sprintf("spec.bindings[%d].resource", i), b.Resource)
	}
	if c := m.Controller; c != nil {
		add("spec.controller.for", c.For)
		for i, o := range c.Owns {
			add(fmt.Sprintf("spec.controller.owns[%d]", i), o)
		}
		for i, w := range c.Watches {
			add(fmt.Sprintf("spec.controller.watches[%d].resource", i), w.Resource)
		}
	}
	for i, g := range m.Grants.Cache {
		add(fmt.Sprintf("spec.grants.cache[%d].resource", i), g.Resource)
	}
	return fields, names
}

func (a *admission) checkCeiling(m *config.Module, ce config.Ceiling, running int) {
	if running >= ce.MaxPlugins {
		a.problem("metadata.name", "namespace %s already runs %d plugins, the most %s allows (maxPlugins)", a.ns, running, a.ceiling)
	}
	fields, names := boundResources(m)
	for i, n := range names {
		if !slices.Contains(ce.Resources, n) {
			a.problem(fields[i], "resource %q is not among the resources %s allows (%s)", n, a.ceiling, list(ce.Resources))
		}
	}
	if w := m.Grants.Writes; w != nil {
		for i, g := range w.Resources {
			at := fmt.Sprintf("spec.grants.writes.resources[%d]", i)
			cg, ok := a.ceilingWrite(ce, g.Resource)
			if !ok {
				a.problem(at+".resource", "writes to %q are not allowed by %s (%s)", g.Resource, a.ceiling, writeList(ce.Writes))
				continue
			}
			for j, v := range g.Verbs {
				if !slices.Contains(cg.Verbs, v) {
					a.problem(fmt.Sprintf("%s.verbs[%d]", at, j), "verb %q on %q is over %s (verbs %s)", v, g.Resource, a.ceiling, list(cg.Verbs))
				}
			}
			for j, s := range g.Subresources {
				if !slices.Contains(cg.Subresources, s) {
					a.problem(fmt.Sprintf("%s.subresources[%d]", at, j), "subresource %q of %q is over %s (subresources %s)", s, g.Resource, a.ceiling, list(cg.Subresources))
				}
			}
			for j, n := range g.Namespaces {
				if n != a.ns {
					a.problem(fmt.Sprintf("%s.namespaces[%d]", at, j), "namespace %q: a Plugin writes only in its own namespace, %s", n, a.ns)
				}
			}
		}
	}
	if m.Grants.Events != nil && !ce.Events {
		a.problem("spec.grants.events", "Events are not allowed by %s (events: false)", a.ceiling)
	}
	if m.Grants.State != nil && !ce.State {
		a.problem("spec.grants.state", "state is not allowed by %s (state: false)", a.ceiling)
	}
	if m.Grants.Metrics != nil && !ce.Metrics {
		a.problem("spec.grants.metrics", "metrics are not allowed by %s (metrics: false)", a.ceiling)
	}
	if h := m.Grants.HTTP; h != nil {
		for i, u := range h.Upstreams {
			if !slices.Contains(ce.Upstreams, u) {
				a.problem(fmt.Sprintf("spec.grants.http.upstreams[%d]", i), "upstream %q is not allowed by %s (%s)", u, a.ceiling, list(ce.Upstreams))
			}
		}
	}
	if p := m.Limits.MemoryPages; p > ce.MaxMemoryPages && p != config.DefaultMemoryPages {
		a.problem("spec.limits.memoryPages", "%d is over %s (maxMemoryPages %d)", p, a.ceiling, ce.MaxMemoryPages)
	}
	if b := m.Delivery.BufferSize; b > ce.MaxBufferSize && b != config.DefaultBufferSize {
		a.problem("spec.delivery.bufferSize", "%d is over %s (maxBufferSize %d)", b, a.ceiling, ce.MaxBufferSize)
	}
	switch t := m.Limits.CallTimeout.Duration; {
	case t == 0 && m.Limits.CallTimeout.IsSet():
		a.problem("spec.limits.callTimeout", "0s (no deadline) is over %s (maxCallTimeout %s)", a.ceiling, ce.MaxCallTimeout.Duration)
	case t > ce.MaxCallTimeout.Duration && t != config.DefaultCallTimeout:
		a.problem("spec.limits.callTimeout", "%s is over %s (maxCallTimeout %s)", t, a.ceiling, ce.MaxCallTimeout.Duration)
	}
}

// ceilingWrite finds the ceiling's write grant of resource, which either
// may name by a configured resource's name or "group/version/resource".
func (a *admission) ceilingWrite(ce config.Ceiling, resource string) (config.WriteGrant, bool) {
	want, ok := a.gvr(resource)
	for _, w := range ce.Writes {
		if w.Resource == resource {
			return w, true
		}
		if got, gok := a.gvr(w.Resource); ok && gok && got == want {
			return w, true
		}
	}
	return config.WriteGrant{}, false
}

// gvr resolves a resource named in a grant to "group/resource", when
// the configuration says it (a resource named by kind is resolved by
// discovery at run time only).
func (a *admission) gvr(resource string) (string, bool) {
	if gvr, ok := config.ParseGVR(resource); ok {
		return gvr.Group + "/" + gvr.Resource, true
	}
	if r, ok := a.cfg.Resource(resource); ok && r.Resource != "" {
		return r.Group + "/" + r.Resource, true
	}
	return "", false
}

// confine returns m set up to run in ns only, as serviceAccount.
func confine(m config.Module, ce config.Ceiling, ns, serviceAccount string) config.Module {
	m.Namespace = ns
	m.Grants.Impersonate = &config.Impersonation{ServiceAccount: ns + "/" + serviceAccount}
	if w := m.Grants.Writes; w != nil {
		c := *w
		c.Resources = make([]config.WriteGrant, len(w.Resources))
		for i, g := range w.Resources {
			g.Verbs = slices.Clone(g.Verbs)
			g.Subresources = slices.Clone(g.Subresources)
			g.Namespaces = []string{ns}
			c.Resources[i] = g
		}
		qps, burst, _ := c.Limits()
		c.QPS, c.Burst = min(qps, ce.WritesQPS), min(burst, ce.WritesBurst)
		m.Grants.Writes = &c
	}
	m.Limits.MemoryPages = min(m.Limits.MemoryPages, ce.MaxMemoryPages)
	m.Delivery.BufferSize = min(m.Delivery.BufferSize, ce.MaxBufferSize)
	if t := m.Limits.CallTimeout.Duration; t > ce.MaxCallTimeout.Duration {
		m.Limits.CallTimeout = config.NewDuration(ce.MaxCallTimeout.Duration)
	}
	return m
}

// review asks whether the ServiceAccount may itself do what the module
// will do as it: the host's informers read for it, so its own RBAC must
// let it list and watch what it is bound to; its writes go out as it.
func (a *admission) review(ctx context.Context, rev Reviewer, m *config.Module) *Refusal {
	user := m.Grants.Impersonate.ServiceAccountUser()
	ask := func(field string, attrs authorizationv1.ResourceAttributes) {
		attrs.Namespace = a.ns
		ok, why, err := rev.Allowed(ctx, user, attrs)
		what := attrs.Verb + " " + attrs.Resource
		if attrs.Subresource != "" {
			what += "/" + attrs.Subresource
		}
		if attrs.Group != "" {
			what += "." + attrs.Group
		}
		switch {
		case err != nil:
			a.problem(field, "could not review whether ServiceAccount %s may %s in %s (tried again on the next change): %v",
				m.Grants.Impersonate.ServiceAccount, what, a.ns, err)
		case !ok:
			if why != "" {
				why = " (" + why + ")"
			}
			a.problem(field, "ServiceAccount %s may not %s in namespace %s%s; grant it with a Role and RoleBinding there",
				m.Grants.Impersonate.ServiceAccount, what, a.ns, why)
		}
	}
	fields, names := boundResources(m)
	seen := map[string]bool{}
	for i, n := range names {
		r, ok := a.cfg.Resource(n)
		if !ok || r.Resource == "" || seen[n] {
			continue
		}
		seen[n] = true
		for _, verb := range []string{"list", "watch"} {
			ask(fields[i], authorizationv1.ResourceAttributes{Verb: verb, Group: r.Group, Version: r.Version, Resource: r.Resource})
		}
	}
	w := m.Grants.Writes
	if w != nil {
		for i, g := range w.Resources {
			group, resource, ok := a.splitGVR(g.Resource)
			if !ok {
				continue
			}
			at := fmt.Sprintf("spec.grants.writes.resources[%d]", i)
			for j, v := range g.Verbs {
				for _, verb := range config.GrantVerbs(v, "") {
					ask(fmt.Sprintf("%s.verbs[%d]", at, j), authorizationv1.ResourceAttributes{Verb: verb, Group: group, Resource: resource})
				}
				for k, s := range g.Subresources {
					for _, verb := range config.GrantVerbs(v, s) {
						ask(fmt.Sprintf("%s.subresources[%d]", at, k), authorizationv1.ResourceAttributes{Verb: verb, Group: group, Resource: resource, Subresource: s})
					}
				}
			}
		}
	}
	if c := m.Controller; c != nil && w != nil {
		// The host's own bookkeeping for a controller (its requeue
		// annotation, blockOwnerDeletion) goes out as the plugin too.
		for _, need := range c.Needs() {
			r, ok := a.cfg.Resource(need.Resource)
			if need.Grant != "" || !ok || r.Resource == "" {
				continue
			}
			for _, verb := range need.Verbs {
				ask("spec.controller", authorizationv1.ResourceAttributes{Verb: verb, Group: r.Group, Resource: r.Resource, Subresource: need.Subresource})
			}
		}
	}
	if len(a.problems) == 0 {
		return nil
	}
	return a.refusal(v1alpha1.ReasonForbidden)
}

func (a *admission) splitGVR(resource string) (group, res string, ok bool) {
	s, ok := a.gvr(resource)
	group, res, _ = strings.Cut(s, "/")
	return group, res, ok
}

func list(s []string) string {
	if len(s) == 0 {
		return "none"
	}
	return strings.Join(s, ", ")
}

func writeList(ws []config.WriteGrant) string {
	if len(ws) == 0 {
		return "no writes"
	}
	out := make([]string, len(ws))
	for i, w := range ws {
		out[i] = w.Resource + " " + strings.Join(w.Verbs, "/")
	}
	return strings.Join(out, "; ")
}
