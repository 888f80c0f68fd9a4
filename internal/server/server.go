package server

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"k8s.io/client-go/kubernetes"

	"github.com/informer-host/informer-host/event"
	"github.com/informer-host/informer-host/host"
	"github.com/informer-host/informer-host/informer"
	"github.com/informer-host/informer-host/internal/config"
	"github.com/informer-host/informer-host/internal/pluginsource"
)

// Options configure the server.
type Options struct {
	// Address to listen on, "host:port" or ":port". ":port" listens on
	// every interface, which a pod needs (the kubelet probes the pod IP);
	// on a workstation "127.0.0.1:port" keeps the endpoints local.
	Address string
	Logger  *slog.Logger

	// MaxConnections bounds the connections held open; at the limit the
	// longest-waiting connection without a request in a handler is closed
	// to make room (limit.go), so probes answer under a flood. Default 256.
	MaxConnections int
	// ReadHeaderTimeout, ReadTimeout, WriteTimeout and IdleTimeout are
	// http.Server's. Defaults: 5s, 10s, 30s, 90s; the idle timeout exceeds
	// Prometheus's common 60s scrape interval so scrapes reuse connections.
	ReadHeaderTimeout, ReadTimeout, WriteTimeout, IdleTimeout time.Duration

	// ConnWriteBuffer is the kernel send buffer of each connection
	// (SO_SNDBUF; Linux doubles it). What a client has not read waits
	// there, charged to the pod's memory (cgroup v2 counts socket
	// memory): with the kernel's autotuning up to 4 MiB a connection, the
	// connection limit's worth of clients that never read could take
	// 1 GiB. Default 256 KiB: ample for a scrape inside a cluster, and
	// MaxConnections × 512 KiB at most. Negative keeps the kernel's.
	ConnWriteBuffer int
	// MaxConcurrentScrapes bounds the /metrics requests served at once,
	// and apart from them the /debug/plugins requests: each holds its
	// response in memory while its client reads it. Past the bound a
	// request gets 503 with Retry-After at once. Default
	// DefaultMaxConcurrentScrapes.
	MaxConcurrentScrapes int
	// ScrapeTimeout bounds rendering and writing one /metrics or
	// /debug/plugins response; a client that reads slower is cut off, so
	// it holds a slot and the response's memory at most this long.
	// Default 10s, Prometheus's default scrape timeout: a slower scrape
	// is discarded by Prometheus anyway.
	ScrapeTimeout time.Duration
	// MaxMetricsBytes bounds a /metrics response body as sent; a larger
	// one is not sent (500, logged). Default: DefaultHostMetricsBytes for
	// the host's own metrics plus the plugins' metric byte budgets
	// (grants.metrics.maxBytes), which bound what plugins add.
	MaxMetricsBytes int64

	// AuthClient, when set, guards /metrics and /debug/plugins with
	// Kubernetes authentication and authorisation (auth.go): a bearer
	// token the apiserver accepts, whose user may "get" the path as a
	// non-resource URL. /healthz and /readyz stay open for probes. Nil:
	// every endpoint is open to whoever reaches the address.
	AuthClient kubernetes.Interface
	// AuthCacheTTL is how long an authentication and authorisation
	// decision is reused. Default 10s.
	AuthCacheTTL time.Duration

	// TLSCertFile and TLSKeyFile, when both set, make the server HTTPS
	// (TLS 1.2 and later, HTTP/2 offered), with the pair read again when
	// the files change. Set them with AuthClient: bearer tokens should not
	// cross the network in clear. Probes then use scheme HTTPS.
	TLSCertFile, TLSKeyFile string
}

func (o *Options) defaults() {
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	for _, d := range []struct {
		v   *time.Duration
		def time.Duration
	}{
		{&o.ReadHeaderTimeout, 5 * time.Second},
		{&o.ReadTimeout, 10 * time.Second},
		{&o.WriteTimeout, 30 * time.Second},
		{&o.IdleTimeout, 90 * time.Second},
		{&o.AuthCacheTTL, 10 * time.Second},
		{&o.ScrapeTimeout, 10 * time.Second},
	} {
		if *d.v <= 0 {
			*d.v = d.def
		}
	}
	if o.MaxConnections <= 0 {
		o.MaxConnections = 256
	}
	if o.ConnWriteBuffer == 0 {
		o.ConnWriteBuffer = 256 << 10
	}
	if o.MaxConcurrentScrapes <= 0 {
		o.MaxConcurrentScrapes = DefaultMaxConcurrentScrapes
	}
}

