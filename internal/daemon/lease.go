package daemon

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"sync/atomic"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"

	"github.com/informer-host/informer-host/host"
	"github.com/informer-host/informer-host/internal/config"
	"github.com/informer-host/informer-host/internal/server"
)

// leader runs the daemon as a warm standby that campaigns for the lease
// named in the config: the informers sync and the plugins compile at
// once, and the plugins start (with the cache as their initial list) when
// this replica gets the lease. Standbys answer /healthz, and /readyz once
// their informers are synced (a rollout waits for a standby to be warm,
// not for it to lead).
type leader struct {
	le      config.LeaderElection
	lock    *resourcelock.LeaseLock
	id      string
	log     *slog.Logger
	abandon bool
	// release, set by wait, stops the elector and gives the lease up.
	release func()
}

func newLeader(le config.LeaderElection, cs kubernetes.Interface, log *slog.Logger, srv *server.Server, abandon bool) *leader {
	hostname, _ := os.Hostname()
	id := hostname + "_" + string(uuid.NewUUID())
	lock := &resourcelock.LeaseLock{
		LeaseMeta:  metav1.ObjectMeta{Namespace: le.Namespace, Name: le.LeaseName},
		Client:     cs.CoordinationV1(),
		LockConfig: resourcelock.ResourceLockConfig{Identity: id},
	}
	if srv != nil {
		srv.Standby(fmt.Sprintf("standby: waiting for the lease %s/%s", le.Namespace, le.LeaseName))
	}
	return &leader{le: le, lock: lock, id: id, log: log, abandon: abandon, release: func() {}}
}

func (l *leader) standby() bool                          { return true }
func (l *leader) join(context.Context, *host.Host) error { return nil }
func (l *leader) loaded(readiness)                       {}
func (l *leader) leave()                                 { l.release() }

// wait activates h when this replica gets the lease, and returns when ctx
// ends (lost false) or when the lease is lost (lost true).
func (l *leader) wait(ctx context.Context, h *host.Host) (bool, error) {
	le, lock, id, log := l.le, l.lock, l.id, l.log
	lease := le.Namespace + "/" + le.LeaseName
	// The elector runs on its own context, ended by release: on SIGTERM
	// the lease is kept while the plugins drain and given up after, so
	// two replicas never deliver at once.
	leCtx, cancelLE := context.WithCancel(context.WithoutCancel(ctx))
	// activated is closed once OnStartedLeading's Activate returned, lost
	// when the elector stopped while leCtx was live, ran when the elector
	// returned.
	activated, lost, ran := make(chan struct{}), make(chan struct{}), make(chan struct{})
	var leading atomic.Bool
	elector, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock:            lock,
		LeaseDuration:   le.LeaseDuration.Duration,
		RenewDeadline:   le.RenewDeadline.Duration,
		RetryPeriod:     le.RetryPeriod.Duration,
		ReleaseOnCancel: !l.abandon,
		Name:            "informer-host",
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(lctx context.Context) {
				defer close(activated)
				leading.Store(true)
				log.Info("became the leader; starting the plugins", "lease", lease, "identity", id)
				// A plugin that fails to start is reported in its status,
				// like a failed load; the others run.
				_ = h.Activate(lctx)
			},
			OnStoppedLeading: func() {
				if leCtx.Err() == nil {
					close(lost)
				}
				log.Info("leader lease released or lost", "identity", id)
			},
			OnNewLeader: func(identity string) {
				if identity != id {
					log.Info("another replica leads", "leader", identity)
				}
			},
		},
	})
	if err != nil {
		cancelLE()
		return false, fmt.Errorf("leader election: %w", err)
	}
	log.Info("standby: campaigning for the leader lease", "lease", lease, "identity", id)
	go func() {
		defer close(ran)
		// Wait for the lease here, then hand it to the elector, which
		// renews it at once: see takeLease.
		if !takeLease(leCtx, lock, le.LeaseDuration.Duration, standbyPoll(le.RetryPeriod.Duration), log) {
			return
		}
		elector.Run(leCtx)
		if !leading.Load() && !l.abandon {
			// Stopped between taking the lease and the elector's first
			// renewal: give it up, as the elector would have, if it is
			// still this replica's (the update is conditional on the
			// version read).
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), le.RenewDeadline.Duration)
			defer cancel()
			if rec, _, err := lock.Get(rctx); err == nil && rec.HolderIdentity == id {
				now := metav1.NewTime(time.Now())
				_ = lock.Update(rctx, resourcelock.LeaderElectionRecord{LeaseDurationSeconds: 1, RenewTime: now,
					AcquireTime: now, LeaderTransitions: rec.LeaderTransitions})
			}
		}
	}()
	l.release = func() {
		cancelLE()
		<-ran
		if leading.Load() {
			<-activated
		}
	}
	select {
	case <-lost:
		return true, nil
	case <-ctx.Done():
		// Let an activation under way finish, so the drain sees every
		// plugin it started.
		if leading.Load() {
			<-activated
		}
		return false, nil
	}
}

// standbyPoll is how often a standby looks at the lease: an eighth of the
// retry period, at least 50ms (one GET of one Lease each time).
func standbyPoll(retry time.Duration) time.Duration { return max(retry/8, 50*time.Millisecond) }

// takeLease waits until the lease is free (released: no holder) or has
// expired by this replica's own observation (unchanged for its
// leaseDurationSeconds since this replica saw it change, the rule
// client-go's elector applies), then takes it with a conditional update,
// and reports true; false when ctx ends. A lease that does not exist yet
// is left for the elector to create.
//
// The elector alone notices a released or expired lease only at its next
// retry, jittered over [1, 2.2] retry periods: 2-4.4s with the default 2s,
// on top of leaseDuration after a crash. Looking every standbyPoll brings
// a SIGTERM handover under a second and a failover within leaseDuration
// plus two polls. A fresh elector handed the lease held in this replica's
// name renews it on its first try (it is the holder), so only the waiting
// is done here; leading and renewing stay client-go's.
func takeLease(ctx context.Context, lock *resourcelock.LeaseLock, leaseDuration, poll time.Duration, log *slog.Logger) bool {
	var seen []byte
	var seenAt time.Time
	holder := ""
	for {
		rec, raw, err := lock.Get(ctx)
		now := time.Now()
		switch {
		case apierrors.IsNotFound(err):
			return true
		case err != nil:
			log.Debug("standby: cannot read the lease", "err", err)
		default:
			if !bytes.Equal(raw, seen) {
				seen, seenAt = raw, now
			}
			if rec.HolderIdentity != holder && rec.HolderIdentity != "" {
				log.Info("another replica leads", "leader", rec.HolderIdentity)
			}
			holder = rec.HolderIdentity
			d := time.Duration(rec.LeaseDurationSeconds) * time.Second
			if rec.HolderIdentity == "" || now.After(seenAt.Add(d)) {
				next := resourcelock.LeaderElectionRecord{HolderIdentity: lock.Identity(),
					LeaseDurationSeconds: int(leaseDuration / time.Second), LeaderTransitions: rec.LeaderTransitions + 1,
					AcquireTime: metav1.NewTime(now), RenewTime: metav1.NewTime(now)}
				// Conditional on the version read: if another replica
				// took it meanwhile, this fails and the wait goes on.
				if err := lock.Update(ctx, next); err == nil {
					return true
				}
			}
		}
		select {
		case <-ctx.Done():
			return false
		case <-time.After(poll):
		}
	}
}
