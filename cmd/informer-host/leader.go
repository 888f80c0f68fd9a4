package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"

	"github.com/informer-host/informer-host/config"
	"github.com/informer-host/informer-host/server"
)

// errLostLeadership ends a replica that lost its lease while running: it
// exits non-zero and its pod restarts as a candidate, the usual pattern
// for client-go leader election (a half-stopped leader must not linger).
var errLostLeadership = errors.New("lost the leader lease")

// runAsLeader campaigns for the lease named in the config and runs the
// daemon while this replica holds it. Standbys answer /healthz and /readyz
// (a Deployment's rollout must not wait for a replica that, by design, runs
// nothing) and say in /readyz that they wait for the lease.
func runAsLeader(ctx context.Context, cfg *config.Config, log *slog.Logger, o runOptions, srv *server.Server) error {
	le := cfg.LeaderElection
	restCfg, _, err := restConfig(cfg)
	if err != nil {
		return err
	}
	cs, err := kubernetes.NewForConfig(restCfg)
	if err != nil {
		return err
	}
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
	var runErr error
	// started is closed when this replica starts leading, ran when the
	// daemon it ran has returned. The elector does not wait for
	// OnStartedLeading to return, so runAsLeader does, lest the daemon
	// still run (or drain) when the caller thinks it stopped.
	started, ran := make(chan struct{}), make(chan struct{})
	elector, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock:            lock,
		LeaseDuration:   le.LeaseDuration.Duration,
		RenewDeadline:   le.RenewDeadline.Duration,
		RetryPeriod:     le.RetryPeriod.Duration,
		ReleaseOnCancel: true,
		Name:            "informer-host",
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(lctx context.Context) {
				close(started)
				defer close(ran)
				log.Info("became the leader; starting", "lease", le.Namespace+"/"+le.LeaseName, "identity", id)
				ro := o
				// lctx ends with the lease, or with ctx: the lease was lost
				// if ctx is still live.
				ro.lostLease = func() bool { return ctx.Err() == nil }
				runErr = run(lctx, cfg, log, ro, srv)
			},
			OnStoppedLeading: func() {
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
		return fmt.Errorf("leader election: %w", err)
	}
	log.Info("campaigning for the leader lease", "lease", le.Namespace+"/"+le.LeaseName, "identity", id)
	elector.Run(ctx)
	select {
	case <-started:
	default:
		return nil // never led (ctx ended while campaigning)
	}
	<-ran
	switch {
	case runErr != nil:
		return runErr
	case ctx.Err() == nil:
		return errLostLeadership
	}
	return nil
}