const (
	// DefaultMaxConcurrentScrapes is Options.MaxConcurrentScrapes's
	// default: an HA pair of Prometheus servers and two people with curl.
	DefaultMaxConcurrentScrapes = 4
	// DefaultHostMetricsBytes is what /metrics may take beyond the
	// plugins' own metrics: the host's metrics per plugin and resource
	// and the Go runtime's are a few KB each.
	DefaultHostMetricsBytes = 8 << 20
	// maxDebugBytes bounds a /debug/plugins response: a plugin's status
	// is a few KB, so this is thousands of plugins, and what one
	// pathological status could make every client hold is bounded.
	maxDebugBytes = 16 << 20
)

// Server serves the endpoints until Shutdown. It starts before the
// pipeline and the plugins exist (a standby replica waiting for
// leadership is alive but not ready); Attach connects them.
type Server struct {
	srv  *http.Server
	addr net.Addr
	log  *slog.Logger
	reg  *prometheus.Registry
	done chan struct{}

	mu       sync.Mutex
	pipeline *informer.Pipeline
	host     *host.Host
	counts   *resourceCounts
	sources  Sources // nil: no plugin sources
	waiting  string  // why nothing is attached yet, for /readyz
	// standby: nothing is attached on purpose (another replica leads), and
	// /readyz answers 200, so a Deployment's rollout does not wait forever
	// for a standby that will never run anything.
	standby bool
}

// Start listens on o.Address and serves in the background.
func Start(ctx context.Context, o Options) (*Server, error) {
	o.defaults()
	log := o.Logger
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	s := &Server{log: log, reg: reg, done: make(chan struct{}), waiting: "starting"}
	guard := func(h http.Handler) http.Handler { return h }
	if o.AuthClient != nil {
		a := &kubeAuth{client: o.AuthClient, ttl: o.AuthCacheTTL, log: log, cache: map[authKey]authDecision{}}
		guard = a.wrap
	}
	metricsLimit := func() int64 { return o.MaxMetricsBytes }
	if o.MaxMetricsBytes <= 0 {
		metricsLimit = s.metricsLimit
	}
	// The guard comes first, so requests it refuses take no slot.
	refused := newRefused()
	reg.MustRegister(refused, readyMetrics{s})
	metrics := newBounded("/metrics", log, o.MaxConcurrentScrapes, o.ScrapeTimeout, metricsLimit,
		promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}), refused)
	debug := newBounded("/debug/plugins", log, o.MaxConcurrentScrapes, o.ScrapeTimeout,
		func() int64 { return maxDebugBytes }, http.HandlerFunc(s.debugPlugins), refused)
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", guard(metrics))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") })
	mux.HandleFunc("GET /readyz", s.readyz)
	mux.Handle("GET /debug/plugins", guard(debug))
	var tlsConfig *tls.Config
	if o.TLSCertFile != "" || o.TLSKeyFile != "" {
		if o.TLSCertFile == "" || o.TLSKeyFile == "" {
			return nil, errors.New("server: TLS needs both a certificate and a key file")
		}
		certs, err := newCertReloader(o.TLSCertFile, o.TLSKeyFile)
		if err != nil {
			return nil, err
		}
		tlsConfig = &tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: certs.getCertificate, NextProtos: []string{"h2", "http/1.1"}}
	}
	ln, err := (&net.ListenConfig{}).Listen(ctx, "tcp", o.Address)
	if err != nil {
		return nil, fmt.Errorf("server: listen on %s: %w", o.Address, err)
	}
	shed := newShedListener(ln, o.MaxConnections, o.ConnWriteBuffer)
	s.addr = ln.Addr()
	s.srv = &http.Server{
		Handler:           serving(mux),
		ReadHeaderTimeout: o.ReadHeaderTimeout,
		ReadTimeout:       o.ReadTimeout,
		WriteTimeout:      o.WriteTimeout,
		IdleTimeout:       o.IdleTimeout,
		MaxHeaderBytes:    16 << 10, // a token fits, and /debug/plugins's one parameter (an object's name)
		ConnContext:       connContext,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelDebug),
	}
	var serveLn net.Listener = shed
	scheme := "http"
	if tlsConfig != nil {
		s.srv.TLSConfig = tlsConfig
		serveLn, scheme = tls.NewListener(shed, tlsConfig), "https"
	}
	go func() {
		defer close(s.done)
		if err := s.srv.Serve(serveLn); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("http server stopped", "err", err)
		}
	}()
	auth := "none: every endpoint is open"
	if o.AuthClient != nil {
		auth = "kubernetes: /metrics and /debug/plugins need a token allowed to get them"
		if tlsConfig == nil {
			log.Warn("bearer tokens reach the HTTP endpoint in clear; give it a TLS certificate and key")
		}
	}
	log.Info("serving /metrics, /healthz, /readyz and /debug/plugins", "address", s.addr.String(),
		"scheme", scheme, "maxConnections", o.MaxConnections, "auth", auth)
	return s, nil
}

