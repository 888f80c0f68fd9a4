package host

import (
	"context"
	"strings"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/informer-host/informer-host/abi"
	"github.com/informer-host/informer-host/host/internal/delivery"
	"github.com/informer-host/informer-host/host/internal/engine"
	"github.com/informer-host/informer-host/internal/tracing"
)

// Traces of deliveries (internal/tracing): a root span per delivered
// event or reconciled key and a child for the guest call, whose context
// the engine hands to the capabilities (k8s_write, event_record,
// http_request), so their spans are the call's children. Free functions,
// not methods: the worker calls them only when Options.Tracer is set, and
// an untraced call pays the nil check.

// tracedCall is a delivery's root span and its guest call's span.
type tracedCall struct {
	root, call trace.Span
}

// startTraced starts d's root span at start and the span of the guest
// call export under it, and returns the context to make the call with.
func startTraced(ctx context.Context, tr *tracing.Tracer, start time.Time, d tracing.Delivery, export string) (context.Context, tracedCall) {
	ctx, root := tr.StartDelivery(ctx, start, d)
	ctx, call := tr.StartCall(ctx, export)
	return ctx, tracedCall{root: root, call: call}
}

// end ends both spans with the plugin's answer or the call's failure.
func (t tracedCall) end(res engine.Result, err error) {
	tracing.EndCall(t.call, strings.ToUpper(res.Code.String()), err)
	t.root.End()
}

// tracedBatch is the root spans of the deliveries one ih_handle_batch
// call hands, and the call's span: a child of the first delivery's root,
// linked to the others, since a span has one parent. The writes, Events
// and requests of the call are its children.
type tracedBatch struct {
	roots []trace.Span
	call  trace.Span
}

// startTracedBatch starts a root span per entry of ents (hs[k] prepared
// for ents[k]) and the batch call's span, and returns the context to make
// the call with.
func startTracedBatch(ctx context.Context, tr *tracing.Tracer, plugin string, ents []*delivery.Entry, hs []handing) (context.Context, tracedBatch) {
	tb := tracedBatch{roots: make([]trace.Span, len(ents))}
	var first context.Context
	links := make([]trace.Link, 0, len(ents)-1)
	for k, d := range ents {
		rctx, root := tr.StartDelivery(ctx, d.Enqueued, tracing.Delivery{Plugin: plugin, Resource: d.Key.Resource,
			Namespace: d.Key.Namespace, Name: d.Key.Name, ResourceVersion: hs[k].rv, Type: hs[k].ev.Type.String()})
		tb.roots[k] = root
		if k == 0 {
			first = rctx
		} else {
			links = append(links, trace.Link{SpanContext: root.SpanContext()})
		}
	}
	ctx, tb.call = tr.StartCall(first, abi.ExportHandleBatch, trace.WithLinks(links...))
	return ctx, tb
}

// end ends the call's span (failed with err, if any) and each delivery's
// root with the plugin's answer for it; the deliveries the plugin did not
// settle end unanswered (they are handed again, each in a trace of its
// own).
func (tb tracedBatch) end(results []engine.Result, err error) {
	tracing.EndCall(tb.call, "", err)
	for k, root := range tb.roots {
		if k < len(results) {
			root.SetAttributes(tracing.AttrResult.String(strings.ToUpper(results[k].Code.String())))
		}
		root.End()
	}
}
