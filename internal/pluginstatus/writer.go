package pluginstatus

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"golang.org/x/time/rate"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"

	"github.com/informer-host/informer-host/host"
	"github.com/informer-host/informer-host/internal/config"
	"github.com/informer-host/informer-host/internal/pluginapi/v1alpha1"
	"github.com/informer-host/informer-host/internal/pluginresource"
	"github.com/informer-host/informer-host/internal/pluginsource"
)

// ReportingController is the Events' reporting controller.
const ReportingController = "informer-host"

// Defaults of the bounds on writes.
const (
	DefaultPoll = time.Second
	// DefaultConditionQPS and DefaultConditionBurst bound the writes of
	// one object by one replica that change a condition: a plugin that
	// flaps between running and restarting must not become a write storm.
	DefaultConditionQPS   = 1
	DefaultConditionBurst = 5
)

// Options configure a Writer.
type Options struct {
	// RESTConfig is the daemon's identity towards the apiserver; the
	// status updates and the Events are made as it.
	RESTConfig *rest.Config
	// Replica is this replica's name in status.replicas (its Lease
	// holder identity or shard member).
	Replica string
	// Members lists the live replicas whose entries stay (sharding: the
	// group's live members); nil keeps this replica's own entry only
	// (a single replica, or the leader under leader election, which is
	// the only one that runs plugins).
	Members func() []string
	// Standby reports whether this replica is a standby; a standby
	// writes nothing and records no Event. Nil: never.
	Standby func() bool
	// Plugins, Sources and Admissions read the host's plugins, the
	// sources' status (nil when there are none) and the plugin
	// objects' admissions. Plugins and Admissions are required.
	Plugins    func() []host.PluginStatus
	Sources    func() map[string]pluginsource.Status
	Admissions func() []pluginresource.Admission
	// StatusInterval is the least time between two writes of one object
	// that change only its counters (default 10s).
	StatusInterval time.Duration
	// Poll is how often the writer looks (default 1s); Notify looks at
	// once.
	Poll time.Duration
	// ConditionQPS and ConditionBurst are the per-object token bucket of
	// writes that change a condition (defaults 1/s, burst 5).
	ConditionQPS   float64
	ConditionBurst int
	Logger         *slog.Logger
	// Clock reads the time the bounds are measured with (tests).
	Clock clock.PassiveClock
}

// Writer writes the status of the plugin objects this replica runs.
type Writer struct {
	o       Options
	log     *slog.Logger
	dyn     dynamic.Interface
	cs      kubernetes.Interface
	notify  chan struct{}
	objects map[types.UID]*object
}

// object is what the writer remembers of one plugin object.
type object struct {
	limiter *rate.Limiter
	// written is what the last successful write was made from, at
	// writtenAt; status is what it wrote (the previous conditions of the
	// next computation).
	written   keys
	wrote     bool
	writtenAt time.Time
	status    v1alpha1.PluginStatus
	// seen is the last snapshot, for the Events.
	seen snapshot
}

// keys split a report into what changes a condition and what only
// counts.
type keys struct {
	conditions, counters, members string
}

// New returns a Writer; Run starts it.
func New(o Options) (*Writer, error) {
	if o.RESTConfig == nil || o.Plugins == nil || o.Admissions == nil || o.Replica == "" {
		return nil, errors.New("pluginstatus: Options needs RESTConfig, Replica, Plugins and Admissions")
	}
	if o.StatusInterval <= 0 {
		o.StatusInterval = config.DefaultStatusInterval
	}
	if o.Poll <= 0 {
		o.Poll = DefaultPoll
	}
	if o.ConditionQPS <= 0 {
		o.ConditionQPS = DefaultConditionQPS
	}
	if o.ConditionBurst <= 0 {
		o.ConditionBurst = DefaultConditionBurst
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	dyn, err := dynamic.NewForConfig(o.RESTConfig)
	if err != nil {
		return nil, fmt.Errorf("pluginstatus: client for the plugin objects: %w", err)
	}
	cs, err := kubernetes.NewForConfig(o.RESTConfig)
	if err != nil {
		return nil, fmt.Errorf("pluginstatus: client for the Events: %w", err)
	}
	return &Writer{o: o, log: o.Logger, dyn: dyn, cs: cs, notify: make(chan struct{}, 1), objects: map[types.UID]*object{}}, nil
}

// Notify makes the writer look now rather than at its next poll.
func (w *Writer) Notify() {
	select {
	case w.notify <- struct{}{}:
	default:
	}
}

// Run writes until ctx ends.
func (w *Writer) Run(ctx context.Context) {
	b := events.NewBroadcaster(&events.EventSinkImpl{Interface: w.cs.EventsV1()})
	if err := b.StartRecordingToSinkWithContext(ctx); err != nil {
		w.log.Error("plugin status: Events on plugin objects are not recorded", "err", err)
	}
	defer b.Shutdown()
	rec := b.NewRecorder(scheme.Scheme, ReportingController)
	t := time.NewTicker(w.o.Poll)
	defer t.Stop()
	for {
		w.tick(ctx, rec)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-w.notify:
		}
	}
}

