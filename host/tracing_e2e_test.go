package host

import (
	"context"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/informer-host/informer-host/internal/config"
	"github.com/informer-host/informer-host/internal/tracing"
	"github.com/informer-host/informer-host/internal/tracing/tracingtest"
)

// tracedConfig binds the traced test plugin to the test's labelled
// ConfigMaps (not kube-root-ca.crt) and grants it a write, Events and
// upstream "u".
const tracedConfig = `
apiVersion: informer-host/v1
resources:
- {name: configmaps, version: v1, resource: configmaps, namespaces: [NS], labelSelector: trace=me}
upstreams:
- {name: u, url: "URL", methods: [POST], timeout: 5m}
plugins:
  directory: DIR
  modules:
  - file: traced.wasm
    bindings: [{resource: configmaps, events: [add]}]
    config: {metadata: {labels: {written: "yes"}}}
    grants:
      writes:
        resources: [{resource: configmaps, verbs: [patch]}]
      events: {}
      http: {upstreams: [u]}
`

// parentHeaders is a loopback upstream keeping the traceparent header of
// every request.
type parentHeaders struct {
	mu  sync.Mutex
	got []string
}

func (p *parentHeaders) all() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.got...)
}

func newParentHeaders(t *testing.T) (*parentHeaders, string) {
	p := &parentHeaders{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.mu.Lock()
		p.got = append(p.got, r.Header.Get("traceparent"))
		p.mu.Unlock()
	}))
	t.Cleanup(srv.Close)
	return p, srv.URL
}

// tracedDeliveries starts the traced plugin with tracing as cfg says,
// creates n labelled ConfigMaps, waits until each was handled OK and
// flushes the spans (the provider's shutdown). It returns the upstream's
// headers and the ConfigMaps.
func tracedDeliveries(t *testing.T, cfg config.Tracing, n int) (*parentHeaders, []*corev1.ConfigMap) {
	t.Helper()
	up, url := newParentHeaders(t)
	prov, err := tracing.New(context.Background(), cfg, "v-test")
	if err != nil {
		t.Fatal(err)
	}
	hs, err := newHarness(t, strings.ReplaceAll(tracedConfig, "URL", url), map[string][]byte{"traced.wasm": testPlugin(t, "traced")},
		func(hs *harness) { hs.tracer = prov.Tracer() })
	if err != nil {
		t.Fatal(err)
	}
	var cms []*corev1.ConfigMap
	for i := range n {
		cm, err := env.Client.CoreV1().ConfigMaps(hs.ns).Create(context.Background(), &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: "traced-" + string(rune('a'+i)), Labels: map[string]string{"trace": "me"}}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		cms = append(cms, cm)
	}
	eventually(t, "every ConfigMap to be handled", func() bool {
		ok := 0
		for _, d := range hs.rec.of("traced.wasm") {
			if d.Type != 0 && d.Failure == 0 && d.Code == 0 {
				ok++
			}
		}
		return ok >= n
	})
	for _, d := range hs.rec.of("traced.wasm") {
		if d.Type != 0 && (d.Failure != 0 || d.Code != 0) {
			t.Errorf("delivery %s: the plugin's write, Event or request failed; host log:\n%s", d, hs.logs.String())
		}
	}
	if err := prov.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	return up, cms
}

