package informer

import (
	"context"
	"errors"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
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
	// ownerIndex adds OwnerIndex to the informer. It is part of the key
	// because client-go cannot add an indexer once an informer runs
	// (AddIndexers fails after start): a watch needing it is built with it.
	ownerIndex bool
	// extraIndexes are the names, sorted and comma-joined, of the
	// Options.Indexers the informer is built with, for the same reason.
	extraIndexes string
}

// watchOptions are the pipeline-wide settings every sharedWatch uses.
type watchOptions struct {
	log *slog.Logger
	// retryMin and retryMax bound the backoff between list/watch attempts
	// that got no answer from the apiserver (see call).
	retryMin, retryMax time.Duration
	// logEvery rate-limits the log of a watch that keeps failing.
	logEvery time.Duration
	// indexers are Options.Indexers.
	indexers cache.Indexers
}

// extraIndexes is watchKey.extraIndexes for a resource that asks for
// names: those of them the pipeline has a function for.
func (o watchOptions) extraIndexes(names []string) string {
	var have []string
	for _, n := range names {
		if _, ok := o.indexers[n]; ok && !slices.Contains(have, n) {
			have = append(have, n)
		}
	}
	slices.Sort(have)
	return strings.Join(have, ",")
}

// sharedWatch is one running dynamic shared informer and the number of
// configured resources using it.
type sharedWatch struct {
	key      watchKey
	opts     watchOptions
	informer cache.SharedIndexInformer
	cancel   context.CancelFunc
	done     chan struct{} // closed when the informer, its processor and all its listeners have returned

	// refs is guarded by Pipeline.mu.
	refs int

	// mu guards calls, the current run of failed list and watch calls.
	mu    sync.Mutex
	calls failureRun

	// changes counts the changes to the store (CacheStamp): its
	// changesIndex function increments it, which client-go calls under
	// the store's lock for every add, update, delete and replace.
	changes atomic.Uint64
}

func newSharedWatch(client dynamic.Interface, key watchKey, opts watchOptions) *sharedWatch {
	w := &sharedWatch{key: key, opts: opts, done: make(chan struct{})}
	log := opts.log
	tweak := func(o *metav1.ListOptions) {
		o.LabelSelector = key.labelSelector
		o.FieldSelector = key.fieldSelector
	}
	res := client.Resource(key.gvr).Namespace(key.namespace)
	// The list/watch dynamicinformer.NewFilteredDynamicInformer builds,
	// with every call going through w.call: it records each outcome for
	// Status and retries promptly while the apiserver cannot be reached.
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			tweak(&o)
			var out runtime.Object
			err := w.call(ctx, "list", func() (err error) { out, err = res.List(ctx, o); return err })
			return out, err
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			tweak(&o)
			var out watch.Interface
			err := w.call(ctx, "watch", func() (err error) { out, err = res.Watch(ctx, o); return err })
			return out, err
		},
	}
	w.informer = cache.NewSharedIndexInformerWithOptions(cache.ToListWatcherWithWatchListSemantics(lw, client),
		&unstructured.Unstructured{}, cache.SharedIndexInformerOptions{
			ResyncPeriod:      key.resync,
			Indexers:          w.indexers(),
			ObjectDescription: key.gvr.String(),
		})
	if key.stripManagedFields {
		// Set before Run, as client-go requires; cannot fail then.
		_ = w.informer.SetTransform(stripManagedFields)
	}
	_ = w.informer.SetWatchErrorHandlerWithContext(func(ctx context.Context, r *cache.Reflector, err error) {
		if apierrors.IsForbidden(err) || apierrors.IsUnauthorized(err) {
			log.Error("list/watch refused by the apiserver; this resource is not ready, the others go on",
				"resource", gvrString(key.gvr), "namespace", key.namespace, "verb", refusedVerb(err), "err", err)
			return
		}
		cache.DefaultWatchErrorHandler(ctx, r, err)
	})
	return w
}

// call runs one list or watch call, records its outcome, and retries it
// while it fails without an answer from the apiserver (refused or reset
// connection, EOF, timeout) or with 503, after a jittered backoff from
// retryMin to retryMax.
//
// Why retry here rather than hand the error to the reflector: the
// reflector backs off from 800ms to 30s with a jitter factor of 1, so
// after an outage of a minute its next attempt comes up to a minute after
// the apiserver is back (measured: 20s and 78s). It also retries a
// refused watch internally without calling the watch error handler, so
// such an outage was not even logged. Retrying below it keeps its backoff
// (and its protection of a struggling apiserver) for answers the
// apiserver gives, 429 and errors alike, and resumes within retryMax of
// the apiserver being reachable again. A cap of a few seconds costs a
// refused connection attempt per watch per few seconds during an outage.
func (w *sharedWatch) call(ctx context.Context, verb string, f func() error) error {
	delay := w.opts.retryMin
	for {
		err := f()
		if err == nil {
			w.succeeded()
			return nil
		}
		if ctx.Err() != nil {
			return err // stopping, not failing
		}
		retry := unanswered(err)
		w.failed(verb, err, retry)
		if !retry {
			return err
		}
		t := time.NewTimer(delay/2 + rand.N(delay))
		select {
		case <-ctx.Done():
			t.Stop()
			return err
		case <-t.C:
		}
		delay = min(2*delay, w.opts.retryMax)
	}
}

// unanswered: the call failed without an answer from the apiserver, or
// with 503 (an apiserver still starting, or a proxy without backends).
// call has checked that its context is alive, so a deadline here is the
// transport's own (a TLS handshake timeout, say): no answer either.
func unanswered(err error) bool {
	var st apierrors.APIStatus
	if errors.As(err, &st) {
		return st.Status().Code == http.StatusServiceUnavailable
	}
	return true
}

func (w *sharedWatch) succeeded() {
	w.mu.Lock()
	ended := w.calls.end()
	w.mu.Unlock()
	if ended.failures > 0 {
		w.opts.log.Info("list/watch works again", "resource", gvrString(w.key.gvr), "namespace", w.key.namespace,
			"failedFor", time.Since(ended.since).Round(time.Millisecond), "failures", ended.failures)
	}
}

// failed records a failed call. Failures the reflector never sees (the
// retried ones) are logged here, the first at once and then at most one
// per logEvery; the others reach the watch error handler, which logs them
// as often as the reflector's backoff calls it.
func (w *sharedWatch) failed(verb string, err error, retried bool) {
	now := time.Now()
	w.mu.Lock()
	logIt := w.calls.fail(now, err, w.opts.logEvery) && retried
	run := w.calls
	w.mu.Unlock()
	if logIt {
		w.opts.log.Warn("list/watch failing: apiserver unreachable; retrying", "resource", gvrString(w.key.gvr),
			"namespace", w.key.namespace, "verb", verb, "failingFor", now.Sub(run.since).Round(time.Millisecond),
			"failures", run.failures, "err", err)
	}
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

// health returns the current run of failures: the last error and since
// when calls have been failing; zero values when the last call succeeded.
func (w *sharedWatch) health() (err error, since time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.calls.lastErr, w.calls.since
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
