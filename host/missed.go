package host

import (
	"context"
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/informer-host/informer-host/abi"
	"github.com/informer-host/informer-host/event"
	"github.com/informer-host/informer-host/host/internal/delivery"
	"github.com/informer-host/informer-host/internal/config"
	"github.com/informer-host/informer-host/internal/seenkeys"
	"github.com/informer-host/informer-host/internal/shard"
)

// Deletes a plugin could not see. client-go tells a listener of a delete
// only while it watches: one that happened while the daemon was down,
// the plugin unloaded or quarantined, or its instance being restarted
// (whose replay starts from an empty view) never arrives. The host can
// tell: it remembers, per plugin, the keys it handed the plugin and the
// plugin still has (internal/seenkeys), and once a binding's informer has
// synced, a remembered key the store no longer has is such a delete. The
// plugin gets it late, through the delivery queue like any delete (so
// retries, parking and the never-backwards rule apply), flagged
// abi.FlagMissedDelete|abi.FlagFinalStateUnknown, with a stub object
// (apiVersion, kind, namespace, name, uid): the host never kept more.
//
// It works through the plugin's view (view.go), which is what decides
// deletes anyway: the stub goes into the view as the plugin's state of
// the object, and the key into the replay cursor, whose entry then finds
// the object gone and hands the view's state as a delete. A key the store
// has with another uid (deleted and recreated meanwhile) is caught when
// its replay entry comes up, before its add: the plugin gets the delete
// of the old uid first, and the add of the new object after it settles.
//
// missedDeletes is the worker's own, but for set (safe for concurrent
// use, and shared by the plugin's generations: seenkeys.Store hands the
// same one). A generation whose plugin opts out (delivery.missedDeletes:
// skip) has none (nil; its methods are then no-ops).
type missedDeletes struct {
	store  *seenkeys.Store
	plugin string
	// set is the plugin's, read from the store on the worker's first
	// use (keys): reading may reach the apiserver, which newGeneration,
	// under the host's locks, must not wait for.
	set *seenkeys.Set
	// due holds the bindings whose remembered keys are still to be
	// compared with their synced store: all of them when the generation
	// starts and when its instance restarts (arm).
	due map[string]bool
	// stubs are the objects of the missed deletes this generation put in
	// its view, so the event built from one is flagged (flags) and a
	// replay entry finding one in the view knows what it is.
	stubs map[*unstructured.Unstructured]bool
	// again holds the keys recreated meanwhile, whose current object is
	// replayed once the plugin has settled the old one's delete.
	again map[delivery.Key]bool

	// Sharding: when the member's Assignment changes (it may have gained
	// a departed member's objects), the sets of the members no longer in
	// the group are read (readDeparted, off the worker: it reaches the
	// apiserver) into departed, whose keys this member now owns and the
	// store lacks are handed as missed deletes like the plugin's own.
	assignment *shard.Assignment // the last one check looked at
	reading    chan []seenkeys.Key
	departed   []seenkeys.Key
}

// newMissedDeletes returns the missed deletes of a new generation of
// slot with settings, nil when there is nothing to remember them in (a
// generation without a host) or the plugin opted out; opting out forgets
// what was remembered, so opting in again later starts afresh rather
// than from a stale set.
func newMissedDeletes(slot *PluginSlot, settings config.PluginSettings) *missedDeletes {
	h := slot.h
	if h == nil || h.seen == nil {
		return nil
	}
	if settings.Delivery.MissedDeletes == config.MissedDeletesSkip {
		h.seen.Forget(slot.name)
		return nil
	}
	m := &missedDeletes{store: h.seen, plugin: slot.name}
	m.arm(settings.Bindings)
	return m
}

// keys returns the plugin's set, reading it on first use (once per
// plugin and daemon: the store keeps it), within seenKeysReadTimeout: a
// set that cannot be read is an empty one, logged by the store.
func (m *missedDeletes) keys() *seenkeys.Set {
	if m.set == nil {
		ctx, cancel := context.WithTimeout(context.Background(), seenKeysReadTimeout)
		m.set = m.store.Set(ctx, m.plugin)
		cancel()
	}
	return m.set
}

// seenKeysReadTimeout bounds the worker's wait for its plugin's set.
const seenKeysReadTimeout = 30 * time.Second

