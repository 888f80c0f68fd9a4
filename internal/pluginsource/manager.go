package pluginsource

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"sort"
	"sync"
	"time"

	"k8s.io/client-go/util/workqueue"

	"github.com/informer-host/informer-host/internal/config"
)

// Loader is what the manager needs of the host (host.Host).
type Loader interface {
	// LoadModule loads, or swaps in, the module at path as plugin name;
	// on failure the running version keeps running.
	LoadModule(ctx context.Context, name, path string) error
	// Unload stops and removes plugin name.
	Unload(name string)
}

// Verifier checks a module's signature against a policy
// (internal/sigverify, adapted). The policy's Keys and TrustedRoot are
// paths resolved against the config file.
type Verifier interface {
	Verify(ctx context.Context, policy config.Verify, repo, digest string) (VerifyResult, error)
}

// VerifyResult is a verification's outcome: Verified with who signed, or
// not, with why.
type VerifyResult struct {
	Verified bool
	Signer   string
	Reason   string
}

// Default retry bounds of a failing source.
const (
	DefaultRetryBase = time.Second
	DefaultRetryMax  = 5 * time.Minute
)

// Options configure a Manager.
type Options struct {
	Host    Loader  // required
	Fetcher Fetcher // required
	Store   Store   // required
	// Verifier checks signatures; nil: a module whose policy requires a
	// signature is refused ("no verifier"), one whose policy does not
	// loads unverified.
	Verifier Verifier
	Logger   *slog.Logger
	// RetryBase and RetryMax bound the backoff of a failing source
	// (default 1s doubling to 5m).
	RetryBase, RetryMax time.Duration
}

// Manager runs the sourced plugins of a configuration.
type Manager struct {
	o       Options
	log     *slog.Logger
	limiter workqueue.TypedRateLimiter[string]

	// verified caches verifications by policy fingerprint and digest.
	verifiedMu sync.Mutex
	verified   map[verifyKey]VerifyResult

	// mu guards sources and status, and the counters.
	mu      sync.Mutex
	sources map[string]*source // by plugin name
	status  map[string]*Status
	pulls   map[string]map[string]uint64 // plugin -> result -> count
}

type verifyKey struct{ policy, digest string }

// spec is what a source's goroutine runs from; a change restarts it.
type spec struct {
	name          string
	src           Source
	key           string // the store's last-good key: the raw source
	shown         string // the source as logs and Status show it (config.RedactSource)
	pullPolicy    string
	failurePolicy string
	refresh       time.Duration
	verify        *config.Verify
	// policy is verify's PolicyFingerprint, read when the config is
	// applied, so that a key file's new content is a changed spec;
	// policyErr why it could not be read.
	policy, policyErr string
}

// required reports whether the spec's policy refuses what does not verify.
func (sp spec) required() bool { return sp.verify != nil && sp.verify.Required }

// source is one running source: its goroutine and what it owns.
type source struct {
	spec   spec
	cancel context.CancelFunc
	done   chan struct{}
	// run is the version the host runs for it; the goroutine's own
	// (read by the next source of the same name after done is closed).
	run version
}

// version is a version the host runs, where it came from and what its
// verification found under which policy.
type version struct {
	digest     string // "" none
	src        Source
	key, shown string // as spec's, of the source it came from
	verified   bool
	signer     string
	// policy is the fingerprint of the policy it was last verified
	// under ("" not under any).
	policy string
}

// trustedUnder reports whether what v's verification found still holds
// under sp's policy: checked under the same policy, and verified if the
// policy requires it.
func (v version) trustedUnder(sp spec) bool {
	if sp.verify == nil {
		return true
	}
	return sp.policyErr == "" && v.policy == sp.policy && (v.verified || !sp.verify.Required)
}

// Status reports one sourced plugin: the source as configured, and
// apart from it the version running, which may have come from another
// source (the config changed and the new source has no good version yet)
// and whose verification is reported under the current policy only.
type Status struct {
	Plugin string `json:"-"`
	// Source is the source as configured, with an https:// URL's user
	// info and query left out.
	Source string `json:"source"`
	// ResolvedDigest is what the configured source named at the last
	// look; RunningDigest what the host runs ("" none yet), as Running.
	ResolvedDigest string `json:"resolvedDigest,omitempty"`
	RunningDigest  string `json:"runningDigest,omitempty"`
	PullPolicy     string `json:"pullPolicy"`
	FailurePolicy  string `json:"failurePolicy"`
	// Running is the version the host runs; nil none.
	Running *RunningStatus `json:"running,omitempty"`
	// Degraded: the last attempt failed (LastError); what runs, if
	// anything, is the last good version.
	Degraded  bool      `json:"degraded"`
	LastError string    `json:"lastError,omitempty"`
	LastPull  time.Time `json:"lastPull,omitzero"`
	NextRetry time.Time `json:"nextRetry,omitzero"`
}