// metricsLimit is the default bound of a /metrics response: the host's
// own metrics and the attached plugins' metric budgets.
func (s *Server) metricsLimit() int64 {
	s.mu.Lock()
	h := s.host
	s.mu.Unlock()
	n := int64(DefaultHostMetricsBytes)
	if h != nil {
		if b, ok := h.PluginMetrics().(interface{ Budget() int64 }); ok {
			n += b.Budget()
		}
	}
	return n
}

// Standby marks this replica as a standby: until Attach, /readyz answers
// 200 with why.
func (s *Server) Standby(why string) {
	s.mu.Lock()
	s.waiting, s.standby = why, true
	s.mu.Unlock()
}

// Attach connects a running pipeline and host: their metrics are
// exported, the events of resources are counted, and /readyz and
// /debug/plugins report them.
func (s *Server) Attach(p *informer.Pipeline, h *host.Host, resources []string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.pipeline != nil {
		return errors.New("server: already attached")
	}
	if err := s.reg.Register(h); err != nil {
		return fmt.Errorf("server: register plugin metrics: %w", err)
	}
	if err := s.reg.Register(h.PluginMetrics()); err != nil {
		s.reg.Unregister(h)
		return fmt.Errorf("server: register plugins' own metrics: %w", err)
	}
	counts := &resourceCounts{p: p}
	if err := counts.watch(resources); err != nil {
		s.reg.Unregister(h)
		return err
	}
	s.reg.MustRegister(counts)
	s.pipeline, s.host, s.counts, s.standby = p, h, counts, false
	return nil
}

// Sources is what the endpoint reports of the plugins' sources
// (internal/pluginsource.Manager): their metrics, each sourced plugin's
// source in /debug/plugins, and in /readyz a fail-closed one with no good
// version.
type Sources interface {
	prometheus.Collector
	Status() map[string]pluginsource.Status
	NotReady() []string
}

// AttachSources reports src from now on; it stays attached until
// Shutdown.
func (s *Server) AttachSources(src Sources) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.sources != nil {
		return errors.New("server: plugin sources already attached")
	}
	if err := s.reg.Register(src); err != nil {
		return fmt.Errorf("server: register plugin source metrics: %w", err)
	}
	s.sources = src
	return nil
}

// Detach undoes Attach; /readyz then reports why.
func (s *Server) Detach(why string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.pipeline == nil {
		return
	}
	s.reg.Unregister(s.host)
	s.reg.Unregister(s.counts)
	s.counts.stop()
	s.pipeline, s.host, s.counts, s.waiting = nil, nil, nil, why
}

// Addr is the address the server listens on (useful with port 0).
func (s *Server) Addr() net.Addr { return s.addr }

// Shutdown stops the server and its event counters.
func (s *Server) Shutdown(ctx context.Context) error {
	err := s.srv.Shutdown(ctx)
	<-s.done
	s.Detach("stopped")
	return err
}

// SetResources makes the event counters follow a new configuration:
// resources no longer configured stop being counted (their totals stay
// exported), new ones start.
func (s *Server) SetResources(names []string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.counts == nil {
		return nil
	}
	return s.counts.watch(names)
}

// NotReady lists why the process is not ready; empty means ready.
func NotReady(p *informer.Pipeline, h *host.Host) []string {
	return notReady(p, h, nil)
}

