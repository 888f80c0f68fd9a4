// Package tracing exports OpenTelemetry traces of deliveries over
// OTLP/HTTP (config.yaml "tracing:"): one trace per delivered event or
// controller reconcile, its root span starting when the event entered the
// plugin's buffer, a child for the guest call (ih_handle, ih_reconcile)
// and, under that, one span per Kubernetes write, Event and HTTP upstream
// call the plugin made during it. Upstream requests carry the W3C
// traceparent, so a service the plugin calls joins the trace.
//
// Off (no endpoint) there is no Tracer at all: the host checks a nil
// pointer per call and the capability packages check whether the call's
// context holds a recording span, so an untraced delivery allocates
// nothing and starts nothing (BenchmarkOff).
//
// Rule of direction: tracing imports config and the OpenTelemetry
// modules; the daemon builds the Provider, host starts the delivery and
// call spans, and kubewrite, kubeevents and upstream start their child
// spans with Child. It knows nothing of plugins, wazero or the engine.
package tracing
