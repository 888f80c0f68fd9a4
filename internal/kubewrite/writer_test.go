package kubewrite

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"

	"github.com/informer-host/informer-host/abi"
	"github.com/informer-host/informer-host/internal/config"
	"github.com/informer-host/informer-host/internal/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) { os.Exit(testenv.Run(m, &env)) }

// writer returns a Writer for plugin "test.wasm" with grant g (through
// cfg, the admin's by default).
func writer(t *testing.T, cfg *rest.Config, o PluginOptions) *Writer {
	t.Helper()
	if cfg == nil {
		cfg = env.Config
	}
	c, err := New(Options{Config: cfg, Resolve: func(name string) (schema.GroupVersionResource, bool) {
		if name == "configmaps" {
			return schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}, true
		}
		return schema.GroupVersionResource{}, false
	}})
	if err != nil {
		t.Fatal(err)
	}
	if o.Plugin == "" {
		o.Plugin = "test.wasm"
	}
	w, err := c.For(o)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

func allVerbs(res string, sub ...string) config.WritesGrant {
	return config.WritesGrant{QPS: 1000, Burst: 1000, Resources: []config.WriteGrant{{Resource: res,
		Verbs: []string{config.VerbCreate, config.VerbPatch, config.VerbApply, config.VerbDelete}, Subresources: sub}}}
}

// do checks and sends r, as the engine does.
func do(t *testing.T, w *Writer, r Request) (map[string]any, int32, string) {
	t.Helper()
	if code, msg := w.Check(&r); code != 0 {
		return nil, code, msg
	}
	return w.Do(context.Background(), &r)
}

