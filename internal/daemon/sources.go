package daemon

import (
	"context"
	"fmt"
	"sync/atomic"

	"github.com/informer-host/informer-host/internal/config"
	"github.com/informer-host/informer-host/internal/pluginsource"
	"k8s.io/client-go/rest"
)

// sources runs the plugins that come from sources (plugins.modules[].source):
// a pluginsource.Manager over the host, made when the first config with a
// source is applied, so a daemon without any needs no source cache.
type sources struct {
	d *Daemon
	m *pluginsource.Manager
	// cur is m for readers on other goroutines (the status writer).
	cur atomic.Pointer[pluginsource.Manager]
	ctx context.Context // the sources' goroutines end with it
	// rest reaches the apiserver for configmap:// sources.
	rest *rest.Config
}

// apply makes the sources follow cfg. Only the reload loop and run call it,
// one at a time.
func (s *sources) apply(cfg *config.Config) error {
	if s.m == nil {
		if len(cfg.Sourced()) == 0 {
			return nil
		}
		dir, err := cfg.SourceCacheDir()
		if err != nil {
			return fmt.Errorf("plugin sources: %w", err)
		}
		store, err := pluginsource.NewDirStore(dir)
		if err != nil {
			return err
		}
		// The registry client is built from the config the sources start
		// with; a reload warns that its settings need a restart.
		oci, err := pluginsource.NewOCI(cfg)
		if err != nil {
			return fmt.Errorf("plugin sources: registry client: %w", err)
		}
		m, err := pluginsource.New(pluginsource.Options{Host: s.d.host, Store: store, Logger: s.d.log,
			Fetcher: &pluginsource.Fetchers{OCI: oci, MaxBytes: cfg.ModuleSizeLimit(), Timeout: cfg.FetchTimeoutOrDefault(), RESTConfig: s.rest}, Verifier: pluginsource.NewSigstore(oci, pluginsource.WithBundleSignatures(dir))})
		if err != nil {
			return err
		}
		s.m = m
		s.cur.Store(m)
		if s.d.server != nil {
			if err := s.d.server.AttachSources(m); err != nil {
				return err
			}
		}
	}
	s.m.Apply(s.ctx, cfg)
	return nil
}

// stop ends the sources' goroutines; their plugins keep running until
// the host stops them.
func (s *sources) stop() {
	if s.m != nil {
		s.m.Stop()
	}
}
