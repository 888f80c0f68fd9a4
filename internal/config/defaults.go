package config

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"time"
)

// fieldSet records which plugin settings a mapping gives, so that merging
// a module over plugins.default takes what the module says, including
// zeros that mean something (maxRetries: 0, callTimeout: 0s).
type fieldSet uint32

const (
	setBindings fieldSet = 1 << iota
	setConfig
	setMode
	setBufferSize
	setMaxRetries
	setRetryBackoff
	setMaxRetryBackoff
	setOnError
	setMemoryPages
	setCallTimeout
	setMaxConsecutiveFailures
	setRestartBackoff
	setMaxRestartBackoff
	setStablePeriod
	setParkAfter
	setGrantState
	setGrantMetrics
	setGrantWrites
	setGrantImpersonate
	setGrantDryRun
	setGrantEvents
	setGrantHTTP
	setMaxCallTime
	setMaxHostCallsPerCall
	setVerify
	setController
	setMissedDeletes

	allFields = setMissedDeletes<<1 - 1
)

// fieldsSet says which of s's fields the document sets under sp. Bindings
// count only when non-empty: a module with "bindings: []" inherits them,
// since a plugin bound to nothing is never called.
func fieldsSet(s PluginSettings, p *problems, sp path) fieldSet {
	var f fieldSet
	if len(s.Bindings) > 0 {
		f |= setBindings
	}
	d, l := sp.key("delivery"), sp.key("limits")
	for _, x := range []struct {
		bit fieldSet
		at  path
	}{
		{setConfig, sp.key("config")},
		{setMode, d.key("mode")},
		{setBufferSize, d.key("bufferSize")},
		{setMaxRetries, d.key("maxRetries")},
		{setRetryBackoff, d.key("retryBackoff")},
		{setMaxRetryBackoff, d.key("maxRetryBackoff")},
		{setOnError, d.key("onError")},
		{setMemoryPages, l.key("memoryPages")},
		{setCallTimeout, l.key("callTimeout")},
		{setMaxConsecutiveFailures, l.key("maxConsecutiveFailures")},
		{setRestartBackoff, l.key("restartBackoff")},
		{setMaxRestartBackoff, l.key("maxRestartBackoff")},
		{setStablePeriod, l.key("stablePeriod")},
		{setParkAfter, l.key("parkAfter")},
		{setGrantState, sp.key("grants").key("state")},
		{setGrantMetrics, metricsGrantAt(sp)},
		{setGrantWrites, sp.key("grants").key("writes")},
		{setGrantImpersonate, sp.key("grants").key("impersonate")},
		{setGrantDryRun, sp.key("grants").key("dryRun")},
		{setGrantEvents, sp.key("grants").key("events")},
		{setGrantHTTP, sp.key("grants").key("http")},
		{setMaxCallTime, l.key("maxCallTime")},
		{setMaxHostCallsPerCall, l.key("maxHostCallsPerCall")},
		{setVerify, sp.key("verify")},
		{setController, sp.key("controller")},
		{setMissedDeletes, d.key("missedDeletes")},
	} {
		if p.present(x.at) {
			f |= x.bit
		}
	}
	// An empty mode string is as good as absent.
	if s.Delivery.Mode == "" {
		f &^= setMode
	}
	if s.Delivery.OnError == "" {
		f &^= setOnError
	}
	if s.Delivery.MissedDeletes == "" {
		f &^= setMissedDeletes
	}
	return f
}

