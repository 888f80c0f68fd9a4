package host

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/tools/cache"

	"github.com/informer-host/informer-host/event"
	"github.com/informer-host/informer-host/host/internal/delivery"
	"github.com/informer-host/informer-host/internal/shard"
)

// shardState is the host's side of sharding (package shard): the
// Assignment in force, which every generation's worker applies to what
// its plugin sees. Without sharding it stays nil and costs a nil check
// per event.
type shardState struct {
	// cur is the Assignment SetAssignment last stored.
	cur atomic.Pointer[shard.Assignment]
	// onDeliver, when set (tests, before any plugin loads), is told of
	// every event a worker is about to hand its plugin, with the
	// Assignment it was decided under and when.
	onDeliver func(plugin string, ev *event.Event, a *shard.Assignment, at time.Time)

	// callsMu guards calls: by worker, the plugin call under way, so
	// that SetAssignment can cancel its I/O once this member no longer
	// owns what the call is about. An entry lives as long as its
	// worker's generation; its call fields are set only during a call.
	callsMu sync.Mutex
	calls   map[*shardView]*shardCall
}

// shardCall is a sharded generation's call into its plugin, for
// fencing: a write or HTTP request the plugin is waiting on when its
// member stops owning the object (a member joined and won it, or this
// one was fenced) must not go on and act after the new owner does.
// Guarded by shardState.callsMu.
type shardCall struct {
	// base is done when the generation stops (or its worker ends). ctx,
	// its child, is the calls' context: reused from call to call until a
	// fence cancels it (then ctx is nil and the next call makes another),
	// so a call costs no allocation.
	base   context.Context
	ctx    context.Context
	cancel context.CancelFunc
	// busy: a call is under way, about key (whole: about no one object,
	// ih_synced; fenced only when the member owns nothing).
	busy  bool
	key   delivery.Key
	whole bool
}

// fenced reports whether a no longer lets this member act for c's call.
func (c *shardCall) fenced(a *shard.Assignment, now time.Time) bool {
	if c.whole {
		return !a.Valid(now)
	}
	return !a.Owns(c.key.Namespace, c.key.Name, now)
}

// shardView is one worker's side of sharding: the Assignment it applied
// to what its plugin sees, and the fencing of its calls. It is kept out
// of the generation so that both ways into a plugin, the event delivery
// (deliver.go) and the controller loop (reconcile.go), decide ownership
// and fence calls alike. Its fields are the worker's own.
type shardView struct {
	// st is the host's sharding state (nil for a generation made
	// without a host, which is never sharded); applied is the Assignment
	// the worker last applied (nil: not sharded, every object is this
	// member's).
	st      *shardState
	applied *shard.Assignment
	// stop and done are the generation's: a fence watcher ends with
	// either.
	stop, done <-chan struct{}
	// moved is told of every Assignment applied after the first, with
	// the one applied before (nil: the first was not sharded), to bring
	// the plugin's view over: the event delivery replays what moved, the
	// controller loop enqueues the keys gained and forgets the ones lost.
	moved func(old, cur *shard.Assignment)
	// confined is the namespace of a confined plugin (tenancy.go): no
	// object of another is ever its own. "": not confined.
	confined string
}

func newShardView(st *shardState, stop, done <-chan struct{}) *shardView {
	return &shardView{st: st, applied: st.cur.Load(), stop: stop, done: done}
}

// sharded reports whether an Assignment is in force at all.
func (v *shardView) sharded() bool { return v.st != nil && v.st.cur.Load() != nil }

// callContext is the context of one call into the plugin: done when the
// generation stops (stopContext) and, sharded, when the member stops
// owning k (nil: the call is about no one object, and ends when the
// member owns nothing), so a network wait returns ERR_CANCELED to the
// plugin instead of acting for an object another member now owns. Only
// a call decided as the owner is fenced so: a handed-over delete, or the
// delete of an object the plugin had, reaches the plugin whoever owns
// the object now. The worker calls callEnded when the call returns.
func (v *shardView) callContext(k *delivery.Key) context.Context {
	call := shardCall{whole: k == nil}
	if k != nil {
		call.key = *k
	}
	if !v.sharded() || call.fenced(v.applied, time.Now()) {
		return stopContext{v.stop}
	}
	st := v.st
	st.callsMu.Lock()
	defer st.callsMu.Unlock()
	c := st.calls[v]
	if c == nil {
		base, stop := context.WithCancel(context.Background())
		c = &shardCall{base: base}
		if st.calls == nil {
			st.calls = map[*shardView]*shardCall{}
		}
		st.calls[v] = c
		go func() {
			// Stopped: cancel the call under way. Done (quarantined, or
			// failed after being replaced): no call will come.
			select {
			case <-v.stop:
			case <-v.done:
			}
			stop()
			st.callsMu.Lock()
			delete(st.calls, v)
			st.callsMu.Unlock()
		}()
	}
	if c.ctx == nil {
		c.ctx, c.cancel = context.WithCancel(c.base)
	}
	c.busy, c.key, c.whole = true, call.key, call.whole
	ctx := c.ctx
	// SetAssignment stores the new Assignment before it looks at the
	// calls: either it sees this call, or this sees its Assignment.
	if c.fenced(st.cur.Load(), time.Now()) {
		c.cancel()
		c.ctx = nil
	}
	return ctx
}