// A delivery is one trace: its root span starts when the event entered the
// plugin's buffer and names the object; the guest call is its child; the
// write, the Event and the HTTP request the plugin made in that call are
// the call's children with what they did; the upstream was handed the
// trace in its traceparent.
func TestTraces(t *testing.T) {
	col := tracingtest.New(t)
	up, cms := tracedDeliveries(t, config.Tracing{Endpoint: col.URL}, 2)
	if errs := col.Errors(); len(errs) > 0 {
		t.Fatalf("the collector could not take the exporter's requests: %v", errs)
	}
	spans := col.Spans()
	byID := map[string]tracingtest.Span{}
	for _, s := range spans {
		byID[s.SpanID] = s
	}
	children := func(parent tracingtest.Span) map[string]tracingtest.Span {
		m := map[string]tracingtest.Span{}
		for _, s := range spans {
			if s.ParentID == parent.SpanID && s.TraceID == parent.TraceID {
				if _, dup := m[s.Name]; dup {
					t.Errorf("two %q spans under %q", s.Name, parent.Name)
				}
				m[s.Name] = s
			}
		}
		return m
	}
	want := func(s tracingtest.Span, attrs map[string]string) {
		t.Helper()
		for k, v := range attrs {
			if s.Attrs[k] != v {
				t.Errorf("span %q: %s = %q, want %q (attributes %v)", s.Name, k, s.Attrs[k], v, s.Attrs)
			}
		}
	}
	traces := map[string]bool{}
	parents := up.all()
	if len(parents) != len(cms) {
		t.Fatalf("upstream got %d requests, want %d", len(parents), len(cms))
	}
	for _, cm := range cms {
		var root *tracingtest.Span
		for _, s := range spans {
			if s.ParentID == "" && s.Attrs["k8s.object.name"] == cm.Name {
				if root != nil {
					t.Fatalf("two root spans for %s: %q and %q", cm.Name, root.Name, s.Name)
				}
				root = &s
			}
		}
		if root == nil {
			t.Fatalf("no root span for %s among %d spans: %+v", cm.Name, len(spans), spans)
		}
		if traces[root.TraceID] {
			t.Errorf("%s shares its trace with another delivery", cm.Name)
		}
		traces[root.TraceID] = true
		if root.Name != "deliver configmaps add" || root.Kind != "CONSUMER" {
			t.Errorf("root span %q (%s), want \"deliver configmaps add\" (CONSUMER)", root.Name, root.Kind)
		}
		want(*root, map[string]string{"informer_host.plugin": "traced.wasm", "k8s.resource": "configmaps", "k8s.namespace.name": cm.Namespace,
			"k8s.object.resource_version": cm.ResourceVersion, "informer_host.event.type": "add"})
		if root.Resource["service.name"] != "informer-host" || root.Resource["service.version"] != "v-test" {
			t.Errorf("resource %v, want service.name informer-host, service.version v-test", root.Resource)
		}
		calls := children(*root)
		call, ok := calls["ih_handle"]
		if !ok || len(calls) != 1 {
			t.Fatalf("children of the delivery span: %v, want one ih_handle", calls)
		}
		want(call, map[string]string{"informer_host.result": "OK"})
		if call.StartUnixNano < root.StartUnixNano || call.EndUnixNano > root.EndUnixNano {
			t.Errorf("the guest call [%d, %d] is not within its delivery [%d, %d]", call.StartUnixNano, call.EndUnixNano, root.StartUnixNano, root.EndUnixNano)
		}
		ops := children(call)
		if len(ops) != 3 {
			t.Errorf("children of ih_handle: %v, want the write, the Event and the request", ops)
		}
		want(ops["k8s patch configmaps"], map[string]string{"k8s.verb": "patch", "k8s.resource": "configmaps", "k8s.namespace.name": cm.Namespace,
			"k8s.object.name": cm.Name, "informer_host.result": "ok", "informer_host.plugin": "traced.wasm", "http.response.status_code": "200"})
		want(ops["event Traced"], map[string]string{"k8s.event.reason": "Traced", "informer_host.event.type": "Normal", "k8s.object.kind": "ConfigMap",
			"k8s.namespace.name": cm.Namespace, "k8s.object.name": cm.Name, "informer_host.result": "ok"})
		want(ops["http POST u"], map[string]string{"informer_host.upstream": "u", "http.request.method": "POST", "http.response.status_code": "200"})
		// traceparent: version-traceid-parentid-flags, the parent being
		// the request's span.
		found := false
		for _, p := range parents {
			f := strings.Split(p, "-")
			if len(f) == 4 && f[1] == root.TraceID {
				found = true
				if f[2] != ops["http POST u"].SpanID || f[3] != "01" {
					t.Errorf("traceparent %q: want the request span %s as parent, sampled", p, ops["http POST u"].SpanID)
				}
			}
		}
		if !found {
			t.Errorf("no upstream request carried trace %s: %q", root.TraceID, parents)
		}
	}
	for _, s := range spans {
		if s.ParentID != "" {
			if _, ok := byID[s.ParentID]; !ok {
				t.Errorf("span %q has a parent that was not exported", s.Name)
			}
		}
	}
}

// Sampled out (sampleRatio 0) nothing is exported and the upstream gets
// no traceparent; off (no endpoint) there is no tracer at all.
func TestTracesOff(t *testing.T) {
	t.Run("sampled out", func(t *testing.T) {
		col := tracingtest.New(t)
		zero := 0.0
		up, _ := tracedDeliveries(t, config.Tracing{Endpoint: col.URL, SampleRatio: &zero}, 1)
		if n := col.Requests(); n != 0 {
			t.Errorf("the collector got %d requests (%d spans), want none", n, len(col.Spans()))
		}
		for _, p := range up.all() {
			if p != "" {
				t.Errorf("upstream got traceparent %q from an unsampled delivery", p)
			}
		}
	})
	t.Run("off", func(t *testing.T) {
		up, _ := tracedDeliveries(t, config.Tracing{}, 1)
		for _, p := range up.all() {
			if p != "" {
				t.Errorf("upstream got traceparent %q with tracing off", p)
			}
		}
	})
}

