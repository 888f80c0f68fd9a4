package host

import (
	"context"
	"log/slog"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/informer-host/informer-host/host/internal/engine"
	"github.com/informer-host/informer-host/internal/config"
	"github.com/informer-host/informer-host/internal/kubeevents"
	"github.com/informer-host/informer-host/internal/kubewrite"
	"github.com/informer-host/informer-host/internal/upstream"
)

// outbound is what serves the plugins' calls out of the host (ABI.md
// §17.2, §17.3): the config's HTTP upstreams and the plugins' Event
// recorders. It outlives instances and versions; a plugin's part goes
// when its file is removed (forget).
type outbound struct {
	log       *slog.Logger
	upstreams *upstream.Set
	events    *kubeevents.Recorders
	writes    *kubewrite.Client // nil: no writes; here for its metrics
}

func newOutbound(opts Options, log *slog.Logger) (*outbound, error) {
	ups, err := upstream.New(opts.Config, upstream.Options{})
	if err != nil {
		return nil, err
	}
	events := kubeevents.New(kubeevents.Options{RESTConfig: opts.RESTConfig, Logger: log})
	return &outbound{log: log, upstreams: ups, events: events, writes: opts.Writes}, nil
}

// update switches to cfg's upstreams (ApplyConfig); on error the old ones
// stay.
func (o *outbound) update(cfg *config.Config) error { return o.upstreams.Update(cfg) }

// forget drops a removed plugin's clients and metrics.
func (o *outbound) forget(plugin string) {
	o.upstreams.Forget(plugin)
	o.events.Forget(plugin)
	if o.writes != nil {
		o.writes.Forget(plugin)
	}
}

// collectors are the metrics of the plugins' calls out of the host:
// HTTP upstreams, Events and, with a writes client, writes.
func (o *outbound) collectors() []prometheus.Collector {
	cs := []prometheus.Collector{o.upstreams, o.events}
	if o.writes != nil {
		cs = append(cs, o.writes)
	}
	return cs
}

// close ends what runs in the background (Stop): the Event recorders.
func (o *outbound) close() { o.events.Close() }

// httpClient is a new instance's view of the upstreams, or nil (a nil
// interface) without grants.http.
func (g *generation) httpClient() engine.HTTPClient {
	c := g.slot.h.outbound.upstreams.Client(g.slot.name, g.settings.Grants.HTTP)
	if c == nil {
		return nil
	}
	return upstreamClient{c}
}

// upstreamClient adapts an upstream.Client to the engine's interface. The
// request and response types of both have the same fields, so the
// pointers convert and nothing is copied.
type upstreamClient struct{ c *upstream.Client }

func (u upstreamClient) Do(ctx context.Context, req *engine.HTTPRequest, resp *engine.HTTPResponse) (int32, string) {
	return u.c.Do(ctx, (*upstream.Request)(req), (*upstream.Response)(resp))
}

// eventRecorder is a new instance's Event recorder, or nil without
// grants.events (or when it cannot be built: then its calls are denied,
// and the reason is logged).
func (g *generation) eventRecorder() engine.EventRecorder {
	rec, err := g.slot.h.outbound.events.For(g.slot.name, g.settings.Grants)
	if err != nil {
		g.log.Error("Events denied to this instance", "err", err)
	}
	if rec == nil {
		return nil
	}
	if ns := g.settings.Namespace; ns != "" {
		return confinedEvents{rec: rec, ns: ns}
	}
	return rec
}
