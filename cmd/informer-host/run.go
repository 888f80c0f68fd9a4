package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"strings"
	"sync"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"

	"github.com/informer-host/informer-host/event"
	"github.com/informer-host/informer-host/host"
	"github.com/informer-host/informer-host/informer"
	"github.com/informer-host/informer-host/internal/config"
	"github.com/informer-host/informer-host/internal/filewatch"
	"github.com/informer-host/informer-host/internal/server"
)

// logOptions are the flags every long-running command shares.
type logOptions struct {
	format string
	level  string
}

func (o *logOptions) register(fs *flag.FlagSet) {
	fs.StringVar(&o.format, "log-format", "text", "log format: text or json")
	fs.StringVar(&o.level, "log-level", "info", "log level: debug, info, warn or error")
}

func (o *logOptions) logger(w io.Writer) (*slog.Logger, error) {
	var level slog.Level
	if err := level.UnmarshalText([]byte(o.level)); err != nil {
		return nil, fmt.Errorf("--log-level: %w", err)
	}
	opts := &slog.HandlerOptions{Level: level}
	switch o.format {
	case "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return nil, fmt.Errorf("--log-format: %q is neither text nor json", o.format)
}

func runCommand(ctx context.Context, args []string, stdout, stderr io.Writer, ro runOptions) int {
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	path := fs.String("config", "config.yaml", "config file")
	fs.BoolVar(&ro.logEvents, "log-events", false, "log every informer event (resource, type, namespace/name)")
	fs.DurationVar(&ro.drainTimeout, "drain-timeout", 10*time.Second, "on SIGTERM, how long plugins may take to handle what is queued")
	fs.DurationVar(&ro.startTimeout, "start-timeout", 10*time.Second, "how long a plugin may take to start (start function, _initialize, ih_init)")
	fs.DurationVar(&ro.watchFailureGrace, "watch-failure-grace", 30*time.Second, "how long a resource's list/watch may keep failing before /readyz reports it")
	fs.IntVar(&ro.maxConnections, "server-max-connections", 256, "connections the HTTP endpoint holds open; past it the longest-waiting idle one is closed")
	fs.StringVar(&ro.serverAuth, "server-auth", "none", "guard /metrics and /debug/plugins: none, or kubernetes (TokenReview and SubjectAccessReview; /healthz and /readyz stay open)")
	fs.StringVar(&ro.tlsCert, "server-tls-cert", "", "serve HTTPS with this certificate (PEM; read again when it changes); needs --server-tls-key")
	fs.StringVar(&ro.tlsKey, "server-tls-key", "", "the key of --server-tls-cert (PEM)")
	ro.apiClient.register(fs)
	var lo logOptions
	lo.register(fs)
	if code, ok := parseFlags(fs, args, stderr); !ok {
		return code
	}
	if err := ro.apiClient.check(); err != nil {
		fmt.Fprintf(stderr, "informer-host run: %v\n", err)
		return 2
	}
	if ro.serverAuth != "none" && ro.serverAuth != "kubernetes" {
		fmt.Fprintf(stderr, "informer-host run: --server-auth: %q is neither none nor kubernetes\n", ro.serverAuth)
		return 2
	}
	log, err := lo.logger(stderr)
	if err != nil {
		fmt.Fprintln(stderr, "informer-host run:", err)
		return 2
	}
	// client-go logs through klog; send it to the same handler. klog is
	// process-wide, so the command sets it, once, before any client-go
	// goroutine runs: serve may run several times in one process (tests
	// run replicas side by side), and setting it there raced the klog
	// reads of the daemons already running.
	klog.SetSlogLogger(log)
	cfg, err := config.Load(*path)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	if err := serve(ctx, cfg, log, ro); err != nil {
		log.Error("informer-host stopped", "err", err)
		return 1
	}
	return 0
}

// serve starts the HTTP endpoint, then runs the daemon: at once, or, with
// leader election, whenever this replica holds the lease.
func serve(ctx context.Context, cfg *config.Config, log *slog.Logger, o runOptions) error {
	var srv *server.Server
	if cfg.Server.Address != config.ServerOff {
		so := server.Options{Address: cfg.Server.Address, Logger: log, MaxConnections: o.maxConnections,
			TLSCertFile: o.tlsCert, TLSKeyFile: o.tlsKey}
		if o.serverAuth == "kubernetes" {
			restCfg, _, err := restConfig(cfg)
			if err != nil {
				return err
			}
			if so.AuthClient, err = kubernetes.NewForConfig(restCfg); err != nil {
				return fmt.Errorf("--server-auth=kubernetes: %w", err)
			}
		}
		var err error
		if srv, err = server.Start(ctx, so); err != nil {
			return err
		}
		defer func() {
			shutdownCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			_ = srv.Shutdown(shutdownCtx)
		}()
	}
	if o.serverStarted != nil {
		o.serverStarted(srv)
	}
	if cfg.LeaderElection.Enabled {
		return runAsLeader(ctx, cfg, log, o, srv)
	}
	if cfg.Sharding.Enabled {
		return runSharded(ctx, cfg, log, o, srv)
	}
	return run(ctx, cfg, log, o, srv)
}

// runOptions are run's flags beyond the config file.
type runOptions struct {
	logEvents    bool
	drainTimeout time.Duration
	startTimeout time.Duration
	// watchFailureGrace is informer.Options.WatchFailureGrace.
	watchFailureGrace time.Duration
	// maxConnections and serverAuth configure the HTTP endpoint
	// (server.Options.MaxConnections and AuthClient).
	maxConnections  int
	serverAuth      string
	tlsCert, tlsKey string
	// apiClient is the daemon's own client-side limit (--kube-api-qps,
	// --kube-api-burst); zero keeps the kubeconfig's.
	apiClient apiClientOptions
	// stopping is called when the first stop signal arrives; it restores
	// the default signal handling so that a second signal exits at once.
	stopping func()
	// reload receives a value for every SIGHUP.
	reload <-chan os.Signal
	// started, if set, is called once everything runs (tests).
	started func(*daemon)
	// serverStarted, if set, is called once the HTTP endpoint listens
	// (nil when it is off), before the daemon starts (tests).
	serverStarted func(*server.Server)
	// campaign, set under leader election, makes run start its host as a
	// warm standby (informers synced, plugins compiled, nothing
	// delivered) and is called once everything runs: it activates the
	// host when this replica gets the lease, and returns when ctx ends
	// (lost false) or when the lease is lost (lost true; then run stops
	// delivering at once instead of draining, since the new leader
	// already delivers the same events). run calls release once its
	// plugins are stopped: it gives the lease up.
	campaign func(ctx context.Context, h *host.Host) (lost bool, release func(), err error)
	// member, set under sharding, is called once the host exists and
	// before any plugin loads: it gives the host its first (empty)
	// Assignment and starts the membership. run calls leave once its
	// plugins are stopped: it deletes the member's Lease (shard.go).
	member func(ctx context.Context, h *host.Host) (leave func(), err error)
	// abandonLease makes a leader that stops keep its lease until it
	// expires, as a crashed one does (tests).
	abandonLease bool
}

// daemon is a running informer-host: the pipeline, the plugins, the HTTP
// endpoint, and the configuration they run with.
type daemon struct {
	log      *slog.Logger
	pipeline *informer.Pipeline
	host     *host.Host
	server   *server.Server
	// cfg is the configuration in force; only the reload goroutine swaps it.
	cfg *config.Config
}

// run runs the pipeline and the plugins until ctx ends, then shuts down
// gracefully: no new events, plugins drain their buffers (for at most
// drainTimeout), their shutdown exports run, the informers stop.
func run(ctx context.Context, cfg *config.Config, log *slog.Logger, o runOptions, srv *server.Server) error {
	restCfg, source, err := restConfig(cfg)
	if err != nil {
		return err
	}
	o.apiClient.apply(restCfg)
	log.Info("informer-host starting", "version", versionString(), "config", cfg.File, "apiserver", restCfg.Host, "credentials", source,
		"apiQPS", restCfg.QPS, "apiBurst", restCfg.Burst)
	p, err := informer.New(informer.Options{RESTConfig: restCfg, Logger: log, WatchFailureGrace: o.watchFailureGrace})
	if err != nil {
		return err
	}
	defer p.Stop()
	if err := p.Apply(ctx, cfg.Resources); err != nil {
		return err
	}
	warnResources(log, cfg, p)
	if o.logEvents {
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
	h, err := host.New(ctx, host.Options{Pipeline: p, Config: cfg, Logger: log, StartTimeout: o.startTimeout, RESTConfig: restCfg,
		Standby: o.campaign != nil, Writes: writes})
	if err != nil {
		return err
	}
	leave := func() {}
	if o.member != nil {
		if leave, err = o.member(ctx, h); err != nil {
			return err
		}
	}
	d := &daemon{log: log, pipeline: p, host: h, cfg: cfg, server: srv}
	if srv != nil {
		if err := srv.Attach(p, h, resourceNames(cfg)); err != nil {
			return err
		}
		defer srv.Detach("stopped")
	}
	// A module that does not load is logged and reported in the plugin
	// status; the others run.
	if err := h.LoadDir(ctx); err != nil && errors.Is(err, fs.ErrNotExist) {
		log.Warn("plugin directory does not exist; modules dropped into it later are loaded", "dir", cfg.PluginDir())
		if err := os.MkdirAll(cfg.PluginDir(), 0o755); err != nil {
			return fmt.Errorf("create plugin directory: %w", err)
		}
	}

	var wg sync.WaitGroup
	bg, cancelBG := context.WithCancel(ctx)
	wg.Go(func() {
		if err := h.Watch(bg, host.WatchOptions{}); err != nil {
			log.Error("plugin directory not watched; reloads need a restart", "err", err)
		}
	})
	changed := make(chan struct{}, 1)
	wg.Go(func() {
		err := filewatch.Watch(bg, cfg.File, filewatch.Options{Debounce: 200 * time.Millisecond, Rescan: 30 * time.Second,
			OnChange: func() {
				select {
				case changed <- struct{}{}:
				default:
				}
			}})
		if err != nil {
			log.Error("config file not watched; send SIGHUP to reload it", "err", err)
		}
	})
	wg.Go(func() {
		for {
			select {
			case <-bg.Done():
				return
			case <-changed:
				d.reload(bg, "file changed")
			case <-o.reload:
				d.reload(bg, "SIGHUP")
			}
		}
	})

	if o.started != nil {
		o.started(d)
	}
	lost, release := false, func() {}
	if o.campaign != nil {
		if lost, release, err = o.campaign(ctx, h); err != nil {
			cancelBG()
			wg.Wait()
			h.Stop(ctx)
			return err
		}
	} else {
		<-ctx.Done()
	}
	// On a lost lease, no drain: every event still queued here is the new
	// leader's to deliver, and delivering it here too would act twice.
	stopCtx, cancel := context.WithTimeout(context.Background(), o.drainTimeout)
	defer cancel()
	if lost {
		log.Warn("informer-host stopping: lost the leader lease; plugins stop after their current event, without draining")
		// At once, before waiting for the watchers below.
		h.Halt(stopCtx)
	} else {
		if o.stopping != nil {
			o.stopping()
		}
		log.Info("informer-host stopping", "drainTimeout", o.drainTimeout)
	}
	cancelBG()
	wg.Wait()
	if lost {
		release()       // waits for an activation the lost lease cut short
		h.Halt(stopCtx) // a plugin a reload or that activation started meanwhile
		log.Info("informer-host stopped")
		return errLostLeadership
	}
	// Drained first, then the lease is given up: the next leader starts
	// once this one delivers nothing more.
	h.Stop(stopCtx)
	release()
	leave()
	log.Info("informer-host stopped")
	return nil
}

// reload reads the config file again and applies it: resources start and
// stop, plugins whose settings changed are reloaded. An invalid file is
// refused with the same file:line messages as validate, and the running
// configuration stays.
func (d *daemon) reload(ctx context.Context, why string) {
	next, err := config.Load(d.cfg.File)
	if err != nil {
		d.log.Error("config not reloaded: the running configuration stays", "reason", why, "problems", err.Error())
		return
	}
	if next.PluginDir() != d.cfg.PluginDir() || next.Kubeconfig != d.cfg.Kubeconfig || next.Server != d.cfg.Server {
		d.log.Warn("plugins.directory, kubeconfig and server take effect only after a restart")
	}
	if next.Sharding != d.cfg.Sharding || next.LeaderElection != d.cfg.LeaderElection {
		d.log.Warn("sharding and leaderElection take effect only after a restart")
	}
	if err := d.pipeline.Apply(ctx, next.Resources); err != nil {
		d.log.Error("config reload: resources", "err", err)
		return
	}
	warnResources(d.log, next, d.pipeline)
	if err := d.host.ApplyConfig(ctx, next); err != nil {
		d.log.Error("config reload: some plugins keep their previous settings", "err", err)
	}
	if d.server != nil {
		if err := d.server.SetResources(resourceNames(next)); err != nil {
			d.log.Error("config reload: event counters", "err", err)
		}
	}
	d.cfg = next
	d.log.Info("config reloaded", "reason", why, "resources", len(next.Resources))
}

// warnResources names, at their entries in the config file, the
// resources Apply left pending, with why (for one the apiserver does not
// serve, the nearest ones it does), and those it watches under another
// name than written. A typo would otherwise show only as a resource that
// never starts. Apply resolves what it adds before it returns, so all of
// that is known by now.
func warnResources(log *slog.Logger, cfg *config.Config, p *informer.Pipeline) {
	for _, st := range p.Status() {
		switch {
		case st.Phase == informer.PhasePending && st.Error != "":
			log.Warn("configured resource is pending: it starts once the apiserver serves it",
				"resource", st.Name, "problem", cfg.ResourceProblem(st.Name, "%s", st.Error).String())
		case st.Warning != "":
			log.Warn("configured resource is watched under another name than written",
				"resource", st.Name, "problem", cfg.ResourceProblem(st.Name, "%s", st.Warning).String())
		}
	}
}

func resourceNames(cfg *config.Config) []string {
	names := make([]string, 0, len(cfg.Resources))
	for _, r := range cfg.Resources {
		names = append(names, r.Name)
	}
	return names
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

// restConfig finds the apiserver: the kubeconfig the config file names;
// else the in-cluster service account; else $KUBECONFIG or ~/.kube/config.
func restConfig(cfg *config.Config) (*rest.Config, string, error) {
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
