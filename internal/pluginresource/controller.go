package pluginresource

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	"github.com/informer-host/informer-host/internal/config"
	"github.com/informer-host/informer-host/internal/pluginapi/v1alpha1"
)

// DefaultDiscoveryInterval is how often a daemon whose apiserver does not
// serve the plugin resources looks again: their CRDs may be installed
// after it started.
const DefaultDiscoveryInterval = time.Minute

// Refusal is why a tenant's module was not admitted (tenancy.Refusal's
// fields, so this package can be tested without the tenancy rules).
type Refusal struct {
	// Reason is v1alpha1.ReasonOverCeiling, ReasonNotAllowed or
	// ReasonRefused.
	Reason   string
	Problems config.Errors
}

// AdmitFunc admits a team's module (parsed by ParseModule) within its
// namespace's ceiling and confines it to ns: tenancy.Admit with the
// daemon's Reviewer. running is how many of the namespace's Plugins were
// admitted before this one.
type AdmitFunc func(ctx context.Context, cfg *config.Config, ns, serviceAccount string, m config.Module, running int) (config.Module, *Refusal)

// Options configure a Controller.
type Options struct {
	// RESTConfig reaches the apiserver; Logger is required.
	RESTConfig *rest.Config
	Logger     *slog.Logger
	// OnChange is called when a plugin object's spec changed (created,
	// deleted, a new generation) once the objects are known; the daemon
	// then reloads. Status updates do not call it.
	OnChange func()
	// KeyDir is where spec.verify.publicKeys are written, one file per
	// key named by the sha256 of its PEM, for the signature verifier,
	// which reads keys from files.
	KeyDir string
	// Admit admits a Plugin (namespaced) object's module; nil refuses
	// every Plugin (NamespaceNotAllowed). ClusterPlugins do not pass
	// through it.
	Admit AdmitFunc
	// Reserved, if set, lists plugin names taken besides config.yaml's
	// modules (the plugin directory's *.wasm files): an object of such a
	// name is refused (NameConflict).
	Reserved func() []string
	// DiscoveryInterval is DefaultDiscoveryInterval when zero.
	DiscoveryInterval time.Duration
}

// Controller watches Plugin and ClusterPlugin objects and turns them
// into modules for the daemon's configuration.
type Controller struct {
	o         Options
	dyn       dynamic.Interface
	discovery *discovery.DiscoveryClient

	mu sync.Mutex
	// listers are set once the informers have synced; nil before (and
	// forever on an apiserver without the CRDs).
	plugins, clusterPlugins cache.GenericLister
	admissions              []Admission
	// logged is the refusal last logged per object, so a refusal is
	// logged once per generation, not once per reload.
	logged map[types.UID]string
	// applied is, per object, the generation of the last admission the
	// daemon has applied (Applied).
	applied map[types.UID]int64
}

// New returns a Controller; Run starts it.
func New(o Options) (*Controller, error) {
	if o.RESTConfig == nil || o.Logger == nil {
		return nil, errors.New("pluginresource: Options.RESTConfig and Options.Logger are required")
	}
	if o.DiscoveryInterval <= 0 {
		o.DiscoveryInterval = DefaultDiscoveryInterval
	}
	dyn, err := dynamic.NewForConfig(o.RESTConfig)
	if err != nil {
		return nil, fmt.Errorf("plugin resources: %w", err)
	}
	disc, err := discovery.NewDiscoveryClientForConfig(o.RESTConfig)
	if err != nil {
		return nil, fmt.Errorf("plugin resources: %w", err)
	}
	return &Controller{o: o, dyn: dyn, discovery: disc, logged: map[types.UID]string{}, applied: map[types.UID]int64{}}, nil
}

// Run waits until the apiserver serves both plugin resources, looking
// again every DiscoveryInterval, then watches them until ctx ends or they
// are no longer served (their CRDs deleted), and then waits again.
func (c *Controller) Run(ctx context.Context) {
	// watch returns at once on an ended ctx, and waitServed returns true
	// while the resources are served, so ctx is checked here too: without
	// it a daemon stopping with the CRDs installed never returns.
	for ctx.Err() == nil && c.waitServed(ctx) {
		c.watch(ctx)
	}
}

