package reconcile

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/google/cel-go/cel"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/informer-host/informer-host/event"
	"github.com/informer-host/informer-host/internal/config"
	"github.com/informer-host/informer-host/internal/filter"
)

// OwnerAnnotation is the annotation the host puts on every child it
// applies for a primary, "<resource>/<namespace>/<name>/<uid>" of the
// primary: it names the primary where no ownerReference can (a child in
// another namespace than its primary).
const OwnerAnnotation = "controller.informer-host.io/owner"

// Mapper maps the events of a controller plugin's bindings to the
// primary keys they enqueue. It is safe for concurrent use: listeners of
// different bindings call Map from their own goroutines.
type Mapper struct {
	primary           *event.ResourceRef
	clusterScoped     bool
	filter            *filter.Filter // nil: every primary is admitted
	generationChanged bool
	owns              map[string]bool
	watches           map[string][]*watch // by resource
	refs              []*watch            // the referencedBy watches
	resources         []string
}

// watch is one compiled config.Watch.
type watch struct {
	label, annotation string
	field             *filter.FieldPath
	keys              *keysExpr   // map, or referencedBy over the primary
	index             *referenced // referencedBy only
}

// MapperOption changes how NewMapper builds a Mapper.
type MapperOption func(*Mapper)

// PrimaryClusterScoped says the primary resource is cluster-scoped, so
// its keys have no namespace whatever the namespace of the objects that
// name them. Without it a controller ownerReference on a namespaced child
// names a primary in the child's namespace, as Kubernetes requires of
// namespaced owners.
func PrimaryClusterScoped() MapperOption {
	return func(m *Mapper) { m.clusterScoped = true }
}

