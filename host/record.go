package host

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"io"
	"maps"
	"slices"
	"sort"
	"strings"
	"sync"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/tools/cache"

	"github.com/informer-host/informer-host/abi"
	"github.com/informer-host/informer-host/event"
	"github.com/informer-host/informer-host/host/internal/engine"
	"github.com/informer-host/informer-host/host/replay"
	"github.com/informer-host/informer-host/internal/config"
	"github.com/informer-host/informer-host/internal/controllerwrites"
)

// Recorder writes, for each plugin, the event stream it receives in a
// host, after its filters and the host's delivery rules, as an events file
// (abi/REPLAY.md) that informer-host replay feeds to the plugin again:
// every ih_handle call's event with the result the plugin gave, every
// ih_synced, and the changes of the caches the plugin may read, in the
// order they happened, each event with the header flags the plugin was
// given (its own writes' self-write flag included). A delivery repeated
// because the plugin said retry is written once (the replay retries it
// itself). What the plugin's writes, Events and HTTP calls were answered
// is kept too, and WriteStubs writes it as the stub file the replay
// answers them from.
//
// Event lines are written as the plugin's call returns, each after the
// cache lines that bring the recording's cache to the informer's then
// (syncCache), except the results of the plugin's own writes in that
// call, which follow its event line: the plugin read the cache before it
// wrote, and a replay whose cache held what it wrote would not write it
// again. The writes of a call no line stands for (ih_init, a call
// Resource leaves out, a cut one) are cache the next event reads.
// Someone else's change that lands while a call runs is written before
// that call's event, so a plugin whose reads race the informer may read
// in the replay a cache a little newer than it read live. A batch call's
// writes and stubs all go with its first event.
type Recorder struct {
	// Resource, when set, records the events of that resource only
	// (cache lines are kept: the plugin's reads need them).
	Resource string
	// KeepSecretData writes Secrets as they are. By default Write blanks
	// every value of a Secret's data and stringData, in event objects,
	// old objects and cache lines alike, and in its
	// kubectl.kubernetes.io/last-applied-configuration annotation (which
	// holds them too): an events file is shared and kept, and a plugin's
	// replay rarely needs the values, only the keys.
	KeepSecretData bool

	p       recordedCaches // the pipeline, set by NewRecording
	mu      sync.Mutex
	streams map[string]*recStream // by plugin file name
}

// recordedCaches is what a Recorder reads of the informer's stores
// (*informer.Pipeline).
type recordedCaches interface {
	CacheList(resource, namespace string, sel labels.Selector, f func(*unstructured.Unstructured))
	CacheGet(resource, namespace, name string) (*unstructured.Unstructured, bool)
	Ref(name string) (*event.ResourceRef, bool)
}

type recStream struct {
	head    replay.Head
	lines   []replay.Line
	pending map[string]bool // events answered retry, not yet answered otherwise
	// answers are what the plugin's capabilities II calls got: the
	// stubs its replay answers them with.
	answers *replay.Cassette
	// known holds, per cached resource, the resourceVersion of each
	// object as the recording's cache lines have it.
	known map[string]map[string]string
	// own holds what the plugin's writes since its last event line did:
	// for each object written, the resourceVersions the writes returned
	// and whether one was a delete. syncCache holds every change these
	// writes may have made until after that event line: the plugin read
	// the cache as it was before it wrote, and a replay whose cache
	// already held its writes' results would not make them.
	own map[ownWrite]*ownVersions
}

// ownWrite is an object a plugin wrote: its resource as group/resource
// (ownTarget), and its store key.
type ownWrite struct{ target, key string }

