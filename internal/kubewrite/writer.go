package kubewrite

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel/trace"
	"golang.org/x/time/rate"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	"github.com/informer-host/informer-host/abi"
	"github.com/informer-host/informer-host/internal/config"
	"github.com/informer-host/informer-host/internal/dynjson"
	"github.com/informer-host/informer-host/internal/tracing"
)

// Options configure a Client.
type Options struct {
	// Config is the daemon's own client configuration, of which the
	// plugins' clients take the credentials only: each plugin's client
	// has the rate limiter of its own grant (a Budget), never the
	// daemon's QPS, Burst or RateLimiter. Required.
	Config *rest.Config
	// Resolve maps a configured resource's name (config.yaml resources)
	// to its API coordinates, false while it is not resolved. nil: only
	// "group/version/resource" targets work.
	Resolve func(name string) (schema.GroupVersionResource, bool)
	// Logger receives the dry-run log lines. Default slog.Default().
	Logger *slog.Logger
}

// Client builds plugins' Writers. Safe for concurrent use.
type Client struct {
	base    *rest.Config
	resolve func(string) (schema.GroupVersionResource, bool)
	log     *slog.Logger
	metrics *metrics

	mu sync.Mutex
	// namespaces are the tenant namespaces' shared budgets, by namespace.
	namespaces map[string]*Budget
}

// New returns a Client.
func New(o Options) (*Client, error) {
	if o.Config == nil {
		return nil, errors.New("kubewrite: Options needs Config")
	}
	base := rest.CopyConfig(o.Config)
	// The daemon's limit is the daemon's: a plugin's writes neither wait
	// on it nor take from it (For sets the plugin's own).
	base.RateLimiter, base.QPS, base.Burst = nil, 0, 0
	// A traced write's span gets the apiserver's status, whatever it is.
	base.Wrap(tracing.RecordStatus)
	log := o.Logger
	if log == nil {
		log = slog.Default()
	}
	return &Client{base: base, resolve: o.Resolve, log: log, metrics: newMetrics()}, nil
}

// PluginOptions are one plugin's writes settings, from its grants.
type PluginOptions struct {
	Plugin      string // the module file's name; the field manager is "informer-host/" + Plugin
	Grant       config.WritesGrant
	Impersonate *config.Impersonation // nil: the daemon's identity
	DryRun      bool
	// Self records the resourceVersions of the plugin's successful
	// writes; nil records nothing.
	Self   *SelfWrites
	Logger *slog.Logger // the plugin's; default the Client's
	// Namespace, when set, confines the plugin (a tenant's): a write of
	// any other namespace, or of a cluster-scoped object, is ErrDenied
	// whatever the grant says, and every write takes a token from the
	// namespace's budget too, a bucket of NamespaceQPS and NamespaceBurst
	// shared by all the plugins of that namespace, so that one tenant's
	// writes cannot use up what the daemon can send for another's.
	Namespace      string
	NamespaceQPS   float64
	NamespaceBurst int
}

// Writer performs one plugin's writes within its grant. Check and Do are
// called by one goroutine at a time (the plugin's instance); the budget,
// the metrics and SelfWrites are safe to share beyond that.
type Writer struct {
	dyn      dynamic.Interface
	resolve  func(string) (schema.GroupVersionResource, bool)
	grants   map[string]config.WriteGrant // by the grant's resource string
	plugin   string
	manager  string
	dryRun   bool
	timeout  time.Duration
	budget   *Budget // the rate limiter of dyn's REST client, and only of it
	self     *SelfWrites
	log      *slog.Logger
	metrics  *metrics
	identity string // the impersonated user, for messages; "" = the daemon
	// namespace confines every write, the host's own for the plugin
	// included (PluginOptions.Namespace); "" = none.
	namespace string
}

