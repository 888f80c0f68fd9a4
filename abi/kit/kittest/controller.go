//go:build !wasip1

package kittest

import (
	"encoding/json"
	"fmt"
	"reflect"
	"sort"
	"strings"
	"time"

	"github.com/informer-host/informer-host/abi"
	"github.com/informer-host/informer-host/abi/kit"
)

// The controller loop (ABI.md §18) offline: a fake cluster of objects, a
// fake clock and the host's side of controller mode, so that a reconciler
// (kit.HandleReconcile) is tested without a cluster, the way envtest
// tests a controller-runtime one, but in microseconds and with time under
// the test's control.

// Bookkeeping the host writes on every child it applies (the same names
// as the host's, so a test can read them).
const (
	// PluginLabel is the label naming the plugin that applied a child.
	PluginLabel = "controller.informer-host.io/plugin"
	// OwnerAnnotation names a child's primary:
	// "<for resource>/<namespace>/<name>/<uid>". The host finds the
	// children to prune by it, and maps events on children across
	// namespaces (where an ownerReference cannot point) to the primary.
	OwnerAnnotation = "controller.informer-host.io/owner"
)

// Kind is one resource of the loop: a configured resource's name and its
// API coordinates.
type Kind struct {
	Name       string   // the configured resource's name ("configmaps-src")
	APIVersion string   // "v1", "batch/v1"
	Kind       string   // "ConfigMap"
	Resource   string   // the plural; "" is the lower-case Kind + "s"
	Namespaces []string // the configured namespaces; none: every namespace
	// ClusterScoped objects have no namespace.
	ClusterScoped bool
}

func (k Kind) plural() string {
	if k.Resource != "" {
		return k.Resource
	}
	return strings.ToLower(k.Kind) + "s"
}

// holds reports whether an object of apiVersion/kind in ns is one of k's.
func (k Kind) holds(apiVersion, kind, ns string) bool {
	if apiVersion != k.APIVersion || kind != k.Kind {
		return false
	}
	if len(k.Namespaces) == 0 {
		return true
	}
	for _, n := range k.Namespaces {
		if n == ns {
			return true
		}
	}
	return false
}

// Watch is a related resource whose objects enqueue primaries that do
// not own them (controller.watches): by a label or an annotation whose
// value names the primary ("name" in the object's namespace, or
// "namespace/name"), or by Map, which stands in for the config's field,
// map and referencedBy mappings (CEL the host evaluates).
type Watch struct {
	Kind       Kind
	Label      string
	Annotation string
	Map        func(obj map[string]any) []string
}

// Controller is the loop's configuration: the controller: block of the
// plugin's configuration, with each resource's API coordinates.
type Controller struct {
	// Plugin is the plugin's name, as the host's bookkeeping names it;
	// "" is "plugin.wasm".
	Plugin    string
	For       Kind
	Owns      []Kind
	Watches   []Watch
	Finalizer string
	// GenerationChanged: an update of a primary that leaves its
	// metadata.generation unchanged does not enqueue it.
	GenerationChanged bool
	// Filter stands in for the config's filter (CEL over the primary): a
	// key whose object it refuses is not reconciled (an absent key is).
	Filter func(obj map[string]any) bool
	// Start is the fake clock's start; zero is 2026-01-01T00:00:00Z.
	Start time.Time
}

// Reconciled is one reconcile the loop made.
type Reconciled struct {
	Namespace, Name string
	Absent          bool // the key had no object
	Deleting        bool // the object had a deletionTimestamp
	Initial         bool // a restart's replay
	// Filtered: Controller.Filter refused the object; the plugin was
	// not called.
	Filtered bool
	Result
}

// Key is "namespace/name" or "name".
func (r Reconciled) Key() string { return key(r.Namespace, r.Name) }

func (r Reconciled) String() string {
	return fmt.Sprintf("reconcile %s (absent %t, deleting %t): %s", r.Key(), r.Absent, r.Deleting, r.Result)
}

