package controllerwrites

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"

	"github.com/informer-host/informer-host/abi"
	"github.com/informer-host/informer-host/internal/kubewrite"
)

// finalizerAttempts bounds the patches a finalizer change tries before it
// reports the conflict: each retry follows a fresh read, so only a
// primary rewritten faster than read-and-patch round trips exhausts it.
const finalizerAttempts = 5

// EnsureFinalizer adds the managed finalizer unless there is none to
// manage, the primary has it, or it is being deleted (Kubernetes refuses
// new finalizers then; the object is deleting anyway). The patch is a
// JSON patch appending to the list, conditional on the primary's uid and
// resourceVersion: under a race it fails (and is retried on a fresh
// read) rather than replacing a list someone changed.
func (w *Writer) EnsureFinalizer(ctx context.Context, primary *unstructured.Unstructured) (added bool, err error) {
	f := w.o.Finalizer
	obj := primary
	for attempt := 1; ; attempt++ {
		if f == "" || obj == nil || obj.GetDeletionTimestamp() != nil || slices.Contains(obj.GetFinalizers(), f) {
			return false, nil
		}
		op := map[string]any{"op": "add", "path": "/metadata/finalizers/-", "value": f}
		if len(obj.GetFinalizers()) == 0 {
			op = map[string]any{"op": "add", "path": "/metadata/finalizers", "value": []string{f}}
		}
		code, msg := w.patchPrimary(ctx, obj, []any{op}, obj.GetResourceVersion())
		switch {
		case code == 0:
			return true, nil
		case code != abi.ErrConflict || attempt == finalizerAttempts:
			return false, &Error{code, fmt.Sprintf("add finalizer %s to %s %s: %s", f, w.o.Primary.Kind, objKey(obj), msg)}
		}
		if obj, err = w.fresh(ctx, obj); err != nil {
			return false, err
		}
	}
}

// RemoveFinalizer removes the managed finalizer, and only it: a JSON
// patch that tests the finalizer at its index and removes that index, so
// a concurrent change to the list makes it fail rather than remove
// another's; it is then retried on a fresh read, a bounded number of
// times. Done when the primary no longer has it, or is gone.
func (w *Writer) RemoveFinalizer(ctx context.Context, primary *unstructured.Unstructured) error {
	f := w.o.Finalizer
	obj := primary
	for attempt := 1; ; attempt++ {
		if f == "" || obj == nil {
			return nil
		}
		ops, ok := removeOps(obj, f)
		if !ok {
			return nil
		}
		code, msg := w.patchPrimary(ctx, obj, ops, "")
		switch {
		case code == 0 || code == abi.ErrAbsent:
			return nil
		case !retryable(code) || attempt == finalizerAttempts:
			return &Error{code, fmt.Sprintf("remove finalizer %s from %s %s: %s", f, w.o.Primary.Kind, objKey(obj), msg)}
		}
		var err error
		if obj, err = w.fresh(ctx, obj); err != nil {
			return err
		}
	}
}

// retryable: the list moved under the patch (a resourceVersion
// precondition's 409, a failed "test" op's 422).
func retryable(code int32) bool { return code == abi.ErrConflict || code == abi.ErrUnprocessable }

// removeOps is the JSON patch that removes f at its index in obj's
// finalizers, only if it is still there.
func removeOps(obj *unstructured.Unstructured, f string) ([]any, bool) {
	i := slices.Index(obj.GetFinalizers(), f)
	if i < 0 {
		return nil, false
	}
	path := fmt.Sprintf("/metadata/finalizers/%d", i)
	return []any{
		map[string]any{"op": "test", "path": path, "value": f},
		map[string]any{"op": "remove", "path": path},
	}, true
}

// patchPrimary sends a JSON patch to the primary as the plugin,
// conditional on its uid (never another object of the same name) and,
// when rv is given, its resourceVersion.
func (w *Writer) patchPrimary(ctx context.Context, obj *unstructured.Unstructured, ops []any, rv string) (int32, string) {
	body, _ := json.Marshal(ops)
	_, code, msg := w.o.Writes.Do(ctx, &kubewrite.Request{Op: abi.WriteJSONPatch, Resource: w.o.Primary.Name,
		Namespace: obj.GetNamespace(), Name: obj.GetName(), Body: body, UID: string(obj.GetUID()), ResourceVersion: rv})
	return code, msg
}