// tick looks at every plugin object once, writes those whose report is
// due, and records the Events of their transitions.
func (w *Writer) tick(ctx context.Context, rec events.EventRecorder) {
	if w.o.Standby != nil && w.o.Standby() {
		return
	}
	plugins := map[string]*host.PluginStatus{}
	for _, p := range w.o.Plugins() {
		plugins[p.File] = &p
	}
	var sources map[string]pluginsource.Status
	if w.o.Sources != nil {
		sources = w.o.Sources()
	}
	var members []string
	if w.o.Members != nil {
		members = slices.Sorted(slices.Values(w.o.Members()))
	}
	now := w.o.Clock.Now()
	live := map[types.UID]bool{}
	for _, adm := range w.o.Admissions() {
		live[adm.UID] = true
		ob := w.objects[adm.UID]
		if ob == nil {
			ob = &object{limiter: rate.NewLimiter(rate.Limit(w.o.ConditionQPS), w.o.ConditionBurst)}
			w.objects[adm.UID] = ob
		}
		in := Input{Admission: adm, Plugin: plugins[adm.Plugin], Replica: w.o.Replica, Prev: ob.status, Now: now}
		if s, ok := sources[adm.Plugin]; ok {
			in.Source = &s
		}
		a := assess(in)
		w.record(rec, adm, ob, a, members)
		k := keysOf(adm, a, members)
		due := false
		switch {
		case !ob.wrote || k.conditions != ob.written.conditions || k.members != ob.written.members:
			due = ob.limiter.AllowN(now, 1)
		case k.counters != ob.written.counters:
			due = now.Sub(ob.writtenAt) >= w.o.StatusInterval
		}
		if !due {
			continue
		}
		st, err := w.write(ctx, in, members)
		switch {
		case apierrors.IsNotFound(err):
			delete(w.objects, adm.UID)
		case apierrors.IsConflict(err):
			// Another replica wrote first: the next look reads its
			// write and tries again.
			w.log.Debug("plugin status: conflict; written again at the next look", "object", objectKey(adm))
		case err != nil:
			w.log.Warn("plugin status not written; trying again", "object", objectKey(adm), "err", err)
		default:
			ob.written, ob.wrote, ob.writtenAt, ob.status = k, true, now, st
		}
	}
	for uid := range w.objects {
		if !live[uid] {
			delete(w.objects, uid)
		}
	}
}

// write reads the object, sets this replica's entry among the live
// others', and updates the status subresource at the resourceVersion it
// read.
func (w *Writer) write(ctx context.Context, in Input, members []string) (v1alpha1.PluginStatus, error) {
	adm := in.Admission
	ri := w.resource(adm)
	obj, err := ri.Get(ctx, adm.Name, metav1.GetOptions{})
	if err != nil {
		return v1alpha1.PluginStatus{}, err
	}
	if obj.GetUID() != adm.UID {
		// The object was deleted and made again: its own admission
		// comes.
		return v1alpha1.PluginStatus{}, apierrors.NewConflict(v1alpha1.PluginsGVR.GroupResource(), adm.Name, errors.New("object recreated"))
	}
	prev, err := StatusOf(obj)
	if err != nil {
		w.log.Warn("plugin status: the object's status does not read; it is written anew", "object", objectKey(adm), "err", err)
	}
	in.Prev = prev
	in.Others = nil
	for _, e := range prev.Replicas {
		if e.Name != w.o.Replica && slices.Contains(members, e.Name) {
			in.Others = append(in.Others, e)
		}
	}
	st := Compute(in)
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&st)
	if err != nil {
		return v1alpha1.PluginStatus{}, err
	}
	obj.Object["status"] = m
	if _, err := ri.UpdateStatus(ctx, obj, metav1.UpdateOptions{FieldManager: ReportingController}); err != nil {
		return v1alpha1.PluginStatus{}, err
	}
	return st, nil
}

// StatusOf reads a plugin object's status (the zero status when it has
// none, or one that does not read, with the error).
func StatusOf(obj *unstructured.Unstructured) (v1alpha1.PluginStatus, error) {
	var st v1alpha1.PluginStatus
	m, ok := obj.Object["status"].(map[string]any)
	if !ok {
		return st, nil
	}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(m, &st); err != nil {
		return v1alpha1.PluginStatus{}, fmt.Errorf("status of %s %s: %w", obj.GetKind(), obj.GetName(), err)
	}
	return st, nil
}