// arm makes every binding's remembered keys due for a comparison with the
// store once it has synced: at the generation's start and when its
// instance restarted (replayAll), whose view starts empty.
func (m *missedDeletes) arm(bindings []config.Binding) {
	if m == nil {
		return
	}
	m.due = map[string]bool{}
	for _, b := range bindings {
		m.due[b.Resource] = true
	}
	m.stubs = map[*unstructured.Unstructured]bool{}
	m.again = map[delivery.Key]bool{}
}

// settled notes what the plugin now has of k after it settled ev (the
// moment its view is set or loses the object, record in deliver.go): an
// add or update is remembered, a delete (the object's own or a handed-over
// one) forgotten. Only bindings that take deletes are remembered: the
// others would never forget.
func (m *missedDeletes) settled(g *generation, k delivery.Key, ev *event.Event, seen seenObject) {
	if m == nil || ev.Object == nil {
		return
	}
	l := g.byResource[k.Resource]
	if l == nil || !l.delete {
		return
	}
	sk := seenkeys.Key{Resource: k.Resource, Namespace: k.Namespace, Name: k.Name, UID: string(ev.Object.GetUID())}
	if ev.Type != event.EventDelete {
		m.keys().Add(sk)
		return
	}
	m.keys().Remove(sk)
	stub := ev.Object
	if !m.stubs[stub] && seen.has() {
		stub = seen.obj // the object's own delete, in the stub's place (flags)
	}
	if m.stubs[stub] {
		delete(m.stubs, stub)
		if m.again[k] {
			delete(m.again, k)
			g.queue.AddReplay([]delivery.Key{k}, false)
		}
	}
}

// check compares the remembered keys of each due binding whose informer
// has synced with its store: a key the store does not have, or that this
// member no longer owns, and that the plugin's view does not hold, gets
// its stub in the view and goes to the replay cursor, which hands its
// delete (eventFor). Called by the worker between two deliveries
// (housekeeping).
func (m *missedDeletes) check(g *generation) {
	if m == nil {
		return
	}
	m.followGroup(g)
	if len(m.due) == 0 {
		return
	}
	for _, l := range g.bindings {
		if !m.due[l.binding] {
			continue
		}
		reg := l.registration()
		if reg == nil || !reg.HasSynced() || reg.Ref() == nil {
			continue
		}
		delete(m.due, l.binding)
		if !l.delete {
			continue
		}
		var keys []delivery.Key
		for _, sk := range m.keys().Keys(l.binding) {
			k := delivery.Key{Resource: sk.Resource, Namespace: sk.Namespace, Name: sk.Name}
			if !inReach(g.settings.Namespace, k.Namespace) {
				continue // never the confined plugin's: not even its name is handed
			}
			if g.seen.get(k).has() {
				continue // handed in this generation: the view decides
			}
			ref, _, found := reg.Get(k.StoreKey())
			if found && g.shard.owns(k) {
				continue // the same object (its initial add), or recreated (missedDeletes.replayed)
			}
			if ref == nil {
				ref = reg.Ref()
			}
			stub := m.stub(ref, sk)
			g.seen.set(k, ref, stub, seenObject{})
			keys = append(keys, k)
		}
		if len(keys) > 0 {
			g.log.Info("handing the plugin the deletes it missed while it was away", "binding", l.binding, "objects", len(keys))
			g.queue.AddReplay(keys, false)
		}
	}
	m.adopt(g)
}

// departedReadTimeout bounds one read of the departed members' sets.
const departedReadTimeout = time.Minute

// followGroup starts reading the departed members' sets when the
// Assignment the worker applied is a new one, and takes the result in
// when it is there.
func (m *missedDeletes) followGroup(g *generation) {
	if a := g.shard.applied; a != nil && a != m.assignment && m.reading == nil {
		m.assignment = a
		ch := make(chan []seenkeys.Key, 1)
		m.reading = ch
		store, plugin, live, log, q := m.store, m.plugin, slices.Clone(a.Members), g.log, g.queue
		// Ends by itself within departedReadTimeout; never blocks on the
		// channel (buffered), and wakes the worker to take the result.
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), departedReadTimeout)
			defer cancel()
			keys, err := store.Others(ctx, plugin, live)
			if err != nil {
				log.Warn("could not read the departed members' seen keys; deletes of their objects that happened meanwhile will not be delivered", "err", err)
			}
			ch <- keys
			q.Wake()
		}()
	}
	if m.reading == nil {
		return
	}
	select {
	case keys := <-m.reading:
		m.reading = nil
		if len(keys) > 0 {
			m.departed = keys
			for _, b := range g.bindings {
				m.due[b.binding] = true
			}
		}
	default:
	}
}