// fresh reads the primary again, as the plugin, after a conflict: the
// cache may not have caught up with what the conflict was about. nil
// when it is gone or is another object now.
func (w *Writer) fresh(ctx context.Context, obj *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	if w.o.Client == nil {
		return nil, &Error{abi.ErrConflict, fmt.Sprintf("%s %s changed under the write and there is no client to read it again", w.o.Primary.Kind, objKey(obj))}
	}
	cur, err := w.o.Client.Resource(w.o.Primary.GVR).Namespace(obj.GetNamespace()).Get(ctx, obj.GetName(), metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return nil, nil
	case err != nil:
		return nil, &Error{Code(err), fmt.Sprintf("read %s %s again after a conflict: %v", w.o.Primary.Kind, objKey(obj), err)}
	case cur.GetUID() != obj.GetUID():
		return nil, nil
	}
	return cur, nil
}

// Release removes finalizer from every object of gvr, in namespaces
// (none: all of them, for which the client needs a cluster-wide list),
// only from those being deleted when onlyDeleting, and returns how many
// it released. It is for an operator (the command
// `informer-host finalizers release`) or a plugin removed with
// onRemove: release: the objects then finish deleting without the
// cleanup the plugin would have done. Each removal is the same
// test-and-remove patch as RemoveFinalizer; a failure on one object does
// not stop the others and is in the joined error.
func Release(ctx context.Context, c dynamic.Interface, gvr schema.GroupVersionResource, finalizer string, onlyDeleting bool, namespaces ...string) (released int, err error) {
	if len(namespaces) == 0 {
		namespaces = []string{metav1.NamespaceAll}
	}
	var errs []error
	for _, ns := range namespaces {
		n, err := releaseIn(ctx, c.Resource(gvr), ns, gvr.GroupResource(), finalizer, onlyDeleting)
		released += n
		errs = append(errs, err)
	}
	return released, errors.Join(errs...)
}

func releaseIn(ctx context.Context, res dynamic.NamespaceableResourceInterface, ns string, gr schema.GroupResource, finalizer string, onlyDeleting bool) (released int, err error) {
	var errs []error
	opts := metav1.ListOptions{Limit: 500}
	for {
		list, err := res.Namespace(ns).List(ctx, opts)
		if err != nil {
			return released, errors.Join(append(errs, fmt.Errorf("list %s: %w", gr, err))...)
		}
		for i := range list.Items {
			obj := &list.Items[i]
			if onlyDeleting && obj.GetDeletionTimestamp() == nil {
				continue
			}
			done, err := releaseOne(ctx, res.Namespace(obj.GetNamespace()), obj, finalizer)
			if err != nil {
				errs = append(errs, fmt.Errorf("%s %s: %w", gr, objKey(obj), err))
			}
			if done {
				released++
			}
		}
		if opts.Continue = list.GetContinue(); opts.Continue == "" {
			return released, errors.Join(errs...)
		}
	}
}

// releaseOne removes f from obj; done is true when this call removed it.
func releaseOne(ctx context.Context, res dynamic.ResourceInterface, obj *unstructured.Unstructured, f string) (done bool, err error) {
	for attempt := 1; ; attempt++ {
		ops, ok := removeOps(obj, f)
		if !ok {
			return false, nil
		}
		uidOp := map[string]any{"op": "test", "path": "/metadata/uid", "value": string(obj.GetUID())}
		body, _ := json.Marshal(append([]any{uidOp}, ops...))
		_, err = res.Patch(ctx, obj.GetName(), types.JSONPatchType, body, metav1.PatchOptions{})
		switch {
		case err == nil:
			return true, nil
		case apierrors.IsNotFound(err):
			return false, nil
		case !(apierrors.IsConflict(err) || apierrors.IsInvalid(err)) || attempt == finalizerAttempts:
			return false, err
		}
		cur, gerr := res.Get(ctx, obj.GetName(), metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(gerr):
			return false, nil
		case gerr != nil:
			return false, gerr
		case cur.GetUID() != obj.GetUID():
			return false, nil
		}
		obj = cur
	}
}

func objKey(obj *unstructured.Unstructured) string {
	return keyString(Key{Namespace: obj.GetNamespace(), Name: obj.GetName()})
}