func cmBody(ns, name, data string) []byte {
	return []byte(fmt.Sprintf(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":%q,"namespace":%q},"data":{"k":%q}}`, name, ns, data))
}

func meta(obj map[string]any, field string) string {
	md, _ := obj["metadata"].(map[string]any)
	s, _ := md[field].(string)
	return s
}

// Every op against the real apiserver, by configured name and by g/v/r,
// with the codes an author handles: exists, absent, conflict (a stale
// resourceVersion or uid, on every op that takes preconditions),
// unprocessable; the field manager names the plugin; the self-writes
// record has what each write returned.
func TestWriterOps(t *testing.T) {
	ns := env.Namespace(t)
	self := NewSelfWrites(0)
	w := writer(t, nil, PluginOptions{Grant: allVerbs("configmaps"), Self: self})
	gvrW := writer(t, nil, PluginOptions{Grant: allVerbs("v1/configmaps")})
	ctx := context.Background()

	obj, code, msg := do(t, w, Request{Op: abi.WriteCreate, Resource: "configmaps", Namespace: ns, Body: cmBody(ns, "a", "1")})
	if code != 0 {
		t.Fatalf("create: %s %s", abi.ErrorName(code), msg)
	}
	uid, rv := meta(obj, "uid"), meta(obj, "resourceVersion")
	if !self.Match(ObjectKey("", "configmaps", ns, "a"), rv) {
		t.Fatal("the create's resourceVersion was not recorded")
	}
	if _, code, _ = do(t, w, Request{Op: abi.WriteCreate, Resource: "configmaps", Namespace: ns, Body: cmBody(ns, "a", "1")}); code != abi.ErrExists {
		t.Fatalf("second create: %s", abi.ErrorName(code))
	}
	cases := []struct {
		name string
		w    *Writer
		r    Request
		want int32
	}{
		{"merge patch", w, Request{Op: abi.WriteMergePatch, Name: "a", Body: []byte(`{"data":{"k":"2"}}`)}, 0},
		{"merge patch, stale rv", w, Request{Op: abi.WriteMergePatch, Name: "a", Body: []byte(`{"data":{"k":"x"}}`), ResourceVersion: rv}, abi.ErrConflict},
		{"merge patch, other uid", w, Request{Op: abi.WriteMergePatch, Name: "a", Body: []byte(`{"data":{"k":"x"}}`), UID: "0000"}, abi.ErrConflict},
		{"merge patch, right uid", w, Request{Op: abi.WriteMergePatch, Name: "a", Body: []byte(`{"data":{"k":"3"}}`), UID: uid}, 0},
		{"json patch", gvrW, Request{Op: abi.WriteJSONPatch, Name: "a", Body: []byte(`[{"op":"replace","path":"/data/k","value":"4"}]`)}, 0},
		{"json patch, stale rv", gvrW, Request{Op: abi.WriteJSONPatch, Name: "a", Body: []byte(`[{"op":"replace","path":"/data/k","value":"x"}]`), ResourceVersion: rv}, abi.ErrConflict},
		{"json patch, other uid", gvrW, Request{Op: abi.WriteJSONPatch, Name: "a", Body: []byte(`[{"op":"replace","path":"/data/k","value":"x"}]`), UID: "0000"}, abi.ErrConflict},
		{"apply", w, Request{Op: abi.WriteApply, Name: "a", Body: cmBody(ns, "a", "5"), Force: true}, 0},
		{"apply, stale rv", w, Request{Op: abi.WriteApply, Name: "a", Body: cmBody(ns, "a", "x"), ResourceVersion: rv, Force: true}, abi.ErrConflict},
		{"apply without kind", w, Request{Op: abi.WriteApply, Name: "a", Body: []byte(`{"data":{"k":"x"}}`)}, abi.ErrInvalid},
		{"patch of a missing object", w, Request{Op: abi.WriteMergePatch, Name: "nope", Body: []byte(`{"data":{"k":"x"}}`)}, abi.ErrAbsent},
		{"invalid object", w, Request{Op: abi.WriteMergePatch, Name: "a", Body: []byte(`{"data":{"bad key!":"x"}}`)}, abi.ErrUnprocessable},
		{"delete, other uid", w, Request{Op: abi.WriteDelete, Name: "a", UID: "0000"}, abi.ErrConflict},
		{"delete, stale rv", w, Request{Op: abi.WriteDelete, Name: "a", ResourceVersion: rv}, abi.ErrConflict},
		{"delete", w, Request{Op: abi.WriteDelete, Name: "a", UID: uid}, 0},
		{"delete again", w, Request{Op: abi.WriteDelete, Name: "a"}, abi.ErrAbsent},
	}
	for _, tc := range cases {
		tc.r.Namespace = ns
		if tc.r.Resource = "configmaps"; tc.w == gvrW {
			tc.r.Resource = "v1/configmaps"
		}
		obj, code, msg := do(t, tc.w, tc.r)
		if code != tc.want {
			t.Errorf("%s: %s (%s), want %s", tc.name, abi.ErrorName(code), msg, abi.ErrorName(tc.want))
			continue
		}
		if code != 0 && msg == "" {
			t.Errorf("%s: no message", tc.name)
		}
		if code == 0 && tc.r.Op != abi.WriteDelete {
			if tc.w == w && !self.Match(ObjectKey("", "configmaps", ns, "a"), meta(obj, "resourceVersion")) {
				t.Errorf("%s: resourceVersion %s not recorded", tc.name, meta(obj, "resourceVersion"))
			}
			if _, has := obj["metadata"].(map[string]any)["managedFields"]; has {
				t.Errorf("%s: managedFields in the response", tc.name)
			}
		}
	}
	// The field manager names the plugin.
	if _, code, _ := do(t, w, Request{Op: abi.WriteApply, Resource: "configmaps", Namespace: ns, Name: "b", Body: cmBody(ns, "b", "1")}); code != 0 {
		t.Fatal(code)
	}
	cm, err := env.Client.CoreV1().ConfigMaps(ns).Get(ctx, "b", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if mf := cm.ManagedFields; len(mf) != 1 || mf[0].Manager != "informer-host/test.wasm" || mf[0].Operation != metav1.ManagedFieldsOperationApply {
		t.Fatalf("managed fields %+v", mf)
	}
}

// The status subresource: granted, a merge patch of a Pod's status
// lands; not granted, ERR_DENIED without a request.
func TestWriterStatusSubresource(t *testing.T) {
	ns := env.Namespace(t)
	ctx := context.Background()
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: ns},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "x"}}}}
	if _, err := env.Client.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	w := writer(t, nil, PluginOptions{Grant: allVerbs("v1/pods", "status")})
	body := []byte(`{"status":{"conditions":[{"type":"Example","status":"True"}]}}`)
	if _, code, msg := do(t, w, Request{Op: abi.WriteMergePatch, Resource: "v1/pods", Namespace: ns, Name: "p", Sub: "status", Body: body}); code != 0 {
		t.Fatalf("status patch: %s %s", abi.ErrorName(code), msg)
	}
	got, err := env.Client.CoreV1().Pods(ns).Get(ctx, "p", metav1.GetOptions{})
	if err != nil || len(got.Status.Conditions) != 1 || got.Status.Conditions[0].Type != "Example" {
		t.Fatalf("status %+v %v", got.Status, err)
	}
	noStatus := writer(t, nil, PluginOptions{Grant: allVerbs("v1/pods")})
	if code, _ := noStatus.Check(&Request{Op: abi.WriteMergePatch, Resource: "v1/pods", Namespace: ns, Name: "p", Sub: "status", Body: body}); code != abi.ErrDenied {
		t.Fatalf("status without the subresource grant: %s", abi.ErrorName(code))
	}
}