// adopt hands, for each key of a departed member's set that this member
// owns now, whose binding has synced, and that the store lacks, a missed
// delete, once per daemon (seenkeys.Store.Adopted): the departed
// member's plugin had the object and nobody handed its delete.
func (m *missedDeletes) adopt(g *generation) {
	if len(m.departed) == 0 {
		return
	}
	adopted := m.store.Adopted(m.plugin)
	var keys []delivery.Key
	rest := m.departed[:0]
	for _, sk := range m.departed {
		l := g.byResource[sk.Resource]
		if l == nil || !l.delete {
			continue
		}
		reg := l.registration()
		if reg == nil || !reg.HasSynced() || reg.Ref() == nil {
			rest = append(rest, sk) // its binding is not synced yet
			continue
		}
		k := delivery.Key{Resource: sk.Resource, Namespace: sk.Namespace, Name: sk.Name}
		if _, mine := m.keys().Get(sk.Resource, sk.Namespace, sk.Name); mine || !g.shard.owns(k) || g.seen.get(k).has() {
			continue
		}
		if _, _, found := reg.Get(k.StoreKey()); found {
			continue
		}
		if u, done := adopted.Get(sk.Resource, sk.Namespace, sk.Name); done && u == sk.UID {
			continue
		}
		adopted.Add(sk)
		g.seen.set(k, reg.Ref(), m.stub(reg.Ref(), sk), seenObject{})
		keys = append(keys, k)
	}
	m.departed = rest
	if len(keys) > 0 {
		g.log.Info("handing the plugin the deletes of departed members' objects that happened while nobody watched", "objects", len(keys))
		g.queue.AddReplay(keys, false)
	}
}

// stub returns the object a missed delete carries: all the host kept.
func (m *missedDeletes) stub(ref *event.ResourceRef, k seenkeys.Key) *unstructured.Unstructured {
	meta := map[string]any{"name": k.Name, "uid": k.UID}
	if k.Namespace != "" {
		meta["namespace"] = k.Namespace
	}
	apiVersion := ref.Version
	if ref.Group != "" {
		apiVersion = ref.Group + "/" + ref.Version
	}
	u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": apiVersion, "kind": ref.Kind, "metadata": meta}}
	m.stubs[u] = true
	return u
}

// replayed decides a replay entry of k when the plugin's last state of
// the object is a missed delete's stub (check put it in the view), or
// was, before this generation or restart, another uid than the store's
// obj (found: the store has it and this member owns it; handed: the
// store has it but another member owns it). The plugin gets the delete
// of what it had, flagged (handed over, when it is another member's),
// and, for an object recreated meanwhile, the add of the new one once
// that delete settles; a stub of the very object the store has again
// gives way to its add. seen is then what the view holds of k (the
// stub); ok is false when the entry is none of these.
// The binding's filter is not asked: it would judge the stub, and the
// plugin had the object.
func (m *missedDeletes) replayed(g *generation, k delivery.Key, ref *event.ResourceRef, obj *unstructured.Unstructured,
	found, handed bool, seen seenObject) (ev *event.Event, _ seenObject, ok bool) {
	if m == nil {
		return nil, seen, false
	}
	l := g.byResource[k.Resource]
	if l == nil || !l.delete {
		return nil, seen, false
	}
	var stub *unstructured.Unstructured
	switch {
	case seen.has() && m.stubs[seen.obj]:
		stub = seen.obj
		if !found {
			return &event.Event{Type: event.EventDelete, Resource: seen.res, Object: stub, FinalStateUnknown: !handed, HandedOver: handed}, seen, true
		}
		if stub.GetUID() == obj.GetUID() {
			// Judged gone, it is back (another member's then, this one's
			// now): the plugin has not seen this state.
			if !l.add {
				return nil, seen, false
			}
			return &event.Event{Type: event.EventAdd, Resource: ref, Object: obj}, seen, true
		}
	case !seen.has() && found:
		uid, had := m.keys().Get(k.Resource, k.Namespace, k.Name)
		if !had || uid == string(obj.GetUID()) {
			return nil, seen, false
		}
		stub = m.stub(ref, seenkeys.Key{Resource: k.Resource, Namespace: k.Namespace, Name: k.Name, UID: uid})
		g.seen.set(k, ref, stub, seen)
		seen = g.seen.get(k)
	default:
		return nil, seen, false
	}
	m.again[k] = true
	return &event.Event{Type: event.EventDelete, Resource: ref, Object: stub, FinalStateUnknown: true}, seen, true
}

