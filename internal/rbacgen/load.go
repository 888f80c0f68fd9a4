package rbacgen

import (
	"fmt"
	"os"

	"gopkg.in/yaml.v3"
	sigsyaml "sigs.k8s.io/yaml"

	"github.com/informer-host/informer-host/internal/config"
)

// Loaded is a config read for generating its RBAC.
type Loaded struct {
	Config *config.Config
	// LeaseNamespace is leaderElection.namespace as the file writes it;
	// "" when left out (the daemon's own namespace then).
	LeaseNamespace string
	// ShardNamespace is sharding.namespace as the file writes it, in the
	// same way.
	ShardNamespace string
}

// Load reads the config at path. With configMapKey set, path is a
// Kubernetes ConfigMap manifest (deploy/base/config.yaml) and the config is its
// data[configMapKey].
func Load(path, configMapKey string) (*Loaded, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading config: %w", err)
	}
	name := path
	if configMapKey != "" {
		var cm struct {
			Kind string            `json:"kind"`
			Data map[string]string `json:"data"`
		}
		if err := sigsyaml.Unmarshal(data, &cm); err != nil {
			return nil, fmt.Errorf("%s: not a ConfigMap manifest: %w", path, err)
		}
		text, ok := cm.Data[configMapKey]
		if cm.Kind != "ConfigMap" || !ok {
			return nil, fmt.Errorf("%s: not a ConfigMap with data key %q (drop the config-map key flag for a plain config file)", path, configMapKey)
		}
		data = []byte(text)
		name = fmt.Sprintf("%s (data %s)", path, configMapKey)
	}
	cfg, err := config.Parse(name, data)
	if err != nil {
		return nil, err
	}
	var raw struct {
		LeaderElection struct {
			Namespace string `yaml:"namespace"`
		} `yaml:"leaderElection"`
		Sharding struct {
			Namespace string `yaml:"namespace"`
		} `yaml:"sharding"`
	}
	// Parse accepted the file, so this decodes.
	_ = yaml.Unmarshal(data, &raw)
	return &Loaded{Config: cfg, LeaseNamespace: raw.LeaderElection.Namespace, ShardNamespace: raw.Sharding.Namespace}, nil
}
