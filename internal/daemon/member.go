package daemon

import (
	"context"
	"crypto/rand"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"k8s.io/client-go/kubernetes"

	"github.com/informer-host/informer-host/host"
	"github.com/informer-host/informer-host/informer"
	"github.com/informer-host/informer-host/internal/config"
	"github.com/informer-host/informer-host/internal/pluginsource"
	"github.com/informer-host/informer-host/internal/shard"
)

// member runs the daemon as a member of the sharding group the config
// names: the informers sync and the plugins start at once, with nothing
// to deliver until the member has joined (package shard); from then on
// each plugin sees the objects this member owns. It writes its Lease, and
// so takes a share, only once its plugins are loaded and past their
// initial lists, but for those that cannot be while nothing changes, or
// once 4 leaseDurations have passed (ready): the others drop the share of
// every Lease they count, and a member still compiling or pulling its
// plugins would leave that share processed by nobody for as long. On stop the plugins
// drain first and the Lease is deleted after, so the others take the
// objects over at their next list without two members ever owning them.
// A member that loses contact with the apiserver does not stop, unlike a
// leader that lost its lease: it owns nothing from renewDeadline on (its
// plugins get handed-over deletes), keeps its caches warm, and rejoins
// once it renews again (RATIONALE.md, "Sharding: a fenced member stays").
type member struct {
	sh      config.Sharding
	cs      kubernetes.Interface
	id      string
	log     *slog.Logger
	abandon bool
	// stop, set by join, ends the membership and waits for it.
	stop func()
	// plugins, set by join, reads the host's plugins.
	plugins func() []host.PluginStatus
	// started is set by loaded: the plugins the config names have been
	// started or have failed, but for the sources (set before started),
	// whose first pulls may still be on their way.
	started atomic.Bool
	waits   readiness
	// joinBy is when the member joins whatever it still waits for; now
	// reads the clock.
	joinBy time.Time
	now    func() time.Time
}

// readiness is what a member reads, at each round until it joins, to
// tell whether it can process a share.
type readiness struct {
	sources   func() map[string]pluginsource.Status
	resources func() []informer.ResourceStatus
}

func newMember(sh config.Sharding, cs kubernetes.Interface, log *slog.Logger, abandon bool) *member {
	return &member{sh: sh, cs: cs, id: memberID(), log: log, abandon: abandon, stop: func() {}, now: time.Now}
}

func (m *member) standby() bool { return false }
func (m *member) leave()        { m.stop() }

func (m *member) loaded(r readiness) {
	m.waits = r
	m.started.Store(true)
}

// joinWaitLeases is how many leaseDurations a member waits at most,
// from its start, before it joins whatever it still waits for: long
// enough for a compile, a first pull retried after a transient failure
// and an initial list (60s by default), short enough that a replica that
// cannot get ready does not leave the group without it for good.
const joinWaitLeases = 4

// ready reports whether this replica can process a share, or has waited
// long enough (joinBy). It waits while its plugins are being started, a
// sourced one has no version running yet (retried after a failed attempt:
// a new pod's first pull may fail once), one is loading, or a running one
// has not had its initial list (which waits for its informers to sync).
// It does not wait for what cannot be ready while nothing changes: a
// plugin that failed or is quarantined, or one bound to a resource that
// is not served (Pending), cannot be watched (Failed), or whose lists fail
// (an RBAC refusal): every replica would wait alike, and the group would
// process nothing (RATIONALE.md, "A member joins once it can process its
// share"). The others keep its share while it waits.
func (m *member) ready() bool {
	var waiting, skipped []string
	if !m.started.Load() {
		waiting = []string{"the plugins the config names are not all started yet"}
	} else {
		waiting, skipped = notReady(m.plugins(), m.waits.sources(), m.waits.resources())
	}
	if len(waiting) > 0 {
		if m.now().Before(m.joinBy) {
			return false
		}
		m.log.Warn("sharding: joining though this replica cannot process all of its share yet: it waited as long as it may (4 leaseDurations) while the others kept its share; what is not ready processes its objects once it is",
			"identity", m.id, "waited", (joinWaitLeases * m.sh.LeaseDuration.Duration).String(), "notReady", waiting)
	}
	if len(skipped) > 0 {
		m.log.Warn("sharding: joining without waiting for plugins bound to resources that cannot sync now; they process their share once their resources list",
			"identity", m.id, "plugins", skipped)
	}
	return true
}