// The deliveries one ih_handle_batch call hands are a trace each; the
// call's span is the first one's child and links to the others.
func TestTracesBatch(t *testing.T) {
	col := tracingtest.New(t)
	prov, err := tracing.New(context.Background(), config.Tracing{Endpoint: col.URL}, "v-test")
	if err != nil {
		t.Fatal(err)
	}
	var held <-chan struct{}
	var open func()
	hs, err := newHarness(t, `
apiVersion: informer-host/v1
resources:
  - {name: cms, version: v1, resource: configmaps, namespaces: [NS], labelSelector: trace=me}
plugins:
  directory: DIR
  default:
    bindings: [{resource: cms}]
`, map[string][]byte{"batch.wasm": fixture(t, "batch")}, func(hs *harness) {
		held, open = hs.rec.gate("batch.wasm")
		hs.tracer = prov.Tracer()
	})
	if err != nil {
		t.Fatal(err)
	}
	create := func(name string) {
		if _, err := env.Client.CoreV1().ConfigMaps(hs.ns).Create(context.Background(), &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"trace": "me"}}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	create("a0")
	<-held
	for _, n := range []string{"b1", "b2", "b3"} {
		create(n)
	}
	eventually(t, "three events to wait", func() bool { return hs.status("batch.wasm").Queue.Depth == 3 })
	open()
	eventually(t, "the backlog to be handled", func() bool { return len(hs.rec.of("batch.wasm")) == 4 })
	if got := batchSizes(hs); !slices.Equal(got, []string{"1", "3"}) {
		t.Fatalf("the guest saw calls of %q events, want [1 3]", got)
	}
	if err := prov.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	spans := col.Spans()
	roots := map[string]tracingtest.Span{} // by object name
	traces := map[string]bool{}
	for _, s := range spans {
		if s.ParentID == "" {
			roots[s.Attrs["k8s.object.name"]] = s
			if traces[s.TraceID] {
				t.Errorf("two deliveries in trace %s", s.TraceID)
			}
			traces[s.TraceID] = true
		}
	}
	if len(roots) != 4 {
		t.Fatalf("root spans for %v, want a0 b1 b2 b3", roots)
	}
	var batch []tracingtest.Span
	for _, s := range spans {
		if s.Name == "ih_handle_batch" {
			batch = append(batch, s)
		}
	}
	if len(batch) != 1 {
		t.Fatalf("%d ih_handle_batch spans, want 1", len(batch))
	}
	call := batch[0]
	var parent string
	for name, r := range roots {
		if r.SpanID == call.ParentID && r.TraceID == call.TraceID {
			parent = name
		}
	}
	if parent == "" || parent == "a0" {
		t.Fatalf("ih_handle_batch's parent is %q, want one of b1 b2 b3", parent)
	}
	var linked []string
	for name, r := range roots {
		if slices.Contains(call.Links, r.SpanID) {
			linked = append(linked, name)
		}
		if name != "a0" {
			if r.Attrs["informer_host.result"] != "OK" {
				t.Errorf("%s's delivery span: result %q, want OK", name, r.Attrs["informer_host.result"])
			}
		}
	}
	slices.Sort(linked)
	want := slices.DeleteFunc([]string{"b1", "b2", "b3"}, func(n string) bool { return n == parent })
	if !slices.Equal(linked, want) {
		t.Errorf("ih_handle_batch links to %q, want %q", linked, want)
	}
}

// A controller's reconcile of a key is a trace too: its root names the
// key, ih_reconcile is its child and the children the plugin applied are
// writes under that.
func TestTracesReconcile(t *testing.T) {
	col := tracingtest.New(t)
	prov, err := tracing.New(context.Background(), config.Tracing{Endpoint: col.URL}, "v-test")
	if err != nil {
		t.Fatal(err)
	}
	hs := controllerHarness(t, "{for: cms, owns: [secrets]}", "{}", func(hs *harness) { hs.tracer = prov.Tracer() })
	cm := hs.createPrimary("kids-a")
	eventually(t, "the child Secret", func() bool { _, ok := hs.getSecret("kids-a"); return ok })
	eventually(t, "a reconcile answered OK", func() bool {
		for _, d := range hs.reconciles("kids-a") {
			if d.Failure == 0 && d.Code == 0 {
				return true
			}
		}
		return false
	})
	if err := prov.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	spans := col.Spans()
	traces := map[string]bool{}
	wrote := false
	for _, root := range spans {
		if root.ParentID != "" || root.Attrs["k8s.object.name"] != "kids-a" {
			continue
		}
		if traces[root.TraceID] {
			t.Errorf("two reconciles in trace %s", root.TraceID)
		}
		traces[root.TraceID] = true
		if root.Name != "reconcile cms" || root.Attrs["informer_host.event.type"] != "reconcile" || root.Attrs["k8s.namespace.name"] != cm.Namespace ||
			root.Attrs["informer_host.plugin"] != reconcilerPlugin {
			t.Errorf("reconcile root span %q %v", root.Name, root.Attrs)
		}
		for _, call := range spans {
			if call.ParentID != root.SpanID || call.TraceID != root.TraceID {
				continue
			}
			if call.Name != "ih_reconcile" {
				t.Errorf("child %q of a reconcile's root, want ih_reconcile", call.Name)
			}
			for _, w := range spans {
				if w.ParentID == call.SpanID && w.Attrs["k8s.resource"] == "secrets" && w.Attrs["k8s.object.name"] == "kids-a" && w.Attrs["informer_host.result"] == "ok" {
					wrote = true
				}
			}
		}
	}
	if len(traces) == 0 {
		t.Fatalf("no reconcile trace of kids-a among %+v", spans)
	}
	if !wrote {
		t.Errorf("no write of the child Secret under an ih_reconcile span: %+v", spans)
	}
}
