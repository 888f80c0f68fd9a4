package daemon

import (
	"context"
	"fmt"
	"log/slog"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/informer-host/informer-host/host"
	"github.com/informer-host/informer-host/internal/config"
	"github.com/informer-host/informer-host/internal/server"
)

// election decides when, and which of, this replica's objects its plugins
// deliver: always all of them (single), all of them while it holds the
// lease (leader), or the share its sharding group assigns it (member).
// Run calls standby as it builds the host, join once the host exists and
// before any plugin loads, loaded once the plugins the config names have
// been started, wait once everything runs, and leave once the plugins are
// stopped.
type election interface {
	// standby reports whether the host starts as a warm standby: synced
	// and compiled, delivering nothing until activated.
	standby() bool
	// join hands the host what it needs before its plugins load.
	join(ctx context.Context, h *host.Host) error
	// loaded says that the plugins the config names have been started
	// (or have failed to), but for the sources, whose first pulls may be
	// on their way; r reads those and the resources, which a member
	// looks at before it takes a share.
	loaded(r readiness)
	// wait returns when ctx ends (lost false), or when this replica must
	// stop delivering at once (lost true).
	wait(ctx context.Context, h *host.Host) (lost bool, err error)
	// leave gives up what join or wait took; it returns once that is done.
	leave()
}

// newElection is the election cfg asks for; srv, if not nil, is told when
// this replica is a standby.
func newElection(cfg *config.Config, restCfg *rest.Config, log *slog.Logger, srv *server.Server, abandon bool) (election, error) {
	if !cfg.LeaderElection.Enabled && !cfg.Sharding.Enabled {
		return single{}, nil
	}
	cs, err := kubernetes.NewForConfig(restCfg)
	if err != nil {
		return nil, fmt.Errorf("client for the Leases: %w", err)
	}
	if cfg.LeaderElection.Enabled {
		return newLeader(cfg.LeaderElection, cs, log, srv, abandon), nil
	}
	return newMember(cfg.Sharding, cs, log, abandon), nil
}

// single is the election of a replica that runs alone: it delivers
// everything from the start until ctx ends.
type single struct{}

func (single) standby() bool                          { return false }
func (single) join(context.Context, *host.Host) error { return nil }
func (single) loaded(readiness)                       {}
func (single) leave()                                 {}

func (single) wait(ctx context.Context, _ *host.Host) (bool, error) {
	<-ctx.Done()
	return false, nil
}
