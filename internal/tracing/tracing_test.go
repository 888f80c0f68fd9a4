package tracing

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/informer-host/informer-host/internal/config"
	"github.com/informer-host/informer-host/internal/tracing/tracingtest"
)

// Off, there is no provider and no tracer, and both are safe to use.
func TestOff(t *testing.T) {
	p, err := New(context.Background(), config.Tracing{}, "v")
	if err != nil || p != nil {
		t.Fatalf("New without an endpoint = %v, %v; want nil, nil", p, err)
	}
	if p.Tracer() != nil {
		t.Error("a nil provider's tracer is not nil")
	}
	if err := p.Shutdown(context.Background()); err != nil {
		t.Error(err)
	}
}

// What a capability does when its call is not traced: nothing that
// allocates, and no traceparent. The benchmarks below give the time.
func TestChildOffAllocatesNothing(t *testing.T) {
	ctx := context.Background()
	h := http.Header{}
	if n := testing.AllocsPerRun(100, func() {
		if _, sp, ok := Child(ctx, "k8s patch configmaps", trace.SpanKindClient); ok || sp != nil {
			t.Fatal("a child span without a recording parent")
		}
	}); n != 0 {
		t.Errorf("Child under an untraced context allocates %v times", n)
	}
	if _, _, ok := Child(ctx, "x", trace.SpanKindClient); ok {
		Inject(ctx, h)
	}
	if len(h) != 0 {
		t.Errorf("headers %v from an untraced context", h)
	}
}

// Shutdown flushes: the spans still in the batch processor's queue reach
// the collector before it returns, and nothing is lost on the way.
func TestShutdownFlushes(t *testing.T) {
	col := tracingtest.New(t)
	p, err := New(context.Background(), config.Tracing{Endpoint: col.URL + "/"}, "v1.2.3")
	if err != nil {
		t.Fatal(err)
	}
	tr := p.Tracer()
	for range 3 {
		ctx, root := tr.StartDelivery(context.Background(), time.Now(), Delivery{Plugin: "p.wasm", Resource: "pods", Name: "a", Type: "add"})
		cctx, call := tr.StartCall(ctx, "ih_handle")
		if _, sp, ok := Child(cctx, "k8s patch pods", trace.SpanKindClient); ok {
			End(sp, 0, "")
		} else {
			t.Fatal("no child span under a recording call span")
		}
		EndCall(call, "OK", nil)
		root.End()
	}
	if err := p.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := len(col.Spans()); got != 9 {
		t.Errorf("collector got %d spans after Shutdown, want 9 (errors %v)", got, col.Errors())
	}
	for _, s := range col.Spans() {
		if s.Resource["service.name"] != ServiceName || s.Resource["service.version"] != "v1.2.3" {
			t.Errorf("resource %v", s.Resource)
		}
	}
}

// The sampler is ParentBased(TraceIDRatioBased(sampleRatio)): a delivery
// is sampled by its ratio, its children with it.
func TestSampleRatio(t *testing.T) {
	for _, ratio := range []float64{0, 1} {
		rec := tracetest.NewSpanRecorder()
		tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec), sdktrace.WithSampler(sampler(config.Tracing{SampleRatio: &ratio})))
		tr := NewTracer(tp)
		ctx, root := tr.StartDelivery(context.Background(), time.Now(), Delivery{Resource: "pods", Type: "add"})
		_, sp, ok := Child(ctx, "x", trace.SpanKindClient)
		if ok {
			sp.End()
		}
		root.End()
		if want := ratio == 1; ok != want || (len(rec.Ended()) == 2) != want {
			t.Errorf("ratio %v: child started %v, %d spans ended", ratio, ok, len(rec.Ended()))
		}
	}
}

// BenchmarkOff is what a delivery with tracing off pays per capability
// call (the host's own part is a nil check).
func BenchmarkOff(b *testing.B) {
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if _, sp, ok := Child(ctx, "k8s patch configmaps", trace.SpanKindClient); ok {
			sp.End()
		}
	}
}

// BenchmarkOn is the same call under a recording span, for scale.
func BenchmarkOn(b *testing.B) {
	tp := sdktrace.NewTracerProvider()
	ctx, root := NewTracer(tp).StartDelivery(context.Background(), time.Now(), Delivery{Resource: "pods", Type: "add"})
	defer root.End()
	b.ReportAllocs()
	for b.Loop() {
		if _, sp, ok := Child(ctx, "k8s patch configmaps", trace.SpanKindClient); ok {
			End(sp, 0, "")
		}
	}
}

// RecordStatus puts the answer's status on a traced request's span, and
// nothing anywhere for an untraced one.
func TestRecordStatus(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusCreated) }))
	defer srv.Close()
	c := &http.Client{Transport: RecordStatus(http.DefaultTransport)}
	rec := tracetest.NewSpanRecorder()
	ctx, root := NewTracer(sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))).StartDelivery(context.Background(), time.Now(), Delivery{})
	for _, ctx := range []context.Context{ctx, context.Background()} {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL, nil)
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	root.End()
	got := rec.Ended()[0].Attributes()
	n := 0
	for _, kv := range got {
		if kv.Key == AttrStatusCode {
			n++
			if kv.Value.AsInt64() != http.StatusCreated {
				t.Errorf("status %v, want 201", kv.Value.AsInt64())
			}
		}
	}
	if n != 1 {
		t.Errorf("%d status attributes on the span, want 1: %v", n, got)
	}
}
