package config

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/informer-host/informer-host/internal/filter"
)

// validate checks what the decoder cannot: values that have the right
// type but make no sense. It runs even when decoding found problems, so a
// file's first run shows everything that is wrong with it.
func validate(p *problems, c *Config) {
	switch {
	case c.APIVersion == "" && !p.isBroken(path{"apiVersion"}):
		p.add(path{"apiVersion"}, "required; set it to %q", APIVersion)
	case c.APIVersion != "" && c.APIVersion != APIVersion:
		p.add(path{"apiVersion"}, "unsupported version %q; this informer-host reads %q", c.APIVersion, APIVersion)
	}

	names, complete := validateResources(p, c.Resources)

	if ms := c.Plugins.MaxModuleSize; p.present(path{"plugins", "maxModuleSize"}) && (ms < 1024 || ms > MaxModuleSize) {
		p.add(path{"plugins", "maxModuleSize"}, "%s is out of range; use a size from 1Ki to %s (default %s)", ms, MaxModuleSize, DefaultMaxModuleSize)
	}
	positive(p, path{"plugins", "fetchTimeout"}, c.Plugins.FetchTimeout)
	validateSettings(p, path{"plugins", "default"}, &c.Plugins.Default, names, complete)
	files := map[string]int{}
	for i := range c.Plugins.Modules {
		m := &c.Plugins.Modules[i]
		mp := path{"plugins", "modules", i}
		fp := mp.key("file")
		switch {
		case m.File == "":
			p.add(fp, "required: the module's file name in the plugin directory, e.g. \"pod-logger.wasm\"")
		case !isWasmBaseName(m.File):
			p.add(fp, "%q must be a plain file name ending in \".wasm\", without directories; modules are looked up in plugins.directory", m.File)
		}
		if m.File != "" {
			if first, dup := files[m.File]; dup {
				p.add(fp, "duplicate module file %q (first at line %d)", m.File, first)
			} else {
				files[m.File] = p.line(fp)
			}
		}
		validateSettings(p, mp, &m.PluginSettings, names, complete)
		validateModuleSource(p, mp, m)
	}
	validateVerify(p, path{"plugins", "default", "verify"}, c.Plugins.Default.Verify)
	validateRegistries(p, c)
	validateRestartBackoff(p, c)
	validateOutbound(p, c)
	validateStateSettings(p, c.Plugins.State)

	validateServer(p, c.Server)
	validateLeaderElection(p, c.LeaderElection)
	validateSharding(p, c)
	validateControllerGrants(p, c)
	validateTracing(p, c.Tracing)
	validateTenancy(p, c, names, complete)
	validatePluginResources(p, c.PluginResources)
}

