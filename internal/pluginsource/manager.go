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

	// verified caches verifications by policy and digest.
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
	pullPolicy    string
	failurePolicy string
	refresh       time.Duration
	verify        *config.Verify
}

// source is one running source: its goroutine and what it owns.
type source struct {
	spec   spec
	cancel context.CancelFunc
	done   chan struct{}
	// running is the digest the host runs for it; the goroutine's own
	// (read by the next source of the same name after done is closed).
	running string
}

// Status reports one sourced plugin.
type Status struct {
	Plugin string `json:"-"`
	Source string `json:"source"`
	// ResolvedDigest is what the source named at the last look;
	// RunningDigest what the host runs ("" none yet).
	ResolvedDigest string `json:"resolvedDigest,omitempty"`
	RunningDigest  string `json:"runningDigest,omitempty"`
	PullPolicy     string `json:"pullPolicy"`
	FailurePolicy  string `json:"failurePolicy"`
	Verified       bool   `json:"verified"`
	Signer         string `json:"signer,omitempty"`
	// Degraded: the last attempt failed (LastError); what runs, if
	// anything, is the last good version.
	Degraded  bool      `json:"degraded"`
	LastError string    `json:"lastError,omitempty"`
	LastPull  time.Time `json:"lastPull,omitzero"`
	NextRetry time.Time `json:"nextRetry,omitzero"`
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
		out[m.File] = spec{name: m.File, src: Source{Ref: ref, SHA256: m.SHA256}, key: m.Source,
			pullPolicy: m.PullPolicy, failurePolicy: m.FailurePolicy, refresh: m.RefreshInterval.Duration, verify: v}
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
	running := map[string]string{}
	for _, s := range stop {
		s.cancel()
		<-s.done
		running[s.spec.name] = s.running
		m.mu.Lock()
		delete(m.sources, s.spec.name)
		m.mu.Unlock()
		if _, ok := want[s.spec.name]; !ok {
			m.log.Info("plugin source removed from the config; unloading the plugin", "plugin", s.spec.name, "source", s.spec.key)
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
		s := &source{spec: sp, cancel: cancel, done: make(chan struct{}), running: running[sp.name]}
		m.mu.Lock()
		m.sources[sp.name] = s
		st := m.status[sp.name]
		if st == nil {
			st = &Status{Plugin: sp.name}
			m.status[sp.name] = st
		}
		st.Source, st.PullPolicy, st.FailurePolicy = sp.key, sp.pullPolicy, sp.failurePolicy
		m.mu.Unlock()
		if s.running == "" {
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
// there is one the policy still accepts.
func (m *Manager) startFromCache(ctx context.Context, s *source) {
	rec, ok := m.o.Store.LastGood(s.spec.key)
	if !ok {
		return
	}
	if p := s.spec.src.Pinned(); p != "" && p != rec.Digest {
		return // the config now pins another version
	}
	if s.spec.verify != nil && s.spec.verify.Required && !rec.Verified {
		return // verified afresh before it may run
	}
	path, ok := m.o.Store.Path(rec.Digest)
	if !ok {
		return
	}
	if err := m.o.Host.LoadModule(ctx, s.spec.name, path); err != nil {
		m.log.Warn("plugin source: the cached last good version did not load; fetching", "plugin", s.spec.name, "digest", rec.Digest, "err", err)
		return
	}
	s.running = rec.Digest
	m.count(s.spec.name, "cached")
	m.update(s.spec.name, func(st *Status) {
		st.RunningDigest, st.Verified, st.Signer = rec.Digest, rec.Verified, rec.Signer
	})
	m.log.Info("plugin started from the source cache's last good version; refreshing", "plugin", s.spec.name, "source", s.spec.key, "digest", rec.Digest)
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
			next := time.Now().Add(wait)
			m.count(s.spec.name, "failed")
			m.update(s.spec.name, func(st *Status) { st.Degraded, st.LastError, st.NextRetry = true, err.Error(), next })
			if s.running != "" {
				m.log.Warn("plugin source degraded; the last good version keeps running", "plugin", s.spec.name, "source", s.spec.key,
					"running", s.running, "retryIn", wait.Round(time.Millisecond), "err", err)
			} else {
				m.log.Error("plugin source failed; the plugin has no good version yet", "plugin", s.spec.name, "source", s.spec.key,
					"retryIn", wait.Round(time.Millisecond), "err", err)
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

// attempt brings the plugin in step with its source once.
func (m *Manager) attempt(ctx context.Context, s *source) error {
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
			return fmt.Errorf("resolve %s: %w", sp.key, err)
		}
		digest = d
		now := time.Now()
		m.update(sp.name, func(st *Status) { st.ResolvedDigest, st.LastPull = d, now })
	}
	m.update(sp.name, func(st *Status) { st.ResolvedDigest = digest })
	if digest == s.running {
		m.count(sp.name, "unchanged")
		return nil
	}
	path, cached := m.o.Store.Path(digest)
	if !cached {
		art, err := m.o.Fetcher.Fetch(ctx, sp.src, digest)
		if err != nil {
			return fmt.Errorf("fetch %s (%s): %w", sp.key, digest, err)
		}
		now := time.Now()
		m.update(sp.name, func(st *Status) { st.LastPull = now })
		if art.Digest != digest {
			// A file that moved on between the two reads: it is this
			// version that is loaded.
			digest = art.Digest
			m.update(sp.name, func(st *Status) { st.ResolvedDigest = digest })
			if digest == s.running {
				m.count(sp.name, "unchanged")
				return nil
			}
		}
		if path, err = m.o.Store.Put(digest, art.Module); err != nil {
			return err
		}
	}
	vr, err := m.verify(ctx, sp, digest)
	if err != nil {
		return err
	}
	if err := m.o.Host.LoadModule(ctx, sp.name, path); err != nil {
		return fmt.Errorf("load %s: %w", digest, err)
	}
	prev := s.running
	s.running = digest
	if err := m.o.Store.SetLastGood(sp.key, Record{Digest: digest, Verified: vr.Verified, Signer: vr.Signer, At: time.Now()}); err != nil {
		m.log.Warn("plugin source: cannot record the last good version; a restart fetches again", "plugin", sp.name, "err", err)
	}
	m.count(sp.name, "pulled")
	m.update(sp.name, func(st *Status) { st.RunningDigest, st.Verified, st.Signer = digest, vr.Verified, vr.Signer })
	if prev == "" {
		m.log.Info("plugin loaded from its source", "plugin", sp.name, "source", sp.key, "digest", digest, "verified", vr.Verified, "signer", vr.Signer)
	} else {
		m.log.Info("plugin source moved; new version swapped in", "plugin", sp.name, "source", sp.key, "digest", digest, "previous", prev)
	}
	return nil
}

// verify checks digest against the source's policy, once per policy and
// digest. An error refuses the version.
func (m *Manager) verify(ctx context.Context, sp spec, digest string) (VerifyResult, error) {
	if sp.verify == nil {
		return VerifyResult{Reason: "no verify policy"}, nil
	}
	k := verifyKey{policy: fmt.Sprintf("%#v", *sp.verify), digest: digest}
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
		m.log.Warn("plugin source: signature not verified; loading it anyway (verify.required is false)", "plugin", sp.name, "digest", digest, "reason", vr.Reason)
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
		if st.RunningDigest == "" && st.FailurePolicy != config.FailOpen {
			reason := st.LastError
			if reason == "" {
				reason = "not pulled yet"
			}
			why = append(why, fmt.Sprintf("plugin %s: source %s has no good version (failurePolicy fail-closed): %s", name, st.Source, reason))
		}
	}
	sort.Strings(why)
	return why
}
