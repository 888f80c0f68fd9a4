package controllerwrites

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/informer-host/informer-host/abi"
	"github.com/informer-host/informer-host/internal/kubewrite"
)

// child is one desired child, validated.
type child struct {
	res            *Resource
	kind, ns, name string
	obj            map[string]any
}

// childID identifies a child across the desired set and the caches.
type childID struct{ res, ns, name string }

// ApplyChildren applies the desired children (a JSON array) of the
// primary key and prunes the ones applied before that are not among
// them. primary is nil when the key is absent: then children must be
// empty, and every child applied for the key goes (PruneAll).
//
// Per-child failures come back in failed, never stopping the other
// children. err is for the call as a whole, and then nothing was
// written: ERR_INVALID (not a JSON array, a child without apiVersion,
// kind or metadata.name, a duplicate), ERR_DENIED (a child of a resource
// the controller does not own, or outside the plugin's write grant),
// ERR_ABSENT (children for an absent primary), ERR_CANCELED (the call
// was stopped; the children applied so far stand).
func (w *Writer) ApplyChildren(ctx context.Context, key Key, primary *unstructured.Unstructured, children []byte) (failed []ChildFailure, err error) {
	desired, err := w.parseChildren(key, children)
	if err != nil {
		return nil, err
	}
	if primary == nil {
		if len(desired) > 0 {
			return nil, &Error{abi.ErrAbsent, fmt.Sprintf("%s %s is absent: its children need an owner (answer an empty set, or none, for an absent key)",
				w.o.Primary.Kind, keyString(key))}
		}
		return w.PruneAll(ctx, key)
	}
	owner := Owner{Resource: w.primaryGR(), Namespace: key.Namespace, Name: key.Name, UID: string(primary.GetUID())}
	keep := make(map[childID]bool, len(desired))
	reqs := make([]*kubewrite.Request, len(desired))
	for i, c := range desired {
		keep[childID{c.res.Name, c.ns, c.name}] = true
		w.decorate(c, primary, owner)
		body, err := json.Marshal(c.obj)
		if err != nil {
			return nil, &Error{abi.ErrInvalid, fmt.Sprintf("child %d (%s %s/%s): %v", i, c.kind, c.ns, c.name, err)}
		}
		reqs[i] = &kubewrite.Request{Op: abi.WriteApply, Resource: c.res.Name, Namespace: c.ns, Name: c.name, Body: body, Force: true}
		// The grant decides for the whole set, before any write.
		if code, msg := w.o.Writes.Check(reqs[i]); code != 0 {
			return nil, &Error{code, fmt.Sprintf("child %d (%s %s/%s): %s", i, c.kind, c.ns, c.name, msg)}
		}
	}
	cached := w.cachedVersions(owner)
	for i, r := range reqs {
		id := childID{r.Resource, r.Namespace, r.Name}
		sum := sha256.Sum256(r.Body)
		if w.applied.current(id, sum, cached[id]) {
			continue
		}
		out, code, msg := w.o.Writes.Do(ctx, r)
		if code != 0 {
			w.applied.forget(id)
			if code == abi.ErrCanceled {
				return failed, &Error{code, msg}
			}
			failed = append(failed, childFailure(desired[i].kind, r.Namespace, r.Name, code, msg))
			continue
		}
		w.applied.record(id, sum, out)
	}
	more, err := w.prune(ctx, owner, keep)
	return append(failed, more...), err
}

// cachedVersions returns the resourceVersions of the cached children
// applied for owner's primary key, by child.
func (w *Writer) cachedVersions(owner Owner) map[childID]string {
	if w.o.Owned == nil {
		return nil
	}
	out := map[childID]string{}
	for i := range w.o.Owns {
		res := &w.o.Owns[i]
		for _, obj := range w.o.Owned.ListOwned(res.Name, owner.IndexKey()) {
			out[childID{res.Name, obj.GetNamespace(), obj.GetName()}] = obj.GetResourceVersion()
		}
	}
	return out
}