// notReady lists what a replica waits for before it joins (waiting), and
// the running plugins it does not wait for since a resource they are
// bound to cannot sync now (skipped).
func notReady(plugins []host.PluginStatus, sources map[string]pluginsource.Status, resources []informer.ResourceStatus) (waiting, skipped []string) {
	for _, st := range sources {
		if st.RunningDigest != "" {
			continue
		}
		w := "plugin " + st.Plugin + ": no version from " + st.Source + " yet"
		if st.LastError != "" {
			w += " (last attempt: " + st.LastError + ")"
		}
		waiting = append(waiting, w)
	}
	byName := make(map[string]informer.ResourceStatus, len(resources))
	for _, r := range resources {
		byName[r.Name] = r
	}
	for _, p := range plugins {
		switch {
		case p.State == host.StateLoading:
			waiting = append(waiting, "plugin "+p.File+": loading")
		case p.State == host.StateRunning && !p.Synced:
			if why := unsyncable(p.Bindings, byName); why != "" {
				skipped = append(skipped, "plugin "+p.File+": "+why)
			} else {
				waiting = append(waiting, "plugin "+p.File+": initial list")
			}
		}
	}
	slices.Sort(waiting)
	return waiting, skipped
}

// unsyncable says why one of bindings' resources cannot sync now, or "".
func unsyncable(bindings []string, resources map[string]informer.ResourceStatus) string {
	for _, b := range bindings {
		r, ok := resources[b]
		switch {
		case !ok:
			return "resource " + b + " is not configured"
		case r.Phase != informer.PhaseActive:
			return "resource " + b + " is " + string(r.Phase) + ": " + r.Error
		case !r.Synced && r.Error != "":
			return "resource " + b + " does not list: " + r.Error
		}
	}
	return ""
}

// join gives h its first (empty) Assignment and starts the membership.
func (m *member) join(ctx context.Context, h *host.Host) error {
	sh := m.sh
	mem, err := shard.New(shard.Options{Client: m.cs.CoordinationV1(), Namespace: sh.Namespace, Group: sh.LeasePrefix,
		Identity: m.id, Key: shard.Key(sh.Key), LeaseDuration: sh.LeaseDuration.Duration,
		RenewDeadline: sh.RenewDeadline.Duration, RetryPeriod: sh.RetryPeriod.Duration,
		Abandon: m.abandon, Logger: m.log, OnChange: h.SetAssignment, Ready: m.ready})
	if err != nil {
		return fmt.Errorf("sharding: %w", err)
	}
	m.plugins = h.Status
	m.joinBy = m.now().Add(joinWaitLeases * sh.LeaseDuration.Duration)
	h.SetAssignment(mem.Assignment())
	m.log.Info("sharding: joining the group", "member", m.id, "lease", sh.Namespace+"/"+mem.LeaseName(), "key", sh.Key)
	// The membership outlives ctx: it must keep the Lease while the
	// plugins drain, and give it up only after.
	mctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	done := make(chan struct{})
	go func() {
		defer close(done)
		mem.Run(mctx)
	}()
	m.stop = func() { cancel(); <-done }
	return nil
}

func (m *member) wait(ctx context.Context, _ *host.Host) (bool, error) {
	<-ctx.Done()
	return false, nil
}

// sourceStatus reads m's sources; none if the config names none.
func sourceStatus(m *pluginsource.Manager) func() map[string]pluginsource.Status {
	return func() map[string]pluginsource.Status {
		if m == nil {
			return nil
		}
		return m.Status()
	}
}

// memberID is the pod's name (its hostname) and a random suffix, so a
// container restarted in the same pod joins as a new member rather than
// inheriting a view it never had. Lower-cased and cut to what a Lease
// name can hold after the prefix.
func memberID() string {
	host, _ := os.Hostname()
	host = strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9', r == '-':
			return r
		case r >= 'A' && r <= 'Z':
			return r + 'a' - 'A'
		}
		return '-'
	}, host)
	host = strings.Trim(host[:min(len(host), 120)], "-")
	if host == "" {
		host = "member"
	}
	const alphabet = "abcdefghijklmnopqrstuvwxyz0123456789"
	b := make([]byte, 5)
	_, _ = rand.Read(b)
	for i := range b {
		b[i] = alphabet[int(b[i])%len(alphabet)]
	}
	return host + "-" + string(b)
}