// Check refuses what the grant does not cover (denied) before what
// cannot work (invalid), without a request.
func TestWriterCheck(t *testing.T) {
	env.Require(t)
	g := config.WritesGrant{Resources: []config.WriteGrant{{Resource: "configmaps", Verbs: []string{config.VerbPatch}, Namespaces: []string{"a"}}}}
	w := writer(t, nil, PluginOptions{Grant: g})
	cases := []struct {
		r    Request
		want int32
	}{
		{Request{Op: abi.WriteMergePatch, Resource: "configmaps", Namespace: "a", Name: "x"}, 0},
		{Request{Op: abi.WriteJSONPatch, Resource: "configmaps", Namespace: "a", Name: "x"}, 0},
		{Request{Op: abi.WriteApply, Resource: "configmaps", Namespace: "a", Name: "x"}, abi.ErrDenied},
		{Request{Op: abi.WriteMergePatch, Resource: "configmaps", Namespace: "b", Name: "x"}, abi.ErrDenied},
		{Request{Op: abi.WriteMergePatch, Resource: "v1/configmaps", Namespace: "a", Name: "x"}, abi.ErrDenied},
		{Request{Op: abi.WriteMergePatch, Resource: "configmaps", Namespace: "a", Name: "x", Sub: "status"}, abi.ErrDenied},
		{Request{Op: 42, Resource: "secrets", Namespace: "a"}, abi.ErrDenied},
		{Request{Op: 42, Resource: "configmaps", Namespace: "a"}, abi.ErrInvalid},
		{Request{Op: abi.WriteMergePatch, Resource: "configmaps", Namespace: "a"}, abi.ErrInvalid},
		{Request{Op: abi.WriteMergePatch, Resource: "configmaps", Namespace: "a", Name: "x", Force: true}, abi.ErrInvalid},
	}
	for _, tc := range cases {
		if code, msg := w.Check(&tc.r); code != tc.want {
			t.Errorf("%+v: %s (%s), want %s", tc.r, abi.ErrorName(code), msg, abi.ErrorName(tc.want))
		}
	}
}

// Dry run: the write is checked by the apiserver (its answer comes back)
// but nothing is persisted, and nothing is recorded as a self-write.
func TestWriterDryRun(t *testing.T) {
	ns := env.Namespace(t)
	self := NewSelfWrites(0)
	w := writer(t, nil, PluginOptions{Grant: allVerbs("configmaps"), DryRun: true, Self: self})
	obj, code, msg := do(t, w, Request{Op: abi.WriteApply, Resource: "configmaps", Namespace: ns, Name: "d", Body: cmBody(ns, "d", "1")})
	if code != 0 || meta(obj, "name") != "d" {
		t.Fatalf("dry-run apply: %s %s %v", abi.ErrorName(code), msg, obj)
	}
	if _, err := env.Client.CoreV1().ConfigMaps(ns).Get(context.Background(), "d", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("dry run persisted the object: %v", err)
	}
	if self.Len() != 0 {
		t.Fatal("a dry-run write was recorded as a self-write")
	}
	if _, code, _ := do(t, w, Request{Op: abi.WriteMergePatch, Resource: "configmaps", Namespace: ns, Name: "d", Body: []byte(`{}`)}); code != abi.ErrAbsent {
		t.Fatalf("dry-run patch of a missing object: %s", abi.ErrorName(code))
	}
}