// Loop is the host's controller loop over a fake cluster. Objects live
// in the Host's cache under their Kind's name, so the plugin reads them
// with kit.Cache() as well (the loop grants the cache of its kinds).
type Loop struct {
	h     *Host
	c     Controller
	now   time.Time
	queue []string        // keys waiting, in order, each once
	init  map[string]bool // keys queued by Restart
	// timers are the requeue-after due times (the host persists them on
	// the object); backoff the retry due times after RETRY or ERROR.
	timers, backoff map[string]time.Time
	failures        map[string]int
	onChild         func(child map[string]any) error
	// owned is, per primary key, the status fields and condition types
	// this plugin applied last (server-side apply's field ownership).
	owned map[string]map[string]bool
	// seen are the primary keys handed to the plugin, as the host
	// remembers them across restarts to find deletes it missed.
	seen map[string]bool
	// During a reconcile: its key and the requeue-after asked (-1: none).
	current string
	requeue time.Duration
	rv      int64
}

// Controller starts the controller loop on h. There is one per Host.
func (h *Host) Controller(c Controller) *Loop {
	if c.Plugin == "" {
		c.Plugin = "plugin.wasm"
	}
	if c.Start.IsZero() {
		c.Start = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	}
	l := &Loop{h: h, c: c, now: c.Start, init: map[string]bool{}, timers: map[string]time.Time{},
		backoff: map[string]time.Time{}, failures: map[string]int{}, owned: map[string]map[string]bool{},
		seen: map[string]bool{}}
	if h.Resources == nil {
		h.Resources = map[string]abi.Header{}
	}
	for _, k := range l.kinds() {
		group, version, ok := strings.Cut(k.APIVersion, "/")
		if !ok {
			group, version = "", k.APIVersion
		}
		var hd abi.Header
		hd.Fields[abi.FieldGroup], hd.Fields[abi.FieldVersion] = group, version
		hd.Fields[abi.FieldResource], hd.Fields[abi.FieldKind] = k.plural(), k.Kind
		h.Resources[k.Name] = hd
		h.GrantCache(k.Name)
	}
	h.loop = l
	return l
}

func (l *Loop) kinds() []Kind {
	ks := append([]Kind{l.c.For}, l.c.Owns...)
	for _, w := range l.c.Watches {
		ks = append(ks, w.Kind)
	}
	return ks
}

func (l *Loop) kind(name string) Kind {
	for _, k := range l.kinds() {
		if k.Name == name {
			return k
		}
	}
	l.h.t.Fatalf("kittest: %q is not a resource of the controller loop (for, owns or watches)", name)
	return Kind{}
}

// Now is the fake clock's time; kit.Now reads it in the plugin.
func (l *Loop) Now() time.Time { return l.now }

// OnChild programs children_apply's per-child answers: a child for which
// f returns an error is not applied, and is reported as failed with the
// error's text, as the apiserver refusing it would be.
func (l *Loop) OnChild(f func(child map[string]any) error) { l.onChild = f }

// Apply creates the object (JSON text, or any value encoding/json
// marshals) in resource, or updates it (the whole object but its
// metadata, which is merged, and its status, kept unless obj has one), as
// a user would, and enqueues the keys the change maps to. A new object
// gets a uid, a creationTimestamp and generation 1; a change outside
// metadata and status a new generation.
func (l *Loop) Apply(resource string, obj any) {
	k := l.kind(resource)
	o := l.object(obj)
	m := metaOf(o)
	ns, _ := m["namespace"].(string)
	name, _ := m["name"].(string)
	if name == "" {
		l.h.t.Fatalf("kittest: Apply(%s): the object has no metadata.name", resource)
	}
	if o["apiVersion"] == nil {
		o["apiVersion"], o["kind"] = k.APIVersion, k.Kind
	}
	if cur, ok := l.get(resource, ns, name); ok {
		cm := metaOf(cur)
		for f, v := range m {
			cm[f] = v
		}
		o["metadata"] = cm
		if _, ok := o["status"]; !ok && cur["status"] != nil {
			o["status"] = cur["status"]
		}
		l.put(resource, o, specChanged(cur, o))
		return
	}
	l.put(resource, o, true)
}

