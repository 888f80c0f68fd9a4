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

	// callsMu guards calls: by generation, the plugin call under way, so
	// that SetAssignment can cancel its I/O once this member no longer
	// owns what the call is about. An entry lives as long as its
	// generation; its call fields are set only during a call.
	callsMu sync.Mutex
	calls   map[*generation]*shardCall
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

// callContext is the context of one call into the plugin: done when the
// generation stops (stopContext) and, sharded, when the member stops
// owning k (nil: the call is about no one object, and ends when the
// member owns nothing), so a network wait returns ERR_CANCELED to the
// plugin instead of acting for an object another member now owns. Only
// a call decided as the owner is fenced so: a handed-over delete, or the
// delete of an object the plugin had, reaches the plugin whoever owns
// the object now. The worker calls callEnded when the call returns.
// Worker only.
func (g *generation) callContext(k *delivery.Key) context.Context {
	call := shardCall{whole: k == nil}
	if k != nil {
		call.key = *k
	}
	if g.shard == nil || g.shard.cur.Load() == nil || call.fenced(g.applied, time.Now()) {
		return stopContext{g.stopCh}
	}
	st := g.shard
	st.callsMu.Lock()
	defer st.callsMu.Unlock()
	c := st.calls[g]
	if c == nil {
		base, stop := context.WithCancel(context.Background())
		c = &shardCall{base: base}
		if st.calls == nil {
			st.calls = map[*generation]*shardCall{}
		}
		st.calls[g] = c
		go func() {
			// Stopped: cancel the call under way. Done (quarantined, or
			// failed after being replaced): no call will come.
			select {
			case <-g.stopCh:
			case <-g.done:
			}
			stop()
			st.callsMu.Lock()
			delete(st.calls, g)
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
// now on does not concern it. Worker only.
func (g *generation) callEnded() {
	if g.shard == nil || g.shard.cur.Load() == nil {
		return
	}
	g.shard.callsMu.Lock()
	if c := g.shard.calls[g]; c != nil {
		c.busy = false
	}
	g.shard.callsMu.Unlock()
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
		if g != nil {
			g.queue.Wake()
		}
	}
}

// Assignment returns the Assignment in force, nil without sharding.
func (h *Host) Assignment() *shard.Assignment { return h.shard.cur.Load() }

// applyAssignment brings the worker over to the host's current
// Assignment: every object whose owner differs between the one it
// applied and the current one goes to the replay cursor, as an initial
// list, and so does every object its plugin has that it no longer owns.
// The replay delivers the difference (prepare). If the applied one's
// validity ran out while it was in force, live events were held back
// under it, so every object is replayed. Worker only.
func (g *generation) applyAssignment() {
	if g.shard == nil {
		return
	}
	cur := g.shard.cur.Load()
	old := g.applied
	if cur == old {
		return
	}
	g.applied = cur
	all := old != nil && !old.Valid(time.Now())
	moved := func(k delivery.Key) bool {
		return all || old.OwnsKey(k.Namespace, k.Name) != cur.OwnsKey(k.Namespace, k.Name)
	}
	var keys []delivery.Key
	for _, l := range g.bindings {
		if reg := l.registration(); reg != nil {
			for _, k := range delivery.KeysOf(l.binding, reg.Keys()) {
				if moved(k) {
					keys = append(keys, k)
				}
			}
		}
	}
	for _, k := range g.seen.appendKeys(nil) {
		if !cur.OwnsKey(k.Namespace, k.Name) {
			keys = append(keys, k)
		}
	}
	g.queue.AddReplay(keys, true)
}

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
