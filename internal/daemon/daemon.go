package daemon

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"sync"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/informer-host/informer-host/event"
	"github.com/informer-host/informer-host/host"
	"github.com/informer-host/informer-host/informer"
	"github.com/informer-host/informer-host/internal/config"
	"github.com/informer-host/informer-host/internal/filewatch"
	"github.com/informer-host/informer-host/internal/pluginresource"
	"github.com/informer-host/informer-host/internal/server"
	"github.com/informer-host/informer-host/internal/tracing"
)

// Options are what `informer-host run` takes beyond the config file: its
// flags, and the hooks of the process around the daemon.
type Options struct {
	// Config is the configuration to start with; reloads replace it.
	// Config and Logger are required.
	Config *config.Config
	Logger *slog.Logger
	// Version is logged at start.
	Version string

	// LogEvents logs every informer event (resource, type, object).
	LogEvents bool
	// DrainTimeout bounds how long plugins may take, on stop, to handle
	// what is queued.
	DrainTimeout time.Duration
	// StartTimeout bounds a plugin's start (host.Options.StartTimeout).
	StartTimeout time.Duration
	// CompileChild compiles reloads' new versions in a child process
	// (host.Options.CompileChild).
	CompileChild string
	// WatchFailureGrace is informer.Options.WatchFailureGrace.
	WatchFailureGrace time.Duration
	// APIClient is the daemon's own client-side limit towards the
	// apiserver, for its informers' lists and watches; the Leases and the
	// endpoint's reviews keep the kubeconfig's.
	APIClient APILimit

	// ServerMaxConnections is server.Options.MaxConnections.
	ServerMaxConnections int
	// ServerAuthKubernetes guards /metrics and /debug/plugins with
	// TokenReview and SubjectAccessReview (server.Options.AuthClient).
	ServerAuthKubernetes bool
	// ServerTLSCert and ServerTLSKey serve HTTPS (server.Options).
	ServerTLSCert, ServerTLSKey string

	// Stopping is called when the daemon begins a graceful stop (ctx
	// ended); the command restores the default signal handling there, so
	// that a second signal exits at once.
	Stopping func()
	// Reload receives a value for every SIGHUP: each one reloads the
	// config file.
	Reload <-chan os.Signal
	// Started, if set, is called once every runnable runs (tests).
	Started func(*Daemon)

	// serverStarted, if set, is called once the HTTP endpoint listens
	// (nil when it is off), before anything else starts (tests).
	serverStarted func(*server.Server)
	// beforeLoad, if set, is called once the host exists and its
	// election has joined, before any plugin loads; blocking in it stands
	// in for plugins that take long to compile or pull (tests).
	beforeLoad func(*host.Host)
	// resourcesDiscovery is how often a daemon whose apiserver does not
	// serve the plugin resources looks again (tests; default a minute).
	resourcesDiscovery time.Duration
	// abandonLease makes a leader or a shard member that stops keep its
	// Lease until it expires, as a crashed one does (tests).
	abandonLease bool
}

// ErrLostLeadership ends a replica that lost its lease while running: it
// exits non-zero and its pod restarts as a warm standby, the usual pattern
// for client-go leader election (a half-stopped leader must not linger;
// RATIONALE.md, "A lost lease exits").
var ErrLostLeadership = errors.New("lost the leader lease")

// Daemon is a running informer-host: the pipeline, the plugins, the HTTP
// endpoint, and the configuration they run with.
type Daemon struct {
	log      *slog.Logger
	pipeline *informer.Pipeline
	host     *host.Host
	server   *server.Server
	// cfg is the configuration in force: fileCfg, the config file as last
	// read, with the admitted plugin objects' modules appended. Only the
	// reload loop swaps them.
	cfg, fileCfg *config.Config
	// resources watches the plugin objects (pluginresources.go); nil
	// when pluginResources.watch is off.
	resources *pluginresource.Controller
	// sources runs the sourced plugins (sources.go).
	sources *sources
}

// Pipeline is the daemon's informer pipeline.
func (d *Daemon) Pipeline() *informer.Pipeline { return d.pipeline }

// Host is the daemon's plugin host.
func (d *Daemon) Host() *host.Host { return d.host }

// Server is the daemon's HTTP endpoint; nil when server.address is off.
func (d *Daemon) Server() *server.Server { return d.server }

// Run runs the daemon on o.Config until ctx ends, then stops it
// gracefully (doc.go gives the order of both). It returns
// ErrLostLeadership when this replica led and lost its lease.
func Run(ctx context.Context, o Options) error {
	if o.Config == nil || o.Logger == nil {
		return errors.New("daemon: Options.Config and Options.Logger are required")
	}
	cfg, log := o.Config, o.Logger
	restCfg, source, err := RESTConfig(cfg)
	if err != nil {
		return err
	}
	srv, err := startServer(ctx, o, restCfg)
	if err != nil {
		return err
	}
	if srv != nil {
		defer func() {
			shutdownCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			_ = srv.Shutdown(shutdownCtx)
		}()
	}
	if o.serverStarted != nil {
		o.serverStarted(srv)
	}
	el, err := newElection(cfg, restCfg, log, srv, o.abandonLease)
	if err != nil {
		return err
	}
	// A copy: the daemon's own limit (Options.APIClient) is for the
	// pipeline and the plugins; the Leases and the reviews keep restCfg's.
	return run(ctx, o, rest.CopyConfig(restCfg), source, srv, el)
}

