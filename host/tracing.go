package host

import (
	"context"
	"strings"
	"time"

	"go.opentelemetry.io/otel/trace"

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