// For returns the Writer of one plugin, with a REST client of its own
// whose rate limiter is the plugin's Budget (grants.writes.qps and
// burst). Connections are still shared: client-go caches its transports
// by TLS settings, and the rate limiter is no part of them.
func (c *Client) For(o PluginOptions) (*Writer, error) {
	qps, burst, timeout := o.Grant.Limits()
	cfg := rest.CopyConfig(c.base)
	user := ""
	if o.Impersonate != nil && o.Impersonate.ServiceAccount != "" {
		user = o.Impersonate.ServiceAccountUser()
		cfg.Impersonate = rest.ImpersonationConfig{UserName: user}
	}
	budget := NewBudget(qps, burst)
	if o.Namespace != "" {
		budget = budget.Within(c.NamespaceBudget(o.Namespace, o.NamespaceQPS, o.NamespaceBurst))
	}
	cfg.RateLimiter, cfg.QPS, cfg.Burst = c.metrics.meter(o.Plugin, budget), float32(qps), burst
	dyn, err := dynjson.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("plugin %q: writes client: %w", o.Plugin, err)
	}
	w := &Writer{
		dyn: dyn, resolve: c.resolve, grants: map[string]config.WriteGrant{}, plugin: o.Plugin,
		manager: "informer-host/" + o.Plugin, dryRun: o.DryRun, timeout: timeout, budget: budget,
		self: o.Self, log: o.Logger, metrics: c.metrics, identity: user, namespace: o.Namespace,
	}
	if w.log == nil {
		w.log = c.log.With("plugin", o.Plugin)
	}
	for _, g := range o.Grant.Resources {
		w.grants[g.Resource] = g
	}
	return w, nil
}

