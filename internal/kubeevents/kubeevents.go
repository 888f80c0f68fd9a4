package kubeevents

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"unicode"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"

	"github.com/informer-host/informer-host/abi"
	"github.com/informer-host/informer-host/internal/config"
	"github.com/informer-host/informer-host/internal/kubewrite"
	"github.com/informer-host/informer-host/internal/tracing"
)

// Options configure Recorders.
type Options struct {
	// RESTConfig reaches the apiserver with the daemon's credentials.
	// nil: every Event is logged instead (no cluster to record to).
	RESTConfig *rest.Config
	// Logger receives dry-run Events and failures. Default slog.Default().
	Logger *slog.Logger
	// Instance is the Events' reportingInstance (source host). Default:
	// the host name.
	Instance string
	// Correlator tunes client-go's aggregation and spam filter; the zero
	// value takes client-go's defaults (tests lower the QPS).
	Correlator record.CorrelatorOptions
}

// Recorders holds the recorder of every plugin that may record Events.
// Safe for concurrent use.
type Recorders struct {
	opts    Options
	metrics *prometheus.CounterVec
	// mu guards byPlugin. A plugin's recorder is kept across its
	// instances and versions while its identity and dry-run setting stay
	// the same, so client-go's aggregation and spam filter see all of its
	// Events.
	mu       sync.Mutex
	byPlugin map[string]*Recorder
	closed   bool
}

// New returns the recorders of one host.
func New(o Options) *Recorders {
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Instance == "" {
		o.Instance, _ = os.Hostname()
	}
	return &Recorders{opts: o, byPlugin: map[string]*Recorder{}, metrics: prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "informer_host_plugin_kube_events_total",
		Help: "Kubernetes Events plugins recorded (event_record), by result: sent (stored by the apiserver, new or aggregated), refused (by the apiserver, not retried), unavailable (not reached; client-go retries), dry_run (logged), invalid and too_large (refused at the call).",
	}, []string{"plugin", "result"})}
}

// Recorder records one plugin's Events.
type Recorder struct {
	plugin   string
	identity string // the impersonated user, "" = the daemon's credentials
	dryRun   bool
	qps      float64 // the plugin's API budget (its writes grant's rate)
	burst    int
	budget   *kubewrite.Budget // the rate limiter of the recorder's client; nil without one
	log      *slog.Logger
	count    func(result string)
	// rec and b are nil when Events are only logged (dry run, no cluster).
	rec record.EventRecorder
	b   record.EventBroadcaster
}

// For returns plugin's recorder for its grants, or nil when it is not
// granted Events. A change of identity or dry run replaces the recorder
// (the old one sends what it has queued and stops).
func (r *Recorders) For(plugin string, g config.Grants) (*Recorder, error) {
	if g.Events == nil {
		return nil, nil
	}
	identity := ""
	if g.Impersonate != nil && g.Impersonate.ServiceAccount != "" {
		ns, name, ok := strings.Cut(g.Impersonate.ServiceAccount, "/")
		if !ok {
			return nil, fmt.Errorf("plugin %q: impersonate: serviceAccount %q is not namespace/name", plugin, g.Impersonate.ServiceAccount)
		}
		identity = "system:serviceaccount:" + ns + ":" + name
	}
	dryRun := g.DryRun != nil && *g.DryRun
	// The plugin's Events have a budget of the same rate as its writes
	// (grants.writes.qps and burst, the defaults without writes), a
	// bucket of their own: the background sends of Events never hold up
	// a write the plugin is waiting on.
	var wg config.WritesGrant
	if g.Writes != nil {
		wg = *g.Writes
	}
	qps, burst, _ := wg.Limits()
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return nil, fmt.Errorf("plugin %q: events: the host is stopping", plugin)
	}
	if old := r.byPlugin[plugin]; old != nil {
		if old.identity == identity && old.dryRun == dryRun && old.qps == qps && old.burst == burst {
			return old, nil
		}
		old.stop()
		delete(r.byPlugin, plugin)
	}
	rec, err := r.build(plugin, identity, dryRun, qps, burst)
	if err != nil {
		return nil, err
	}
	r.byPlugin[plugin] = rec
	return rec, nil
}