// The controller loop's side (controller mode): it reconciles keys, not
// events, so it asks for the keys to enqueue as absent once its `for`
// binding has synced, and tells what each reconcile settled.

// absent returns the remembered keys of resource that the store (get,
// a registration's Get) does not have with the same uid: the primaries
// to reconcile as absent after a restart, a reload or a return from
// quarantine.
func (m *missedDeletes) absent(resource string, get func(storeKey string) (*event.ResourceRef, *unstructured.Unstructured, bool)) []delivery.Key {
	if m == nil {
		return nil
	}
	var out []delivery.Key
	for _, sk := range m.keys().Missing(resource, func(namespace, name string) (string, bool) {
		_, obj, found := get(delivery.Key{Resource: resource, Namespace: namespace, Name: name}.StoreKey())
		if !found {
			return "", false
		}
		return string(obj.GetUID()), true
	}) {
		out = append(out, delivery.Key{Resource: sk.Resource, Namespace: sk.Namespace, Name: sk.Name})
	}
	return out
}

// reconciled notes a reconcile of k answered OK: obj, the primary it was
// handed, is remembered; nil (absent) forgets the key.
func (m *missedDeletes) reconciled(k delivery.Key, obj *unstructured.Unstructured) {
	if m == nil {
		return
	}
	sk := seenkeys.Key{Resource: k.Resource, Namespace: k.Namespace, Name: k.Name}
	if obj == nil {
		m.keys().Remove(sk)
		return
	}
	sk.UID = string(obj.GetUID())
	m.keys().Add(sk)
}

// flags returns the header flags ev carries as a missed delete: a
// delete of a stub, or a delete of an object the plugin's view holds as a
// stub (seen). The second is the object's own live delete, reaching a
// listener registered while the informer was handing it out (client-go
// updates its store before it notifies): the plugin never had the object
// either way, so it is the same missed delete.
func (m *missedDeletes) flags(ev *event.Event, seen seenObject) uint8 {
	if m == nil || ev.Type != event.EventDelete || ev.HandedOver {
		return 0
	}
	if !m.stubs[ev.Object] && !(seen.has() && m.stubs[seen.obj]) {
		return 0
	}
	return abi.FlagMissedDelete | abi.FlagFinalStateUnknown
}

// newSeenKeys returns the host's store of the keys plugins were handed
// when Options gives none: in the state file when plugins.state.path
// makes it persistent, else in memory (a restart forgets; reloads and
// quarantines are still covered).
func newSeenKeys(h *Host, given *seenkeys.Store) *seenkeys.Store {
	if given != nil {
		return given
	}
	b := seenkeys.Memory()
	if h.state.Persistent() {
		b = seenkeys.StateFile(h.state)
	}
	return seenkeys.New(seenkeys.Options{Backend: b, Logger: h.log})
}

// seenKeysCloseTimeout bounds the last write of the sets on Stop.
const seenKeysCloseTimeout = 10 * time.Second

// closeSeenKeys writes the sets that changed since the last flush. Stop
// calls it once every plugin stopped, before the state file closes (the
// sets may be in it).
func closeSeenKeys(h *Host) {
	ctx, cancel := context.WithTimeout(context.Background(), seenKeysCloseTimeout)
	defer cancel()
	if err := h.seen.Close(ctx); err != nil {
		h.log.Warn("the keys plugins were handed were not all written; a delete that happens before the next start may be missed", "backend", h.seen.Backend().Name(), "err", err)
	}
}