// waitServed returns true once both resources are served, false when
// ctx ended first. It says once that they are not, not at every look.
func (c *Controller) waitServed(ctx context.Context) bool {
	told := false
	for {
		served, err := c.served(ctx)
		switch {
		case served:
			return true
		case err != nil && !told:
			c.o.Logger.Info("plugin resources not watched yet: cannot ask the apiserver whether it serves them; asking again every interval",
				"group", v1alpha1.Group+"/"+v1alpha1.Version, "interval", c.o.DiscoveryInterval, "err", err)
		case err == nil && !told:
			c.o.Logger.Info("plugin resources not watched: the apiserver does not serve them (install the CRDs of deploy/crds); looking again every interval",
				"group", v1alpha1.Group+"/"+v1alpha1.Version, "interval", c.o.DiscoveryInterval)
		default:
			c.o.Logger.Debug("plugin resources: not served yet", "err", err)
		}
		told = true
		select {
		case <-ctx.Done():
			return false
		case <-time.After(c.o.DiscoveryInterval):
		}
	}
}

// served reports whether discovery lists both resources of the group.
func (c *Controller) served(ctx context.Context) (bool, error) {
	// With ctx: a stopping daemon must not wait on the client's rate
	// limiter for a look nobody needs any more.
	list, err := c.discovery.ServerResourcesForGroupVersionWithContext(ctx, v1alpha1.Group+"/"+v1alpha1.Version)
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	var plugins, clusterPlugins bool
	for _, r := range list.APIResources {
		plugins = plugins || r.Name == v1alpha1.PluginsGVR.Resource
		clusterPlugins = clusterPlugins || r.Name == v1alpha1.ClusterPluginsGVR.Resource
	}
	return plugins && clusterPlugins, nil
}

// watch runs the informers until ctx ends.
func (c *Controller) watch(ctx context.Context) {
	f := dynamicinformer.NewDynamicSharedInformerFactory(c.dyn, 0)
	changed := func() {
		if c.o.OnChange != nil {
			c.o.OnChange()
		}
	}
	handler := cache.ResourceEventHandlerFuncs{
		AddFunc: func(any) { changed() },
		UpdateFunc: func(before, after any) {
			if specChanged(before, after) {
				changed()
			}
		},
		DeleteFunc: func(any) { changed() },
	}
	informers := map[schema.GroupVersionResource]cache.GenericLister{}
	var synced []cache.InformerSynced
	for _, gvr := range []schema.GroupVersionResource{v1alpha1.PluginsGVR, v1alpha1.ClusterPluginsGVR} {
		gi := f.ForResource(gvr)
		if _, err := gi.Informer().AddEventHandler(handler); err != nil {
			c.o.Logger.Error("plugin resources not watched", "resource", gvr.Resource, "err", err)
			return
		}
		informers[gvr] = gi.Lister()
		synced = append(synced, gi.Informer().HasSynced)
	}
	// The informers stop when watch returns: Shutdown waits for them
	// once stop has ended their context (deferred calls run last first).
	defer f.Shutdown()
	informerCtx, stop := context.WithCancel(ctx)
	defer stop()
	f.Start(informerCtx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), synced...) {
		return
	}
	c.mu.Lock()
	c.plugins, c.clusterPlugins = informers[v1alpha1.PluginsGVR], informers[v1alpha1.ClusterPluginsGVR]
	c.mu.Unlock()
	c.o.Logger.Info("plugin resources watched", "group", v1alpha1.Group+"/"+v1alpha1.Version)
	changed()
	// Deleted CRDs take their objects with them (the informers hand out
	// the deletes), and then the informers' lists would fail on and on:
	// they stop, and Run waits for the resources to be served again.
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(c.o.DiscoveryInterval):
		}
		if served, err := c.served(ctx); err == nil && !served {
			c.mu.Lock()
			c.plugins, c.clusterPlugins = nil, nil
			c.mu.Unlock()
			c.o.Logger.Info("plugin resources no longer served: their plugins unload; looking again every interval",
				"group", v1alpha1.Group+"/"+v1alpha1.Version, "interval", c.o.DiscoveryInterval)
			changed()
			return
		}
	}
}

