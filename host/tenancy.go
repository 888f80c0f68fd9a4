package host

import (
	"context"
	"fmt"
	"slices"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/informer-host/informer-host/abi"
	"github.com/informer-host/informer-host/host/internal/delivery"
	"github.com/informer-host/informer-host/host/internal/engine"
	"github.com/informer-host/informer-host/internal/config"
)

// A plugin confined to a namespace (PluginSettings.Namespace, a team's
// Plugin object) is handed, reads, writes and records Events about only
// the objects of that namespace. The checks sit where each way in or out
// begins: the listeners drop other namespaces' events before they are
// queued, the shard view's owns refuses their keys on every way into the
// plugin (a replay, a repair, a missed delete, a controller's key), the
// cache reader answers as if they did not exist, the writes client
// refuses them and draws from the namespace's shared budget, and the
// Event recorder refuses them. These are functions, not methods of
// generation: its methods are the worker's loop.

// inReach reports whether an object of namespace objNS is within the
// reach of a plugin confined to ns ("": not confined, everything is).
// A cluster-scoped object (objNS "") is beyond every confined plugin.
func inReach(ns, objNS string) bool { return ns == "" || objNS == ns }

// objectInReach is inReach for an object.
func objectInReach(ns string, obj *unstructured.Unstructured) bool {
	return ns == "" || (obj != nil && obj.GetNamespace() == ns)
}

// keysInReach drops from keys, in place, those beyond ns.
func keysInReach(ns string, keys []delivery.Key) []delivery.Key {
	if ns == "" {
		return keys
	}
	return slices.DeleteFunc(keys, func(k delivery.Key) bool { return k.Namespace != ns })
}

// storeKeysInReach keeps of keys[from:] the store keys ("namespace/name")
// of namespace ns.
func storeKeysInReach(ns string, keys []string, from int) []string {
	if ns == "" {
		return keys
	}
	prefix := ns + "/"
	out := keys[:from]
	for _, k := range keys[from:] {
		if len(k) > len(prefix) && k[:len(prefix)] == prefix {
			out = append(out, k)
		}
	}
	return out
}

// confinedGrant returns g with every resource's namespaces set to ns:
// whatever the module says, a confined plugin writes only there.
func confinedGrant(ns string, g config.WritesGrant) config.WritesGrant {
	rs := make([]config.WriteGrant, len(g.Resources))
	for i, r := range g.Resources {
		r.Namespaces = []string{ns}
		rs[i] = r
	}
	g.Resources = rs
	return g
}

// namespaceBudget is the write budget of tenant namespace ns from its
// ceiling; zero (the defaults) when no ceiling names it any more.
func namespaceBudget(cfg *config.Config, ns string) (qps float64, burst int) {
	if cfg == nil {
		return 0, 0
	}
	if i := cfg.Tenancy.CeilingIndex(ns); i >= 0 {
		c := cfg.Tenancy.Ceilings[i]
		return c.WritesQPS, c.WritesBurst
	}
	return 0, 0
}

// confinedEvents records a confined plugin's Events about objects of its
// namespace only; any other is ERR_DENIED, reported as a denied call.
type confinedEvents struct {
	rec engine.EventRecorder
	ns  string
}

func (c confinedEvents) Record(ctx context.Context, obj map[string]any, eventType, reason, message string) (int32, string) {
	u := unstructured.Unstructured{Object: obj}
	if got := u.GetNamespace(); got != c.ns {
		if got == "" {
			return abi.ErrDenied, fmt.Sprintf("the plugin is confined to namespace %q: it may not record an Event about cluster-scoped %s %s", c.ns, u.GetKind(), u.GetName())
		}
		return abi.ErrDenied, fmt.Sprintf("the plugin is confined to namespace %q: it may not record an Event about %s %s/%s", c.ns, u.GetKind(), got, u.GetName())
	}
	return c.rec.Record(ctx, obj, eventType, reason, message)
}