// validateResources checks resources and returns the line of every
// resource name, for bindings to be checked against. complete is false
// when some name could not be decoded: a binding to it would then be
// reported as unknown for no fault of its own.
func validateResources(p *problems, rs []Resource) (names map[string]int, complete bool) {
	names = map[string]int{}
	complete = !p.isBroken(path{"resources"})
	for i := range rs {
		r := &rs[i]
		rp := path{"resources", i}
		np := rp.key("name")
		if p.isBroken(rp) || p.isBroken(np) {
			complete = false
		}
		switch {
		case r.Name == "":
			p.add(np, "required: bindings refer to resources by name")
		case len(validation.IsDNS1123Subdomain(r.Name)) > 0:
			p.add(np, "%q is not a valid name: use lower-case letters, digits, '-' and '.', starting and ending with a letter or digit", r.Name)
		}
		if r.Name != "" {
			if first, dup := names[r.Name]; dup {
				p.add(np, "duplicate resource name %q (first at line %d)", r.Name, first)
			} else {
				names[r.Name] = p.line(np)
			}
		}

		validateGroup(p, rp.key("group"), r.Group)
		vp := rp.key("version")
		switch {
		case r.Version == "":
			p.add(vp, "required, e.g. \"v1\"")
		case strings.Contains(r.Version, "/"):
			g, v, _ := strings.Cut(r.Version, "/")
			p.add(vp, "%q is group and version in one; write group: %s and version: %s", r.Version, g, v)
		default:
			if errs := validation.IsDNS1123Label(r.Version); len(errs) > 0 {
				p.add(vp, "invalid version %q: %s", r.Version, strings.Join(errs, "; "))
			}
		}

		switch {
		case r.Resource == "" && r.Kind == "":
			p.add(rp, "set one of resource (the plural name, e.g. \"pods\") or kind (e.g. \"Pod\")")
		case r.Resource != "" && r.Kind != "":
			p.add(rp.key("kind"), "set either resource or kind, not both")
		}
		if r.Resource != "" {
			res := rp.key("resource")
			switch {
			case strings.Contains(r.Resource, "/"):
				p.add(res, "%q is a subresource; informers watch whole resources", r.Resource)
			case strings.ToLower(r.Resource) != r.Resource:
				p.add(res, "%q: resource is the plural lower-case name, e.g. \"pods\"; to name the type use kind: %s", r.Resource, r.Resource)
			default:
				if errs := validation.IsDNS1123Label(r.Resource); len(errs) > 0 {
					p.add(res, "invalid resource %q: %s", r.Resource, strings.Join(errs, "; "))
				}
			}
		}
		if r.Kind != "" {
			// The same rule the apiserver applies to CRD kinds.
			if errs := validation.IsDNS1035Label(strings.ToLower(r.Kind)); len(errs) > 0 {
				p.add(rp.key("kind"), "invalid kind %q: a kind is a name like \"Pod\" or \"ConfigMap\"", r.Kind)
			}
		}

		seen := map[string]int{}
		for j, ns := range r.Namespaces {
			nsp := rp.key("namespaces").index(j)
			switch {
			case ns == "*":
				p.add(nsp, "\"*\" is not a namespace; leave namespaces out to watch all of them")
				continue
			case ns == "":
				p.add(nsp, "empty namespace")
				continue
			}
			if errs := validation.IsDNS1123Label(ns); len(errs) > 0 {
				p.add(nsp, "invalid namespace %q: %s", ns, strings.Join(errs, "; "))
			}
			if first, dup := seen[ns]; dup {
				p.add(nsp, "duplicate namespace %q (first at line %d)", ns, first)
			} else {
				seen[ns] = p.line(nsp)
			}
		}

		if r.LabelSelector != "" {
			if _, err := labels.Parse(r.LabelSelector); err != nil {
				p.add(rp.key("labelSelector"), "invalid label selector %q: %v", r.LabelSelector, err)
			}
		}
		if r.FieldSelector != "" {
			if _, err := fields.ParseSelector(r.FieldSelector); err != nil {
				p.add(rp.key("fieldSelector"), "invalid field selector %q: %v", r.FieldSelector, err)
			}
		}
		notNegative(p, rp.key("resyncPeriod"), r.ResyncPeriod)
	}
	return names, complete
}

func validateGroup(p *problems, gp path, g string) {
	switch {
	case g == "":
	case g == "core":
		p.add(gp, "the core API group is \"\" (leave group out)")
	case strings.Contains(g, "/"):
		p.add(gp, "%q contains \"/\"; put the version in version", g)
	default:
		if errs := validation.IsDNS1123Subdomain(g); len(errs) > 0 {
			p.add(gp, "invalid group %q: %s", g, strings.Join(errs, "; "))
		}
	}
}

