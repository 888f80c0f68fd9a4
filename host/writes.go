package host

import (
	"context"
	"log/slog"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"

	"github.com/informer-host/informer-host/host/internal/engine"
	"github.com/informer-host/informer-host/informer"
	"github.com/informer-host/informer-host/internal/kubewrite"
)

// Kubernetes writes (ABI.md §17.1): the engine's ClusterWriter, served
// by the plugin's kubewrite.Writer, and the record of the plugin's own
// writes, by which prepare (deliver.go) marks the events they cause.

// clusterWriter adapts a kubewrite.Writer to the engine's interface.
type clusterWriter struct {
	w   *kubewrite.Writer
	req kubewrite.Request // reused: one call at a time per instance
}

var _ engine.ClusterWriter = (*clusterWriter)(nil)

func (c *clusterWriter) request(r *engine.WriteRequest) *kubewrite.Request {
	c.req = kubewrite.Request{
		Op: r.Op, Resource: string(r.Resource), Namespace: string(r.Namespace), Name: string(r.Name),
		Sub: string(r.Subresource), Body: r.Body, UID: string(r.UID), ResourceVersion: string(r.ResourceVersion), Force: r.Force,
		MustExist: r.MustExist,
	}
	return &c.req
}

func (c *clusterWriter) Check(r *engine.WriteRequest) (int32, string) { return c.w.Check(c.request(r)) }

func (c *clusterWriter) Do(ctx context.Context, r *engine.WriteRequest) (map[string]any, int32, string) {
	return c.w.Do(ctx, c.request(r))
}

// writer returns the generation's ClusterWriter, or nil (writes denied)
// when the plugin has no writes grant or the host no writes client. One
// Writer serves every instance of the generation, so a restart keeps the
// token bucket: a crashing plugin cannot reset its rate limit.
func (g *generation) writer() engine.ClusterWriter {
	h := g.slot.h
	wg := g.settings.Grants.Writes
	if h.writes == nil || wg == nil || len(wg.Resources) == 0 {
		if wg != nil && h.writes == nil {
			g.log.Warn("plugin is granted writes, but the host has no writes client; its writes return ERR_DENIED")
		}
		return nil
	}
	if g.kw == nil {
		o := kubewrite.PluginOptions{Plugin: g.slot.name, Grant: *wg, Impersonate: g.settings.Grants.Impersonate,
			DryRun: g.settings.Grants.DryRunOn(), Self: g.slot.selfWrites(), Logger: g.log}
		if ns := g.settings.Namespace; ns != "" {
			o.Grant, o.Namespace = confinedGrant(ns, *wg), ns
			o.NamespaceQPS, o.NamespaceBurst = namespaceBudget(h.config(), ns)
		}
		w, err := h.writes.For(o)
		if err != nil {
			g.log.Error("plugin's writes client cannot be built; its writes return ERR_DENIED", "err", err)
			return nil
		}
		g.kw = w
	}
	return &clusterWriter{w: g.kw}
}

// selfWrites returns the slot's record of its plugin's writes, which
// outlives instances and versions: a reload's replay still knows which
// states the plugin wrote.
func (s *PluginSlot) selfWrites() *kubewrite.SelfWrites {
	s.selfOnce.Do(func() { s.self = kubewrite.NewSelfWrites(0) })
	return s.self
}

// stopContext is the context of a call into the plugin: done when the
// generation is stopped (reload, unload, the host's stop), so a write
// waiting on the apiserver returns ERR_CANCELED instead of holding the
// stop up to its I/O timeout. It carries no deadline: the plugin's CPU
// is bounded by the engine.
type stopContext struct{ stop <-chan struct{} }

func (stopContext) Deadline() (time.Time, bool) { return time.Time{}, false }
func (c stopContext) Done() <-chan struct{}     { return c.stop }
func (c stopContext) Err() error {
	select {
	case <-c.stop:
		return context.Canceled
	default:
		return nil
	}
}
func (stopContext) Value(any) any { return nil }

// NewWritesClient returns the writes client of a daemon whose
// credentials are cfg: configured resource names resolve through p.
func NewWritesClient(cfg *rest.Config, p *informer.Pipeline, log *slog.Logger) (*kubewrite.Client, error) {
	return kubewrite.New(kubewrite.Options{Config: cfg, Logger: log, Resolve: func(name string) (schema.GroupVersionResource, bool) {
		if r, ok := p.Ref(name); ok {
			return r.GroupVersionResource(), true
		}
		return schema.GroupVersionResource{}, false
	}})
}