type ownVersions struct {
	rvs map[string]bool
	// deleted: the object's next state is the delete's (gone, or, with
	// finalizers, updated with a deletionTimestamp), and a delete
	// returns no resourceVersion to know it by.
	deleted bool
	// child: the host applied or pruned the object as a child in the
	// call (children_apply), which returns no resourceVersions to know
	// the results by: any state of it is the call's.
	child bool
	// before is the object as the cache held it when the call first
	// wrote it (nil: absent), the state the plugin read: the cache lines
	// before the call's line hold it when they hold no later state (one
	// that someone else's change that landed before the write, a Pod
	// made by its controller, say, is in the store but masked by the
	// write's result).
	before *unstructured.Unstructured
}

// holds reports whether the store's state rv of a written object
// (seen: present) is the result of the call's writes.
func (v *ownVersions) holds(rv string, seen bool) bool {
	return v.deleted || !seen || v.rvs[rv]
}

// ownTarget names a write's or a cached resource's objects alike: a
// write names its target by a configured name or group/version/resource
// (ABI.md 17.1), and two configured resources (two selectors) may be
// one group/resource. A name that does not resolve stays itself.
func ownTarget(p recordedCaches, name string) string {
	if gvr, ok := config.ParseGVR(name); ok {
		return gvr.Group + "/" + gvr.Resource
	}
	if ref, ok := p.Ref(name); ok && ref != nil {
		return ref.Group + "/" + ref.Resource
	}
	return "name:" + name
}

func (r *Recorder) stream(plugin string) *recStream {
	if r.streams == nil {
		r.streams = map[string]*recStream{}
	}
	s := r.streams[plugin]
	if s == nil {
		s = &recStream{head: replay.Head{Plugin: plugin, Resources: map[string]replay.Resource{}}, pending: map[string]bool{}, known: map[string]map[string]string{},
			answers: &replay.Cassette{}, own: map[ownWrite]*ownVersions{}}
		r.streams[plugin] = s
	}
	return s
}

func (s *recStream) ref(ref *event.ResourceRef) {
	if ref != nil {
		s.head.Resources[ref.Name] = replay.ResourceOf(ref)
	}
}

// recordingHooks is what a recording host tells its Recorder.
type recordingHooks interface {
	// handled is told of every call into a plugin's ih_handle, with the
	// header flags only that plugin saw (abi.FlagSelfWrite), and its
	// outcome, and of every ih_synced call (an event with only a
	// Resource).
	handled(plugin string, ev *event.Event, pluginFlags uint8, res engine.Result, err error)
	// capabilities wraps the capabilities of each instance of plugin
	// before it starts.
	capabilities(plugin string, o *engine.InstanceOptions)
	// unrecorded is told when a call into plugin ends that handled is
	// not told of: ih_init (replayed: the replay makes it too), or a call
	// the stop or a fence cut.
	unrecorded(plugin string, replayed bool)
	// reconciling is told of an ih_reconcile call of plugin about to be
	// made, for the key namespace/name of ref with the primary obj (nil:
	// absent) and the header flags; it returns the ControllerCall to give
	// the plugin (call, recorded) and done, to be told of the call's end
	// (cut: the stop or a fence cut it, and no line stands for it).
	reconciling(plugin string, ref *event.ResourceRef, namespace, name string, obj *unstructured.Unstructured, flags uint8,
		call engine.ControllerCall) (ctl engine.ControllerCall, done func(res engine.Result, err error, cut bool))
}

// recordReconcile is rec's reconciling, or call itself and a done that
// does nothing when the host records nothing.
func recordReconcile(rec recordingHooks, plugin string, ref *event.ResourceRef, namespace, name string, obj *unstructured.Unstructured,
	flags uint8, call engine.ControllerCall) (engine.ControllerCall, func(res engine.Result, err error, cut bool)) {
	if rec == nil {
		return call, func(engine.Result, error, bool) {}
	}
	return rec.reconciling(plugin, ref, namespace, name, obj, flags, call)
}

