package informer

import (
	"errors"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/tools/cache"
)

// Index names for Pipeline.CacheKeys.
const (
	// NamespaceIndex maps a namespace to the objects in it; every
	// informer has it.
	NamespaceIndex = cache.NamespaceIndex
	// OwnerIndex maps a uid to the objects that name it in their
	// ownerReferences. Only the informers of resources whose config asks
	// for it (config.Resource.Indexes, from cache grants) have it.
	OwnerIndex = "owner"
)

// ErrNoIndex is returned by CacheKeys for an index the resource's informers
// were not built with.
var ErrNoIndex = errors.New("the resource's informers have no such index")

// changesIndex is the name of the index that indexes nothing: its
// function counts the store's changes (sharedWatch.changes). No reader can
// name it: cache reads take only the index names above.
const changesIndex = "informer-host/changes"

// indexers are the indexers the watch's informer is built with.
func (w *sharedWatch) indexers() cache.Indexers {
	ix := cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc,
		changesIndex: func(any) ([]string, error) { w.changes.Add(1); return nil, nil }}
	if w.key.ownerIndex {
		ix[OwnerIndex] = ownerUIDs
	}
	if w.key.extraIndexes != "" {
		for _, n := range strings.Split(w.key.extraIndexes, ",") {
			ix[n] = w.opts.indexers[n]
		}
	}
	return ix
}

// CacheStamp identifies the state of a resource's informer caches: two
// stamps of one resource are equal only if no object was added, changed
// or removed between them and the resource's informers are the same
// ones. A reader that keeps what it computed from the caches with the
// stamp taken before computing it may answer with it again while
// CacheStamp returns the same: the answer is what reading the caches
// afresh would give, as of the moment the stamp was taken, which is the
// consistency of CacheGet (a change CacheGet sees has moved the stamp).
//
// Why it holds: client-go calls every index function under the store's
// write lock for each add, update, delete and replace, so a change
// counts before a read can see it, and the counts only grow, so their
// sum is equal only when none moved. The stamp holds the array of the
// resource's watches, which is only appended to (the length tells) and
// replaced when the resource is deactivated, so new informers cannot
// take its address.
type CacheStamp struct {
	watches **sharedWatch // the slice's array: only ever appended to, replaced when deactivated
	n       int
	changes uint64
}

// CacheStamp returns the stamp of the configured resource's caches now;
// ok is false when the resource is not active.
func (p *Pipeline) CacheStamp(resource string) (s CacheStamp, ok bool) {
	ws, ok := p.indexersOf(resource)
	if !ok || len(ws) == 0 {
		return CacheStamp{}, ok
	}
	s = CacheStamp{watches: &ws[0], n: len(ws)}
	for _, w := range ws {
		s.changes += w.changes.Load()
	}
	return s, true
}

// ownerUIDs is the OwnerIndex function: the uid of every owner reference.
func ownerUIDs(obj any) ([]string, error) {
	m, err := meta.Accessor(obj)
	if err != nil {
		return nil, fmt.Errorf("owner index: %w", err)
	}
	refs := m.GetOwnerReferences()
	if len(refs) == 0 {
		return nil, nil
	}
	out := make([]string, len(refs))
	for i, r := range refs {
		out[i] = string(r.UID)
	}
	return out, nil
}

// indexersOf returns the watches of the active resource name (one per
// namespace, or one cluster-wide). Their stores are safe for concurrent
// use and are read without the pipeline's lock; the slice is never
// changed in place (deactivation replaces it).
func (p *Pipeline) indexersOf(name string) ([]*sharedWatch, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	st, ok := p.resources[name]
	if !ok || st.phase != PhaseActive {
		return nil, false
	}
	return st.watches, true
}

