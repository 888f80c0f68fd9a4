package kubewrite

import (
	"container/list"
	"sync"
)

// DefaultSelfWrites is how many objects a SelfWrites remembers. A
// plugin's write shows up as an event within moments, so only recent
// writes matter; an object written longer ago than the last
// DefaultSelfWrites distinct objects loses its mark (its event is then
// delivered unflagged, as before v1.2).
const DefaultSelfWrites = 4096

// SelfWrites is the resourceVersion of each object a plugin's successful
// writes returned, the most recent max objects. Safe for concurrent use:
// the plugin's instance records and the host's worker matches, on
// different goroutines across a reload.
type SelfWrites struct {
	max int
	// mu guards byKey and lru: lru's front is the object written last;
	// each element's Value is a *selfEntry, found by key in byKey.
	mu    sync.Mutex
	byKey map[string]*list.Element
	lru   list.List
}

type selfEntry struct{ key, rv string }

// NewSelfWrites remembers up to max objects (DefaultSelfWrites if max <= 0).
func NewSelfWrites(max int) *SelfWrites {
	if max <= 0 {
		max = DefaultSelfWrites
	}
	return &SelfWrites{max: max, byKey: map[string]*list.Element{}}
}

// ObjectKey is the key of an object across API versions: group,
// resource, namespace and name.
func ObjectKey(group, resource, namespace, name string) string {
	return group + "/" + resource + "/" + namespace + "/" + name
}

// Record notes that a write of the plugin left object key at rv.
func (s *SelfWrites) Record(key, rv string) {
	if s == nil || rv == "" {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if e, ok := s.byKey[key]; ok {
		e.Value.(*selfEntry).rv = rv
		s.lru.MoveToFront(e)
		return
	}
	s.byKey[key] = s.lru.PushFront(&selfEntry{key: key, rv: rv})
	for s.lru.Len() > s.max {
		old := s.lru.Back()
		delete(s.byKey, old.Value.(*selfEntry).key)
		s.lru.Remove(old)
	}
}

// Match reports whether object key at rv is the result of the plugin's
// last write of it.
func (s *SelfWrites) Match(key, rv string) bool {
	if s == nil || rv == "" {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.byKey[key]
	return ok && e.Value.(*selfEntry).rv == rv
}

// Len is the number of objects remembered.
func (s *SelfWrites) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lru.Len()
}
