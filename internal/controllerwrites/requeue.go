package controllerwrites

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/informer-host/informer-host/abi"
	"github.com/informer-host/informer-host/internal/kubewrite"
)

// PersistRequeue records the primary's due time in its requeue
// annotation (RequeueAnnotation), so that whoever reconciles the key
// next (this host after a restart or reload, another member after a
// handover) re-arms the timer from the object alone. A zero due clears
// it. The value is in whole seconds, rounded up so a re-armed timer
// never fires early; it is written only when it changes, by a JSON merge
// patch of that one annotation, conditional on the primary's uid. A
// primary gone or replaced meanwhile needs no timer: that is no error.
func (w *Writer) PersistRequeue(ctx context.Context, primary *unstructured.Unstructured, due time.Time) error {
	if primary == nil {
		return nil
	}
	key := RequeueAnnotation(w.o.Plugin)
	cur, has := primary.GetAnnotations()[key]
	var value any
	switch {
	case due.IsZero() && !has:
		return nil
	case !due.IsZero():
		s := ceilSecond(due).UTC().Format(time.RFC3339)
		if has && cur == s {
			return nil
		}
		value = s
	}
	body, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]any{key: value}}})
	_, code, msg := w.o.Writes.Do(ctx, &kubewrite.Request{Op: abi.WriteMergePatch, Resource: w.o.Primary.Name,
		Namespace: primary.GetNamespace(), Name: primary.GetName(), Body: body, UID: string(primary.GetUID())})
	switch code {
	case 0, abi.ErrAbsent, abi.ErrConflict:
		return nil
	}
	return &Error{code, fmt.Sprintf("persist the requeue time of %s %s: %s", w.o.Primary.Kind, objKey(primary), msg)}
}

func ceilSecond(t time.Time) time.Time {
	if s := t.Truncate(time.Second); s.Before(t) {
		return s.Add(time.Second)
	}
	return t
}

// RequeueAt reads back the due time PersistRequeue recorded for the
// plugin; false when there is none or it does not parse.
func RequeueAt(obj *unstructured.Unstructured, plugin string) (time.Time, bool) {
	if obj == nil {
		return time.Time{}, false
	}
	s, ok := obj.GetAnnotations()[RequeueAnnotation(plugin)]
	if !ok {
		return time.Time{}, false
	}
	t, err := time.Parse(time.RFC3339, s)
	return t, err == nil
}

// OnlyHostMetadataChanged reports whether an update of a primary is the
// host's own bookkeeping for the plugin and nothing else: old and new
// differ, and only in the plugin's requeue annotation, its finalizer
// (finalizer; "" for none), metadata.managedFields and
// metadata.resourceVersion. Such an update must not enqueue the key
// again, or every persisted requeue time would cause a reconcile. A
// resync (no difference at all) is not such an update.
func OnlyHostMetadataChanged(old, new *unstructured.Unstructured, plugin, finalizer string) bool {
	if old == nil || new == nil || equality.Semantic.DeepEqual(old.Object, new.Object) {
		return false
	}
	return equality.Semantic.DeepEqual(withoutHostMetadata(old, plugin, finalizer), withoutHostMetadata(new, plugin, finalizer))
}

func withoutHostMetadata(obj *unstructured.Unstructured, plugin, finalizer string) map[string]any {
	c := obj.DeepCopy()
	unstructured.RemoveNestedField(c.Object, "metadata", "resourceVersion")
	unstructured.RemoveNestedField(c.Object, "metadata", "managedFields")
	if a := c.GetAnnotations(); a != nil {
		delete(a, RequeueAnnotation(plugin))
		if len(a) == 0 {
			a = nil
		}
		c.SetAnnotations(a)
	}
	if finalizer != "" {
		var keep []string
		for _, f := range c.GetFinalizers() {
			if f != finalizer {
				keep = append(keep, f)
			}
		}
		c.SetFinalizers(keep)
	}
	return c.Object
}
