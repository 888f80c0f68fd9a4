package daemon

import (
	"errors"
	"fmt"
	"strings"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/informer-host/informer-host/internal/config"
)

// RESTConfig finds the apiserver: the kubeconfig the config file names;
// else the in-cluster service account; else $KUBECONFIG or ~/.kube/config.
// It also says which of them it used (for the log).
func RESTConfig(cfg *config.Config) (*rest.Config, string, error) {
	if path := cfg.KubeconfigPath(); path != "" {
		c, err := clientcmd.BuildConfigFromFlags("", path)
		if err != nil {
			return nil, "", fmt.Errorf("kubeconfig %s (from %s): %w", path, cfg.File, err)
		}
		return c, "kubeconfig " + path, nil
	}
	c, err := rest.InClusterConfig()
	if err == nil {
		return c, "in-cluster service account", nil
	}
	if !errors.Is(err, rest.ErrNotInCluster) {
		return nil, "", fmt.Errorf("in-cluster config: %w", err)
	}
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	c, err = clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{}).ClientConfig()
	if err != nil {
		return nil, "", fmt.Errorf("no apiserver to talk to: not in a cluster, kubeconfig not set in %s, and $KUBECONFIG/~/.kube/config: %w", cfg.File, err)
	}
	return c, "kubeconfig " + strings.Join(rules.GetLoadingPrecedence(), ":"), nil
}