// setByValue is fieldsSet for settings built in code, where there is no
// document: a zero value counts as not set, except for durations marked
// Set.
func setByValue(s PluginSettings) fieldSet {
	var f fieldSet
	mark := func(bit fieldSet, set bool) {
		if set {
			f |= bit
		}
	}
	isSet := func(d Duration) bool { return d.Set || d.Duration != 0 }
	mark(setBindings, len(s.Bindings) > 0)
	mark(setConfig, s.Config != nil)
	mark(setMode, s.Delivery.Mode != "")
	mark(setBufferSize, s.Delivery.BufferSize != 0)
	mark(setMaxRetries, s.Delivery.MaxRetries != 0)
	mark(setRetryBackoff, isSet(s.Delivery.RetryBackoff))
	mark(setMaxRetryBackoff, isSet(s.Delivery.MaxRetryBackoff))
	mark(setOnError, s.Delivery.OnError != "")
	mark(setMissedDeletes, s.Delivery.MissedDeletes != "")
	mark(setMemoryPages, s.Limits.MemoryPages != 0)
	mark(setCallTimeout, isSet(s.Limits.CallTimeout))
	mark(setMaxConsecutiveFailures, s.Limits.MaxConsecutiveFailures != 0)
	mark(setRestartBackoff, isSet(s.Limits.RestartBackoff))
	mark(setMaxRestartBackoff, isSet(s.Limits.MaxRestartBackoff))
	mark(setStablePeriod, isSet(s.Limits.StablePeriod))
	mark(setParkAfter, s.Limits.ParkAfter != 0)
	mark(setGrantState, s.Grants.State != nil)
	mark(setGrantMetrics, s.Grants.Metrics != nil)
	mark(setGrantWrites, s.Grants.Writes != nil)
	mark(setGrantImpersonate, s.Grants.Impersonate != nil)
	mark(setGrantDryRun, s.Grants.DryRun != nil)
	mark(setGrantEvents, s.Grants.Events != nil)
	mark(setGrantHTTP, s.Grants.HTTP != nil)
	mark(setMaxCallTime, isSet(s.Limits.MaxCallTime))
	mark(setMaxHostCallsPerCall, s.Limits.MaxHostCallsPerCall != 0)
	mark(setVerify, s.Verify != nil)
	mark(setController, s.Controller != nil)
	return f
}

