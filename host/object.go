package host

import (
	"context"
	"time"

	"github.com/informer-host/informer-host/host/internal/delivery"
)

// ObjectView is what this member makes of one object, for
// /debug/plugins?object=: its owner in the member's view, the cache's
// version of it, and what each plugin's worker counts its plugin as
// having of it. When two members' plugins hold one object, theirs say
// which of them is wrong and why (the soak prints them).
type ObjectView struct {
	Resource, Namespace, Name string
	// Sharded: the host follows an Assignment. Owner is the member that
	// owns the object in it ("" when no member is live), Owned whether
	// it is this member's now, its validity included (true unsharded).
	Sharded bool
	Owner   string
	Owned   bool
	// CacheRV is the resourceVersion of the object in the resource's
	// cache, "" when the cache does not hold it.
	CacheRV string
	Plugins []PluginObjectView
}

// PluginObjectView is one plugin's part of an ObjectView.
type PluginObjectView struct {
	File string
	// Answered: the plugin's worker answered within the wait; the fields
	// below are empty when it did not (in a long call, restarting,
	// stopped, or not bound to the resource).
	Answered bool
	// Has: the worker counts the plugin as having the object, at RV.
	// Unsettled: only for a delete; the plugin was handed that state in
	// a call its member's loss of the object fenced (seenObject).
	Has, Unsettled bool
	RV             string
	// AppliedOwner is the owner in the Assignment the worker applied
	// last, which its decisions follow until it applies the next one;
	// AppliedOwned whether that one gives the object to this member now.
	AppliedOwner string
	AppliedOwned bool
}

// objectQuery asks a generation's worker for its plugin's view of key.
type objectQuery struct {
	key   delivery.Key
	reply chan PluginObjectView // buffered: the worker never waits on it
}

// objectQueries is how many queries may wait for a worker at once; more
// are answered as not answered.
const objectQueries = 8

// Object reports what this member makes of the object namespace/name of
// the configured resource. Each plugin's worker answers between two
// calls; Object waits for each until ctx ends.
func (h *Host) Object(ctx context.Context, resource, namespace, name string) ObjectView {
	v := ObjectView{Resource: resource, Namespace: namespace, Name: name, Owned: true}
	if a := h.shard.cur.Load(); a != nil {
		v.Sharded, v.Owner, v.Owned = true, a.Owner(namespace, name), a.Owns(namespace, name, time.Now())
	}
	if obj, ok := h.pipeline.CacheGet(resource, namespace, name); ok {
		v.CacheRV = delivery.ResourceVersion(obj)
	}
	h.mu.Lock()
	var gens []*generation
	var files []string
	for _, s := range h.slots {
		s.mu.Lock()
		gens, files = append(gens, s.current), append(files, s.name)
		s.mu.Unlock()
	}
	h.mu.Unlock()
	k := delivery.Key{Resource: resource, Namespace: namespace, Name: name}
	for i, g := range gens {
		p := PluginObjectView{File: files[i]}
		if g != nil && g.byResource[resource] != nil {
			q := objectQuery{key: k, reply: make(chan PluginObjectView, 1)}
			select {
			case g.queries <- q:
				g.queue.Wake()
				select {
				case p = <-q.reply:
					p.File = files[i]
				case <-ctx.Done():
				case <-g.done:
				}
			default:
			}
		}
		v.Plugins = append(v.Plugins, p)
	}
	return v
}

// answerQueries answers the object queries waiting. Worker only.
func (g *generation) answerQueries() {
	for {
		select {
		case q := <-g.queries:
			p := PluginObjectView{Answered: true}
			if s := g.seen.get(q.key); s.has() {
				p.Has, p.Unsettled, p.RV = true, s.unsettled, s.rv()
			}
			if a := g.shard.applied; a != nil {
				p.AppliedOwner, p.AppliedOwned = a.Owner(q.key.Namespace, q.key.Name), a.Owns(q.key.Namespace, q.key.Name, time.Now())
			} else {
				p.AppliedOwned = true
			}
			q.reply <- p
		default:
			return
		}
	}
}