// callEnded marks the call callContext began as returned: a fence from
// now on does not concern it.
func (v *shardView) callEnded() {
	if !v.sharded() {
		return
	}
	v.st.callsMu.Lock()
	if c := v.st.calls[v]; c != nil {
		c.busy = false
	}
	v.st.callsMu.Unlock()
}

// apply brings the worker over to the host's current Assignment, telling
// moved when it changed.
func (v *shardView) apply() {
	if v.st == nil {
		return
	}
	cur := v.st.cur.Load()
	old := v.applied
	if cur == old {
		return
	}
	v.applied = cur
	if v.moved != nil {
		v.moved(old, cur)
	}
}

// owns reports whether this member owns k now, under the Assignment the
// worker applied (applying a newer one first).
func (v *shardView) owns(k delivery.Key) bool {
	if !inReach(v.confined, k.Namespace) {
		return false
	}
	v.apply()
	a := v.applied
	return a == nil || a.Owns(k.Namespace, k.Name, time.Now())
}

// foreign reports whether a live event must not reach the plugin because
// this member does not own its object now. A delete of an object the
// plugin has still does: the object is gone either way, and the replay
// that would tell the plugin so was taken out of the cursor by this very
// delete.
func (v *shardView) foreign(ev *event.Event, k delivery.Key, have bool) bool {
	return !v.owns(k) && (ev.Type != event.EventDelete || !have)
}

// handedOver turns a replay's view of the store into what this member's
// plugin may see: an object it does not own is absent. It reports whether
// the object was taken out for that reason.
func (v *shardView) handedOver(k delivery.Key, found bool) (stillFound, handed bool) {
	if found && !v.owns(k) {
		return false, true
	}
	return found, false
}

// delivering tells the test hook of an event about to be handed over.
func (v *shardView) delivering(plugin string, ev *event.Event) {
	if v.st == nil {
		return
	}
	if f := v.st.onDeliver; f != nil {
		f(plugin, ev, v.applied, time.Now())
	}
}

// movedKeys returns the keys the event delivery replays when the
// Assignment changes from old to cur: every object whose owner differs
// between them, and every object the plugin has that it no longer owns.
// If old's validity ran out while it was in force, live events were held
// back under it, so every object is replayed.
func movedKeys(bindings []*bindingListener, seen *cacheView, old, cur *shard.Assignment) []delivery.Key {
	all := old != nil && !old.Valid(time.Now())
	moved := func(k delivery.Key) bool {
		return all || old.OwnsKey(k.Namespace, k.Name) != cur.OwnsKey(k.Namespace, k.Name)
	}
	var keys []delivery.Key
	for _, l := range bindings {
		if reg := l.registration(); reg != nil {
			for _, k := range delivery.KeysOf(l.binding, reg.Keys()) {
				if moved(k) {
					keys = append(keys, k)
				}
			}
		}
	}
	for _, k := range seen.appendKeys(nil) {
		if !cur.OwnsKey(k.Namespace, k.Name) {
			keys = append(keys, k)
		}
	}
	return keys
}

// fenceCalls cancels the calls under way that a does not let this member
// make. The validity's end is covered too: the member publishes an
// inactive Assignment when it runs out (shard.Member's fence timer).
func (st *shardState) fenceCalls(a *shard.Assignment) {
	now := time.Now()
	st.callsMu.Lock()
	defer st.callsMu.Unlock()
	for _, c := range st.calls {
		if c.busy && c.ctx != nil && c.fenced(a, now) {
			c.cancel()
			c.ctx = nil
		}
	}
}

