package tracing

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/informer-host/informer-host/internal/config"
)

// ServiceName is the service.name of every span the daemon exports.
const ServiceName = "informer-host"

// scope is the instrumentation scope of the spans.
const scope = "github.com/informer-host/informer-host"

// Attribute keys of the spans, beside OpenTelemetry's semantic ones.
const (
	AttrPlugin          = attribute.Key("informer_host.plugin")
	AttrResource        = attribute.Key("k8s.resource")
	AttrNamespace       = attribute.Key("k8s.namespace.name")
	AttrName            = attribute.Key("k8s.object.name")
	AttrResourceVersion = attribute.Key("k8s.object.resource_version")
	AttrEventType       = attribute.Key("informer_host.event.type")
	AttrResult          = attribute.Key("informer_host.result")
	AttrVerb            = attribute.Key("k8s.verb")
	AttrSubresource     = attribute.Key("k8s.subresource")
	AttrUpstream        = attribute.Key("informer_host.upstream")
	AttrReason          = attribute.Key("k8s.event.reason")
	AttrKind            = attribute.Key("k8s.object.kind")
	AttrStatusCode      = semconv.HTTPResponseStatusCodeKey
	AttrMethod          = semconv.HTTPRequestMethodKey
)

// Provider is the daemon's TracerProvider: an OTLP/HTTP exporter behind a
// batch span processor.
type Provider struct {
	tp     *sdktrace.TracerProvider
	tracer *Tracer
}

// New builds the provider of cfg, or returns nil (tracing off) when cfg
// has no endpoint. Spans go to <endpoint>/v1/traces. Nothing is sent until a span ends; an unreachable
// collector costs dropped spans and the exporter's log lines, never a
// delivery.
func New(ctx context.Context, cfg config.Tracing, version string) (*Provider, error) {
	if !cfg.Enabled() {
		return nil, nil
	}
	exp, err := otlptracehttp.New(ctx, otlptracehttp.WithEndpointURL(strings.TrimSuffix(cfg.Endpoint, "/")+"/v1/traces"))
	if err != nil {
		return nil, fmt.Errorf("tracing: the OTLP/HTTP exporter to %s: %w", cfg.Endpoint, err)
	}
	res := resource.NewSchemaless(semconv.ServiceName(ServiceName), semconv.ServiceVersion(version))
	tp := sdktrace.NewTracerProvider(
		sdktrace.WithBatcher(exp),
		sdktrace.WithResource(res),
		sdktrace.WithSampler(sampler(cfg)),
	)
	return &Provider{tp: tp, tracer: NewTracer(tp)}, nil
}

// sampler samples a delivery by tracing.sampleRatio; what it calls
// follows it (the parent's decision), so a trace is whole or absent.
func sampler(cfg config.Tracing) sdktrace.Sampler {
	return sdktrace.ParentBased(sdktrace.TraceIDRatioBased(cfg.Ratio()))
}

// Tracer is what the host starts spans with; nil on a nil Provider.
func (p *Provider) Tracer() *Tracer {
	if p == nil {
		return nil
	}
	return p.tracer
}

// Shutdown flushes the spans still queued and stops the exporter, within
// ctx. Nil-safe, so the daemon defers it whether tracing is on or off.
func (p *Provider) Shutdown(ctx context.Context) error {
	if p == nil {
		return nil
	}
	if err := p.tp.Shutdown(ctx); err != nil {
		return fmt.Errorf("tracing: flushing the last spans: %w", err)
	}
	return nil
}

// Tracer starts the root and guest-call spans of deliveries. A nil
// *Tracer is tracing off: callers check for nil before building anything.
type Tracer struct{ t trace.Tracer }

// NewTracer wraps any TracerProvider (tests use an SDK provider with an
// in-memory exporter).
func NewTracer(tp trace.TracerProvider) *Tracer { return &Tracer{t: tp.Tracer(scope)} }