func (w *Writer) resource(adm pluginresource.Admission) dynamic.ResourceInterface {
	if adm.Kind == v1alpha1.KindClusterPlugin {
		return w.dyn.Resource(v1alpha1.ClusterPluginsGVR)
	}
	return w.dyn.Resource(v1alpha1.PluginsGVR).Namespace(adm.Namespace)
}

// keysOf splits this replica's report: what makes a condition (written
// within the token bucket) and what only counts (within the interval).
func keysOf(adm pluginresource.Admission, a assessment, members []string) keys {
	var b strings.Builder
	fmt.Fprintf(&b, "%d|%v|%s|%s|%v|%v|%v|", adm.Generation, adm.Admitted, a.entry.Digest, a.entry.State, a.entry.Ready, a.entry.Synced, a.entry.Degraded)
	for _, c := range []metav1.Condition{a.ready, a.verified, a.synced, a.degraded, a.quarantined} {
		fmt.Fprintf(&b, "%s=%s/%s/%s|", c.Type, c.Status, c.Reason, c.Message)
	}
	if f := a.entry.LastFailure; f != nil {
		b.WriteString(f.Message)
	}
	return keys{conditions: b.String(), counters: fmt.Sprintf("%d/%d", a.entry.EventsDelivered, a.entry.Parked),
		members: strings.Join(members, ",")}
}

func objectKey(adm pluginresource.Admission) string {
	if adm.Namespace == "" {
		return adm.Kind + " " + adm.Name
	}
	return adm.Kind + " " + adm.Namespace + "/" + adm.Name
}

// snapshot is what the Events are told from: one replica's view of one
// object at one look.
type snapshot struct {
	refusal    string
	digest     string
	state      string
	loadFailed string
	parked     int64
}

// record records an Event for each transition between the last
// snapshot and this one. Loaded, Swapped and Refused are the object's
// own and said once, by the first live member; LoadFailed,
// Quarantined and Parked happen to a replica, which says so itself.
func (w *Writer) record(rec events.EventRecorder, adm pluginresource.Admission, ob *object, a assessment, members []string) {
	cur := snapshot{state: a.entry.State, loadFailed: a.loadFailed, parked: a.entry.Parked}
	if cur.state == string(host.StateRunning) || cur.state == string(host.StateRestarting) {
		// Loaded once it runs; a quarantined or failed plugin that runs
		// again is Loaded again.
		cur.digest = a.entry.Digest
	}
	if !adm.Admitted {
		cur.refusal = fmt.Sprintf("%d/%s/%s", adm.Generation, adm.Reason, adm.Message)
	}
	prev := ob.seen
	ob.seen = cur
	if rec == nil {
		return
	}
	ref := &corev1.ObjectReference{APIVersion: v1alpha1.Group + "/" + v1alpha1.Version, Kind: adm.Kind,
		Namespace: adm.Namespace, Name: adm.Name, UID: adm.UID}
	first := len(members) == 0 || members[0] == w.o.Replica
	who := ""
	if len(members) > 0 {
		who = "replica " + w.o.Replica + ": "
	}
	switch {
	case !first:
	case cur.refusal != "" && cur.refusal != prev.refusal:
		rec.Eventf(ref, nil, corev1.EventTypeWarning, "Refused", "Admit", "%s", truncate(adm.Message))
	case cur.digest != "" && prev.digest == "":
		rec.Eventf(ref, nil, corev1.EventTypeNormal, "Loaded", "Load", "loaded %s", cur.digest)
	case cur.digest != "" && prev.digest != "" && cur.digest != prev.digest:
		rec.Eventf(ref, nil, corev1.EventTypeNormal, "Swapped", "Swap", "swapped %s for %s", prev.digest, cur.digest)
	}
	if cur.loadFailed != "" && cur.loadFailed != prev.loadFailed {
		rec.Eventf(ref, nil, corev1.EventTypeWarning, "LoadFailed", "Load", "%s%s", who, truncate(cur.loadFailed))
	}
	if cur.state == string(host.StateQuarantined) && prev.state != cur.state {
		rec.Eventf(ref, nil, corev1.EventTypeWarning, "Quarantined", "Quarantine", "%s%s", who, truncate(a.quarantined.Message))
	}
	if cur.parked > 0 && prev.parked == 0 {
		rec.Eventf(ref, nil, corev1.EventTypeWarning, "Parked", "Park", "%s%s", who, truncate(a.degraded.Message))
	}
}

// truncate keeps an Event's note within what the apiserver takes (1 KiB).
func truncate(s string) string {
	if len(s) > 1000 {
		return s[:997] + "..."
	}
	return s
}