// capabilities records, as the plugin's stubs, what its capabilities II
// calls are answered, and notes what its writes leave in the cluster
// (recStream.own).
func (r *Recorder) capabilities(plugin string, o *engine.InstanceOptions) {
	r.mu.Lock()
	c := r.stream(plugin).answers
	r.mu.Unlock()
	c.Wrap(o)
	if o.Writes != nil {
		o.Writes = ownWrites{next: o.Writes, r: r, plugin: plugin}
	}
}

// ownWrites notes each successful write of a plugin in its stream's own.
type ownWrites struct {
	next   engine.ClusterWriter
	r      *Recorder
	plugin string
}

func (w ownWrites) Check(req *engine.WriteRequest) (int32, string) { return w.next.Check(req) }

func (w ownWrites) Do(ctx context.Context, req *engine.WriteRequest) (map[string]any, int32, string) {
	before, found := w.r.cached(w.plugin, string(req.Resource), string(req.Namespace), string(req.Name))
	obj, code, msg := w.next.Do(ctx, req)
	if code != 0 {
		return obj, code, msg
	}
	// The returned object names what was written (a create may have
	// had only a generateName); a delete returns none.
	ns, name, rv := string(req.Namespace), string(req.Name), ""
	if req.Op != abi.WriteDelete && obj != nil {
		u := unstructured.Unstructured{Object: obj}
		ns, name, rv = u.GetNamespace(), u.GetName(), u.GetResourceVersion()
	}
	k := ownWrite{ownTarget(w.r.p, string(req.Resource)), cache.NewObjectName(ns, name).String()}
	w.r.mu.Lock()
	defer w.r.mu.Unlock()
	own := w.r.stream(w.plugin).own
	v := own[k]
	if v == nil {
		v = &ownVersions{rvs: map[string]bool{}}
		if found && k.key == storeKey(before) {
			v.before = before
		}
		own[k] = v
	}
	if req.Op == abi.WriteDelete {
		v.deleted = true
	} else if rv != "" {
		v.rvs[rv] = true
	}
	return obj, code, msg
}

// cached returns the object a write of plugin's names as a cache it may
// read holds it before the write (found false: none holds it, or the
// write names no object yet, a create by generateName).
func (r *Recorder) cached(plugin, resource, namespace, name string) (*unstructured.Unstructured, bool) {
	if name == "" {
		return nil, false
	}
	target := ownTarget(r.p, resource)
	r.mu.Lock()
	var caches []string
	if s := r.streams[plugin]; s != nil {
		caches = slices.Clone(s.head.Cache)
	}
	r.mu.Unlock()
	for _, res := range caches {
		if ownTarget(r.p, res) == target {
			if obj, ok := r.p.CacheGet(res, namespace, name); ok {
				return obj, true
			}
		}
	}
	return nil, false
}

// wrote returns what the plugin's writes since its last event did to the
// cached resource res, by store key.
func (r *Recorder) wrote(s *recStream, res string) map[string]*ownVersions {
	var out map[string]*ownVersions
	target := ownTarget(r.p, res)
	for w, v := range s.own {
		if w.target != target {
			continue
		}
		if out == nil {
			out = map[string]*ownVersions{}
		}
		out[w.key] = v
	}
	return out
}

// unrecorded is told of a plugin's call no event line follows: ih_init,
// or a call the stop or a fence cut. Its writes' results are cache for
// the next recorded event, which would otherwise take them as its own;
// its stubs are kept if the replay makes it too (replayed).
func (r *Recorder) unrecorded(plugin string, replayed bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if s := r.streams[plugin]; s != nil {
		clear(s.own)
		s.answers.Settle(replayed, false)
	}
}