func (r *Recorders) build(plugin, identity string, dryRun bool, qps float64, burst int) (*Recorder, error) {
	rec := &Recorder{plugin: plugin, identity: identity, dryRun: dryRun, qps: qps, burst: burst, log: r.opts.Logger.With("plugin", plugin),
		count: func(result string) { r.metrics.WithLabelValues(plugin, result).Inc() }}
	if dryRun || r.opts.RESTConfig == nil {
		return rec, nil
	}
	cfg := rest.CopyConfig(r.opts.RESTConfig)
	if identity != "" {
		cfg.Impersonate = rest.ImpersonationConfig{UserName: identity}
	}
	// The sink sends without a deadline, so over the budget an Event
	// waits in the background for its token rather than being dropped.
	rec.budget = kubewrite.NewBudget(qps, burst)
	cfg.RateLimiter, cfg.QPS, cfg.Burst = rec.budget, float32(qps), burst
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("plugin %q: events client: %w", plugin, err)
	}
	// client-go logs a refused Event as a dump of the whole struct; the
	// sink logs it as one line instead, so client-go's logger is muted.
	quiet := klog.NewContext(context.Background(), logr.Discard())
	rec.b = record.NewBroadcaster(record.WithCorrelatorOptions(r.opts.Correlator), record.WithContext(quiet))
	rec.b.StartRecordingToSink(loggingSink{EventSink: &typedcorev1.EventSinkImpl{Interface: cs.CoreV1().Events("")}, log: rec.log, identity: identity, count: rec.count})
	rec.rec = rec.b.NewRecorder(scheme.Scheme, corev1.EventSource{Component: Component(plugin), Host: r.opts.Instance})
	return rec, nil
}

// Component is the source component and reportingController of plugin's
// Events: "informer-host/" and the file name without ".wasm", made a
// valid name (at most 63 characters of [A-Za-z0-9_.-]).
func Component(plugin string) string {
	name := strings.TrimSuffix(plugin, ".wasm")
	name = strings.Map(func(r rune) rune {
		if r < unicode.MaxASCII && (unicode.IsLetter(r) || unicode.IsDigit(r) || r == '-' || r == '_' || r == '.') {
			return r
		}
		return '-'
	}, name)
	name = strings.Trim(name[:min(len(name), 63)], "-_.")
	if name == "" {
		name = "plugin"
	}
	return "informer-host/" + name
}

// Forget stops plugin's recorder and drops its series (its file was
// removed).
func (r *Recorders) Forget(plugin string) {
	r.metrics.DeletePartialMatch(prometheus.Labels{"plugin": plugin})
	r.mu.Lock()
	defer r.mu.Unlock()
	if old := r.byPlugin[plugin]; old != nil {
		old.stop()
		delete(r.byPlugin, plugin)
	}
}

// Close stops every recorder; Events still queued are dropped, as client-go
// does at shutdown.
func (r *Recorders) Close() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.closed = true
	for p, rec := range r.byPlugin {
		rec.stop()
		delete(r.byPlugin, p)
	}
}

func (rec *Recorder) stop() {
	if rec.b != nil {
		rec.b.Shutdown()
	}
}

// Record records an Event about obj (the object's content, read during the
// call only). It returns 0, abi.ErrInvalid for a reason, type or object the
// Events API would refuse, or abi.ErrTooLarge for a message over
// abi.MaxEventMessage, with the result message. The Event is sent in the
// background: 0 means it was queued.
// ctx's span, when it records, gets a child for the Event.
func (rec *Recorder) Record(ctx context.Context, obj map[string]any, eventType, reason, message string) (int32, string) {
	code, msg := rec.record(obj, eventType, reason, message)
	if _, sp, ok := tracing.Child(ctx, "event "+reason, trace.SpanKindProducer); ok {
		u := unstructured.Unstructured{Object: obj}
		sp.SetAttributes(tracing.AttrPlugin.String(rec.plugin), tracing.AttrReason.String(reason), tracing.AttrEventType.String(eventType),
			tracing.AttrKind.String(u.GetKind()), tracing.AttrNamespace.String(u.GetNamespace()), tracing.AttrName.String(u.GetName()),
			tracing.AttrResult.String(kubewrite.Result(code)))
		tracing.End(sp, code, msg)
	}
	switch {
	case code != 0:
		rec.count(kubewrite.Result(code))
	case rec.rec == nil:
		rec.count("dry_run")
	}
	return code, msg
}

