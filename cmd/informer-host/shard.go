package main

import (
	"context"
	"crypto/rand"
	"fmt"
	"log/slog"
	"os"
	"strings"

	"k8s.io/client-go/kubernetes"

	"github.com/informer-host/informer-host/host"
	"github.com/informer-host/informer-host/internal/config"
	"github.com/informer-host/informer-host/internal/server"
	"github.com/informer-host/informer-host/internal/shard"
)

// runSharded runs the daemon as a member of the sharding group the config
// names: the informers sync and the plugins start at once, with nothing
// to deliver until the member has joined (package shard); from then on
// each plugin sees the objects this member owns. On SIGTERM the plugins
// drain first and the Lease is deleted after, so the others take the
// objects over at their next list without two members ever owning them.
// A member that loses contact with the apiserver does not exit, unlike a
// leader that lost its lease: it owns nothing from renewDeadline on (its
// plugins get handed-over deletes), keeps its caches warm, and rejoins
// once it renews again (RATIONALE.md, "Sharding: a fenced member stays").
func runSharded(ctx context.Context, cfg *config.Config, log *slog.Logger, o runOptions, srv *server.Server) error {
	sh := cfg.Sharding
	cs, err := clientset(cfg)
	if err != nil {
		return err
	}
	id := memberID()
	ro := o
	ro.member = func(ctx context.Context, h *host.Host) (func(), error) {
		m, err := shard.New(shard.Options{Client: cs.CoordinationV1(), Namespace: sh.Namespace, Group: sh.LeasePrefix,
			Identity: id, Key: shard.Key(sh.Key), LeaseDuration: sh.LeaseDuration.Duration,
			RenewDeadline: sh.RenewDeadline.Duration, RetryPeriod: sh.RetryPeriod.Duration,
			Abandon: o.abandonLease, Logger: log, OnChange: h.SetAssignment})
		if err != nil {
			return nil, fmt.Errorf("sharding: %w", err)
		}
		h.SetAssignment(m.Assignment())
		log.Info("sharding: joining the group", "member", id, "lease", sh.Namespace+"/"+m.LeaseName(), "key", sh.Key)
		// The membership outlives ctx: it must keep the Lease while the
		// plugins drain, and give it up only after.
		mctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
		done := make(chan struct{})
		go func() {
			defer close(done)
			m.Run(mctx)
		}()
		return func() { cancel(); <-done }, nil
	}
	return run(ctx, cfg, log, ro, srv)
}

// clientset is a client of the apiserver the config finds (restConfig),
// for the Leases of leader election and sharding.
func clientset(cfg *config.Config) (*kubernetes.Clientset, error) {
	restCfg, _, err := restConfig(cfg)
	if err != nil {
		return nil, err
	}
	return kubernetes.NewForConfig(restCfg)
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