func (r *Recorder) handled(plugin string, ev *event.Event, pluginFlags uint8, res engine.Result, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.Resource != "" && ev.Resource != nil && ev.Resource.Name != r.Resource {
		// Not recorded, but what the call wrote is in the cache the next
		// recorded event reads.
		if s := r.streams[plugin]; s != nil {
			clear(s.own)
			s.answers.Settle(false, false)
		}
		return
	}
	s := r.stream(plugin)
	s.ref(ev.Resource)
	r.syncCache(s)
	// The next sync, before the next event, takes what this call wrote.
	clear(s.own)
	if ev.Object == nil {
		s.answers.Settle(true, false)
		s.lines = append(s.lines, replay.Line{Type: replay.LineSynced, Resource: ev.Resource.Name})
		return
	}
	result := resultOf(res, err)
	k := ev.Type.String() + " " + ev.Resource.Name + " " + ev.Key() + " " + ev.Object.GetResourceVersion()
	if s.pending[k] {
		s.answers.Settle(true, true)
		if err != nil || res.Code != engine.CodeRetry {
			delete(s.pending, k)
		}
		return
	}
	s.answers.Settle(true, false)
	if err == nil && res.Code == engine.CodeRetry {
		s.pending[k] = true
	}
	s.lines = append(s.lines, replay.EventLine(ev, pluginFlags, result))
}

// resultOf is a call's outcome as a line's result: the plugin's answer,
// or the kind of the failure.
func resultOf(res engine.Result, err error) string {
	if err == nil {
		return res.Code.String()
	}
	var f *engine.Failure
	if errors.As(err, &f) {
		return f.Kind.String()
	}
	return "error"
}

// reconciling records an ih_reconcile call: what its children_apply and
// status_apply are answered goes into the plugin's stubs, the children
// the host applies and prunes in it are its own writes (held out of the
// cache lines until after its line), and done writes its line.
func (r *Recorder) reconciling(plugin string, ref *event.ResourceRef, namespace, name string, obj *unstructured.Unstructured, flags uint8,
	call engine.ControllerCall) (engine.ControllerCall, func(engine.Result, error, bool)) {
	r.mu.Lock()
	c := r.stream(plugin).answers
	r.mu.Unlock()
	cc := c.Controller(ref.Name, namespace, name, call)
	ctl := ownChildren{CassetteController: cc, r: r, plugin: plugin, primary: ref, namespace: namespace, name: name}
	return ctl, func(res engine.Result, err error, cut bool) {
		if cut {
			r.unrecorded(plugin, false)
			return
		}
		children, status, requeue := cc.Given()
		r.mu.Lock()
		defer r.mu.Unlock()
		if r.Resource != "" && ref.Name != r.Resource {
			if s := r.streams[plugin]; s != nil {
				clear(s.own)
				s.answers.Settle(false, false)
			}
			return
		}
		s := r.stream(plugin)
		s.ref(ref)
		r.syncCache(s)
		clear(s.own)
		s.answers.Settle(true, false)
		s.lines = append(s.lines, replay.ReconcileLine(ref, namespace, name, obj, flags, children, status, requeue, resultOf(res, err)))
	}
}

// ownChildren notes, before a children_apply goes to the host, every
// cached object it may change: each child of the set, and each child the
// host applied for the key before (it may be pruned). The apply returns
// no resourceVersions, so any state of them until the call's line is
// taken as the call's.
type ownChildren struct {
	*replay.CassetteController
	r               *Recorder
	plugin          string
	primary         *event.ResourceRef
	namespace, name string
}

func (o ownChildren) ApplyChildren(ctx context.Context, body []byte) (int32, int32, string) {
	o.r.noteChildren(o.plugin, o.primary, o.namespace, o.name, body)
	return o.CassetteController.ApplyChildren(ctx, body)
}

