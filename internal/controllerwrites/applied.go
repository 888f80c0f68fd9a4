package controllerwrites

import (
	"crypto/sha256"
	"sync"
)

// appliedChild is what the Writer last applied to a child: the body's
// sum and the resourceVersion the apiserver answered with.
type appliedChild struct {
	sum [sha256.Size]byte
	rv  string
}

// appliedSet remembers the last apply of each child, so a reconcile that
// wants what it already applied, to an object nobody changed since,
// sends nothing: with force, the same configuration applied again by the
// same manager to the same object is a no-op the apiserver would answer
// (with the same resourceVersion) after taking a write token. Such
// reconciles are common: every child's own event maps back to its
// primary. controller-runtime's CreateOrPatch skips them the same way,
// by comparing with the cache.
type appliedSet struct {
	mu sync.Mutex
	m  map[childID]appliedChild
}

// current reports whether applying body to id would change nothing: the
// same body was the last applied, and the cache holds the object at the
// resourceVersion that apply answered (cachedRV "": not cached). A cache
// behind the apply, or an object changed by anyone since, applies again.
func (s *appliedSet) current(id childID, sum [sha256.Size]byte, cachedRV string) bool {
	if cachedRV == "" {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	a, ok := s.m[id]
	return ok && a.sum == sum && a.rv == cachedRV
}

// record notes a successful apply of the body summed sum, answered with
// the object obj (nil, or without a resourceVersion: nothing to compare
// with later, forgotten).
func (s *appliedSet) record(id childID, sum [sha256.Size]byte, obj map[string]any) {
	md, _ := obj["metadata"].(map[string]any)
	rv, _ := md["resourceVersion"].(string)
	s.mu.Lock()
	defer s.mu.Unlock()
	if rv == "" {
		delete(s.m, id)
		return
	}
	if s.m == nil {
		s.m = map[childID]appliedChild{}
	}
	s.m[id] = appliedChild{sum: sum, rv: rv}
}

// forget drops id: its apply failed, or it was pruned.
func (s *appliedSet) forget(id childID) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.m, id)
}