// specChanged reports whether an update changed an object's spec. The
// status writer's updates leave metadata.generation as it was: reloading
// on them would reload on every status write.
func specChanged(before, after any) bool {
	b, okB := before.(*unstructured.Unstructured)
	a, okA := after.(*unstructured.Unstructured)
	return !okB || !okA || b.GetGeneration() != a.GetGeneration()
}

// Modules returns the modules of the admitted plugin objects, read under
// base (its resources, upstreams, modules and pluginResources block), and
// records every object's Admission. Nothing before the informers synced.
func (c *Controller) Modules(ctx context.Context, base *config.Config) []config.Module {
	c.mu.Lock()
	plugins, clusterPlugins := c.plugins, c.clusterPlugins
	c.mu.Unlock()
	var objs []*unstructured.Unstructured
	for _, l := range []cache.GenericLister{clusterPlugins, plugins} {
		if l == nil {
			continue
		}
		list, err := l.List(everything)
		if err != nil {
			c.o.Logger.Error("plugin resources: cannot list the cache", "err", err)
			continue
		}
		for _, o := range list {
			if u, ok := o.(*unstructured.Unstructured); ok {
				objs = append(objs, u)
			}
		}
	}
	// ClusterPlugins first, then by namespace and name: a namespace's
	// plugins are counted against its maxPlugins in a fixed order.
	slices.SortFunc(objs, func(a, b *unstructured.Unstructured) int {
		if ka, kb := a.GetNamespace() != "", b.GetNamespace() != ""; ka != kb {
			if ka {
				return 1
			}
			return -1
		}
		return strings.Compare(a.GetNamespace()+"/"+a.GetName(), b.GetNamespace()+"/"+b.GetName())
	})
	reserved := map[string]bool{}
	if c.o.Reserved != nil {
		for _, n := range c.o.Reserved() {
			reserved[n] = true
		}
	}
	running := map[string]int{}
	var out []config.Module
	adms := make([]Admission, 0, len(objs))
	for _, o := range objs {
		m, a := c.admit(ctx, base, o, reserved, running)
		if a.Admitted {
			out = append(out, m)
			if o.GetNamespace() != "" {
				running[o.GetNamespace()]++
			}
		}
		adms = append(adms, a)
	}
	sortAdmissions(adms)
	c.mu.Lock()
	c.admissions = adms
	c.logRefusals(adms)
	c.mu.Unlock()
	return out
}

// Admissions returns what Modules last made of every object, sorted by
// kind, namespace and name.
func (c *Controller) Admissions() []Admission {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := slices.Clone(c.admissions)
	for i := range out {
		gen, ok := c.applied[out[i].UID]
		out[i].Applied = ok && gen == out[i].Generation
	}
	return out
}

// Applied tells the controller that the daemon has applied the
// configuration of the last Modules call: the host and the sources run
// those generations' settings now.
func (c *Controller) Applied() {
	c.mu.Lock()
	defer c.mu.Unlock()
	clear(c.applied)
	for _, a := range c.admissions {
		c.applied[a.UID] = a.Generation
	}
}

func sortAdmissions(a []Admission) {
	slices.SortFunc(a, func(x, y Admission) int {
		return strings.Compare(x.Kind+"\x00"+x.Namespace+"\x00"+x.Name, y.Kind+"\x00"+y.Namespace+"\x00"+y.Name)
	})
}

// logRefusals logs each refusal once per generation and reason; c.mu is
// held.
func (c *Controller) logRefusals(adms []Admission) {
	alive := map[types.UID]bool{}
	for _, a := range adms {
		alive[a.UID] = true
		key := ""
		if !a.Admitted {
			key = fmt.Sprintf("%d\x00%s\x00%s", a.Generation, a.Reason, a.Message)
		}
		if c.logged[a.UID] == key {
			continue
		}
		c.logged[a.UID] = key
		if !a.Admitted {
			c.o.Logger.Warn("plugin object refused: its plugin does not run", "kind", a.Kind, "namespace", a.Namespace, "name", a.Name,
				"generation", a.Generation, "reason", a.Reason, "message", a.Message)
		}
	}
	for uid := range c.logged {
		if !alive[uid] {
			delete(c.logged, uid)
		}
	}
}