// NamespaceBudget returns the write budget shared by the plugins of
// tenant namespace ns, made at qps and burst on first use and set to
// them on every later one (a changed ceiling takes effect at once,
// keeping the tokens spent).
func (c *Client) NamespaceBudget(ns string, qps float64, burst int) *Budget {
	if qps <= 0 {
		qps = config.DefaultCeilingWritesQPS
	}
	if burst <= 0 {
		burst = config.DefaultCeilingWritesBurst
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	b := c.namespaces[ns]
	if b == nil {
		if c.namespaces == nil {
			c.namespaces = map[string]*Budget{}
		}
		b = NewBudget(qps, burst)
		c.namespaces[ns] = b
		return b
	}
	if b.lim.Limit() != rate.Limit(qps) {
		b.lim.SetLimit(rate.Limit(qps))
	}
	if b.lim.Burst() != burst {
		b.lim.SetBurst(burst)
	}
	return b
}

// Budget is the plugin's API budget, which its REST client waits on.
func (w *Writer) Budget() *Budget { return w.budget }

// Dynamic is the plugin's dynamic client: its identity and its budget.
// Controller mode reads fresh copies through it (internal/controllerwrites)
// so that those reads, too, are the plugin's and count against its budget.
func (w *Writer) Dynamic() dynamic.Interface { return w.dyn }

// Request is one write, as the plugin asked for it.
type Request struct {
	Op                             int32 // abi.WriteCreate ... abi.WriteDelete
	Resource, Namespace, Name, Sub string
	Body                           []byte
	UID, ResourceVersion           string // preconditions; "" = none
	Force                          bool
	MustExist                      bool // an apply that updates only, never creates
}

// Check decides the grant and the arguments, without I/O: abi.ErrDenied
// when the grant does not cover the resource, the namespace, the
// subresource or the op's verb; then abi.ErrInvalid for arguments that
// cannot work; else 0.
func (w *Writer) Check(r *Request) (int32, string) {
	if code, msg := w.confined(r); code != 0 {
		return code, msg
	}
	g, ok := w.grants[r.Resource]
	switch {
	case !ok:
		return abi.ErrDenied, fmt.Sprintf("no write grant for resource %q", r.Resource)
	case !g.InNamespace(r.Namespace):
		return abi.ErrDenied, fmt.Sprintf("the write grant for %q does not cover namespace %q", r.Resource, r.Namespace)
	case r.Sub != "" && !slices.Contains(g.Subresources, r.Sub):
		return abi.ErrDenied, fmt.Sprintf("the write grant for %q does not cover subresource %q", r.Resource, r.Sub)
	}
	if verb := abi.WriteVerb(r.Op); verb != "" && !g.Allows(verb, r.Sub) {
		return abi.ErrDenied, fmt.Sprintf("the write grant for %q does not allow %s", r.Resource, verb)
	}
	return CheckArgs(r)
}

// CheckArgs is Check's part that needs no grant: abi.ErrInvalid for
// arguments that cannot work (an unknown op, a missing name, a create
// with preconditions, force or must-exist on anything but an apply, an
// apply body without apiVersion or kind), else 0. The replay
// (host/replay) checks its stubbed writes with it.
func CheckArgs(r *Request) (int32, string) {
	switch {
	case abi.WriteVerb(r.Op) == "":
		return abi.ErrInvalid, fmt.Sprintf("unknown k8s_write op %d", r.Op)
	case r.Name == "" && r.Op != abi.WriteCreate:
		return abi.ErrInvalid, "a name is required (only a create may leave it to the body)"
	case r.Op == abi.WriteCreate && (r.UID != "" || r.ResourceVersion != ""):
		return abi.ErrInvalid, "a create takes no preconditions"
	case r.Force && r.Op != abi.WriteApply:
		return abi.ErrInvalid, "force applies to apply only"
	case r.MustExist && r.Op != abi.WriteApply:
		return abi.ErrInvalid, "must-exist applies to apply only (a patch never creates)"
	case r.Op == abi.WriteApply:
		return checkApplyBody(r.Body)
	}
	return 0, ""
}

// checkApplyBody refuses an applied configuration the apiserver could
// only answer with a puzzle ("invalid object type: /v1, Kind="): server
// side apply needs the object's apiVersion and kind in the body.
func checkApplyBody(body []byte) (int32, string) {
	var tm struct {
		APIVersion any `json:"apiVersion"`
		Kind       any `json:"kind"`
	}
	if err := json.Unmarshal(body, &tm); err != nil {
		return abi.ErrInvalid, "an apply's body must be a JSON object (the applied configuration)"
	}
	var missing []string
	if s, _ := tm.APIVersion.(string); s == "" {
		missing = append(missing, "apiVersion")
	}
	if s, _ := tm.Kind.(string); s == "" {
		missing = append(missing, "kind")
	}
	if len(missing) > 0 {
		return abi.ErrInvalid, "an apply's body needs " + strings.Join(missing, " and ") +
			` (as in {"apiVersion":"v1","kind":"Pod","metadata":{...}}): server-side apply cannot tell the type without`
	}
	return 0, ""
}

// Do sends the request within the plugin's budget and I/O timeout: a
// write over the rate limit waits for its token inside the timeout (and
// is abi.ErrRateLimited at once, unsent, when the wait would outlast
// it). It returns the apiserver's object (nil for a delete) or a code
// with its message, and counts the outcome in the write metrics.
func (w *Writer) Do(parent context.Context, r *Request) (map[string]any, int32, string) {
	start := time.Now()
	ctx, sp, traced := tracing.Child(parent, "k8s "+abi.WriteVerb(r.Op)+" "+r.Resource, trace.SpanKindClient)
	obj, code, msg := w.do(ctx, r)
	w.metrics.observe(w.plugin, abi.WriteVerb(r.Op), r.Resource, code, time.Since(start))
	if traced {
		sp.SetAttributes(tracing.AttrPlugin.String(w.plugin), tracing.AttrVerb.String(abi.WriteVerb(r.Op)), tracing.AttrResource.String(r.Resource),
			tracing.AttrNamespace.String(r.Namespace), tracing.AttrName.String(r.Name), tracing.AttrSubresource.String(r.Sub),
			tracing.AttrResult.String(Result(code)))
		tracing.End(sp, code, msg)
	}
	return obj, code, msg
}

// confined refuses a write outside the plugin's namespace.
func (w *Writer) confined(r *Request) (int32, string) {
	if w.namespace == "" || r.Namespace == w.namespace {
		return 0, ""
	}
	if r.Namespace == "" {
		return abi.ErrDenied, fmt.Sprintf("the plugin is confined to namespace %q: it may not write cluster-scoped %q", w.namespace, r.Resource)
	}
	return abi.ErrDenied, fmt.Sprintf("the plugin is confined to namespace %q: it may not write in namespace %q", w.namespace, r.Namespace)
}

func (w *Writer) do(parent context.Context, r *Request) (map[string]any, int32, string) {
	// The host's own writes for the plugin (a controller's finalizer and
	// requeue patches) come here without Check.
	if code, msg := w.confined(r); code != 0 {
		return nil, code, msg
	}
	gvr, ok := w.gvr(r.Resource)
	if !ok {
		return nil, abi.ErrUnavailable, fmt.Sprintf("resource %q is not resolved yet (its informer has not started)", r.Resource)
	}
	// One deadline for the wait for a token and the request: the budget
	// is part of the I/O timeout, not on top of it.
	ctx, cancel := context.WithTimeout(parent, w.timeout)
	defer cancel()
	var dryRun []string
	if w.dryRun {
		dryRun = []string{metav1.DryRunAll}
	}
	res := w.dyn.Resource(gvr).Namespace(r.Namespace)
	var subs []string
	if r.Sub != "" {
		subs = []string{r.Sub}
	}
	var out *unstructured.Unstructured
	var err error
	switch r.Op {
	case abi.WriteCreate:
		var u unstructured.Unstructured
		if err := json.Unmarshal(r.Body, &u.Object); err != nil || u.Object == nil {
			return nil, abi.ErrInvalid, "a create's body must be a JSON object"
		}
		if r.Name != "" {
			if n := u.GetName(); n != "" && n != r.Name {
				return nil, abi.ErrInvalid, fmt.Sprintf("the name %q differs from the body's metadata.name %q", r.Name, n)
			}
			u.SetName(r.Name)
		}
		out, err = res.Create(ctx, &u, metav1.CreateOptions{FieldManager: w.manager, DryRun: dryRun}, subs...)
	case abi.WriteMergePatch, abi.WriteJSONPatch, abi.WriteApply:
		if r.MustExist && r.UID == "" {
			// An apply creates what is missing; only a uid in the applied
			// object stops it (patchBody folds it in). Without the
			// plugin's, the object's own: then the apply updates that
			// object or fails, atomically, however soon it is deleted.
			cur, err := res.Get(ctx, r.Name, metav1.GetOptions{}, subs...)
			if err != nil {
				code, msg := w.codeOf(parent, err, r)
				return nil, code, msg
			}
			rr := *r
			rr.UID = string(cur.GetUID())
			r = &rr
		}
		body, pt, msg := w.patchBody(r)
		if msg != "" {
			return nil, abi.ErrInvalid, msg
		}
		opts := metav1.PatchOptions{FieldManager: w.manager, DryRun: dryRun}
		if r.Op == abi.WriteApply {
			force := r.Force
			opts.Force = &force
		}
		out, err = res.Patch(ctx, r.Name, pt, body, opts, subs...)
	case abi.WriteDelete:
		opts := metav1.DeleteOptions{DryRun: dryRun}
		if r.UID != "" || r.ResourceVersion != "" {
			opts.Preconditions = &metav1.Preconditions{}
			if r.UID != "" {
				uid := types.UID(r.UID)
				opts.Preconditions.UID = &uid
			}
			if r.ResourceVersion != "" {
				rv := r.ResourceVersion
				opts.Preconditions.ResourceVersion = &rv
			}
		}
		err = res.Delete(ctx, r.Name, opts, subs...)
	}
	if w.dryRun {
		w.log.Info("dry run: write sent with dryRun=All, nothing persisted", "op", opName(r.Op),
			"resource", r.Resource, "namespace", r.Namespace, "name", r.Name, "subresource", r.Sub, "err", err)
	}
	if err != nil {
		code, msg := w.codeOf(parent, err, r)
		return nil, code, msg
	}
	if out == nil {
		return nil, 0, ""
	}
	if !w.dryRun {
		w.self.Record(ObjectKey(gvr.Group, gvr.Resource, out.GetNamespace(), out.GetName()), out.GetResourceVersion())
	}
	// As the informer caches do by default: managed fields are the bulk
	// of an object and rarely what a plugin wants.
	unstructured.RemoveNestedField(out.Object, "metadata", "managedFields")
	return out.Object, 0, ""
}

// gvr resolves a grant's resource string.
func (w *Writer) gvr(res string) (schema.GroupVersionResource, bool) {
	if gvr, ok := config.ParseGVR(res); ok {
		return gvr, true
	}
	if w.resolve == nil {
		return schema.GroupVersionResource{}, false
	}
	return w.resolve(res)
}

// patchBody returns the body and patch type of a patch or an apply, with
// the preconditions folded in. The apiserver checks them atomically with
// the write: a resourceVersion in the patched object makes the update
// conditional on it (409 on a mismatch), and a uid that differs is
// refused (codeOf turns that into ERR_CONFLICT).
func (w *Writer) patchBody(r *Request) ([]byte, types.PatchType, string) {
	pt := types.MergePatchType
	switch r.Op {
	case abi.WriteJSONPatch:
		pt = types.JSONPatchType
	case abi.WriteApply:
		pt = types.ApplyPatchType
	}
	if r.UID == "" && r.ResourceVersion == "" {
		return r.Body, pt, ""
	}
	if r.Op == abi.WriteJSONPatch {
		var ops []any
		if err := json.Unmarshal(r.Body, &ops); err != nil {
			return nil, pt, "a JSON patch's body must be a JSON array of operations"
		}
		// The same fields a merge patch sets, set by "add" (which
		// replaces a member that exists): the apiserver then checks them
		// as it does for a merge patch. ("test" ops would fail with a
		// bare 422 that says nothing of a precondition.)
		var pre []any
		if r.UID != "" {
			pre = append(pre, map[string]any{"op": "add", "path": "/metadata/uid", "value": r.UID})
		}
		if r.ResourceVersion != "" {
			pre = append(pre, map[string]any{"op": "add", "path": "/metadata/resourceVersion", "value": r.ResourceVersion})
		}
		b, _ := json.Marshal(append(pre, ops...))
		return b, pt, ""
	}
	var obj map[string]any
	if err := json.Unmarshal(r.Body, &obj); err != nil || obj == nil {
		return nil, pt, "a merge patch's or an apply's body must be a JSON object"
	}
	md, _ := obj["metadata"].(map[string]any)
	if md == nil {
		md = map[string]any{}
		obj["metadata"] = md
	}
	if r.UID != "" {
		md["uid"] = r.UID
	}
	if r.ResourceVersion != "" {
		md["resourceVersion"] = r.ResourceVersion
	}
	b, _ := json.Marshal(obj)
	return b, pt, ""
}

// codeOf maps a failed write to its code (ABI.md §17.1) and message.
func (w *Writer) codeOf(parent context.Context, err error, r *Request) (int32, string) {
	msg := err.Error()
	if w.identity != "" {
		msg += " (acting as " + w.identity + ")"
	}
	if parent.Err() != nil {
		return abi.ErrCanceled, "the host stopped the call while it waited for the apiserver: " + msg
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return abi.ErrTimeout, fmt.Sprintf("no answer within the write timeout (%s): %s", w.timeout, msg)
	}
	if rl := (*RateLimitedError)(nil); errors.As(err, &rl) && rl.Shared {
		return abi.ErrRateLimited, fmt.Sprintf("the write budget of namespace %s, shared by its plugins (the tenancy ceiling's writesQPS %g, writesBurst %d), "+
			"would have held the write %s, longer than its I/O timeout (grants.writes.timeout %s) allows: nothing was sent; answer RETRY",
			w.namespace, rl.QPS, rl.Burst, rl.Wait.Round(time.Millisecond), w.timeout)
	}
	if rl := (*RateLimitedError)(nil); errors.As(err, &rl) {
		return abi.ErrRateLimited, fmt.Sprintf("the plugin's write rate limit (grants.writes.qps %g, burst %d) would have held the write %s, "+
			"longer than its I/O timeout (grants.writes.timeout %s) allows: nothing was sent; answer RETRY",
			rl.QPS, rl.Burst, rl.Wait.Round(time.Millisecond), w.timeout)
	}
	var st apierrors.APIStatus
	if !errors.As(err, &st) {
		return abi.ErrUnavailable, msg // no answer: connection refused, reset, TLS
	}
	switch {
	case apierrors.IsForbidden(err), apierrors.IsUnauthorized(err):
		return abi.ErrForbidden, msg
	case apierrors.IsNotFound(err):
		return abi.ErrAbsent, msg
	case apierrors.IsAlreadyExists(err):
		return abi.ErrExists, msg
	case apierrors.IsConflict(err) && apierrors.HasStatusCause(err, metav1.CauseTypeFieldManagerConflict):
		return abi.ErrFieldConflict, msg + " (another field manager owns the field: force it, or report it; a newer event does not change this)"
	case r.MustExist && apierrors.IsConflict(err) && strings.Contains(st.Status().Message, noExistingObject):
		return abi.ErrAbsent, "the object is gone (apply with must-exist does not create it): " + msg
	case apierrors.IsConflict(err):
		return abi.ErrConflict, msg
	case preconditionFailed(err, r):
		return abi.ErrConflict, msg
	case apierrors.IsInvalid(err), apierrors.IsBadRequest(err), apierrors.IsMethodNotSupported(err),
		apierrors.IsNotAcceptable(err), apierrors.IsUnsupportedMediaType(err):
		return abi.ErrUnprocessable, msg
	case apierrors.IsTooManyRequests(err):
		return abi.ErrRateLimited, msg
	case apierrors.IsTimeout(err), apierrors.IsServerTimeout(err):
		return abi.ErrTimeout, msg
	case apierrors.IsRequestEntityTooLargeError(err):
		return abi.ErrTooLarge, msg
	}
	if code := st.Status().Code; code >= 500 || code == 0 {
		return abi.ErrUnavailable, msg
	}
	return abi.ErrUnprocessable, msg
}

// noExistingObject is how the apiserver's patch handler (patcher.applyPatch)
// words the 409 of an apply whose object has a uid when there is no
// object of that name: the only way an apply says "absent" in one
// request.
const noExistingObject = "no existing object was found"

// preconditionFailed reports whether err is the apiserver refusing a
// patch or apply for the uid patchBody folded in: a changed metadata.uid
// is a 422 naming that field (the uid is immutable), where a delete's
// precondition is a 409.
func preconditionFailed(err error, r *Request) bool {
	if r.UID == "" {
		return false
	}
	var se *apierrors.StatusError
	if !errors.As(err, &se) {
		return false
	}
	s := se.Status()
	if s.Code == http.StatusUnprocessableEntity && s.Details != nil {
		for _, c := range s.Details.Causes {
			if c.Field == "metadata.uid" {
				return true
			}
		}
	}
	return false
}

func opName(op int32) string {
	switch op {
	case abi.WriteMergePatch:
		return "merge-patch"
	case abi.WriteJSONPatch:
		return "json-patch"
	}
	return abi.WriteVerb(op)
}