// The I/O timeout ends a write the apiserver does not answer in time
// (ERR_TIMEOUT); the caller's cancel ends it too (ERR_CANCELED).
func TestWriterTimeoutAndCancel(t *testing.T) {
	ns := env.Namespace(t)
	proxy, cfg := testenv.NewSlowProxy(t, env.Config)
	proxy.Delay.Store(int64(time.Hour))
	g := allVerbs("configmaps")
	g.Timeout = config.NewDuration(50 * time.Millisecond)
	w := writer(t, cfg, PluginOptions{Grant: g})
	r := Request{Op: abi.WriteApply, Resource: "configmaps", Namespace: ns, Name: "s", Body: cmBody(ns, "s", "1")}
	if _, code, msg := w.Do(context.Background(), &r); code != abi.ErrTimeout || !strings.Contains(msg, "timeout") {
		t.Fatalf("slow apiserver: %s %q, want ERR_TIMEOUT", abi.ErrorName(code), msg)
	}
	g.Timeout = config.NewDuration(time.Hour)
	w = writer(t, cfg, PluginOptions{Grant: g})
	ctx, cancel := context.WithCancel(context.Background())
	before := proxy.Writes.Load()
	go func() {
		testenv.Eventually(t, "the write reaches the proxy", func() bool { return proxy.Writes.Load() > before })
		cancel()
	}()
	if _, code, _ := w.Do(ctx, &r); code != abi.ErrCanceled {
		t.Fatalf("canceled: %s, want ERR_CANCELED", abi.ErrorName(code))
	}
}

// The plugin's budget: writes past its burst wait for their tokens
// inside the I/O timeout and all succeed, spaced by the rate; when the
// wait would outlast the timeout the write is ERR_RATE_LIMITED at once,
// saying how long it would have waited, and no request is sent.
func TestWriterRateLimit(t *testing.T) {
	ns := env.Namespace(t)
	proxy, cfg := testenv.NewSlowProxy(t, env.Config)
	apply := func(w *Writer, name string) (int32, string) {
		_, code, msg := do(t, w, Request{Op: abi.WriteApply, Resource: "configmaps", Namespace: ns, Name: name, Body: cmBody(ns, name, "1")})
		return code, msg
	}

	g := allVerbs("configmaps")
	g.QPS, g.Burst = 20, 2
	w := writer(t, cfg, PluginOptions{Grant: g})
	const n = 6 // three times the burst
	start := time.Now()
	for i := range n {
		if code, msg := apply(w, fmt.Sprint("r", i)); code != 0 {
			t.Fatalf("write %d of %d: %s %s; want every write to wait for its token", i+1, n, abi.ErrorName(code), msg)
		}
	}
	// The limiter's own arithmetic: past the burst, one token per 1/qps.
	if took, least := time.Since(start), time.Duration(n-g.Burst)*time.Second/time.Duration(g.QPS); took < least {
		t.Fatalf("%d writes took %s, less than the %s the rate allows", n, took, least)
	}
	// The writes client's limiter is the metered budget: the writes past
	// the burst are counted as waits, with their time.
	limited := func(w *Writer, outcome string) float64 {
		return testutil.ToFloat64(w.metrics.limited.WithLabelValues(w.plugin, outcome))
	}
	if waited := limited(w, "waited"); waited < n-float64(g.Burst) {
		t.Errorf("%v requests counted as waiting for a token, want at least the %d past the burst", waited, n-g.Burst)
	}
	if s := testutil.ToFloat64(w.metrics.limitWait.WithLabelValues(w.plugin)); s <= 0 {
		t.Errorf("%v seconds waited counted, want > 0", s)
	}

	g.QPS, g.Burst = 1, 1
	g.Timeout = config.NewDuration(50 * time.Millisecond)
	w = writer(t, cfg, PluginOptions{Grant: g})
	if code, msg := apply(w, "s0"); code != 0 {
		t.Fatalf("first write: %s %s", abi.ErrorName(code), msg)
	}
	before := proxy.Writes.Load()
	code, msg := apply(w, "s1")
	if code != abi.ErrRateLimited || !strings.Contains(msg, "would have held the write") || !strings.Contains(msg, "timeout 50ms") {
		t.Fatalf("a wait longer than the timeout: %s %q; want ERR_RATE_LIMITED saying how long the wait would have been", abi.ErrorName(code), msg)
	}
	if sent := proxy.Writes.Load() - before; sent != 0 {
		t.Fatalf("%d requests sent for a write the budget refused", sent)
	}
	if refused := limited(w, "refused"); refused != 1 {
		t.Errorf("%v requests counted as refused by the budget, want 1", refused)
	}
}