// resolveSettings returns own, with every field own does not set taken
// from base when base sets it, and from the built-in defaults otherwise.
// Binding events come out normalised and every duration marked set.
func resolveSettings(own PluginSettings, ownSet fieldSet, base PluginSettings, baseSet fieldSet) PluginSettings {
	pick := func(bit fieldSet) (from *PluginSettings, ok bool) {
		switch {
		case ownSet&bit != 0:
			return &own, true
		case baseSet&bit != 0:
			return &base, true
		}
		return nil, false
	}
	var out PluginSettings
	// What a plugin listens to is bindings or a controller, taken
	// together from where either is written: a module with bindings
	// does not inherit the default's controller, nor the reverse.
	switch listen := setBindings | setController; {
	case ownSet&listen != 0:
		out.Bindings, out.Controller = own.Bindings, own.Controller
	case baseSet&listen != 0:
		out.Bindings, out.Controller = base.Bindings, base.Controller
	}
	if out.Controller != nil {
		out.Bindings = out.Controller.Bindings()
	}
	if s, ok := pick(setConfig); ok {
		out.Config = jsonable(s.Config)
	}
	str := func(bit fieldSet, get func(*PluginSettings) string, def string) string {
		if s, ok := pick(bit); ok {
			return get(s)
		}
		return def
	}
	num := func(bit fieldSet, get func(*PluginSettings) int, def int) int {
		if s, ok := pick(bit); ok {
			return get(s)
		}
		return def
	}
	dur := func(bit fieldSet, get func(*PluginSettings) Duration, def time.Duration) Duration {
		if s, ok := pick(bit); ok {
			return NewDuration(get(s).Duration)
		}
		return NewDuration(def)
	}
	out.Grants = own.Grants.over(base.Grants)
	// State is picked like the fields above: its presence in YAML (a
	// bit) decides, not a nil pointer (metrics: below).
	if s, ok := pick(setGrantState); ok {
		out.Grants.State = s.Grants.State
	}
	out.Delivery = Delivery{
		Mode:            str(setMode, func(s *PluginSettings) string { return s.Delivery.Mode }, DefaultDeliveryMode),
		BufferSize:      num(setBufferSize, func(s *PluginSettings) int { return s.Delivery.BufferSize }, DefaultBufferSize),
		MaxRetries:      num(setMaxRetries, func(s *PluginSettings) int { return s.Delivery.MaxRetries }, DefaultMaxRetries),
		RetryBackoff:    dur(setRetryBackoff, func(s *PluginSettings) Duration { return s.Delivery.RetryBackoff }, DefaultRetryBackoff),
		MaxRetryBackoff: dur(setMaxRetryBackoff, func(s *PluginSettings) Duration { return s.Delivery.MaxRetryBackoff }, DefaultMaxRetryBackoff),
		OnError:         str(setOnError, func(s *PluginSettings) string { return s.Delivery.OnError }, DefaultOnError),
		MissedDeletes:   str(setMissedDeletes, func(s *PluginSettings) string { return s.Delivery.MissedDeletes }, DefaultMissedDeletes),
	}
	out.Limits = Limits{
		MemoryPages:            uint32(num(setMemoryPages, func(s *PluginSettings) int { return int(s.Limits.MemoryPages) }, DefaultMemoryPages)),
		CallTimeout:            dur(setCallTimeout, func(s *PluginSettings) Duration { return s.Limits.CallTimeout }, DefaultCallTimeout),
		MaxConsecutiveFailures: num(setMaxConsecutiveFailures, func(s *PluginSettings) int { return s.Limits.MaxConsecutiveFailures }, DefaultMaxConsecutiveFailures),
		RestartBackoff:         dur(setRestartBackoff, func(s *PluginSettings) Duration { return s.Limits.RestartBackoff }, DefaultRestartBackoff),
		MaxRestartBackoff:      dur(setMaxRestartBackoff, func(s *PluginSettings) Duration { return s.Limits.MaxRestartBackoff }, DefaultMaxRestartBackoff),
		StablePeriod:           dur(setStablePeriod, func(s *PluginSettings) Duration { return s.Limits.StablePeriod }, DefaultStablePeriod),
		ParkAfter:              num(setParkAfter, func(s *PluginSettings) int { return s.Limits.ParkAfter }, DefaultParkAfter),
	}
	// The call bounds stay zero when absent: zero selects the engine's
	// defaults (DefaultMaxCallTimeFactor times callTimeout, at least a
	// minute, and
	// DefaultMaxHostCallsPerCall), which follow the resolved callTimeout.
	if s, ok := pick(setMaxCallTime); ok {
		out.Limits.MaxCallTime = s.Limits.MaxCallTime
	}
	if s, ok := pick(setMaxHostCallsPerCall); ok {
		out.Limits.MaxHostCallsPerCall = s.Limits.MaxHostCallsPerCall
	}
	if s, ok := pick(setGrantMetrics); ok {
		out.Grants.Metrics = s.Grants.Metrics.resolved()
	}
	// Capabilities II: writes, the identity and dry run are each taken
	// whole from where they are written (grants_writes.go).
	if s, ok := pick(setGrantWrites); ok {
		out.Grants.Writes = s.Grants.Writes
	}
	if s, ok := pick(setGrantImpersonate); ok {
		out.Grants.Impersonate = s.Grants.Impersonate
	}
	if s, ok := pick(setGrantDryRun); ok {
		out.Grants.DryRun = s.Grants.DryRun
	}
	// Events and HTTP are picked like State: a module's "http:" mapping
	// replaces the default's grant whole.
	if s, ok := pick(setGrantEvents); ok {
		out.Grants.Events = s.Grants.Events
	}
	if s, ok := pick(setGrantHTTP); ok {
		out.Grants.HTTP = s.Grants.HTTP
	}
	// A module's verify replaces the default's whole, like grants.http.
	if s, ok := pick(setVerify); ok {
		out.Verify = s.Verify
	}
	out = out.clone()
	if c := out.Controller; c != nil && c.Finalizer != "" && c.OnRemove == "" {
		c.OnRemove = OnRemoveKeep
	}
	return out
}