// Delivery is what a delivery's root span names.
type Delivery struct {
	Plugin, Resource, Namespace, Name, ResourceVersion string
	// Type is the event's ("add", "update", "delete") or "reconcile".
	Type string
}

// StartDelivery starts the root span of one delivery at start (when the
// event entered the plugin's buffer): a new trace, whatever ctx holds.
func (t *Tracer) StartDelivery(ctx context.Context, start time.Time, d Delivery) (context.Context, trace.Span) {
	name := "deliver " + d.Resource + " " + d.Type
	if d.Type == "reconcile" {
		name = "reconcile " + d.Resource
	}
	attrs := []attribute.KeyValue{AttrPlugin.String(d.Plugin), AttrResource.String(d.Resource),
		AttrName.String(d.Name), AttrEventType.String(d.Type)}
	if d.Namespace != "" {
		attrs = append(attrs, AttrNamespace.String(d.Namespace))
	}
	if d.ResourceVersion != "" {
		attrs = append(attrs, AttrResourceVersion.String(d.ResourceVersion))
	}
	return t.t.Start(ctx, name, trace.WithNewRoot(), trace.WithTimestamp(start),
		trace.WithSpanKind(trace.SpanKindConsumer), trace.WithAttributes(attrs...))
}

// StartCall starts the span of the guest call export (ih_handle,
// ih_reconcile) under ctx's delivery span.
func (t *Tracer) StartCall(ctx context.Context, export string, opts ...trace.SpanStartOption) (context.Context, trace.Span) {
	return t.t.Start(ctx, export, append(opts, trace.WithSpanKind(trace.SpanKindInternal))...)
}

// EndCall ends a guest-call span with the plugin's answer (result: "OK",
// "RETRY", ...; "" for a batch, whose answers are its deliveries') or the
// call's failure.
func EndCall(sp trace.Span, result string, err error) {
	if err != nil {
		sp.RecordError(err)
		sp.SetStatus(codes.Error, err.Error())
		result = "FAILED"
	} else if result == "ERROR" {
		sp.SetStatus(codes.Error, "the plugin answered ERROR")
	}
	if result != "" {
		sp.SetAttributes(AttrResult.String(result))
	}
	sp.End()
}

// Child starts a span under ctx's span when that one records (a traced,
// sampled delivery): ok is false, and ctx is returned as is, otherwise,
// so a capability pays one context lookup when tracing is off.
func Child(ctx context.Context, name string, kind trace.SpanKind) (context.Context, trace.Span, bool) {
	parent := trace.SpanFromContext(ctx)
	if !parent.IsRecording() {
		return ctx, nil, false
	}
	ctx, sp := parent.TracerProvider().Tracer(scope).Start(ctx, name, trace.WithSpanKind(kind))
	return ctx, sp, true
}

// End ends a child span with code, an ABI result (0 success, negative an
// ABI error, an HTTP status otherwise), and msg, the call's message.
func End(sp trace.Span, code int32, msg string) {
	if code < 0 || code >= 500 {
		sp.SetStatus(codes.Error, msg)
	}
	sp.End()
}

// Inject writes ctx's trace context into h as a W3C traceparent (and
// tracestate), so the service called joins the delivery's trace.
func Inject(ctx context.Context, h http.Header) {
	propagation.TraceContext{}.Inject(ctx, propagation.HeaderCarrier(h))
}

// RecordStatus wraps a client's transport so that a request made under a
// recording span sets the span's http.response.status_code to the
// answer's, success included (client-go's typed and dynamic clients do
// not return it). Under any other context it only looks the span up.
func RecordStatus(rt http.RoundTripper) http.RoundTripper { return statusRecorder{rt} }

type statusRecorder struct{ next http.RoundTripper }

func (s statusRecorder) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := s.next.RoundTrip(req)
	if sp := trace.SpanFromContext(req.Context()); err == nil && sp.IsRecording() {
		sp.SetAttributes(AttrStatusCode.Int(resp.StatusCode))
	}
	return resp, err
}