// Each plugin spends its own budget only: two plugins granted 5/s,
// burst 10, writing at once each get their whole burst from their own
// bucket, and neither takes anything from the daemon's client limit
// (which once all plugins shared, at client-go's default of 5/s).
func TestWriterBudgetPerPlugin(t *testing.T) {
	ns := env.Namespace(t)
	daemon := &testenv.CountingLimiter{}
	cfg := rest.CopyConfig(env.Config)
	cfg.RateLimiter, cfg.QPS, cfg.Burst = daemon, 5, 10
	c, err := New(Options{Config: cfg})
	if err != nil {
		t.Fatal(err)
	}
	g := allVerbs("v1/configmaps")
	g.QPS, g.Burst = 5, 10
	var ws [2]*Writer
	for i := range ws {
		if ws[i], err = c.For(PluginOptions{Plugin: fmt.Sprintf("p%d.wasm", i), Grant: g}); err != nil {
			t.Fatal(err)
		}
	}
	if ws[0].Budget() == ws[1].Budget() {
		t.Fatal("two plugins share one budget")
	}
	errs := make(chan error, 2*g.Burst)
	start := time.Now()
	for i, w := range ws {
		go func() {
			for j := range g.Burst {
				name := fmt.Sprintf("p%d-%d", i, j)
				_, code, msg := w.Do(context.Background(), &Request{Op: abi.WriteApply, Resource: "v1/configmaps", Namespace: ns, Name: name, Body: cmBody(ns, name, "1")})
				if code != 0 {
					errs <- fmt.Errorf("plugin %d write %d: %s %s", i, j, abi.ErrorName(code), msg)
					continue
				}
				errs <- nil
			}
		}()
	}
	for range 2 * g.Burst {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
	for i, w := range ws {
		// Each took its whole burst from its own bucket: what is left is
		// at most what refilled since (qps × the time taken).
		left := w.Budget().Tokens()
		if refilled := g.QPS * time.Since(start).Seconds(); left > refilled+1e-6 {
			t.Errorf("plugin %d: its budget holds %.2f tokens, more than the %.2f refilled: its writes did not spend it", i, left, refilled)
		}
	}
	if n := daemon.Waits.Load(); n != 0 {
		t.Fatalf("the plugins' writes took %d tokens from the daemon's client limit", n)
	}
}

// The answers of an apply an author must tell apart, against the real
// apiserver: a field another manager owns (kubectl set the label) is
// ERR_FIELD_CONFLICT, a stale resourceVersion ERR_CONFLICT; with
// must-exist an apply to a deleted Pod is ERR_ABSENT (with or without
// the uid precondition) and creates nothing, where without it the apply
// tries to create the Pod anew; a body without apiVersion or kind is
// ERR_INVALID naming what is missing, without a request.
func TestWriterApplyAnswers(t *testing.T) {
	ns := env.Namespace(t)
	ctx := context.Background()
	pods := env.Client.CoreV1().Pods(ns)
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: ns},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "x"}}}}
	created, err := pods.Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	kubectl := []byte(`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","labels":{"team":"kubectl"}}}`)
	if _, err := pods.Patch(ctx, "p", types.ApplyPatchType, kubectl, metav1.PatchOptions{FieldManager: "kubectl"}); err != nil {
		t.Fatal(err)
	}
	proxy, cfg := testenv.NewSlowProxy(t, env.Config)
	w := writer(t, cfg, PluginOptions{Grant: allVerbs("v1/pods")})
	label := func(v string) []byte {
		return []byte(fmt.Sprintf(`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","namespace":%q,"labels":{"team":%q}}}`, ns, v))
	}
	r := func(body []byte, mod func(*Request)) Request {
		req := Request{Op: abi.WriteApply, Resource: "v1/pods", Namespace: ns, Name: "p", Body: body}
		if mod != nil {
			mod(&req)
		}
		return req
	}
	cases := []struct {
		name   string
		r      Request
		delete bool // delete the Pod before this case
		want   int32
		msg    string
		unsent bool
	}{
		{"a field kubectl owns", r(label("plugin"), nil), false, abi.ErrFieldConflict, "kubectl", false},
		{"a stale resourceVersion", r(label("kubectl"), func(q *Request) { q.ResourceVersion = created.ResourceVersion }), false, abi.ErrConflict, "modified", false},
		{"no kind", r([]byte(`{"apiVersion":"v1","metadata":{"name":"p"}}`), nil), false, abi.ErrInvalid, "needs kind", true},
		{"no apiVersion nor kind", r([]byte(`{"metadata":{"name":"p"}}`), nil), false, abi.ErrInvalid, "needs apiVersion and kind", true},
		{"must-exist on anything but an apply", r([]byte(`{}`), func(q *Request) { q.Op, q.MustExist = abi.WriteMergePatch, true }), false, abi.ErrInvalid, "must-exist", true},
		{"forced, must exist", r(label("plugin"), func(q *Request) { q.Force, q.MustExist = true, true }), false, 0, "", false},
		{"must exist, deleted", r(label("plugin"), func(q *Request) { q.MustExist = true }), true, abi.ErrAbsent, "", false},
		{"must exist, deleted, with its uid", r(label("plugin"), func(q *Request) { q.MustExist, q.UID = true, string(created.UID) }), false, abi.ErrAbsent, "gone", false},
		{"deleted, an apply creates", r(label("plugin"), func(q *Request) { q.ResourceVersion = created.ResourceVersion }), false, abi.ErrUnprocessable, "containers", false},
	}
	for _, tc := range cases {
		if tc.delete {
			if err := pods.Delete(ctx, "p", metav1.DeleteOptions{GracePeriodSeconds: new(int64)}); err != nil {
				t.Fatal(err)
			}
		}
		before := proxy.Writes.Load()
		_, code, msg := do(t, w, tc.r)
		if code != tc.want || !strings.Contains(msg, tc.msg) {
			t.Errorf("%s: %s %q, want %s mentioning %q", tc.name, abi.ErrorName(code), msg, abi.ErrorName(tc.want), tc.msg)
		}
		if sent := proxy.Writes.Load() - before; tc.unsent && sent != 0 {
			t.Errorf("%s: %d requests sent", tc.name, sent)
		}
	}
	if _, err := pods.Get(ctx, "p", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("an apply created the deleted Pod again: %v", err)
	}
	// Every write Check let through is counted by its result's name.
	for result, want := range map[string]float64{"ok": 1, "field_conflict": 1, "conflict": 1, "absent": 2, "unprocessable": 1} {
		if got := testutil.ToFloat64(w.metrics.writes.WithLabelValues("test.wasm", "apply", "v1/pods", result)); got != want {
			t.Errorf("writes_total{result=%s} = %g, want %g", result, got, want)
		}
	}
}

