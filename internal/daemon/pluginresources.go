package daemon

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"time"

	"k8s.io/client-go/rest"

	"github.com/informer-host/informer-host/internal/config"
	"github.com/informer-host/informer-host/internal/pluginresource"
)

// Plugin objects (Plugin, ClusterPlugin) add modules to the file's: the
// reload loop applies the file's configuration with the admitted objects'
// modules appended, on a file change, SIGHUP, and a change of the
// objects' specs alike, so a plugin from an object loads, hot-reloads and
// unloads exactly as one of config.yaml's.

// newPluginResources returns the controller of the plugin objects, or nil
// when pluginResources.watch is off. changed receives a value (dropped
// when one is pending) for every change of an object's spec.
func newPluginResources(d *Daemon, restCfg *rest.Config, discoveryInterval time.Duration, changed chan<- struct{}) (*pluginresource.Controller, error) {
	if d.fileCfg.PluginResources.Watch == config.WatchOff {
		return nil, nil
	}
	keyDir := ""
	// Without a source cache inline keys cannot be kept; objects naming
	// some are refused, saying so.
	if dir, err := d.fileCfg.SourceCacheDir(); err == nil {
		keyDir = filepath.Join(dir, "keys")
	}
	return pluginresource.New(pluginresource.Options{
		RESTConfig: restCfg, Logger: d.log, KeyDir: keyDir, DiscoveryInterval: discoveryInterval,
		OnChange: func() {
			select {
			case changed <- struct{}{}:
			default:
			}
		},
		// Read by the reload loop, the only goroutine that calls Modules
		// and swaps fileCfg.
		Reserved: func() []string { return wasmFiles(d.fileCfg.PluginDir()) },
		// Admit stays nil until tenancy is wired: every Plugin is then
		// refused as NamespaceNotAllowed; ClusterPlugins run.
	})
}

// wasmFiles lists the *.wasm names in dir (none when it cannot be read).
func wasmFiles(dir string) []string {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	var out []string
	for _, e := range entries {
		if !e.IsDir() && strings.HasSuffix(e.Name(), ".wasm") {
			out = append(out, e.Name())
		}
	}
	return out
}

// merged returns fileCfg with the admitted plugin objects' modules.
func (d *Daemon) merged(ctx context.Context, fileCfg *config.Config) *config.Config {
	if d.resources == nil {
		return fileCfg
	}
	return fileCfg.WithModules(d.resources.Modules(ctx, fileCfg))
}

// PluginResources is the controller of the plugin objects; nil when
// pluginResources.watch is off.
func (d *Daemon) PluginResources() *pluginresource.Controller { return d.resources }
