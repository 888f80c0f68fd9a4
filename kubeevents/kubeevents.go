package kubeevents

import (
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"unicode"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/record"

	"github.com/informer-host/informer-host/abi"
	"github.com/informer-host/informer-host/config"
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
	opts Options
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
	return &Recorders{opts: o, byPlugin: map[string]*Recorder{}}
}

// Recorder records one plugin's Events.
type Recorder struct {
	plugin   string
	identity string // the impersonated user, "" = the daemon's credentials
	dryRun   bool
	log      *slog.Logger
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
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return nil, fmt.Errorf("plugin %q: events: the host is stopping", plugin)
	}
	if old := r.byPlugin[plugin]; old != nil {
		if old.identity == identity && old.dryRun == dryRun {
			return old, nil
		}
		old.stop()
		delete(r.byPlugin, plugin)
	}
	rec, err := r.build(plugin, identity, dryRun)
	if err != nil {
		return nil, err
	}
	r.byPlugin[plugin] = rec
	return rec, nil
}

func (r *Recorders) build(plugin, identity string, dryRun bool) (*Recorder, error) {
	rec := &Recorder{plugin: plugin, identity: identity, dryRun: dryRun, log: r.opts.Logger.With("plugin", plugin)}
	if dryRun || r.opts.RESTConfig == nil {
		return rec, nil
	}
	cfg := rest.CopyConfig(r.opts.RESTConfig)
	if identity != "" {
		cfg.Impersonate = rest.ImpersonationConfig{UserName: identity}
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("plugin %q: events client: %w", plugin, err)
	}
	rec.b = record.NewBroadcaster(record.WithCorrelatorOptions(r.opts.Correlator))
	rec.b.StartRecordingToSink(loggingSink{EventSink: &typedcorev1.EventSinkImpl{Interface: cs.CoreV1().Events("")}, log: rec.log, identity: identity})
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

// Forget stops plugin's recorder (its file was removed).
func (r *Recorders) Forget(plugin string) {
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
func (rec *Recorder) Record(obj map[string]any, eventType, reason, message string) (int32, string) {
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
// into the host's log; client-go would only tell klog.
type loggingSink struct {
	record.EventSink
	log      *slog.Logger
	identity string
}

func (s loggingSink) failed(e *corev1.Event, err error) {
	if err != nil {
		as := s.identity
		if as == "" {
			as = "the daemon's credentials"
		}
		s.log.Warn("Event not recorded: the apiserver refused it", "err", err, "as", as,
			"object", e.InvolvedObject.Kind+" "+e.InvolvedObject.Namespace+"/"+e.InvolvedObject.Name, "reason", e.Reason)
	}
}

func (s loggingSink) Create(e *corev1.Event) (*corev1.Event, error) {
	out, err := s.EventSink.Create(e)
	s.failed(e, err)
	return out, err
}

func (s loggingSink) Update(e *corev1.Event) (*corev1.Event, error) {
	out, err := s.EventSink.Update(e)
	s.failed(e, err)
	return out, err
}

func (s loggingSink) Patch(e *corev1.Event, data []byte) (*corev1.Event, error) {
	out, err := s.EventSink.Patch(e, data)
	if !apierrors.IsNotFound(err) { // client-go creates it then
		s.failed(e, err)
	}
	return out, err
}