// Delete deletes the object as the apiserver does: one with finalizers
// gets a deletionTimestamp and stays until they are gone; one without is
// removed, with the objects whose ownerReferences name it (the garbage
// collector's cascade). Either enqueues the keys the change maps to.
func (l *Loop) Delete(resource, namespace, name string) {
	o, ok := l.get(resource, namespace, name)
	if !ok {
		l.h.t.Fatalf("kittest: Delete: no %s %s", resource, key(namespace, name))
	}
	if len(finalizers(o)) == 0 {
		l.remove(resource, o)
		return
	}
	if metaOf(o)["deletionTimestamp"] == nil {
		// The apiserver gives an object a new generation when its
		// deletion starts.
		metaOf(o)["deletionTimestamp"] = kit.Timestamp(l.now)
		l.put(resource, o, true)
	}
}

// Object returns the object resource namespace/name as the cluster has
// it, and whether there is one.
func (l *Loop) Object(resource, namespace, name string) (map[string]any, bool) {
	return l.get(resource, namespace, name)
}

// Decode decodes the object resource namespace/name into v with
// encoding/json, and reports whether there is one.
func (l *Loop) Decode(resource, namespace, name string, v any) bool {
	b, ok := l.h.cache[resource][key(namespace, name)]
	if !ok {
		return false
	}
	if err := json.Unmarshal(b, v); err != nil {
		l.h.t.Fatalf("kittest: decoding %s %s: %v", resource, key(namespace, name), err)
	}
	return true
}