// PruneAll deletes every child applied for the key (whatever the uid of
// the primary it was applied for): its primary is gone. Failures come
// back one per child, as ApplyChildren's.
func (w *Writer) PruneAll(ctx context.Context, key Key) ([]ChildFailure, error) {
	return w.prune(ctx, Owner{Resource: w.primaryGR(), Namespace: key.Namespace, Name: key.Name}, nil)
}

// prune deletes the cached children of owner's primary key, applied by
// this plugin, that keep does not hold. A child applied for an earlier
// primary of the same name (another uid) is stale too. Each delete has
// the cached object's uid as precondition, so an object recreated under
// the same name meanwhile is judged on its own, when the cache has it.
func (w *Writer) prune(ctx context.Context, owner Owner, keep map[childID]bool) (failed []ChildFailure, err error) {
	if w.o.Owned == nil {
		return nil, nil
	}
	label := PluginLabel(w.o.Plugin)
	for i := range w.o.Owns {
		res := &w.o.Owns[i]
		for _, obj := range w.o.Owned.ListOwned(res.Name, owner.IndexKey()) {
			if obj.GetLabels()[LabelPlugin] != label {
				continue // another plugin's, or no controller's
			}
			o, ok := ParseOwner(obj.GetAnnotations()[AnnotationOwner])
			if !ok || o.IndexKey() != owner.IndexKey() {
				continue
			}
			if keep[childID{res.Name, obj.GetNamespace(), obj.GetName()}] {
				// Wanted: just applied, whatever uid the cache still shows.
				continue
			}
			r := &kubewrite.Request{Op: abi.WriteDelete, Resource: res.Name, Namespace: obj.GetNamespace(), Name: obj.GetName(), UID: string(obj.GetUID())}
			code, msg := w.o.Writes.Check(r)
			if code == 0 {
				_, code, msg = w.o.Writes.Do(ctx, r)
			}
			switch code {
			case 0, abi.ErrAbsent, abi.ErrConflict:
				w.applied.forget(childID{res.Name, obj.GetNamespace(), obj.GetName()})
				// Gone, or replaced by another object of that name: not
				// this one's to delete any more.
			case abi.ErrCanceled:
				return failed, &Error{code, msg}
			default:
				failed = append(failed, childFailure(obj.GetKind(), obj.GetNamespace(), obj.GetName(), code, "prune: "+msg))
			}
		}
	}
	return failed, nil
}

func childFailure(kind, ns, name string, code int32, msg string) ChildFailure {
	return ChildFailure{Kind: kind, Namespace: ns, Name: name, Err: &Error{code, msg}, Code: code}
}

// String is the failure's result_message line: "<kind> <ns>/<name>:
// <error>" ("<kind> <name>: <error>" for a cluster-scoped child).
func (f ChildFailure) String() string {
	return fmt.Sprintf("%s %s: %v", f.Kind, keyString(Key{f.Namespace, f.Name}), f.Err)
}