// Impersonation: a plugin acting as ServiceAccount ns/sa-a, whose Role
// lets it patch ConfigMaps only, is refused by the apiserver (RBAC) when
// it patches a Secret, though its grant lists Secrets; the same write
// with the daemon's identity succeeds.
func TestWriterImpersonation(t *testing.T) {
	ns := env.Namespace(t)
	ctx := context.Background()
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "cm-patcher", Namespace: ns},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"patch"}}}}
	if _, err := env.Client.RbacV1().Roles(ns).Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	rb := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "sa-a", Namespace: ns},
		RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: "cm-patcher"},
		Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: "sa-a", Namespace: ns}}}
	if _, err := env.Client.RbacV1().RoleBindings(ns).Create(ctx, rb, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := env.Client.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "c"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := env.Client.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "s"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	g := config.WritesGrant{Resources: []config.WriteGrant{
		{Resource: "v1/configmaps", Verbs: []string{config.VerbPatch}},
		{Resource: "v1/secrets", Verbs: []string{config.VerbPatch}},
	}}
	as := writer(t, nil, PluginOptions{Grant: g, Impersonate: &config.Impersonation{ServiceAccount: ns + "/sa-a"}})
	patch := []byte(`{"metadata":{"labels":{"by":"plugin"}}}`)
	if _, code, msg := do(t, as, Request{Op: abi.WriteMergePatch, Resource: "v1/configmaps", Namespace: ns, Name: "c", Body: patch}); code != 0 {
		t.Fatalf("ConfigMap as sa-a: %s %s", abi.ErrorName(code), msg)
	}
	_, code, msg := do(t, as, Request{Op: abi.WriteMergePatch, Resource: "v1/secrets", Namespace: ns, Name: "s", Body: patch})
	if code != abi.ErrForbidden || !strings.Contains(msg, "system:serviceaccount:"+ns+":sa-a") {
		t.Fatalf("Secret as sa-a: %s %q, want ERR_FORBIDDEN naming the ServiceAccount", abi.ErrorName(code), msg)
	}
	daemon := writer(t, nil, PluginOptions{Grant: g})
	if _, code, msg := do(t, daemon, Request{Op: abi.WriteMergePatch, Resource: "v1/secrets", Namespace: ns, Name: "s", Body: patch}); code != 0 {
		t.Fatalf("Secret as the daemon: %s %s", abi.ErrorName(code), msg)
	}
}