// CacheGet returns the object namespace/name ("" namespace for a
// cluster-scoped object) of the configured resource from its informers'
// caches: no API request is made. ok is false when the resource is not
// active or has no such object. The object is the cache's own and must not
// be modified.
func (p *Pipeline) CacheGet(resource, namespace, name string) (obj *unstructured.Unstructured, ok bool) {
	ws, ok := p.indexersOf(resource)
	if !ok {
		return nil, false
	}
	key := name
	if namespace != "" {
		key = namespace + "/" + name
	}
	for _, w := range ws {
		if w.key.namespace != "" && w.key.namespace != namespace {
			continue
		}
		o, exists, err := w.informer.GetIndexer().GetByKey(key)
		if err == nil && exists {
			if u, ok := o.(*unstructured.Unstructured); ok {
				return u, true
			}
		}
	}
	return nil, false
}

// CacheList calls f for every cached object of the configured resource in
// namespace ("" = every namespace) whose labels match sel (nil = all),
// served by the namespace index. f must not keep or modify the object.
func (p *Pipeline) CacheList(resource, namespace string, sel labels.Selector, f func(*unstructured.Unstructured)) {
	ws, ok := p.indexersOf(resource)
	if !ok {
		return
	}
	for _, w := range ws {
		if namespace != "" && w.key.namespace != "" && w.key.namespace != namespace {
			continue
		}
		var objs []any
		if namespace == "" {
			objs = w.informer.GetIndexer().List()
		} else {
			var err error
			if objs, err = w.informer.GetIndexer().ByIndex(cache.NamespaceIndex, namespace); err != nil {
				continue
			}
		}
		for _, o := range objs {
			u, ok := o.(*unstructured.Unstructured)
			if !ok {
				continue
			}
			if sel != nil && !sel.Empty() && !sel.Matches(labels.Set(u.GetLabels())) {
				continue
			}
			f(u)
		}
	}
}

// CacheByIndex calls f for every cached object of the configured
// resource that index maps to value: the index's own lookup, so the cost
// is that of the objects found, not of the resource's whole cache.
// ErrNoIndex when the resource's informers were not built with index (an
// Options.Indexers name its config.Resource.Indexes asks for, or
// OwnerIndex); nothing when the resource is not active. f must not keep
// or modify the object.
func (p *Pipeline) CacheByIndex(resource, index, value string, f func(*unstructured.Unstructured)) error {
	ws, ok := p.indexersOf(resource)
	if !ok {
		return nil
	}
	for _, w := range ws {
		ix := w.informer.GetIndexer()
		if _, ok := ix.GetIndexers()[index]; !ok {
			return fmt.Errorf("resource %q, index %q: %w", resource, index, ErrNoIndex)
		}
		objs, err := ix.ByIndex(index, value)
		if err != nil {
			return err
		}
		for _, o := range objs {
			if u, ok := o.(*unstructured.Unstructured); ok {
				f(u)
			}
		}
	}
	return nil
}

// CacheKeys appends to dst the store keys of the cached objects of the
// configured resource that index maps to value, or of every object when
// index is "". It reads the index itself (client-go's IndexKeys), without
// touching the objects, which makes it the cheap path of an unfiltered
// list. ErrNoIndex when the resource's informers were not built with index
// (see OwnerIndex).
func (p *Pipeline) CacheKeys(dst []string, resource, index, value string) ([]string, error) {
	ws, ok := p.indexersOf(resource)
	if !ok {
		return dst, nil
	}
	for _, w := range ws {
		ix := w.informer.GetIndexer()
		if index == "" {
			dst = append(dst, ix.ListKeys()...)
			continue
		}
		if index == NamespaceIndex && w.key.namespace != "" && w.key.namespace != value {
			continue
		}
		if _, ok := ix.GetIndexers()[index]; !ok {
			return dst, fmt.Errorf("resource %q, index %q: %w", resource, index, ErrNoIndex)
		}
		keys, err := ix.IndexKeys(index, value)
		if err != nil {
			return dst, err
		}
		dst = append(dst, keys...)
	}
	return dst, nil
}