// clone copies the slices so that callers of SettingsFor cannot change
// the Config through the result, and normalises binding events.
func (s PluginSettings) clone() PluginSettings {
	if s.Bindings != nil {
		bs := make([]Binding, len(s.Bindings))
		for i, b := range s.Bindings {
			b.Events = normaliseEvents(b.Events)
			b.Changed = append([]string(nil), b.Changed...)
			bs[i] = b
		}
		s.Bindings = bs
	}
	s.Grants = s.Grants.clone()
	s.Verify = s.Verify.Clone()
	s.Controller = s.Controller.clone()
	return s
}

// normaliseEvents spells out "all events" and puts events in a fixed
// order, so consumers never special-case an empty list and two bindings
// that mean the same compare equal.
func normaliseEvents(ev []string) []string {
	out := make([]string, 0, 3)
	for _, e := range []string{EventAdd, EventUpdate, EventDelete} {
		if len(ev) == 0 || slices.Contains(ev, e) {
			out = append(out, e)
		}
	}
	return out
}

// applyDefaults fills in everything the file left out. It runs only on a
// valid document, so it never has to second-guess a value.
func applyDefaults(c *Config, p *problems) {
	if c.Plugins.Directory == "" {
		c.Plugins.Directory = DefaultPluginDirectory
	}
	if !p.present(path{"plugins", "maxModuleSize"}) {
		c.Plugins.MaxModuleSize = DefaultMaxModuleSize
	}
	if !p.present(path{"plugins", "fetchTimeout"}) {
		c.Plugins.FetchTimeout = NewDuration(DefaultFetchTimeout)
	}
	dp := path{"plugins", "default"}
	def := resolveSettings(c.Plugins.Default, fieldsSet(c.Plugins.Default, p, dp), PluginSettings{}, 0)
	c.Plugins.Default = def
	for i := range c.Plugins.Modules {
		m := &c.Plugins.Modules[i]
		mp := path{"plugins", "modules", i}
		m.PluginSettings = resolveSettings(m.PluginSettings, fieldsSet(m.PluginSettings, p, mp), def, allFields)
		m.applySourceDefaults(c, p, mp)
	}

	if c.Server.Address == "" {
		c.Server.Address = DefaultServerAddress
	}

	le := &c.LeaderElection
	if le.Namespace == "" {
		le.Namespace = podNamespace(serviceAccountNamespaceFile)
	}
	if le.LeaseName == "" {
		le.LeaseName = DefaultLeaseName
	}
	le.LeaseDuration = NewDuration(orDefault(le.LeaseDuration, DefaultLeaseDuration))
	le.RenewDeadline = NewDuration(orDefault(le.RenewDeadline, DefaultRenewDeadline))
	le.RetryPeriod = NewDuration(orDefault(le.RetryPeriod, DefaultRetryPeriod))
	c.Sharding.applyDefaults()
	c.Tracing.applyDefaults()
	c.Tenancy.applyDefaults()
	c.PluginResources.applyDefaults()

	for i := range c.Resources {
		r := &c.Resources[i]
		r.ResyncPeriod = NewDuration(r.ResyncPeriod.Duration)
	}
	c.ResolveIndexes()
	c.resolved = true
}

// podNamespace returns the namespace the daemon's pod runs in, so that a
// replica set's lease lands next to it without configuration; outside a
// cluster that is "default".
func podNamespace(file string) string {
	b, err := os.ReadFile(file)
	if ns := strings.TrimSpace(string(b)); err == nil && ns != "" {
		return ns
	}
	return "default"
}

// jsonable turns what yaml.v3 decodes into something encoding/json
// accepts: mappings with non-string keys (1: x) come back as
// map[any]any, which JSON objects cannot be, so their keys are written
// out as strings, as a JSON author would have to.
func jsonable(v any) any {
	switch t := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(t))
		for k, x := range t {
			out[k] = jsonable(x)
		}
		return out
	case map[any]any:
		out := make(map[string]any, len(t))
		for k, x := range t {
			out[fmt.Sprint(k)] = jsonable(x)
		}
		return out
	case []any:
		out := make([]any, len(t))
		for i, x := range t {
			out[i] = jsonable(x)
		}
		return out
	}
	return v
}