func (rec *Recorder) record(obj map[string]any, eventType, reason, message string) (int32, string) {
	if err := checkReason(reason); err != "" {
		return abi.ErrInvalid, err
	}
	if len(message) > abi.MaxEventMessage {
		return abi.ErrTooLarge, fmt.Sprintf("message of %d bytes is over %d", len(message), abi.MaxEventMessage)
	}
	u := &unstructured.Unstructured{Object: obj}
	if u.GetKind() == "" || u.GetAPIVersion() == "" || u.GetName() == "" {
		return abi.ErrInvalid, "the object has no apiVersion, kind or name to record an Event about"
	}
	if rec.rec == nil {
		rec.log.Info("Event (dry run: logged, not recorded)", "type", eventType, "reason", reason, "message", message,
			"object", u.GetKind()+" "+key(u), "reportingController", Component(rec.plugin))
		return 0, ""
	}
	rec.rec.Event(u, eventType, reason, message)
	return 0, ""
}

func key(u *unstructured.Unstructured) string {
	if ns := u.GetNamespace(); ns != "" {
		return ns + "/" + u.GetName()
	}
	return u.GetName()
}

// checkReason accepts what the Events API does and a reader expects: a
// short machine word (CamelCase, as in "FailedMount").
func checkReason(reason string) string {
	switch {
	case reason == "":
		return "reason is required (a CamelCase word such as TooLarge)"
	case len(reason) > abi.MaxEventReason:
		return fmt.Sprintf("reason of %d bytes is over %d", len(reason), abi.MaxEventReason)
	}
	for _, r := range reason {
		if r > unicode.MaxASCII || !(unicode.IsLetter(r) || unicode.IsDigit(r) || r == '_' || r == '-' || r == '.' || r == ':') {
			return fmt.Sprintf("reason %q: use letters and digits (CamelCase), no spaces", reason)
		}
	}
	return ""
}

// loggingSink is the apiserver's Event sink, logging what the apiserver
// refuses (an impersonated identity without RBAC for Events: forbidden)
// into the host's log as one line a person reads, and counting every
// send; client-go would only tell klog, with the Event's whole struct.
type loggingSink struct {
	record.EventSink
	log      *slog.Logger
	identity string
	count    func(result string)
}

func (s loggingSink) done(e *corev1.Event, err error) {
	if err == nil {
		s.count("sent")
		return
	}
	as := s.identity
	if as == "" {
		as = "the daemon's credentials"
	}
	obj := e.InvolvedObject.Kind + " " + e.InvolvedObject.Name
	if ns := e.InvolvedObject.Namespace; ns != "" {
		obj = e.InvolvedObject.Kind + " " + ns + "/" + e.InvolvedObject.Name
	}
	if st := (*apierrors.StatusError)(nil); errors.As(err, &st) {
		s.count("refused")
		s.log.Warn("Event not recorded: the apiserver refused it", "object", obj, "reason", e.Reason, "as", as,
			"error", st.ErrStatus.Message)
		return
	}
	s.count("unavailable")
	s.log.Warn("Event not recorded yet: the apiserver could not be reached (client-go retries)", "object", obj, "reason", e.Reason,
		"as", as, "error", err.Error())
}

func (s loggingSink) Create(e *corev1.Event) (*corev1.Event, error) {
	out, err := s.EventSink.Create(e)
	s.done(e, err)
	return out, err
}

func (s loggingSink) Update(e *corev1.Event) (*corev1.Event, error) {
	out, err := s.EventSink.Update(e)
	s.done(e, err)
	return out, err
}

func (s loggingSink) Patch(e *corev1.Event, data []byte) (*corev1.Event, error) {
	out, err := s.EventSink.Patch(e, data)
	if !apierrors.IsNotFound(err) { // client-go creates it then
		s.done(e, err)
	}
	return out, err
}

// Describe implements prometheus.Collector.
func (r *Recorders) Describe(ch chan<- *prometheus.Desc) { r.metrics.Describe(ch) }

// Collect implements prometheus.Collector.
func (r *Recorders) Collect(ch chan<- prometheus.Metric) { r.metrics.Collect(ch) }