// NewMapper compiles c for the primary resource primary (c.For resolved:
// its config name, group, version and kind). Its errors name the
// offending field (filter, watches[i].map, …) and CEL's message; they are
// all reported together.
func NewMapper(c *config.Controller, primary *event.ResourceRef, opts ...MapperOption) (*Mapper, error) {
	if c == nil || primary == nil {
		return nil, errors.New("reconcile: NewMapper needs a controller block and its resolved primary resource")
	}
	m := &Mapper{
		primary:           primary,
		generationChanged: c.GenerationChanged,
		owns:              make(map[string]bool, len(c.Owns)),
		watches:           make(map[string][]*watch, len(c.Watches)),
	}
	for _, o := range opts {
		o(m)
	}
	seen := map[string]bool{}
	addResource := func(r string) {
		if !seen[r] {
			seen[r] = true
			m.resources = append(m.resources, r)
		}
	}
	addResource(primary.Name)

	var errs []error
	if c.Filter != "" {
		f, err := filter.Compile(filter.Spec{Expression: c.Filter}, filter.Options{})
		var probs filter.Errors
		if errors.As(err, &probs) && len(probs) == 1 {
			errs = append(errs, fmt.Errorf("controller.filter: %s", probs[0].Message))
		} else if err != nil {
			errs = append(errs, fmt.Errorf("controller.filter: %w", err))
		}
		m.filter = f
	}
	for _, o := range c.Owns {
		m.owns[o] = true
		addResource(o)
	}
	env, err := newKeysEnv()
	if err != nil {
		return nil, fmt.Errorf("reconcile: building the CEL environment: %w", err)
	}
	for i, w := range c.Watches {
		field := fmt.Sprintf("controller.watches[%d]", i)
		cw, err := compileWatch(env, field, w)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		m.watches[w.Resource] = append(m.watches[w.Resource], cw)
		if cw.index != nil {
			m.refs = append(m.refs, cw)
		}
		addResource(w.Resource)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return m, nil
}

// compileWatch checks that w sets exactly one mapping and compiles it.
func compileWatch(env *cel.Env, field string, w config.Watch) (*watch, error) {
	var set []string
	for _, f := range []struct{ name, v string }{
		{"label", w.Label}, {"annotation", w.Annotation}, {"field", w.Field}, {"map", w.Map}, {"referencedBy", w.ReferencedBy},
	} {
		if f.v != "" {
			set = append(set, f.name)
		}
	}
	if len(set) != 1 {
		const one = "set exactly one of label, annotation, field, map and referencedBy"
		if len(set) == 0 {
			return nil, fmt.Errorf("%s (resource %q): %s, none is set", field, w.Resource, one)
		}
		return nil, fmt.Errorf("%s (resource %q): %s, not %d (%s)", field, w.Resource, one, len(set), strings.Join(set, ", "))
	}
	cw := &watch{label: w.Label, annotation: w.Annotation}
	var err error
	switch {
	case w.Field != "":
		if cw.field, err = filter.ParseFieldPath(w.Field); err != nil {
			return nil, fmt.Errorf("%s.field: %w", field, err)
		}
	case w.Map != "":
		cw.keys, err = compileKeys(env, field+".map", w.Map)
	case w.ReferencedBy != "":
		cw.keys, err = compileKeys(env, field+".referencedBy", w.ReferencedBy)
		cw.index = newReferenced()
	}
	if err != nil {
		return nil, err
	}
	return cw, nil
}

// Resources returns the config resource names the controller binds to:
// its primary, then owns, then watches, each once.
func (m *Mapper) Resources() []string {
	return append([]string(nil), m.resources...)
}

// Admits reports whether the primary object obj passes the controller's
// filter (true when there is none). The loop asks it before reconciling
// a key, whatever enqueued it; an absent primary is reconciled without
// asking. An evaluation error admits the object (binding filters' default,
// onError: open) and is returned for the caller to log.
func (m *Mapper) Admits(obj *unstructured.Unstructured) (bool, error) {
	if m.filter == nil || obj == nil {
		return true, nil
	}
	d := m.filter.Decide(&event.Event{Type: event.EventAdd, Resource: m.primary, Object: obj})
	return d.Deliver, d.Err
}

// Map returns the primaries an event on an object of binding resource (a
// config resource name) enqueues, without duplicates: for the primary
// resource the object itself, for owned ones the primary named by the
// controller ownerReference or OwnerAnnotation, for watched ones what the
// watch names. An update maps both its old and its new object, so an
// object that moves from one primary to another enqueues both. Events of
// the primary resource also keep the referencedBy index up to date.
//
// The error joins the CEL evaluation errors and unreadable keys met on
// the way, each naming its watch and object; the requests are those that
// could be mapped regardless, so the caller logs (and counts) the error
// and enqueues the requests.
func (m *Mapper) Map(resource string, ev *event.Event) ([]Request, error) {
	if ev == nil || ev.Object == nil {
		return nil, nil
	}
	var out requests
	var errs []error
	objs := []*unstructured.Unstructured{ev.Object}
	if ev.Type == event.EventUpdate && ev.OldObject != nil {
		objs = append(objs, ev.OldObject)
	}
	if resource == m.primary.Name {
		errs = append(errs, m.index(ev)...)
		ok, err := m.mapsPrimary(ev)
		if ok {
			out.add(Request{Namespace: ev.Object.GetNamespace(), Name: ev.Object.GetName()})
		}
		errs = append(errs, err)
	}
	if m.owns[resource] {
		for _, o := range objs {
			if r, ok := m.owner(o); ok {
				out.add(r)
			}
			if r, ok := m.ownerAnnotation(o); ok {
				out.add(r)
			}
		}
	}
	for _, w := range m.watches[resource] {
		for _, o := range objs {
			errs = append(errs, w.mapObject(o, &out))
		}
	}
	return out.list, errors.Join(errs...)
}

// mapsPrimary says whether an event of the primary resource enqueues the
// object itself: a delete does (an absent key is reconciled, the filter
// notwithstanding) unless it only says the object moved to another
// member of a sharding group, which reconciles it there; an add or update
// does when the object passes the filter and, with generationChanged, an
// update only when it changed metadata.generation or started the
// object's deletion.
func (m *Mapper) mapsPrimary(ev *event.Event) (bool, error) {
	if ev.Type == event.EventDelete {
		return !ev.HandedOver, nil
	}
	if ev.Type == event.EventUpdate && m.generationChanged && ev.OldObject != nil &&
		ev.OldObject.GetGeneration() == ev.Object.GetGeneration() &&
		(ev.OldObject.GetDeletionTimestamp() != nil || ev.Object.GetDeletionTimestamp() == nil) {
		return false, nil
	}
	return m.Admits(ev.Object)
}

// owner returns the primary a child's controller ownerReference names,
// if it is of the primary's group and kind (the version may differ: an
// owner is the same object in every version).
func (m *Mapper) owner(obj *unstructured.Unstructured) (Request, bool) {
	ref := metav1.GetControllerOfNoCopy(obj)
	if ref == nil || ref.Kind != m.primary.Kind || ref.Name == "" {
		return Request{}, false
	}
	gv, err := schema.ParseGroupVersion(ref.APIVersion)
	if err != nil || gv.Group != m.primary.Group {
		return Request{}, false
	}
	if m.clusterScoped {
		return Request{Name: ref.Name}, true
	}
	return Request{Namespace: obj.GetNamespace(), Name: ref.Name}, true
}

// ownerAnnotation returns the primary OwnerAnnotation names, if it names
// one of the primary resource. The resource part is matched against the
// primary's config name, its plural and plural.group, so the annotation
// may be written with any of them.
func (m *Mapper) ownerAnnotation(obj *unstructured.Unstructured) (Request, bool) {
	v, ok := obj.GetAnnotations()[OwnerAnnotation]
	if !ok {
		return Request{}, false
	}
	parts := strings.Split(v, "/")
	if len(parts) != 4 || parts[2] == "" {
		return Request{}, false
	}
	res := parts[0]
	p := m.primary
	if res != p.Name && res != p.Resource && (p.Group == "" || res != p.Resource+"."+p.Group) {
		return Request{}, false
	}
	return Request{Namespace: parts[1], Name: parts[2]}, true
}

// mapObject adds the primaries w maps obj to.
func (w *watch) mapObject(obj *unstructured.Unstructured, out *requests) error {
	switch {
	case w.label != "":
		if v, ok := obj.GetLabels()[w.label]; ok {
			return out.addKey(v, obj.GetNamespace(), "label "+w.label, obj)
		}
	case w.annotation != "":
		if v, ok := obj.GetAnnotations()[w.annotation]; ok {
			return out.addKey(v, obj.GetNamespace(), "annotation "+w.annotation, obj)
		}
	case w.field != nil:
		v, ok := w.field.Lookup(obj.Object)
		if !ok || v == nil {
			return nil
		}
		s, isString := v.(string)
		if !isString {
			return fmt.Errorf("watch field %s on %s: holds a %T, not a key (string)", w.field.String(), objectKey(obj), v)
		}
		return out.addKey(s, obj.GetNamespace(), "field "+w.field.String(), obj)
	case w.index != nil:
		for _, r := range w.index.primaries(obj.GetNamespace(), obj.GetName()) {
			out.add(r)
		}
	case w.keys != nil:
		keys, err := w.keys.eval(obj)
		var errs []error
		for _, k := range keys {
			errs = append(errs, out.addKey(k, obj.GetNamespace(), w.keys.field, obj))
		}
		return errors.Join(append(errs, err)...)
	}
	return nil
}

// index updates the referencedBy indexes from an event of the primary
// resource.
func (m *Mapper) index(ev *event.Event) []error {
	if len(m.refs) == 0 {
		return nil
	}
	p := Request{Namespace: ev.Object.GetNamespace(), Name: ev.Object.GetName()}
	var errs []error
	for _, w := range m.refs {
		if ev.Type == event.EventDelete {
			w.index.set(p, nil)
			continue
		}
		keys, err := w.keys.eval(ev.Object)
		if err != nil {
			// Keep what the primary referred to before: enqueueing it once
			// too often is better than missing a change it depends on.
			errs = append(errs, err)
			continue
		}
		refs := make([]Request, 0, len(keys))
		for _, k := range keys {
			r, ok := parseKey(k, p.Namespace)
			if !ok {
				errs = append(errs, fmt.Errorf("%s on %s: %q is not a key (\"namespace/name\" or \"name\")", w.keys.field, objectKey(ev.Object), k))
				continue
			}
			refs = append(refs, r)
		}
		w.index.set(p, refs)
	}
	return errs
}

// referenced is a referencedBy watch's index: which primaries refer to
// each watched key. It holds what the primaries' expressions returned and
// nothing else, so it is as large as those references.
type referenced struct {
	mu        sync.Mutex
	byWatched map[Request]map[Request]struct{}
	byPrimary map[Request][]Request
}

func newReferenced() *referenced {
	return &referenced{byWatched: map[Request]map[Request]struct{}{}, byPrimary: map[Request][]Request{}}
}

// set replaces what primary p refers to (nil: nothing; it is gone).
func (x *referenced) set(p Request, refs []Request) {
	x.mu.Lock()
	defer x.mu.Unlock()
	for _, w := range x.byPrimary[p] {
		if ps := x.byWatched[w]; ps != nil {
			delete(ps, p)
			if len(ps) == 0 {
				delete(x.byWatched, w)
			}
		}
	}
	delete(x.byPrimary, p)
	if len(refs) == 0 {
		return
	}
	kept := refs[:0]
	for _, w := range refs {
		ps := x.byWatched[w]
		if ps == nil {
			ps = map[Request]struct{}{}
			x.byWatched[w] = ps
		}
		if _, dup := ps[p]; !dup {
			ps[p] = struct{}{}
			kept = append(kept, w)
		}
	}
	x.byPrimary[p] = kept
}

// primaries returns the primaries referring to the watched object
// namespace/name.
func (x *referenced) primaries(namespace, name string) []Request {
	x.mu.Lock()
	defer x.mu.Unlock()
	ps := x.byWatched[Request{Namespace: namespace, Name: name}]
	out := make([]Request, 0, len(ps))
	for p := range ps {
		out = append(out, p)
	}
	return out
}

// parseKey reads "namespace/name" or "name" (in namespace ns).
func parseKey(k, ns string) (Request, bool) {
	if k == "" {
		return Request{}, false
	}
	before, after, found := strings.Cut(k, "/")
	if !found {
		return Request{Namespace: ns, Name: k}, true
	}
	if before == "" || after == "" || strings.Contains(after, "/") {
		return Request{}, false
	}
	return Request{Namespace: before, Name: after}, true
}

// requests collects a Map's answer, each key once, in the order found.
type requests struct {
	list []Request
	seen map[Request]struct{} // made once the list is long enough to need it
}

func (r *requests) add(q Request) {
	if r.seen == nil && len(r.list) >= 8 {
		r.seen = make(map[Request]struct{}, 2*len(r.list))
		for _, have := range r.list {
			r.seen[have] = struct{}{}
		}
	}
	if r.seen != nil {
		if _, dup := r.seen[q]; dup {
			return
		}
		r.seen[q] = struct{}{}
	} else if slices.Contains(r.list, q) {
		return
	}
	r.list = append(r.list, q)
}

// addKey adds the primary a key read from obj names ("name" is in obj's
// namespace ns); what holds it is named in the error for a malformed key.
func (r *requests) addKey(k, ns, what string, obj *unstructured.Unstructured) error {
	if k == "" {
		return nil
	}
	q, ok := parseKey(k, ns)
	if !ok {
		return fmt.Errorf("watch %s on %s: %q is not a key (\"namespace/name\" or \"name\")", what, objectKey(obj), k)
	}
	r.add(q)
	return nil
}