// Keys returns the keys of resource's objects, sorted.
func (l *Loop) Keys(resource string) []string {
	var ks []string
	for k := range l.h.cache[resource] {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

// RequeueAt returns the requeue-after timer of a key, if it has one.
func (l *Loop) RequeueAt(namespace, name string) (time.Time, bool) {
	t, ok := l.timers[key(namespace, name)]
	return t, ok
}

// Queued returns the keys waiting to be reconciled, in order.
func (l *Loop) Queued() []string { return append([]string(nil), l.queue...) }

// Restart is the daemon (or the plugin) starting again: every primary
// key is reconciled again, flagged initial, and so is every key handed
// to the plugin before that no longer exists (a delete missed while
// away, ABI.md §18); the timers, persisted on the objects, stay.
func (l *Loop) Restart() {
	keys := l.Keys(l.c.For.Name)
	for k := range l.seen {
		if _, ok := l.h.cache[l.c.For.Name][k]; !ok {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	for _, k := range keys {
		l.init[k] = true
		l.enqueue(k)
	}
}

// DeleteWhileAway deletes the object as Delete does, but while the
// daemon is down: nothing is enqueued, the garbage collector takes its
// owned objects, and only a Restart finds out.
func (l *Loop) DeleteWhileAway(resource, namespace, name string) {
	o, ok := l.get(resource, namespace, name)
	if !ok {
		l.h.t.Fatalf("kittest: DeleteWhileAway: no %s %s", resource, key(namespace, name))
	}
	queued := l.Queued()
	if len(finalizers(o)) == 0 {
		l.remove(resource, o)
	} else if metaOf(o)["deletionTimestamp"] == nil {
		metaOf(o)["deletionTimestamp"] = kit.Timestamp(l.now)
		l.store(resource, o)
	}
	l.queue = queued
}

// Advance moves the fake clock by d, enqueues the keys whose timers
// (requeue-after, retry backoff) are due, and runs the loop (Run).
func (l *Loop) Advance(d time.Duration) []Reconciled {
	l.now = l.now.Add(d)
	var due []string
	for k, t := range l.timers {
		if !t.After(l.now) {
			due = append(due, k)
			delete(l.timers, k)
		}
	}
	for k, t := range l.backoff {
		if !t.After(l.now) {
			due = append(due, k)
			delete(l.backoff, k)
		}
	}
	sort.Strings(due)
	for _, k := range due {
		l.enqueue(k)
	}
	return l.Run()
}

// maxRun bounds one Run: a reconciler whose every reconcile changes
// something it then reacts to never settles, and the test fails.
const maxRun = 1000

// Run reconciles the queued keys until none is left, the changes each
// reconcile makes (children, status) enqueuing their keys as the host's
// informers would; a key that fails waits for its backoff (Advance).
func (l *Loop) Run() []Reconciled {
	var out []Reconciled
	for len(l.queue) > 0 {
		if len(out) == maxRun {
			l.h.t.Fatalf("kittest: the controller loop did not settle after %d reconciles; the last: %v", maxRun, out[len(out)-5:])
		}
		k := l.queue[0]
		l.queue = l.queue[1:]
		ns, name := kit.SplitKey(k)
		out = append(out, l.Reconcile(ns, name))
	}
	return out
}

// Reconcile reconciles one key now, as the host's worker does: the
// finalizer added first (an object without it, not deleting), then
// ih_reconcile, then the answer settled: OK sets or clears the
// requeue-after timer and, for a deleting object, removes the finalizer
// (the object goes once it has none), or, for an absent key, prunes the
// children applied for it; RETRY and ERROR back the key off (5ms
// doubling to 1000s, client-go's default); DROP forgets it.
func (l *Loop) Reconcile(namespace, name string) Reconciled {
	k := key(namespace, name)
	l.dequeue(k)
	initial := l.init[k]
	delete(l.init, k)
	obj, present := l.get(l.c.For.Name, namespace, name)
	if present && l.c.Filter != nil && !l.c.Filter(obj) {
		return Reconciled{Namespace: namespace, Name: name, Initial: initial, Filtered: true}
	}
	deleting := present && metaOf(obj)["deletionTimestamp"] != nil
	if present && !deleting && l.c.Finalizer != "" && !hasString(finalizers(obj), l.c.Finalizer) {
		metaOf(obj)["finalizers"] = append(finalizers(obj), l.c.Finalizer)
		l.store(l.c.For.Name, obj)
	}
	var flags uint8
	if !present {
		flags |= abi.FlagAbsent
	}
	if deleting {
		flags |= abi.FlagDeleting
	}
	if initial {
		flags |= abi.FlagInitialList
	}
	hd := l.h.resourceHeader(abi.Header{Type: abi.EventReconcile, Flags: flags}, l.c.For.Name)
	hd.Fields[abi.FieldNamespace], hd.Fields[abi.FieldName] = namespace, name
	l.h.obj, l.h.old = nil, nil
	if present {
		m := metaOf(obj)
		hd.Fields[abi.FieldUID], _ = m["uid"].(string)
		hd.Fields[abi.FieldResourceVersion], _ = m["resourceVersion"].(string)
		l.h.obj = l.h.cache[l.c.For.Name][k]
	}
	l.h.header = abi.AppendHeader(nil, &hd)
	l.h.errMsg, l.h.resultMsg = "", ""
	l.h.inEvent, l.current, l.requeue = true, k, -1
	rc := func() int32 {
		defer func() { l.h.end(); l.current = "" }()
		return kit.NativeReconcile(int32(len(l.h.header)))
	}()
	l.seen[k] = present || l.seen[k]
	r := Reconciled{Namespace: namespace, Name: name, Absent: !present, Deleting: deleting, Initial: initial,
		Result: Result{Code: rc, Message: l.h.errMsg}}
	switch rc {
	case OK:
		delete(l.failures, k)
		delete(l.backoff, k)
		if l.requeue > 0 {
			l.timers[k] = l.now.Add(l.requeue)
		} else {
			delete(l.timers, k)
		}
		if deleting && l.c.Finalizer != "" {
			l.removeFinalizer(k)
		}
		if !present {
			l.prune(k, nil)
			delete(l.owned, k)
			delete(l.seen, k)
		}
	case Drop:
		delete(l.failures, k)
		delete(l.backoff, k)
	default:
		l.failures[k]++
		d := 5 * time.Millisecond << min(l.failures[k]-1, 20)
		l.backoff[k] = l.now.Add(min(d, 1000*time.Second))
	}
	return r
}

func (l *Loop) removeFinalizer(k string) {
	ns, name := kit.SplitKey(k)
	obj, ok := l.get(l.c.For.Name, ns, name)
	if !ok {
		return
	}
	var keep []any
	for _, f := range finalizers(obj) {
		if f != l.c.Finalizer {
			keep = append(keep, f)
		}
	}
	if len(keep) == 0 && metaOf(obj)["deletionTimestamp"] != nil {
		l.remove(l.c.For.Name, obj)
		return
	}
	metaOf(obj)["finalizers"] = keep
	l.store(l.c.For.Name, obj)
}

// ReconcileRequeueAfter is reconcile_requeue_after.
func (h *Host) ReconcileRequeueAfter(millis int64) int32 {
	l := h.loop
	switch {
	case l == nil || l.current == "":
		return abi.ErrNoEvent
	case millis < 0 || millis > 366*24*3600*1000:
		return abi.ErrInvalid
	}
	l.requeue = time.Duration(millis) * time.Millisecond
	return 0
}

// ChildrenApply is children_apply: every child applied (as the plugin,
// with the bookkeeping and, where Kubernetes allows one, a controller
// ownerReference to the primary), then the children applied for the key
// before that are not in the set deleted.
func (h *Host) ChildrenApply(body []byte) int32 {
	l := h.loop
	h.resultMsg = ""
	if l == nil || l.current == "" {
		return abi.ErrNoEvent
	}
	var children []map[string]any
	if err := json.Unmarshal(body, &children); err != nil {
		return h.fail(abi.ErrInvalid, "children_apply takes a JSON array of objects: %v", err)
	}
	pns, pname := kit.SplitKey(l.current)
	primary, present := l.get(l.c.For.Name, pns, pname)
	kinds := make([]string, len(children))
	for i, c := range children {
		av, _ := c["apiVersion"].(string)
		kind, _ := c["kind"].(string)
		m, _ := c["metadata"].(map[string]any)
		name, _ := m["name"].(string)
		if av == "" || kind == "" || name == "" {
			return h.fail(abi.ErrInvalid, "child %d has no apiVersion, kind or metadata.name", i)
		}
		ns, _ := m["namespace"].(string)
		if ns == "" && !l.c.For.ClusterScoped {
			ns = pns
			m["namespace"] = ns
		}
		for _, o := range l.c.Owns {
			if o.holds(av, kind, ns) {
				kinds[i] = o.Name
				break
			}
		}
		if kinds[i] == "" {
			var owns []string
			for _, o := range l.c.Owns {
				owns = append(owns, o.Name)
			}
			return h.fail(abi.ErrDenied, "%s %s: not an object of controller.owns [%s]", kind, key(ns, name), strings.Join(owns, ", "))
		}
	}
	var failed []string
	wanted := map[string]bool{}
	for i, c := range children {
		m := metaOf(c)
		ns, _ := m["namespace"].(string)
		name, _ := m["name"].(string)
		wanted[kinds[i]+"\x00"+key(ns, name)] = true
		if l.onChild != nil {
			if err := l.onChild(c); err != nil {
				failed = append(failed, fmt.Sprintf("%s %s/%s: %v", c["kind"], ns, name, err))
				continue
			}
		}
		l.applyChild(kinds[i], c, primary, present)
	}
	l.prune(l.current, wanted)
	h.resultMsg = strings.Join(failed, "\n")
	return int32(len(failed))
}

// applyChild applies child (its own fields over the object's, metadata
// merged, status kept) with the host's bookkeeping.
func (l *Loop) applyChild(resource string, child, primary map[string]any, present bool) {
	m := metaOf(child)
	ns, _ := m["namespace"].(string)
	name, _ := m["name"].(string)
	labels, _ := m["labels"].(map[string]any)
	if labels == nil {
		labels = map[string]any{}
	}
	labels[PluginLabel] = l.c.Plugin
	m["labels"] = labels
	ann, _ := m["annotations"].(map[string]any)
	if ann == nil {
		ann = map[string]any{}
	}
	pns, pname := kit.SplitKey(l.current)
	uid := ""
	if present {
		uid, _ = metaOf(primary)["uid"].(string)
	}
	ann[OwnerAnnotation] = l.c.For.Name + "/" + pns + "/" + pname + "/" + uid
	m["annotations"] = ann
	if present && (ns == pns || l.c.For.ClusterScoped) {
		m["ownerReferences"] = []any{map[string]any{"apiVersion": l.c.For.APIVersion, "kind": l.c.For.Kind,
			"name": pname, "uid": uid, "controller": true, "blockOwnerDeletion": true}}
	}
	cur, exists := l.get(resource, ns, name)
	if !exists {
		l.put(resource, child, true)
		return
	}
	next := map[string]any{}
	for f, v := range child {
		next[f] = v
	}
	cm := metaOf(cur)
	for f, v := range m {
		if f == "labels" || f == "annotations" {
			merged, _ := cm[f].(map[string]any)
			if merged == nil {
				merged = map[string]any{}
			}
			for lk, lv := range v.(map[string]any) {
				merged[lk] = lv
			}
			v = merged
		}
		cm[f] = v
	}
	next["metadata"] = cm
	if s, ok := cur["status"]; ok {
		next["status"] = s
	}
	if !reflect.DeepEqual(strip(cur), strip(next)) {
		l.put(resource, next, specChanged(cur, next))
	}
}

// prune deletes the children the plugin applied for the primary key k
// (its owner annotation) that wanted does not name (nil: every one).
func (l *Loop) prune(k string, wanted map[string]bool) {
	pns, pname := kit.SplitKey(k)
	prefix := l.c.For.Name + "/" + pns + "/" + pname + "/"
	for _, o := range l.c.Owns {
		for _, ck := range l.Keys(o.Name) {
			ns, name := kit.SplitKey(ck)
			c, _ := l.get(o.Name, ns, name)
			ann, _ := metaOf(c)["annotations"].(map[string]any)
			owner, _ := ann[OwnerAnnotation].(string)
			labels, _ := metaOf(c)["labels"].(map[string]any)
			if strings.HasPrefix(owner, prefix) && labels[PluginLabel] == l.c.Plugin && !wanted[o.Name+"\x00"+ck] {
				l.remove(o.Name, c)
			}
		}
	}
}

// StatusApply is status_apply: conditions completed (observedGeneration,
// lastTransitionTime kept while their status is unchanged), then applied
// as this plugin's fields: the ones it applied before and leaves out now
// removed, other managers' kept.
func (h *Host) StatusApply(body []byte) int32 {
	l := h.loop
	h.resultMsg = ""
	if l == nil || l.current == "" {
		return abi.ErrNoEvent
	}
	var st map[string]any
	if err := json.Unmarshal(body, &st); err != nil || st == nil {
		return h.fail(abi.ErrInvalid, "status_apply takes a JSON object")
	}
	ns, name := kit.SplitKey(l.current)
	obj, ok := l.get(l.c.For.Name, ns, name)
	if !ok {
		return h.fail(abi.ErrAbsent, "%s %s is absent", l.c.For.Name, l.current)
	}
	before, _ := json.Marshal(obj["status"])
	cur, _ := obj["status"].(map[string]any)
	if cur == nil {
		cur = map[string]any{}
	}
	old := map[string]map[string]any{}
	var others []any
	prev := l.owned[l.current]
	curConds, _ := cur["conditions"].([]any)
	for _, c := range curConds {
		cm, _ := c.(map[string]any)
		t, _ := cm["type"].(string)
		old[t] = cm
		if !prev["condition:"+t] {
			others = append(others, c)
		}
	}
	owned := map[string]bool{}
	if conds, ok := st["conditions"]; ok {
		list, _ := conds.([]any)
		for i, c := range list {
			cm, _ := c.(map[string]any)
			t, _ := cm["type"].(string)
			s, _ := cm["status"].(string)
			if t == "" || (s != kit.ConditionTrue && s != kit.ConditionFalse && s != kit.ConditionUnknown) {
				return h.fail(abi.ErrInvalid, "condition %d: a condition needs a type and a status True, False or Unknown (type %q, status %q)", i, t, s)
			}
			cm["observedGeneration"] = metaOf(obj)["generation"]
			cm["lastTransitionTime"] = kit.Timestamp(l.now)
			if o := old[t]; o != nil && o["status"] == s && o["lastTransitionTime"] != nil {
				cm["lastTransitionTime"] = o["lastTransitionTime"]
			}
			owned["condition:"+t] = true
			for j, oc := range others {
				if ot, _ := oc.(map[string]any)["type"].(string); ot == t {
					others = append(others[:j], others[j+1:]...)
					break
				}
			}
		}
		st["conditions"] = append(others, list...)
	} else if len(others) > 0 {
		st["conditions"] = others
	}
	for f := range prev {
		if !strings.HasPrefix(f, "condition:") {
			if _, still := st[f]; !still {
				delete(cur, f)
			}
		}
	}
	for f, v := range st {
		cur[f] = v
		if f != "conditions" {
			owned[f] = true
		}
	}
	if _, ok := st["conditions"]; !ok && len(curConds) > 0 {
		delete(cur, "conditions")
	}
	l.owned[l.current] = owned
	obj["status"] = cur
	after, _ := json.Marshal(cur)
	if string(before) != string(after) {
		l.put(l.c.For.Name, obj, false)
	}
	return 0
}

// Now is the fake clock's time under a controller loop, else the wall
// clock's: kit.Now reads it.
func (h *Host) Now() time.Time {
	if h.loop != nil {
		return h.loop.now
	}
	return time.Now()
}

// object is a test's object as a map.
func (l *Loop) object(obj any) map[string]any {
	var b []byte
	switch v := obj.(type) {
	case string:
		b = []byte(v)
	case []byte:
		b = v
	default:
		var err error
		if b, err = json.Marshal(v); err != nil {
			l.h.t.Fatalf("kittest: the object does not marshal: %v", err)
		}
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil || m == nil {
		l.h.t.Fatalf("kittest: the object is not a JSON object: %v", err)
	}
	return m
}

func (l *Loop) get(resource, ns, name string) (map[string]any, bool) {
	b, ok := l.h.cache[resource][key(ns, name)]
	if !ok {
		return nil, false
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		l.h.t.Fatalf("kittest: the cached %s %s is not JSON: %v", resource, key(ns, name), err)
	}
	return m, true
}

// put stores a change of obj, as a user's or a reconcile's write, and
// enqueues the keys it maps to.
func (l *Loop) put(resource string, obj map[string]any, newGeneration bool) {
	m := metaOf(obj)
	if m["uid"] == nil {
		l.h.uids++
		m["uid"] = fmt.Sprintf("kittest-uid-%d", l.h.uids)
		m["creationTimestamp"] = kit.Timestamp(l.now)
	}
	if m["generation"] == nil {
		newGeneration = true
	}
	if newGeneration {
		g, _ := m["generation"].(float64)
		m["generation"] = g + 1
	}
	l.store(resource, obj)
	if resource == l.c.For.Name && l.c.GenerationChanged && !newGeneration {
		// generationChanged: an update that leaves the generation as it
		// was (status, labels) does not enqueue the primary itself.
		l.mappedOthers(resource, obj)
		return
	}
	l.mapped(resource, obj)
}

// store writes obj with a new resourceVersion; a host-metadata change
// (a finalizer) goes through it alone, enqueuing nothing.
func (l *Loop) store(resource string, obj map[string]any) {
	l.rv++
	metaOf(obj)["resourceVersion"] = fmt.Sprint(l.rv)
	b, err := json.Marshal(obj)
	if err != nil {
		l.h.t.Fatalf("kittest: %v", err)
	}
	m := metaOf(obj)
	ns, _ := m["namespace"].(string)
	name, _ := m["name"].(string)
	l.h.cached(resource, ns, name, string(b))
}

// remove deletes obj and, as the garbage collector does, every object
// whose ownerReferences name it.
func (l *Loop) remove(resource string, obj map[string]any) {
	m := metaOf(obj)
	ns, _ := m["namespace"].(string)
	name, _ := m["name"].(string)
	l.h.Uncache(resource, ns, name)
	l.mapped(resource, obj)
	uid := m["uid"]
	for _, k := range l.kinds() {
		for _, ck := range l.Keys(k.Name) {
			cns, cname := kit.SplitKey(ck)
			c, _ := l.get(k.Name, cns, cname)
			refs, _ := metaOf(c)["ownerReferences"].([]any)
			for _, r := range refs {
				if rm, _ := r.(map[string]any); rm["uid"] == uid {
					l.remove(k.Name, c)
					break
				}
			}
		}
	}
}

// mapped enqueues the primaries a change of obj in resource maps to:
// itself (for), its controller (owns: ownerReference, else the host's
// owner annotation), the watches' mappings.
func (l *Loop) mapped(resource string, obj map[string]any) {
	if resource == l.c.For.Name {
		m := metaOf(obj)
		ns, _ := m["namespace"].(string)
		name, _ := m["name"].(string)
		l.enqueue(key(ns, name))
	}
	l.mappedOthers(resource, obj)
}

// mappedOthers enqueues the primaries obj maps to through owns and
// watches.
func (l *Loop) mappedOthers(resource string, obj map[string]any) {
	m := metaOf(obj)
	ns, _ := m["namespace"].(string)
	named := func(v string) {
		if v == "" {
			return
		}
		if !strings.Contains(v, "/") && !l.c.For.ClusterScoped {
			v = ns + "/" + v
		}
		l.enqueue(v)
	}
	for _, o := range l.c.Owns {
		if o.Name != resource {
			continue
		}
		found := false
		refs, _ := m["ownerReferences"].([]any)
		for _, r := range refs {
			rm, _ := r.(map[string]any)
			if rm["controller"] == true && rm["kind"] == l.c.For.Kind && rm["apiVersion"] == l.c.For.APIVersion {
				n, _ := rm["name"].(string)
				if l.c.For.ClusterScoped {
					l.enqueue(n)
				} else {
					l.enqueue(key(ns, n))
				}
				found = true
			}
		}
		ann, _ := m["annotations"].(map[string]any)
		if owner, _ := ann[OwnerAnnotation].(string); !found && strings.HasPrefix(owner, l.c.For.Name+"/") {
			parts := strings.Split(strings.TrimPrefix(owner, l.c.For.Name+"/"), "/")
			if len(parts) == 3 {
				l.enqueue(key(parts[0], parts[1]))
			}
		}
	}
	for _, w := range l.c.Watches {
		if w.Kind.Name != resource {
			continue
		}
		if w.Label != "" {
			labels, _ := m["labels"].(map[string]any)
			v, _ := labels[w.Label].(string)
			named(v)
		}
		if w.Annotation != "" {
			ann, _ := m["annotations"].(map[string]any)
			v, _ := ann[w.Annotation].(string)
			named(v)
		}
		if w.Map != nil {
			for _, v := range w.Map(obj) {
				named(v)
			}
		}
	}
}

func (l *Loop) enqueue(k string) {
	for _, q := range l.queue {
		if q == k {
			return
		}
	}
	l.queue = append(l.queue, k)
}

func (l *Loop) dequeue(k string) {
	for i, q := range l.queue {
		if q == k {
			l.queue = append(l.queue[:i], l.queue[i+1:]...)
			return
		}
	}
}

func metaOf(o map[string]any) map[string]any {
	m, _ := o["metadata"].(map[string]any)
	if m == nil {
		m = map[string]any{}
		o["metadata"] = m
	}
	return m
}

func finalizers(o map[string]any) []any {
	fs, _ := metaOf(o)["finalizers"].([]any)
	return fs
}

func hasString(list []any, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// specChanged reports a change outside metadata and status: what gives
// an object a new generation.
func specChanged(a, b map[string]any) bool {
	return !reflect.DeepEqual(strip(a, "metadata", "status"), strip(b, "metadata", "status"))
}

// strip is o without the fields named (and without resourceVersion, which
// every write changes).
func strip(o map[string]any, fields ...string) map[string]any {
	out := map[string]any{}
	for k, v := range o {
		out[k] = v
	}
	for _, f := range fields {
		delete(out, f)
	}
	if m, ok := out["metadata"].(map[string]any); ok {
		c := map[string]any{}
		for k, v := range m {
			if k != "resourceVersion" {
				c[k] = v
			}
		}
		out["metadata"] = c
	}
	return out
}