func (r *Recorder) noteChildren(plugin string, primary *event.ResourceRef, namespace, name string, body []byte) {
	var children []map[string]any
	_ = json.Unmarshal(body, &children)
	r.mu.Lock()
	defer r.mu.Unlock()
	s := r.stream(plugin)
	// The first children_apply of a call finds the state the plugin
	// read; a later one would find the earlier one's results.
	note := func(res, key string, obj *unstructured.Unstructured) {
		k := ownWrite{ownTarget(r.p, res), key}
		if v := s.own[k]; v == nil {
			s.own[k] = &ownVersions{rvs: map[string]bool{}, child: true, before: obj}
		} else {
			v.child = true // before: what the call's first write found
		}
	}
	mine := labels.SelectorFromSet(labels.Set{controllerwrites.LabelPlugin: controllerwrites.PluginLabel(plugin)})
	for _, res := range s.head.Cache {
		ref, ok := r.p.Ref(res)
		if !ok || ref == nil {
			continue
		}
		for _, c := range children {
			u := unstructured.Unstructured{Object: c}
			if u.GroupVersionKind().Group == ref.Group && u.GetKind() == ref.Kind {
				ns := cmp.Or(u.GetNamespace(), namespace)
				obj, _ := r.p.CacheGet(res, ns, u.GetName())
				note(res, cache.NewObjectName(ns, u.GetName()).String(), obj)
			}
		}
		r.p.CacheList(res, "", mine, func(u *unstructured.Unstructured) {
			o, ok := controllerwrites.ParseOwner(u.GetAnnotations()[controllerwrites.AnnotationOwner])
			if ok && o.Resource.Resource == primary.Resource && o.Resource.Group == primary.Group && o.Namespace == namespace && o.Name == name {
				note(res, storeKey(u), u)
			}
		})
	}
}

// syncCache appends to s the changes of the caches it may read since the
// last event: each granted resource's store is compared with what the
// recording's cache lines hold. It runs as each call is observed, so the
// cache lines before an event line are the cache when the call returned,
// less what the plugin's own writes in that call left there (s.own),
// which the next sync takes: the cache during the call, unless someone
// else changed it meanwhile. It walks every granted store once per
// event: a recording tool's cost.
func (r *Recorder) syncCache(s *recStream) {
	for _, res := range s.head.Cache {
		known := s.known[res]
		if known == nil {
			known = map[string]string{}
			s.known[res] = known
		}
		ref, resolved := r.p.Ref(res)
		if resolved {
			s.ref(ref)
		} else if _, ok := s.head.Resources[res]; !ok {
			s.head.Resources[res] = replay.Resource{}
		}
		wrote := r.wrote(s, res)
		seen, current := map[string]bool{}, map[string]bool{}
		put := func(k string, u *unstructured.Unstructured) {
			seen[k] = true
			if rv := u.GetResourceVersion(); known[k] != rv || rv == "" {
				known[k] = rv
				s.lines = append(s.lines, replay.Line{Type: replay.LineCache, Resource: res, Object: u.Object})
			}
		}
		r.p.CacheList(res, "", labels.Everything(), func(u *unstructured.Unstructured) {
			k := storeKey(u)
			if w := wrote[k]; w != nil && (w.child || w.holds(u.GetResourceVersion(), true)) {
				// The call's own write: after its event line. What the
				// call found stands here instead (below).
				seen[k] = !w.child
				return
			}
			current[k] = true
			put(k, u)
		})
		for _, k := range slices.Sorted(maps.Keys(wrote)) {
			if w := wrote[k]; w.before != nil && !current[k] {
				put(k, w.before)
			}
		}
		var gone []string
		for k := range known {
			if w := wrote[k]; !seen[k] && (w == nil || w.child || !w.holds("", false)) {
				gone = append(gone, k)
			}
		}
		sort.Strings(gone)
		for _, k := range gone {
			delete(known, k)
			ns, name := splitKey(k)
			s.lines = append(s.lines, replay.Line{Type: replay.LineCacheDelete, Resource: res, Namespace: ns, Name: name})
		}
	}
}

func splitKey(k string) (ns, name string) {
	if i := strings.IndexByte(k, '/'); i >= 0 {
		return k[:i], k[i+1:]
	}
	return "", k
}