func isWasmBaseName(f string) bool {
	return strings.HasSuffix(f, ".wasm") && len(f) > len(".wasm") &&
		!strings.ContainsAny(f, `/\`) && filepath.Base(f) == f && !strings.HasPrefix(f, ".")
}

// knownNames lists configured resource names for "not configured" hints.
func knownNames(names map[string]int) string {
	if len(names) == 0 {
		return "no resources are configured"
	}
	list := make([]string, 0, len(names))
	for n := range names {
		list = append(list, n)
	}
	sort.Strings(list)
	return "configured: " + strings.Join(list, ", ")
}

func validateSettings(p *problems, sp path, s *PluginSettings, names map[string]int, complete bool) {
	bound := map[string]int{}
	for j := range s.Bindings {
		b := &s.Bindings[j]
		bp := sp.key("bindings").index(j)
		rp := bp.key("resource")
		switch {
		case b.Resource == "":
			p.add(rp, "required: the name of a configured resource")
		default:
			if _, ok := names[b.Resource]; !ok && complete {
				p.add(rp, "binding refers to resource %q, which is not configured (%s)", b.Resource, knownNames(names))
			}
			if first, dup := bound[b.Resource]; dup {
				p.add(rp, "duplicate binding for resource %q (first at line %d); list all its events in one binding", b.Resource, first)
			} else {
				bound[b.Resource] = p.line(rp)
			}
		}
		seen := map[string]bool{}
		for k, e := range b.Events {
			ep := bp.key("events").index(k)
			switch e {
			case EventAdd, EventUpdate, EventDelete:
				if seen[e] {
					p.add(ep, "duplicate event %q", e)
				}
				seen[e] = true
			default:
				p.add(ep, "unknown event %q; expected add, update or delete", e)
			}
		}
		validateFilter(p, bp, b)
		if b.DropSelfNoop && len(b.Events) > 0 && !slices.Contains(b.Events, EventUpdate) {
			p.add(bp.key("dropSelfNoop"), "drops update events, but this binding asks for none (events: %s); remove it or add update", strings.Join(b.Events, ", "))
		}
		if b.GenerationChanged {
			switch {
			case len(b.Events) > 0 && !slices.Contains(b.Events, EventUpdate):
				p.add(bp.key("generationChanged"), "drops update events, but this binding asks for none (events: %s); remove it or add update", strings.Join(b.Events, ", "))
			case b.Resyncs:
				p.add(bp.key("generationChanged"), "drops every update that leaves metadata.generation as it was, resyncs included, so resyncs: true has no effect; remove one of them")
			}
		}
	}

	dp := sp.key("delivery")
	d := &s.Delivery
	switch d.Mode {
	case "", DeliveryEvery, DeliveryLatest:
	default:
		p.add(dp.key("mode"), "unknown delivery mode %q; expected %q or %q", d.Mode, DeliveryEvery, DeliveryLatest)
	}
	inRange(p, dp.key("bufferSize"), d.BufferSize, 1, MaxBufferSize)
	if at := dp.key("maxRetries"); d.MaxRetries != UnlimitedRetries {
		inRange(p, at, d.MaxRetries, 0, MaxMaxRetries)
	}
	notNegative(p, dp.key("retryBackoff"), d.RetryBackoff)
	positive(p, dp.key("maxRetryBackoff"), d.MaxRetryBackoff)
	switch d.OnError {
	case "", OnErrorRetry, OnErrorSkip:
	default:
		p.add(dp.key("onError"), "unknown onError %q; expected %q (retry the object with backoff) or %q (give up on the event)", d.OnError, OnErrorRetry, OnErrorSkip)
	}
	switch d.MissedDeletes {
	case "", MissedDeletesDeliver, MissedDeletesSkip:
	default:
		p.add(dp.key("missedDeletes"), "unknown missedDeletes %q; expected %q (hand the plugin, late and flagged, the deletes it could not see) or %q (do not)",
			d.MissedDeletes, MissedDeletesDeliver, MissedDeletesSkip)
	}

	lp := sp.key("limits")
	l := &s.Limits
	inRange(p, lp.key("memoryPages"), int(l.MemoryPages), 1, MaxMemoryPages)
	notNegative(p, lp.key("callTimeout"), l.CallTimeout)
	if l.MaxConsecutiveFailures < 1 && (l.MaxConsecutiveFailures != 0 || p.present(lp.key("maxConsecutiveFailures"))) {
		p.add(lp.key("maxConsecutiveFailures"), "%d is out of range; must be at least 1", l.MaxConsecutiveFailures)
	}
	// A zero restart delay would let a crashing plugin spin a core.
	positive(p, lp.key("restartBackoff"), l.RestartBackoff)
	positive(p, lp.key("maxRestartBackoff"), l.MaxRestartBackoff)
	positive(p, lp.key("stablePeriod"), l.StablePeriod)
	inRange(p, lp.key("parkAfter"), l.ParkAfter, 0, MaxParkAfter)
	// Below callTimeout, maxCallTime would make callTimeout meaningless:
	// most likely a typo, as is an explicit 0s (there is no unbounded call
	// with a deadline).
	if positive(p, lp.key("maxCallTime"), l.MaxCallTime) && l.MaxCallTime.Duration > 0 && l.MaxCallTime.Duration < l.CallTimeout.Duration {
		p.add(lp.key("maxCallTime"), "%s is below callTimeout (%s); it bounds the whole call, callTimeout its CPU time", l.MaxCallTime.Duration, l.CallTimeout.Duration)
	}
	inRange(p, lp.key("maxHostCallsPerCall"), l.MaxHostCallsPerCall, 1, MaxHostCallsPerCall)

	validateGrants(p, sp, &s.Grants, names, complete)
	validateStateGrant(p, sp.key("grants").key("state"), s.Grants.State)
	validateMetricsGrant(p, sp, s.Grants.Metrics)
	validateWritesGrant(p, sp.key("grants"), s.Grants.Writes, names, complete)
	validateImpersonation(p, sp.key("grants"), s.Grants.Impersonate)
	validateController(p, sp, s, names, complete)

	if s.Config != nil {
		if _, err := json.Marshal(jsonable(s.Config)); err != nil {
			p.add(sp.key("config"), "cannot be handed to the plugin as JSON: %v", err)
		}
	}
}

// validateFilter compiles the binding's filter as the host will, so a
// syntax, type or cost problem is reported with its line before anything
// runs. CEL's own message is kept whole.
func validateFilter(p *problems, bp path, b *Binding) {
	spec := b.FilterSpec()
	if spec.Expression == "" && len(spec.Changed) == 0 && spec.OnError == "" {
		return
	}
	_, err := filter.Compile(spec, filter.Options{})
	var probs filter.Errors
	if !errors.As(err, &probs) {
		if err != nil {
			p.add(bp.key("filter"), "%v", err)
		}
		return
	}
	for _, fp := range probs {
		at := bp.key("filter")
		switch {
		case fp.Field == "onError":
			at = bp.key("onFilterError")
		case strings.HasPrefix(fp.Field, "changed["):
			if i, err := strconv.Atoi(strings.TrimSuffix(strings.TrimPrefix(fp.Field, "changed["), "]")); err == nil {
				at = bp.key("changed").index(i)
			}
		}
		p.add(at, "%s", fp.Message)
	}
}

// validateRestartBackoff compares the first and the last delay of the
// restart and the retry backoff as they will be in effect, since either
// may come from plugins.default or the defaults.
func validateRestartBackoff(p *problems, c *Config) {
	pairs := []struct {
		section, first, last string
		get                  func(s *PluginSettings) (first, last time.Duration)
	}{
		{"limits", "restartBackoff", "maxRestartBackoff", func(s *PluginSettings) (time.Duration, time.Duration) {
			return s.Limits.RestartBackoff.Duration, s.Limits.MaxRestartBackoff.Duration
		}},
		{"delivery", "retryBackoff", "maxRetryBackoff", func(s *PluginSettings) (time.Duration, time.Duration) {
			return s.Delivery.RetryBackoff.Duration, s.Delivery.MaxRetryBackoff.Duration
		}},
	}
	check := func(sp path, s PluginSettings, mustMention bool) {
		for _, pr := range pairs {
			first, last := pr.get(&s)
			if first < 0 || last <= 0 {
				continue // reported on their own
			}
			at := sp.key(pr.section)
			if mustMention && !p.present(at.key(pr.first)) && !p.present(at.key(pr.last)) {
				continue // reported for plugins.default already
			}
			if last < first {
				if p.present(at.key(pr.last)) {
					p.add(at.key(pr.last), "%s (%s) must not be less than %s (%s)", pr.last, last, pr.first, first)
				} else {
					p.add(at.key(pr.first), "%s (%s) must not be more than %s (%s)", pr.first, first, pr.last, last)
				}
			}
		}
	}
	dp := path{"plugins", "default"}
	def := resolveSettings(c.Plugins.Default, fieldsSet(c.Plugins.Default, p, dp), PluginSettings{}, 0)
	check(dp, def, false)
	for i, m := range c.Plugins.Modules {
		mp := path{"plugins", "modules", i}
		check(mp, resolveSettings(m.PluginSettings, fieldsSet(m.PluginSettings, p, mp), def, allFields), true)
	}
}

func validateServer(p *problems, s Server) {
	a := s.Address
	if a == "" || a == ServerOff {
		return
	}
	ap := path{"server", "address"}
	_, port, err := net.SplitHostPort(a)
	if err != nil {
		hint := ""
		if _, err := strconv.Atoi(a); err == nil {
			hint = fmt.Sprintf(" (did you mean \":%s\"?)", a)
		}
		p.add(ap, "invalid address %q; use \"host:port\", \":port\" or %q%s", a, ServerOff, hint)
		return
	}
	if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
		p.add(ap, "invalid port %q in address %q; use a number from 0 to 65535", port, a)
	}
}

func validateLeaderElection(p *problems, le LeaderElection) {
	lp := path{"leaderElection"}
	if le.Namespace != "" {
		if errs := validation.IsDNS1123Label(le.Namespace); len(errs) > 0 {
			p.add(lp.key("namespace"), "invalid namespace %q: %s", le.Namespace, strings.Join(errs, "; "))
		}
	}
	if le.LeaseName != "" {
		if errs := validation.IsDNS1123Subdomain(le.LeaseName); len(errs) > 0 {
			p.add(lp.key("leaseName"), "invalid lease name %q: %s", le.LeaseName, strings.Join(errs, "; "))
		}
	}
	validateLeaseTimings(p, lp, le.LeaseDuration, le.RenewDeadline, le.RetryPeriod)
}

// validateLeaseTimings checks the leaseDuration, renewDeadline and
// retryPeriod under lp (leaderElection or sharding): each positive, in
// the order client-go's elector demands.
func validateLeaseTimings(p *problems, lp path, leaseD, renewD, retryD Duration) {
	ok := positive(p, lp.key("leaseDuration"), leaseD)
	ok = positive(p, lp.key("renewDeadline"), renewD) && ok
	ok = positive(p, lp.key("retryPeriod"), retryD) && ok
	if !ok {
		return
	}
	// client-go's leaderelection refuses these combinations at start-up;
	// better to say so here, with a line number.
	lease := orDefault(leaseD, DefaultLeaseDuration)
	renew := orDefault(renewD, DefaultRenewDeadline)
	retry := orDefault(retryD, DefaultRetryPeriod)
	if lease <= renew {
		at := lp.key("renewDeadline")
		if !p.present(at) {
			at = lp.key("leaseDuration")
		}
		p.add(at, "renewDeadline (%s) must be less than leaseDuration (%s)", renew, lease)
	}
	if float64(renew) <= 1.2*float64(retry) {
		at := lp.key("retryPeriod")
		if !p.present(at) {
			at = lp.key("renewDeadline")
		}
		p.add(at, "renewDeadline (%s) must be greater than 1.2 × retryPeriod (%s)", renew, retry)
	}
}

func orDefault(d Duration, def time.Duration) time.Duration {
	if d.Set || d.Duration != 0 {
		return d.Duration
	}
	return def
}

func inRange(p *problems, at path, v, lo, hi int) {
	if v == 0 && !p.present(at) {
		return // absent: the default applies
	}
	if v < lo || v > hi {
		p.add(at, "%d is out of range; must be between %d and %d", v, lo, hi)
	}
}

func notNegative(p *problems, at path, d Duration) bool {
	if d.Duration < 0 {
		p.add(at, "must not be negative (got %s)", d.Duration)
		return false
	}
	return true
}

// positive accepts an absent value (the default applies) but not an
// explicit zero.
func positive(p *problems, at path, d Duration) bool {
	if !notNegative(p, at, d) {
		return false
	}
	if d.Set && d.Duration == 0 {
		p.add(at, "must be greater than 0")
		return false
	}
	return true
}