// notReady is NotReady with the plugin sources: a sourced plugin with
// failurePolicy fail-open is no reason, whatever its state, and one that
// is fail-closed with no good version is, even before the host has it.
func notReady(p *informer.Pipeline, h *host.Host, src Sources) []string {
	var sources map[string]pluginsource.Status
	if src != nil {
		sources = src.Status()
	}
	var why []string
	if p != nil {
		for _, r := range p.Status() {
			switch {
			case r.Phase != informer.PhaseActive:
				why = append(why, fmt.Sprintf("resource %s: %s %s", r.Name, strings.ToLower(string(r.Phase)), r.Error))
			case !r.Synced:
				why = append(why, fmt.Sprintf("resource %s: not synced %s", r.Name, r.Error))
			case r.WatchFailing:
				why = append(why, fmt.Sprintf("resource %s: list/watch failing since %s (%s): %s", r.Name,
					r.FailingSince.UTC().Format(time.RFC3339), time.Since(r.FailingSince).Round(time.Second), r.Error))
			}
		}
	}
	if h != nil {
		if r := h.ShardNotReady(); r != "" {
			why = append(why, r)
		}
		for _, pl := range h.Status() {
			if st, ok := sources[pl.File]; ok && st.FailurePolicy == config.FailOpen {
				continue
			}
			if c := pl.Controller; c != nil && c.FinalizerStuck > 0 {
				why = append(why, fmt.Sprintf("plugin %s: %d objects being deleted wait on its finalizer %s while it is %s",
					pl.File, c.FinalizerStuck, c.Finalizer, pl.State))
			}
			switch pl.State {
			case host.StateQuarantined, host.StateStandby: // deliberately off: not a reason to stop traffic
			case host.StateRunning:
				if !pl.Synced {
					why = append(why, fmt.Sprintf("plugin %s: initial list not delivered yet", pl.File))
				}
			default:
				why = append(why, fmt.Sprintf("plugin %s: %s %s", pl.File, pl.State, pl.LastError))
			}
		}
	}
	if src != nil {
		why = append(why, src.NotReady()...)
	}
	return why
}

func (s *Server) readyz(w http.ResponseWriter, _ *http.Request) {
	why, standby := s.readiness()
	if standby {
		fmt.Fprintln(w, why[0])
		return
	}
	if len(why) > 0 {
		w.WriteHeader(http.StatusServiceUnavailable)
		for _, r := range why {
			fmt.Fprintln(w, strings.TrimSpace(r))
		}
		return
	}
	fmt.Fprintln(w, "ok")
}

// readiness is what /readyz answers: why the daemon is not ready (none:
// ready), or standby with its one reason, which is ready too.
func (s *Server) readiness() (why []string, standby bool) {
	s.mu.Lock()
	p, h, waiting, sb, src := s.pipeline, s.host, s.waiting, s.standby, s.sources
	s.mu.Unlock()
	if p == nil && sb {
		return []string{waiting}, true
	}
	if p == nil {
		return []string{waiting}, false
	}
	return notReady(p, h, src), false
}

var (
	descReady = prometheus.NewDesc("informer_host_ready",
		"1 while /readyz answers 200 (a standby included), 0 while it answers 503 and says why.", nil, nil)
	descStandby = prometheus.NewDesc("informer_host_standby",
		"1 while the replica is a standby (another replica leads, or it waits to join the shards), else 0.", nil, nil)
)

// readyMetrics exports /readyz's answer, so an alert sees a replica that
// stays unready without probing it.
type readyMetrics struct{ s *Server }

func (r readyMetrics) Describe(ch chan<- *prometheus.Desc) {
	ch <- descReady
	ch <- descStandby
}

func (r readyMetrics) Collect(ch chan<- prometheus.Metric) {
	why, standby := r.s.readiness()
	ready := 0.0
	if standby || len(why) == 0 {
		ready = 1
	}
	sb := 0.0
	if standby {
		sb = 1
	}
	ch <- prometheus.MustNewConstMetric(descReady, prometheus.GaugeValue, ready)
	ch <- prometheus.MustNewConstMetric(descStandby, prometheus.GaugeValue, sb)
}