// NewRecording returns a host whose plugins' event streams r records.
// Call Watch(plugin) for each plugin file before LoadDir, so that the
// caches it may read are recorded from their first object.
func NewRecording(ctx context.Context, opts Options, r *Recorder) (*Host, error) {
	opts.recording = r
	r.p = opts.Pipeline
	return New(ctx, opts)
}

// Watch starts recording, for plugin (a file name in the plugin
// directory), the caches its settings grant it. Call it before the plugin
// loads.
func (r *Recorder) Watch(h *Host, plugin string) error {
	s := h.config().SettingsFor(plugin)
	r.mu.Lock()
	defer r.mu.Unlock()
	st := r.stream(plugin)
	for _, g := range s.Grants.Cache {
		st.head.Cache = append(st.head.Cache, g.Resource)
	}
	return nil
}

// Plugins returns the plugins with a stream.
func (r *Recorder) Plugins() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for p := range r.streams {
		out = append(out, p)
	}
	return out
}

// CapabilityCalls returns how many capabilities II calls (writes,
// Events, HTTP) plugin made in the calls its replay makes too: the stubs
// WriteStubs writes.
func (r *Recorder) CapabilityCalls(plugin string) int {
	r.mu.Lock()
	c := r.stream(plugin).answers
	r.mu.Unlock()
	return len(c.Stubs())
}

// WriteStubs writes what plugin's capabilities II calls were answered as
// the stub file (abi/REPLAY.md) its replay reads with --stubs: with it,
// the replay of the recording gets every answer the live run got, the
// resourceVersions its writes returned included. The file holds the
// objects the writes returned, Secrets' values blanked unless
// KeepSecretData.
func (r *Recorder) WriteStubs(plugin string, w io.Writer) error {
	r.mu.Lock()
	c := r.stream(plugin).answers
	r.mu.Unlock()
	stubs := c.Stubs()
	if !r.KeepSecretData {
		for i := range stubs {
			stubs[i].Response = redactResponse(stubs[i].Response)
		}
	}
	return replay.WriteStubs(w, stubs)
}

// redactResponse blanks the values of a Secret a write returned.
func redactResponse(raw json.RawMessage) json.RawMessage {
	var obj map[string]any
	if json.Unmarshal(raw, &obj) != nil || obj["apiVersion"] != "v1" || obj["kind"] != "Secret" {
		return raw
	}
	b, err := json.Marshal(redactSecret(obj))
	if err != nil {
		return raw
	}
	return b
}

// Stop is kept for symmetry with Watch: the recording needs no cleanup.
func (r *Recorder) Stop() {}

// Write writes plugin's stream as an events file.
func (r *Recorder) Write(plugin string, w io.Writer) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := r.stream(plugin)
	rw := replay.NewWriter(w)
	if err := rw.Head(s.head); err != nil {
		return err
	}
	for _, l := range s.lines {
		if !r.KeepSecretData {
			l = redactSecrets(s.head.Resources[l.Resource], l)
			l.Children = replay.RedactChildren(l.Children)
		}
		if err := rw.Line(l); err != nil {
			return err
		}
	}
	return rw.Flush()
}

// lastApplied is the annotation kubectl apply keeps the applied object
// in, Secret values included.
const lastApplied = replay.LastApplied

// redactSecrets returns l with its objects' Secret values blanked
// (redactSecret), when they are Secrets: by the resource l names (core
// secrets) or by the object's own apiVersion and kind.
func redactSecrets(res replay.Resource, l replay.Line) replay.Line {
	bySecrets := res.Group == "" && (res.Resource == "secrets" || res.Kind == "Secret")
	for _, obj := range []*map[string]any{&l.Object, &l.OldObject} {
		if *obj != nil && (bySecrets || (*obj)["apiVersion"] == "v1" && (*obj)["kind"] == "Secret") {
			*obj = redactSecret(*obj)
		}
	}
	return l
}

// redactSecret is replay.RedactSecret.
func redactSecret(obj map[string]any) map[string]any { return replay.RedactSecret(obj) }