// RunningStatus is the version a sourced plugin runs.
type RunningStatus struct {
	Digest string `json:"digest"`
	// Source is the source it came from (shown as Status.Source is).
	Source string `json:"source"`
	// Verified: its signature verified under the current policy, by
	// Signer. False when the current policy has not (yet) verified it,
	// whatever an earlier policy found.
	Verified bool   `json:"verified"`
	Signer   string `json:"signer,omitempty"`
}

// New returns a manager that runs nothing until Apply.
func New(o Options) (*Manager, error) {
	if o.Host == nil || o.Fetcher == nil || o.Store == nil {
		return nil, errors.New("pluginsource: Options needs Host, Fetcher and Store")
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.RetryBase <= 0 {
		o.RetryBase = DefaultRetryBase
	}
	if o.RetryMax <= 0 {
		o.RetryMax = DefaultRetryMax
	}
	return &Manager{o: o, log: o.Logger,
		limiter:  workqueue.NewTypedItemExponentialFailureRateLimiter[string](o.RetryBase, o.RetryMax),
		verified: map[verifyKey]VerifyResult{},
		sources:  map[string]*source{}, status: map[string]*Status{}, pulls: map[string]map[string]uint64{}}, nil
}

func specsOf(cfg *config.Config) map[string]spec {
	out := map[string]spec{}
	for _, m := range cfg.Sourced() {
		ref, ok := cfg.SourceRef(m)
		if !ok {
			continue // Load validated it
		}
		// The verifier gets the policy's files as paths it can open:
		// resolved against the config file, as the config means them.
		v := m.Verify.Clone()
		if v != nil {
			for i, k := range v.Keys {
				v.Keys[i] = cfg.ResolvePath(k)
			}
			v.TrustedRoot = cfg.ResolvePath(v.TrustedRoot)
		}
		src := Source{Ref: ref, SHA256: m.SHA256}
		if m.Grants.Impersonate != nil && m.Grants.Impersonate.ServiceAccount != "" {
			src.Impersonate = m.Grants.Impersonate.ServiceAccountUser()
		}
		sp := spec{name: m.File, src: src, key: m.Source, shown: config.RedactSource(m.Source),
			pullPolicy: m.PullPolicy, failurePolicy: m.FailurePolicy, refresh: m.RefreshInterval.Duration, verify: v}
		if fp, err := PolicyFingerprint(v); err != nil {
			sp.policyErr = fmt.Sprintf("plugin %s: %v", m.File, err)
		} else {
			sp.policy = fp
		}
		out[m.File] = sp
	}
	return out
}

// Apply makes the manager run cfg's sources: a new source starts, a
// changed one restarts (its running version keeps running until the new
// one loads), a removed one stops and its plugin is unloaded. A new
// source whose cache holds a last good version has it loaded before Apply
// returns, so a daemon restarting while its registry is down runs it at
// once; everything else happens on the sources' goroutines, which end
// with ctx or Stop.
//
// A source whose verify policy changed (other keys, or a key file with
// other content) re-verifies the version it runs before anything else;
// under verify.required a version the new policy does not verify is
// unloaded.
func (m *Manager) Apply(ctx context.Context, cfg *config.Config) {
	want := specsOf(cfg)
	m.mu.Lock()
	var stop []*source
	var start []spec
	for name, s := range m.sources {
		if w, ok := want[name]; !ok || !reflect.DeepEqual(w, s.spec) {
			stop = append(stop, s)
		}
	}
	for name, w := range want {
		if s, ok := m.sources[name]; !ok || !reflect.DeepEqual(w, s.spec) {
			start = append(start, w)
		}
	}
	m.mu.Unlock()
	sort.Slice(start, func(i, j int) bool { return start[i].name < start[j].name })
	running := map[string]version{}
	for _, s := range stop {
		s.cancel()
		<-s.done
		running[s.spec.name] = s.run
		m.mu.Lock()
		delete(m.sources, s.spec.name)
		m.mu.Unlock()
		if _, ok := want[s.spec.name]; !ok {
			m.log.Info("plugin source removed from the config; unloading the plugin", "plugin", s.spec.name, "source", s.spec.shown)
			m.o.Host.Unload(s.spec.name)
			m.limiter.Forget(s.spec.name)
			m.mu.Lock()
			delete(m.status, s.spec.name)
			delete(m.pulls, s.spec.name)
			m.mu.Unlock()
		}
	}
	for _, sp := range start {
		sctx, cancel := context.WithCancel(ctx)
		s := &source{spec: sp, cancel: cancel, done: make(chan struct{}), run: running[sp.name]}
		m.mu.Lock()
		m.sources[sp.name] = s
		st := m.status[sp.name]
		if st == nil {
			st = &Status{Plugin: sp.name}
			m.status[sp.name] = st
		}
		st.Source, st.PullPolicy, st.FailurePolicy = sp.shown, sp.pullPolicy, sp.failurePolicy
		m.mu.Unlock()
		if s.run.digest != "" && sp.verify != nil && s.run.policy != sp.policy {
			// Verified under another policy: until the source's goroutine
			// has checked it under this one, it is not verified (the
			// status only; the goroutine decides whether it keeps running).
			m.setRunning(sp.name, version{digest: s.run.digest, shown: s.run.shown})
		}
		if s.run.digest == "" {
			m.startFromCache(sctx, s)
		}
		go m.run(sctx, s)
	}
}

// Stop ends every source's goroutine; the plugins keep running (the
// host's Stop ends them).
func (m *Manager) Stop() {
	m.mu.Lock()
	all := make([]*source, 0, len(m.sources))
	for _, s := range m.sources {
		all = append(all, s)
	}
	m.mu.Unlock()
	for _, s := range all {
		s.cancel()
		<-s.done
	}
}

// startFromCache loads the source's last good version from the store, if
// there is one the policy still accepts: under verify.required only one
// verified under the current policy (the record names it by content).
// One that is not, under a policy that does not require a signature, runs
// reported unverified until the first attempt verifies it.
func (m *Manager) startFromCache(ctx context.Context, s *source) {
	sp := s.spec
	rec, ok := m.o.Store.LastGood(sp.key)
	if !ok {
		return
	}
	if p := sp.src.Pinned(); p != "" && p != rec.Digest {
		return // the config now pins another version
	}
	v := version{digest: rec.Digest, src: sp.src, key: sp.key, shown: sp.shown}
	if sp.verify != nil && rec.Policy != "" && rec.Policy == sp.policy {
		v.verified, v.signer, v.policy = rec.Verified, rec.Signer, rec.Policy
	}
	if sp.required() && !v.trustedUnder(sp) {
		return // verified afresh before it may run
	}
	path, ok := m.o.Store.Path(rec.Digest)
	if !ok {
		return
	}
	if err := m.o.Host.LoadModule(ctx, sp.name, path); err != nil {
		m.log.Warn("plugin source: the cached last good version did not load; fetching", "plugin", sp.name, "digest", rec.Digest, "err", err)
		return
	}
	s.run = v
	m.count(sp.name, "cached")
	m.setRunning(sp.name, v)
	next := "resolving the source once"
	switch {
	case sp.pullPolicy == config.PullNever:
		next = "pullPolicy Never: the registry is not asked"
	case sp.pullPolicy == config.PullIfNotPresent:
		next = "pullPolicy IfNotPresent: the registry is not asked while the cache holds it"
	case sp.refresh > 0 && sp.src.Pinned() == "":
		next = "refreshing every " + sp.refresh.String()
	}
	if sp.verify != nil && !v.trustedUnder(sp) {
		next += "; verifying it under the current policy, which has not verified it yet"
	}
	m.log.Info("plugin started from the source cache's last good version; "+next, "plugin", sp.name, "source", sp.shown, "digest", rec.Digest)
}

// run is a source's goroutine: attempts, with backoff after a failure and
// the refresh interval after a success, until ctx ends. A source that
// does not move (pinned, IfNotPresent, Never) stops after its first
// success.
func (m *Manager) run(ctx context.Context, s *source) {
	defer close(s.done)
	for {
		err := m.attempt(ctx, s)
		if ctx.Err() != nil {
			return
		}
		var wait time.Duration
		if err != nil {
			wait = m.limiter.When(s.spec.name)
			if r := s.spec.refresh; r > 0 && wait > r {
				// The operator's interval bounds the wait for a fix (a
				// signature attached, a tag pushed) to be picked up; the
				// backoff only spaces retries of sources that have none.
				wait = r
			}
			next := time.Now().Add(wait)
			m.count(s.spec.name, "failed")
			// The reason goes to the log and to /readyz, which anyone
			// reaching the port reads: without the source's secrets.
			msg := scrubSource(s.spec.key, err.Error())
			m.update(s.spec.name, func(st *Status) { st.Degraded, st.LastError, st.NextRetry = true, msg, next })
			if s.run.digest != "" {
				m.log.Warn("plugin source degraded; the last good version keeps running", "plugin", s.spec.name, "source", s.spec.shown,
					"running", s.run.digest, "retryIn", wait.Round(time.Millisecond), "err", msg)
			} else {
				m.log.Error("plugin source failed; the plugin has no good version yet", "plugin", s.spec.name, "source", s.spec.shown,
					"retryIn", wait.Round(time.Millisecond), "err", msg)
			}
		} else {
			m.limiter.Forget(s.spec.name)
			m.update(s.spec.name, func(st *Status) { st.Degraded, st.LastError, st.NextRetry = false, "", time.Time{} })
			if s.spec.refresh <= 0 || s.spec.pullPolicy != config.PullAlways {
				return
			}
			wait = s.spec.refresh
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}

// attempt brings the plugin in step with its source and policy once:
// the running version is verified again if the policy changed, then the
// source is resolved and a new version swapped in.
func (m *Manager) attempt(ctx context.Context, s *source) error {
	var unloaded error
	if s.run.digest != "" && !s.run.trustedUnder(s.spec) {
		if err := m.recheck(ctx, s); err != nil {
			if s.run.digest != "" {
				return err // still running, reported unverified
			}
			unloaded = err
		}
	}
	err := m.follow(ctx, s)
	if err != nil && unloaded != nil {
		return fmt.Errorf("%w; and the configured source: %w", unloaded, err)
	}
	return err
}

// recheck verifies the running version under the current policy. Under
// verify.required one that does not verify (refused, or the verifier
// cannot decide) is unloaded: the operator changed the policy to stop
// trusting something, and only a version verified under the policy in
// force may run. Otherwise it keeps running, reported unverified.
func (m *Manager) recheck(ctx context.Context, s *source) error {
	sp, v := s.spec, s.run
	// Signatures are looked up where the running version came from.
	at := sp
	at.src = v.src
	vr, err := m.verify(ctx, at, v.digest)
	if err == nil {
		v.verified, v.signer, v.policy = vr.Verified, vr.Signer, sp.policy
		s.run = v
		m.setRunning(sp.name, v)
		if v.key == sp.key {
			m.setLastGood(sp, v)
		}
		return nil
	}
	if ctx.Err() != nil {
		// Stopped (a reload, shutdown) while asking: that is no answer,
		// and the next source of this name asks again.
		return err
	}
	v.verified, v.signer, v.policy = false, "", ""
	s.run = v
	if !sp.required() {
		m.setRunning(sp.name, v)
		return fmt.Errorf("the running version %s is not verified under the current policy: %w", v.digest, err)
	}
	m.o.Host.Unload(sp.name)
	s.run = version{}
	m.setRunning(sp.name, version{})
	m.count(sp.name, "unloaded")
	m.log.Error("plugin unloaded: the version it ran is not verified under the current verify policy (verify.required)",
		"plugin", sp.name, "source", v.shown, "digest", v.digest, "err", scrubSource(v.key, err.Error()))
	return fmt.Errorf("unloaded the version that ran (%s from %s): %w", v.digest, v.shown, err)
}

// follow resolves the source and loads what it names if that is not what
// runs.
func (m *Manager) follow(ctx context.Context, s *source) error {
	sp := s.spec
	var digest string
	switch {
	case sp.pullPolicy == config.PullNever:
		rec, ok := m.o.Store.LastGood(sp.key)
		if p := sp.src.Pinned(); p != "" {
			digest = p
		} else if ok {
			digest = rec.Digest
		}
		if _, cached := m.o.Store.Path(digest); digest == "" || !cached {
			return errors.New("pullPolicy is Never and the source cache holds no version of this source; pull it once with IfNotPresent or Always")
		}
	case sp.pullPolicy == config.PullIfNotPresent && sp.src.Pinned() != "":
		digest = sp.src.Pinned()
	case sp.pullPolicy == config.PullIfNotPresent:
		if rec, ok := m.o.Store.LastGood(sp.key); ok {
			if _, cached := m.o.Store.Path(rec.Digest); cached {
				digest = rec.Digest
				break
			}
		}
		fallthrough
	default:
		d, err := m.o.Fetcher.Resolve(ctx, sp.src)
		if err != nil {
			err = fmt.Errorf("resolve %s: %w", sp.shown, err)
			if s.run.digest == "" && sp.required() {
				return m.cachedWhileUnreachable(ctx, s, err)
			}
			return err
		}
		digest = d
		now := time.Now()
		m.update(sp.name, func(st *Status) { st.ResolvedDigest, st.LastPull = d, now })
	}
	m.update(sp.name, func(st *Status) { st.ResolvedDigest = digest })
	if digest == s.run.digest {
		m.adopt(s)
		m.count(sp.name, "unchanged")
		return nil
	}
	path, cached := m.o.Store.Path(digest)
	if !cached {
		art, err := m.o.Fetcher.Fetch(ctx, sp.src, digest)
		if err != nil {
			return fmt.Errorf("fetch %s (%s): %w", sp.shown, digest, err)
		}
		now := time.Now()
		m.update(sp.name, func(st *Status) { st.LastPull = now })
		if art.Digest != digest {
			// A file that moved on between the two reads: it is this
			// version that is loaded.
			digest = art.Digest
			m.update(sp.name, func(st *Status) { st.ResolvedDigest = digest })
			if digest == s.run.digest {
				m.adopt(s)
				m.count(sp.name, "unchanged")
				return nil
			}
		}
		if path, err = m.o.Store.Put(digest, art.Module); err != nil {
			return err
		}
	}
	return m.load(ctx, s, digest, path)
}

// load verifies digest under the source's policy and swaps it in.
func (m *Manager) load(ctx context.Context, s *source, digest, path string) error {
	sp := s.spec
	vr, err := m.verify(ctx, sp, digest)
	if err != nil {
		return err
	}
	if err := m.o.Host.LoadModule(ctx, sp.name, path); err != nil {
		return fmt.Errorf("load %s: %w", digest, err)
	}
	prev := s.run.digest
	s.run = version{digest: digest, src: sp.src, key: sp.key, shown: sp.shown, verified: vr.Verified, signer: vr.Signer, policy: sp.policy}
	m.setLastGood(sp, s.run)
	m.count(sp.name, "pulled")
	m.setRunning(sp.name, s.run)
	if prev == "" {
		m.log.Info("plugin loaded from its source", "plugin", sp.name, "source", sp.shown, "digest", digest, "verified", vr.Verified, "signer", vr.Signer)
	} else {
		m.log.Info("plugin source moved; new version swapped in", "plugin", sp.name, "source", sp.shown, "digest", digest, "previous", prev)
	}
	return nil
}

// adopt makes the running version the configured source's when the
// source, changed in the config, names the digest already running (it was
// verified under the current policy before follow was called).
func (m *Manager) adopt(s *source) {
	sp := s.spec
	if s.run.key == sp.key {
		return
	}
	s.run.src, s.run.key, s.run.shown = sp.src, sp.key, sp.shown
	m.setLastGood(sp, s.run)
	m.setRunning(sp.name, s.run)
}

// cachedWhileUnreachable is a required source's answer to a registry that
// cannot be reached when nothing runs yet: the cache's last good version
// runs if it verifies under the current policy where it is (its
// signatures brought by a bundle, or a verification cached in this
// process); otherwise the error says that the cached version is there
// and what would let it run, rather than only how the registry failed.
func (m *Manager) cachedWhileUnreachable(ctx context.Context, s *source, resolveErr error) error {
	sp := s.spec
	rec, ok := m.o.Store.LastGood(sp.key)
	if !ok {
		return resolveErr
	}
	if p := sp.src.Pinned(); p != "" && p != rec.Digest {
		return resolveErr
	}
	path, ok := m.o.Store.Path(rec.Digest)
	if !ok {
		return resolveErr
	}
	if err := m.load(ctx, s, rec.Digest, path); err != nil {
		return fmt.Errorf("the source cache holds %s, but it cannot run: no signature of it verifies under this verify policy here (%w), and the registry cannot be reached to look further (%w); "+
			"to run it air-gapped, load a bundle made by `informer-host bundle save`, which carries its signatures, or sign it with a key in verify.keys; otherwise bring the registry back",
			rec.Digest, err, resolveErr)
	}
	return fmt.Errorf("%w (the cached version %s, verified under the current policy, runs meanwhile)", resolveErr, rec.Digest)
}

func (m *Manager) setLastGood(sp spec, v version) {
	if err := m.o.Store.SetLastGood(sp.key, Record{Digest: v.digest, Verified: v.verified, Signer: v.signer, Policy: v.policy, At: time.Now()}); err != nil {
		m.log.Warn("plugin source: cannot record the last good version; a restart fetches again", "plugin", sp.name, "err", err)
	}
}

// setRunning reports v as what the host runs for name (none for the zero
// version).
func (m *Manager) setRunning(name string, v version) {
	m.update(name, func(st *Status) {
		st.RunningDigest, st.Running = v.digest, nil
		if v.digest != "" {
			st.Running = &RunningStatus{Digest: v.digest, Source: v.shown, Verified: v.verified, Signer: v.signer}
		}
	})
}

// verify checks digest against the source's policy, once per policy and
// digest. An error refuses the version.
func (m *Manager) verify(ctx context.Context, sp spec, digest string) (VerifyResult, error) {
	if sp.verify == nil {
		return VerifyResult{Reason: "no verify policy"}, nil
	}
	if sp.policyErr != "" {
		return VerifyResult{}, fmt.Errorf("verify %s: %s", digest, sp.policyErr)
	}
	k := verifyKey{policy: sp.policy, digest: digest}
	m.verifiedMu.Lock()
	vr, ok := m.verified[k]
	m.verifiedMu.Unlock()
	if !ok {
		if m.o.Verifier == nil {
			vr = VerifyResult{Reason: "no signature verifier in this build"}
		} else {
			var err error
			vr, err = m.o.Verifier.Verify(ctx, *sp.verify, sp.src.Ref.Repo(), digest)
			if err != nil {
				// Not cached: the verifier could not decide (a registry
				// down), the next attempt asks again.
				return vr, fmt.Errorf("verify %s: %w", digest, err)
			}
		}
		// Only a verified result is kept: a signature may be attached
		// after the tag moved (push, then sign), and a later attempt
		// must find it.
		if vr.Verified {
			m.verifiedMu.Lock()
			m.verified[k] = vr
			m.verifiedMu.Unlock()
		}
	}
	if !vr.Verified && sp.verify.Required {
		return vr, fmt.Errorf("signature of %s not verified: %s (verify.required refuses it)", digest, vr.Reason)
	}
	if !vr.Verified {
		m.log.Warn("plugin source: signature not verified; loading it anyway (verify.required is false)", "plugin", sp.name, "digest", digest, "reason", scrubSource(sp.key, vr.Reason))
	}
	return vr, nil
}

func (m *Manager) update(name string, f func(*Status)) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if st := m.status[name]; st != nil {
		f(st)
	}
}

func (m *Manager) count(name, result string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	c := m.pulls[name]
	if c == nil {
		c = map[string]uint64{}
		m.pulls[name] = c
	}
	c[result]++
}

// Status reports every sourced plugin, by plugin name.
func (m *Manager) Status() map[string]Status {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make(map[string]Status, len(m.status))
	for n, st := range m.status {
		out[n] = *st
	}
	return out
}

// NotReady lists why the sources keep the daemon from being ready: a
// fail-closed plugin with no good version.
func (m *Manager) NotReady() []string {
	var why []string
	for name, st := range m.Status() {
		if st.FailurePolicy == config.FailOpen {
			continue
		}
		reason := st.LastError
		if reason == "" {
			reason = "not pulled yet"
		}
		switch {
		case st.Running == nil:
			why = append(why, fmt.Sprintf("plugin %s: source %s has no good version (failurePolicy fail-closed): %s", name, st.Source, reason))
		case st.Running.Source != st.Source && st.Degraded:
			// A config edit whose source has no good version: what runs
			// is not what the config says.
			why = append(why, fmt.Sprintf("plugin %s: runs %s from %s, not the configured source %s, which has no good version (failurePolicy fail-closed): %s",
				name, st.Running.Digest, st.Running.Source, st.Source, reason))
		}
	}
	sort.Strings(why)
	return why
}
