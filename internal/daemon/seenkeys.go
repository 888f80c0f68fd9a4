package daemon

import (
	"fmt"
	"log/slog"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/informer-host/informer-host/internal/config"
	"github.com/informer-host/informer-host/internal/seenkeys"
)

// leaderSeenMember is the member name every replica of a leader-elected
// daemon writes its seen keys under: only the leader delivers, and the
// next leader must read what the last one handed.
const leaderSeenMember = "leader"

// seenKeysStore returns where the host keeps the keys it handed each
// plugin (host/missed.go) when the daemon has a namespace of its own,
// the one of its Leases: ConfigMaps there, so another replica reads
// them. nil otherwise: the host then uses the state file, or memory.
func seenKeysStore(cfg *config.Config, restCfg *rest.Config, el election, log *slog.Logger) (*seenkeys.Store, error) {
	var namespace, name string
	// The order is newElection's: leader election wins over sharding.
	switch m, isMember := el.(*member); {
	case cfg.LeaderElection.Enabled:
		namespace, name = cfg.LeaderElection.Namespace, leaderSeenMember
	case cfg.Sharding.Enabled && isMember:
		namespace, name = cfg.Sharding.Namespace, m.id
	default:
		return nil, nil
	}
	cs, err := kubernetes.NewForConfig(restCfg)
	if err != nil {
		return nil, fmt.Errorf("client for the seen-keys ConfigMaps: %w", err)
	}
	return seenkeys.New(seenkeys.Options{Backend: seenkeys.ConfigMaps(cs.CoreV1(), namespace, name), Logger: log}), nil
}