// startServer starts the HTTP endpoint, or nothing when it is off.
func startServer(ctx context.Context, o Options, restCfg *rest.Config) (*server.Server, error) {
	if o.Config.Server.Address == config.ServerOff {
		return nil, nil
	}
	so := server.Options{Address: o.Config.Server.Address, Logger: o.Logger, MaxConnections: o.ServerMaxConnections,
		TLSCertFile: o.ServerTLSCert, TLSKeyFile: o.ServerTLSKey}
	if o.ServerAuthKubernetes {
		var err error
		if so.AuthClient, err = kubernetes.NewForConfig(restCfg); err != nil {
			return nil, fmt.Errorf("--server-auth=kubernetes: %w", err)
		}
	}
	return server.Start(ctx, so)
}

// run starts the pipeline, the plugins and the watches, waits for the
// election to end, and stops them.
func run(ctx context.Context, o Options, restCfg *rest.Config, source string, srv *server.Server, el election) error {
	cfg, log := o.Config, o.Logger
	o.APIClient.Apply(restCfg)
	log.Info("informer-host starting", "version", o.Version, "config", cfg.File, "apiserver", restCfg.Host, "credentials", source,
		"apiQPS", restCfg.QPS, "apiBurst", restCfg.Burst)
	p, err := informer.New(informer.Options{RESTConfig: restCfg, Logger: log, WatchFailureGrace: o.WatchFailureGrace, Indexers: host.Indexers()})
	if err != nil {
		return err
	}
	defer p.Stop()
	if err := p.Apply(ctx, cfg.Resources); err != nil {
		return err
	}
	warnResources(log, cfg, p)
	if o.LogEvents {
		for _, r := range cfg.Resources {
			if _, err := p.AddListener(r.Name, eventLogger(log)); err != nil {
				return err
			}
		}
	}
	writes, err := host.NewWritesClient(restCfg, p, log)
	if err != nil {
		return err
	}
	seen, err := seenKeysStore(cfg, restCfg, el, log)
	if err != nil {
		return err
	}
	traces, err := tracing.New(ctx, cfg.Tracing, o.Version)
	if err != nil {
		return err
	}
	defer shutdownTracing(log, traces) // after the host's stop, which ends every span
	h, err := host.New(ctx, host.Options{Pipeline: p, Config: cfg, Logger: log, StartTimeout: o.StartTimeout, RESTConfig: restCfg,
		CompileChild: o.CompileChild, Standby: el.standby(), Writes: writes, SeenKeys: seen, Tracer: traces.Tracer()})
	if err != nil {
		return err
	}
	if err := el.join(ctx, h); err != nil {
		return err
	}
	d := &Daemon{log: log, pipeline: p, host: h, cfg: cfg, fileCfg: cfg, server: srv}
	resourcesChanged := make(chan struct{}, 1)
	if d.resources, err = newPluginResources(d, restCfg, o.resourcesDiscovery, resourcesChanged); err != nil {
		return err
	}
	if srv != nil {
		if err := srv.Attach(p, h, resourceNames(cfg)); err != nil {
			return err
		}
		defer srv.Detach("stopped")
	}
	if o.beforeLoad != nil {
		o.beforeLoad(h)
	}
	// Sourced plugins before the directory: each starts from its cached
	// last good version, if any, before LoadDir (which skips their
	// names), and then refreshes on its own goroutine.
	srcCtx, cancelSources := context.WithCancel(ctx)
	defer cancelSources()
	d.sources = &sources{d: d, ctx: srcCtx, rest: restCfg}
	if err := d.sources.apply(cfg); err != nil {
		return err
	}
	stopSources := func() { cancelSources(); d.sources.stop() }
	// A module that does not load is logged and reported in the plugin
	// status; the others run.
	if err := h.LoadDir(ctx); err != nil && errors.Is(err, fs.ErrNotExist) {
		log.Warn("plugin directory does not exist; modules dropped into it later are loaded", "dir", cfg.PluginDir())
		if err := os.MkdirAll(cfg.PluginDir(), 0o755); err != nil {
			return fmt.Errorf("create plugin directory: %w", err)
		}
	}

	el.loaded(readiness{sources: sourceStatus(d.sources.m), resources: p.Status})

	bg, cancelBG := context.WithCancel(ctx)
	var watches sync.WaitGroup
	configWatched := d.startWatches(bg, &watches, o.Reload, resourcesChanged)
	d.startPluginStatus(bg, &watches, restCfg, el)
	if o.Started != nil {
		// A change written once Started returns must be reloaded: the
		// config watch takes the file's content as it finds it.
		<-configWatched
		o.Started(d)
	}
	lost, err := el.wait(ctx, h)
	if err != nil {
		cancelBG()
		watches.Wait()
		stopSources()
		h.Stop(ctx)
		return err
	}
	// On a lost lease, no drain: every event still queued here is the new
	// leader's to deliver, and delivering it here too would act twice.
	stopCtx, cancel := context.WithTimeout(context.Background(), o.DrainTimeout)
	defer cancel()
	if lost {
		log.Warn("informer-host stopping: lost the leader lease; plugins stop after their current event, without draining")
		// At once, before waiting for the watches below.
		h.Halt(stopCtx)
	} else {
		if o.Stopping != nil {
			o.Stopping()
		}
		log.Info("informer-host stopping", "drainTimeout", o.DrainTimeout)
	}
	cancelBG()
	watches.Wait()
	// No source swaps a plugin in while the host drains or halts.
	stopSources()
	if lost {
		el.leave()      // waits for an activation the lost lease cut short
		h.Halt(stopCtx) // a plugin a reload or that activation started meanwhile
		log.Info("informer-host stopped")
		return ErrLostLeadership
	}
	// Drained first, then the election is left: the next leader or the
	// other members take over once this one delivers nothing more.
	h.Stop(stopCtx)
	el.leave()
	log.Info("informer-host stopped")
	return nil
}

