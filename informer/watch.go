package informer

import (
	"context"
	"log/slog"
	"regexp"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/tools/cache"
)

// watchKey identifies one list/watch against the apiserver. Configured
// resources whose watches have equal keys share one informer.
type watchKey struct {
	gvr                          schema.GroupVersionResource
	namespace                    string // "" = all namespaces
	labelSelector, fieldSelector string
	stripManagedFields           bool
	resync                       time.Duration
}

// sharedWatch is one running dynamic shared informer and the number of
// configured resources using it.
type sharedWatch struct {
	key      watchKey
	informer cache.SharedIndexInformer
	cancel   context.CancelFunc
	done     chan struct{} // closed when the informer, its processor and all its listeners have returned

	// refs is guarded by Pipeline.mu.
	refs int

	mu      sync.Mutex
	lastErr error // the last list/watch error, for Status
}

func newSharedWatch(client dynamic.Interface, key watchKey, log *slog.Logger) *sharedWatch {
	tweak := func(o *metav1.ListOptions) {
		o.LabelSelector = key.labelSelector
		o.FieldSelector = key.fieldSelector
	}
	inf := dynamicinformer.NewFilteredDynamicInformer(client, key.gvr, key.namespace, key.resync,
		cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc}, tweak).Informer()
	w := &sharedWatch{key: key, informer: inf, done: make(chan struct{})}
	if key.stripManagedFields {
		// Set before Run, as client-go requires; cannot fail then.
		_ = inf.SetTransform(stripManagedFields)
	}
	_ = inf.SetWatchErrorHandlerWithContext(func(ctx context.Context, r *cache.Reflector, err error) {
		w.mu.Lock()
		w.lastErr = err
		w.mu.Unlock()
		if apierrors.IsForbidden(err) || apierrors.IsUnauthorized(err) {
			log.Error("list/watch refused by the apiserver; this resource is not ready, the others go on",
				"resource", gvrString(key.gvr), "namespace", key.namespace, "verb", refusedVerb(err), "err", err)
			return
		}
		cache.DefaultWatchErrorHandler(ctx, r, err)
	})
	return w
}

// run starts the informer; done closes when it has fully stopped.
func (w *sharedWatch) run(parent context.Context) {
	ctx, cancel := context.WithCancel(parent)
	w.cancel = cancel
	go func() {
		defer close(w.done)
		w.informer.RunWithContext(ctx)
	}()
}

// stop stops the informer and waits until every listener on it returned.
func (w *sharedWatch) stop() {
	w.cancel()
	<-w.done
}

// err returns the last list/watch error while the informer has not synced.
// Errors after the first sync are a dropped watch the reflector recovers
// from on its own; they are logged, not reported as "not ready".
func (w *sharedWatch) err() error {
	if w.informer.HasSynced() {
		return nil
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.lastErr
}

// gvrString writes a resource the way kubectl names it, with the version:
// "secrets/v1", "deployments.apps/v1".
func gvrString(gvr schema.GroupVersionResource) string {
	if gvr.Group == "" {
		return gvr.Resource + "/" + gvr.Version
	}
	return gvr.Resource + "." + gvr.Group + "/" + gvr.Version
}

var verbRE = regexp.MustCompile(`cannot (\w+) resource`)

// refusedVerb digs the verb out of an RBAC refusal ("User "x" cannot list
// resource ..."); the status carries it only in its message.
func refusedVerb(err error) string {
	if m := verbRE.FindStringSubmatch(err.Error()); m != nil {
		return m[1]
	}
	return "list"
}

// stripManagedFields drops metadata.managedFields before objects enter the
// cache: they are often the largest part of an object, no handler here
// needs them, and every listener would otherwise carry them.
func stripManagedFields(obj any) (any, error) {
	if u, ok := obj.(*unstructured.Unstructured); ok {
		u.SetManagedFields(nil)
	}
	return obj, nil
}