// parseChildren validates the whole set before anything is written (the
// grant is checked once the children are complete, in ApplyChildren).
func (w *Writer) parseChildren(key Key, body []byte) ([]*child, error) {
	invalid := func(format string, a ...any) error { return &Error{abi.ErrInvalid, fmt.Sprintf(format, a...)} }
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber() // int64 fields survive the round trip
	var items []any
	if err := dec.Decode(&items); err != nil || dec.More() {
		return nil, invalid("children must be one JSON array of objects, the complete set (e.g. [] for none): %v", err)
	}
	seen := map[childID]int{}
	out := make([]*child, 0, len(items))
	for i, it := range items {
		obj, ok := it.(map[string]any)
		if !ok {
			return nil, invalid("child %d is not a JSON object", i)
		}
		apiVersion, _ := obj["apiVersion"].(string)
		kind, _ := obj["kind"].(string)
		md, _ := obj["metadata"].(map[string]any)
		name, _ := md["name"].(string)
		var missing []string
		for _, f := range [][2]string{{"apiVersion", apiVersion}, {"kind", kind}, {"metadata.name", name}} {
			if f[1] == "" {
				missing = append(missing, f[0])
			}
		}
		if len(missing) > 0 {
			return nil, invalid("child %d needs %s (a string)", i, strings.Join(missing, " and "))
		}
		gv, err := schema.ParseGroupVersion(apiVersion)
		if err != nil {
			return nil, invalid("child %d (%s %s): apiVersion: %v", i, kind, name, err)
		}
		res := w.owned(gv.WithKind(kind))
		if res == nil {
			return nil, &Error{abi.ErrDenied, fmt.Sprintf("child %d (%s %s): %s %s is not among the controller's owned resources (%s): add its resource to controller.owns",
				i, kind, name, apiVersion, kind, w.ownsList())}
		}
		ns, given := md["namespace"].(string)
		switch {
		case !res.Namespaced && ns != "":
			return nil, invalid("child %d (%s %s): %s is cluster-scoped: remove metadata.namespace %q", i, kind, name, kind, ns)
		case !res.Namespaced:
		case !given || ns == "":
			if key.Namespace == "" {
				return nil, invalid("child %d (%s %s): needs metadata.namespace (the primary is cluster-scoped, so there is no namespace to default to)", i, kind, name)
			}
			ns = key.Namespace
			md["namespace"] = ns
		}
		if refs, _ := md["ownerReferences"].([]any); len(refs) > 0 {
			for _, r := range refs {
				if m, _ := r.(map[string]any); m["controller"] == true {
					return nil, invalid("child %d (%s %s): has a controller ownerReference; the host sets the controller reference to the primary itself: remove it", i, kind, name)
				}
			}
		}
		id := childID{res.Name, ns, name}
		if j, dup := seen[id]; dup {
			return nil, invalid("children %d and %d are the same object (%s %s/%s): give each once", j, i, kind, ns, name)
		}
		seen[id] = i
		out = append(out, &child{res: res, kind: kind, ns: ns, name: name, obj: obj})
	}
	return out, nil
}

// owned finds the owned resource of a child's group, version and kind.
func (w *Writer) owned(gvk schema.GroupVersionKind) *Resource {
	for i := range w.o.Owns {
		r := &w.o.Owns[i]
		if r.GVR.GroupVersion() == gvk.GroupVersion() && r.Kind == gvk.Kind {
			return r
		}
	}
	return nil
}

func (w *Writer) ownsList() string {
	var s []string
	for _, r := range w.o.Owns {
		s = append(s, r.Name+" = "+r.GVR.GroupVersion().String()+" "+r.Kind)
	}
	if len(s) == 0 {
		return "none"
	}
	return strings.Join(s, ", ")
}

// decorate adds the host's bookkeeping to a child: the plugin label, the
// owner annotation, and the controller ownerReference where Kubernetes
// allows one (a namespaced owner only for dependents of its namespace;
// a cluster-scoped owner for any). Across namespaces the annotation is
// the only link: pruning still finds the child, the garbage collector
// does not.
func (w *Writer) decorate(c *child, primary *unstructured.Unstructured, owner Owner) {
	md := c.obj["metadata"].(map[string]any)
	sub := func(f string) map[string]any {
		m, _ := md[f].(map[string]any)
		if m == nil {
			m = map[string]any{}
			md[f] = m
		}
		return m
	}
	sub("labels")[LabelPlugin] = PluginLabel(w.o.Plugin)
	sub("annotations")[AnnotationOwner] = owner.String()
	if w.o.Primary.Namespaced && (!c.res.Namespaced || c.ns != owner.Namespace) {
		return
	}
	apiVersion, kind := primary.GetAPIVersion(), primary.GetKind()
	if apiVersion == "" || kind == "" {
		apiVersion, kind = w.o.Primary.GVR.GroupVersion().String(), w.o.Primary.Kind
	}
	refs, _ := md["ownerReferences"].([]any)
	md["ownerReferences"] = append(refs, map[string]any{
		"apiVersion": apiVersion, "kind": kind, "name": owner.Name, "uid": owner.UID,
		"controller": true, "blockOwnerDeletion": true,
	})
}

func keyString(k Key) string {
	if k.Namespace == "" {
		return k.Name
	}
	return k.Namespace + "/" + k.Name
}