// startWatches starts the plugin directory watch, the config file watch,
// the plugin objects' watch and the reload loop, which reloads on a
// changed file and on every value of sighup, and applies the plugin
// objects' modules anew once resources has been quiet for
// resourcesDebounce after a change, until ctx ends. The channel it
// returns is closed once the config file watch is in place, or has
// failed.
func (d *Daemon) startWatches(ctx context.Context, wg *sync.WaitGroup, sighup <-chan os.Signal, resources <-chan struct{}) <-chan struct{} {
	wg.Go(func() {
		if err := d.host.Watch(ctx, host.WatchOptions{}); err != nil {
			d.log.Error("plugin directory not watched; reloads need a restart", "err", err)
		}
	})
	if d.resources != nil {
		wg.Go(func() { d.resources.Run(ctx) })
	}
	changed := make(chan struct{}, 1)
	file := d.cfg.File
	watched := make(chan struct{})
	var watchedOnce sync.Once
	wg.Go(func() {
		defer watchedOnce.Do(func() { close(watched) })
		err := filewatch.Watch(ctx, file, filewatch.Options{Debounce: 200 * time.Millisecond, Rescan: 30 * time.Second,
			Started: func() { watchedOnce.Do(func() { close(watched) }) },
			OnChange: func() {
				select {
				case changed <- struct{}{}:
				default:
				}
			}})
		if err != nil {
			d.log.Error("config file not watched; send SIGHUP to reload it", "err", err)
		}
	})
	wg.Go(func() {
		// One apply for a burst of object changes (kubectl apply -f of a
		// directory); stopped while no change waits.
		quiet := time.NewTimer(time.Hour)
		quiet.Stop()
		defer quiet.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-changed:
				d.reload(ctx, "file changed")
			case <-sighup:
				d.reload(ctx, "SIGHUP")
			case <-resources:
				quiet.Reset(resourcesDebounce)
			case <-quiet.C:
				d.resourcesChanged(ctx)
			}
		}
	})
	return watched
}

// resourcesDebounce is how long the plugin objects must be quiet after a
// change before their modules are applied.
const resourcesDebounce = 200 * time.Millisecond

// APILimit is a client-side rate limit towards the apiserver.
type APILimit struct {
	QPS   float64
	Burst int
}

// Apply sets the limit on c; a zero leaves c's own (the kubeconfig's, or
// client-go's default).
func (l APILimit) Apply(c *rest.Config) {
	if l.QPS > 0 {
		c.QPS = float32(l.QPS)
	}
	if l.Burst > 0 {
		c.Burst = l.Burst
	}
}

func eventLogger(log *slog.Logger) informer.ListenerFunc {
	return func(ev *event.Event) {
		attrs := []any{"resource", ev.Resource.Name, "type", ev.Type.String(), "object", ev.Key()}
		if ev.IsInInitialList {
			attrs = append(attrs, "initialList", true)
		}
		if ev.FinalStateUnknown {
			attrs = append(attrs, "finalStateUnknown", true)
		}
		log.Info("event", attrs...)
	}
}

// shutdownTracing flushes the spans still queued, within a bound: a
// collector that is down must not hold the daemon's exit.
func shutdownTracing(log *slog.Logger, p *tracing.Provider) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := p.Shutdown(ctx); err != nil {
		log.Warn("the last spans were not exported", "err", err)
	}
}