// SetAssignment makes a the view plugins are fed by: from now on each
// plugin is handed only the objects a owns, while a is valid (see
// shard.Assignment.Owns). Every worker brings its plugin's view over to a
// before its next event: objects it no longer owns arrive as deletes
// flagged handed over (ABI.md §8), objects it now owns as adds with the
// initial-list flag, both from the informer's store through the replay
// cursor, as a restart's replay does. Call it before LoadDir, with the
// member's first (inactive) Assignment, so nothing is delivered before
// the member has joined its group. A call under way whose object a does
// not give this member has its I/O canceled at once: the plugin's write
// or HTTP request returns ERR_CANCELED.
func (h *Host) SetAssignment(a *shard.Assignment) {
	h.shard.cur.Store(a)
	h.shard.fenceCalls(a)
	h.mu.Lock()
	slots := make([]*PluginSlot, 0, len(h.slots))
	for _, s := range h.slots {
		slots = append(slots, s)
	}
	h.mu.Unlock()
	for _, s := range slots {
		s.mu.Lock()
		g := s.current
		s.mu.Unlock()
		switch {
		case g != nil && g.ctl != nil:
			g.ctl.wake()
		case g != nil:
			g.queue.Wake()
		}
	}
}

// Assignment returns the Assignment in force, nil without sharding.
func (h *Host) Assignment() *shard.Assignment { return h.shard.cur.Load() }

// ShardStatus is this member's view of its sharding group
// (/debug/plugins).
type ShardStatus struct {
	Member  string
	Active  bool
	Members []string
	Key     string
	// Owned counts, per resource, the cached objects this member owns.
	Owned      map[string]int
	ValidUntil time.Time
	// Problem says why the member cannot take part (it cannot list its
	// group's Leases or renew its own); /readyz reports it.
	Problem string
}

// ShardNotReady says why this member is not ready, "" when it is (or
// without sharding): it cannot see its group or renew its Lease, and so
// takes no share of the objects. A member still joining is ready: its
// share is owned by the others meanwhile.
func (h *Host) ShardNotReady() string {
	a := h.shard.cur.Load()
	if a == nil || a.Problem == "" || a.Active {
		return ""
	}
	return "sharding: " + a.Problem
}

// ShardStatus reports the member's view, nil without sharding.
func (h *Host) ShardStatus() *ShardStatus {
	a := h.shard.cur.Load()
	if a == nil {
		return nil
	}
	st := &ShardStatus{Member: a.Self, Active: a.Active, Members: a.Members, Key: string(a.Key),
		Owned: map[string]int{}, ValidUntil: a.ValidUntil(), Problem: a.Problem}
	now := time.Now()
	for _, r := range h.config().Resources {
		keys, _ := h.pipeline.CacheKeys(nil, r.Name, "", "")
		n := 0
		for _, k := range keys {
			if ns, name, err := cache.SplitMetaNamespaceKey(k); err == nil && a.Owns(ns, name, now) {
				n++
			}
		}
		st.Owned[r.Name] = n
	}
	return st
}

var (
	descShardMember = prometheus.NewDesc("informer_host_shard_member_info",
		"1, labelled with this replica's sharding member id; active is 1 while it owns objects (joined, not fenced).",
		[]string{"member", "active"}, nil)
	descShardLive = prometheus.NewDesc("informer_host_shard_live_member",
		"1 for every member this replica counts live (its Lease renewed within its leaseDuration), itself included while active.",
		[]string{"member"}, nil)
	descShardOwned = prometheus.NewDesc("informer_host_shard_owned_objects",
		"Cached objects of the resource this member owns and delivers to its plugins.", []string{"resource"}, nil)
	descShardBlocked = prometheus.NewDesc("informer_host_shard_member_blocked",
		"1 while this member cannot list its sharding group's Leases or renew its own (RBAC, most often): it takes no share of the objects.",
		nil, nil)
)

// collectShard adds the sharding metrics, none without sharding.
func (h *Host) collectShard(ch chan<- prometheus.Metric) {
	st := h.ShardStatus()
	if st == nil {
		return
	}
	active := "0"
	if st.Active {
		active = "1"
	}
	ch <- prometheus.MustNewConstMetric(descShardMember, prometheus.GaugeValue, 1, st.Member, active)
	for _, m := range st.Members {
		ch <- prometheus.MustNewConstMetric(descShardLive, prometheus.GaugeValue, 1, m)
	}
	for r, n := range st.Owned {
		ch <- prometheus.MustNewConstMetric(descShardOwned, prometheus.GaugeValue, float64(n), r)
	}
	blocked := 0.0
	if st.Problem != "" {
		blocked = 1
	}
	ch <- prometheus.MustNewConstMetric(descShardBlocked, prometheus.GaugeValue, blocked)
}

func describeShard(ch chan<- *prometheus.Desc) {
	ch <- descShardMember
	ch <- descShardLive
	ch <- descShardOwned
	ch <- descShardBlocked
}