func (s *Server) debugPlugins(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	h, src := s.host, s.sources
	s.mu.Unlock()
	var (
		st      []host.PluginStatus
		sh      *host.ShardStatus
		sources map[string]pluginsource.Status
	)
	var object *host.ObjectView
	if q := r.URL.Query().Get("object"); q != "" {
		res, ns, name, ok := parseObject(q)
		if !ok {
			http.Error(w, fmt.Sprintf("object=%q: want resource/namespace/name, or resource/name for a cluster-scoped object, with the resource's name in config.yaml", q),
				http.StatusBadRequest)
			return
		}
		if h != nil {
			ctx, cancel := context.WithTimeout(r.Context(), objectWait)
			v := h.Object(ctx, res, ns, name)
			cancel()
			object = &v
		}
	}
	if h != nil {
		st, sh = h.Status(), h.ShardStatus()
	}
	if src != nil {
		sources = src.Status()
	}
	w.Header().Set("Content-Type", "application/json")
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	doc := pluginsDocument(st, sh, sources)
	doc.Object = objectDocument(object)
	_ = enc.Encode(doc)
}

// objectWait bounds how long /debug/plugins?object= waits for each
// plugin's worker to answer between two calls.
const objectWait = 2 * time.Second

// parseObject reads the object parameter of /debug/plugins.
func parseObject(q string) (resource, namespace, name string, ok bool) {
	parts := strings.Split(q, "/")
	for _, p := range parts {
		if p == "" {
			return "", "", "", false
		}
	}
	switch len(parts) {
	case 2:
		return parts[0], "", parts[1], true
	case 3:
		return parts[0], parts[1], parts[2], true
	}
	return "", "", "", false
}

// resourceCounts counts the events each configured resource delivers, with
// one listener of its own per resource.
type resourceCounts struct {
	p    *informer.Pipeline
	mu   sync.Mutex
	n    map[string]*[4]atomic.Uint64      // by resource, indexed by EventType; guarded by mu
	regs map[string]*informer.Registration // the resources counted now
}

var (
	descResourceEvents = prometheus.NewDesc("informer_host_resource_events_total",
		"Events the resource's informers delivered, by type.", []string{"resource", "type"}, nil)
	descResourceSynced = prometheus.NewDesc("informer_host_resource_synced",
		"1 when every informer of the resource has completed its initial list.", []string{"resource"}, nil)
	descResourceFailing = prometheus.NewDesc("informer_host_resource_watch_failing_seconds",
		"How long the resource's list/watch calls have been failing; 0 while they succeed.", []string{"resource"}, nil)
)

// watch counts the events of names from now on, and stops counting the
// others.
func (c *resourceCounts) watch(names []string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n == nil {
		c.n, c.regs = map[string]*[4]atomic.Uint64{}, map[string]*informer.Registration{}
	}
	want := map[string]bool{}
	for _, name := range names {
		want[name] = true
		if c.regs[name] != nil {
			continue
		}
		counts := c.n[name]
		if counts == nil {
			counts = &[4]atomic.Uint64{}
			c.n[name] = counts
		}
		reg, err := c.p.AddListener(name, informer.ListenerFunc(func(ev *event.Event) { counts[ev.Type].Add(1) }))
		if err != nil {
			return fmt.Errorf("server: count events of %s: %w", name, err)
		}
		c.regs[name] = reg
	}
	for name, reg := range c.regs {
		if !want[name] {
			reg.Remove()
			delete(c.regs, name)
		}
	}
	return nil
}

func (c *resourceCounts) stop() {
	c.mu.Lock()
	regs := c.regs
	c.regs = nil
	c.mu.Unlock()
	for _, r := range regs {
		r.Remove()
	}
}

func (c *resourceCounts) Describe(ch chan<- *prometheus.Desc) {
	ch <- descResourceEvents
	ch <- descResourceSynced
	ch <- descResourceFailing
}

func (c *resourceCounts) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, r := range c.p.Status() {
		synced := 0.0
		if r.Synced {
			synced = 1
		}
		ch <- prometheus.MustNewConstMetric(descResourceSynced, prometheus.GaugeValue, synced, r.Name)
		failing := 0.0
		if !r.FailingSince.IsZero() {
			failing = time.Since(r.FailingSince).Seconds()
		}
		ch <- prometheus.MustNewConstMetric(descResourceFailing, prometheus.GaugeValue, failing, r.Name)
		if counts, ok := c.n[r.Name]; ok {
			for _, t := range []event.EventType{event.EventAdd, event.EventUpdate, event.EventDelete} {
				ch <- prometheus.MustNewConstMetric(descResourceEvents, prometheus.CounterValue, float64(counts[t].Load()), r.Name, t.String())
			}
		}
	}
}