func TestSelfWritesBounded(t *testing.T) {
	s := NewSelfWrites(3)
	for i := range 5 {
		s.Record(fmt.Sprint("k", i), "1")
	}
	s.Record("k2", "9") // moves k2 to the front
	s.Record("k5", "1") // evicts k3
	if s.Len() != 3 || s.Match("k1", "1") || s.Match("k3", "1") || !s.Match("k2", "9") || s.Match("k2", "1") || !s.Match("k4", "1") || !s.Match("k5", "1") {
		t.Fatalf("after eviction: len %d", s.Len())
	}
	var nilSelf *SelfWrites
	nilSelf.Record("k", "1")
	if nilSelf.Match("k", "1") {
		t.Fatal("nil SelfWrites matched")
	}
}

// A 429 with Retry-After is retried by the host after the wait the
// apiserver asked for, within the I/O timeout: the plugin sees one
// successful write. When the wait would outlast the timeout, the plugin
// gets a code at the timeout, not after the wait. (A stand-in apiserver:
// the real one does not throttle on demand.)
func TestWriterHonoursRetryAfter(t *testing.T) {
	env.Require(t)
	var requests atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if requests.Add(1) == 1 {
			w.Header().Set("Retry-After", "1")
			w.WriteHeader(http.StatusTooManyRequests)
			fmt.Fprint(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"TooManyRequests","code":429,"message":"slow down"}`)
			return
		}
		fmt.Fprint(w, `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c","namespace":"ns","resourceVersion":"9"}}`)
	}))
	t.Cleanup(srv.Close)
	cfg := &rest.Config{Host: srv.URL}
	r := Request{Op: abi.WriteMergePatch, Resource: "v1/configmaps", Namespace: "ns", Name: "c", Body: []byte(`{}`)}

	w := writer(t, cfg, PluginOptions{Grant: allVerbs("v1/configmaps")})
	obj, code, msg := w.Do(context.Background(), &r)
	if code != 0 || meta(obj, "resourceVersion") != "9" || requests.Load() != 2 {
		t.Fatalf("after a 429: %s %q, %d requests; want success on the second", abi.ErrorName(code), msg, requests.Load())
	}

	requests.Store(0)
	g := allVerbs("v1/configmaps")
	g.Timeout = config.NewDuration(100 * time.Millisecond)
	w = writer(t, cfg, PluginOptions{Grant: g})
	if _, code, _ := w.Do(context.Background(), &r); code != abi.ErrTimeout && code != abi.ErrRateLimited {
		t.Fatalf("a Retry-After past the timeout: %s, want ERR_TIMEOUT or ERR_RATE_LIMITED", abi.ErrorName(code))
	}
	if n := requests.Load(); n != 1 {
		t.Fatalf("%d requests; the retry should not have been sent past the timeout", n)
	}
}
