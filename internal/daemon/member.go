package daemon

import (
	"context"
	"crypto/rand"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync/atomic"

	"k8s.io/client-go/kubernetes"

	"github.com/informer-host/informer-host/host"
	"github.com/informer-host/informer-host/internal/config"
	"github.com/informer-host/informer-host/internal/pluginsource"
	"github.com/informer-host/informer-host/internal/shard"
)

// member runs the daemon as a member of the sharding group the config
// names: the informers sync and the plugins start at once, with nothing
// to deliver until the member has joined (package shard); from then on
// each plugin sees the objects this member owns. It writes its Lease, and
// so takes a share, only once its plugins are loaded and past their
// initial lists (ready): the others drop the share of every Lease they
// count, and a member still compiling or pulling its plugins would leave
// that share processed by nobody for as long. On stop the plugins
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
	// started is set by loaded: the plugins the config names have been
	// started or have failed, but for those pending (set before started)
	// reports still on their way.
	started atomic.Bool
	pending func() bool
}

func newMember(sh config.Sharding, cs kubernetes.Interface, log *slog.Logger, abandon bool) *member {
	return &member{sh: sh, cs: cs, id: memberID(), log: log, abandon: abandon, stop: func() {}}
}

func (m *member) standby() bool { return false }
func (m *member) leave()        { m.stop() }

func (m *member) loaded(pending func() bool) {
	m.pending = pending
	m.started.Store(true)
}

// ready reports whether this replica can process a share: its plugins
// have been started, no sourced one is still on its first pull, none is
// loading, and every running one has had its initial list (which waits
// for its informers to sync). A plugin that failed or is quarantined, or
// whose source's first attempt failed, does not hold the join back: it
// would hold the share back for good, and on the others it may run.
func (m *member) ready(h *host.Host) bool {
	if !m.started.Load() || m.pending() {
		return false
	}
	for _, p := range h.Status() {
		if p.State == host.StateLoading || p.State == host.StateRunning && !p.Synced {
			return false
		}
	}
	return true
}

// join gives h its first (empty) Assignment and starts the membership.
func (m *member) join(ctx context.Context, h *host.Host) error {
	sh := m.sh
	mem, err := shard.New(shard.Options{Client: m.cs.CoordinationV1(), Namespace: sh.Namespace, Group: sh.LeasePrefix,
		Identity: m.id, Key: shard.Key(sh.Key), LeaseDuration: sh.LeaseDuration.Duration,
		RenewDeadline: sh.RenewDeadline.Duration, RetryPeriod: sh.RetryPeriod.Duration,
		Abandon: m.abandon, Logger: m.log, OnChange: h.SetAssignment, Ready: func() bool { return m.ready(h) }})
	if err != nil {
		return fmt.Errorf("sharding: %w", err)
	}
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

// pendingSources reports whether a plugin of m's is on its first pull:
// nothing of it runs yet and no attempt has failed. Once one has, the
// next may be minutes away, and the join waits no longer.
func pendingSources(m *pluginsource.Manager) func() bool {
	return func() bool {
		if m == nil {
			return false
		}
		for _, st := range m.Status() {
			if st.RunningDigest == "" && st.LastError == "" {
				return true
			}
		}
		return false
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
