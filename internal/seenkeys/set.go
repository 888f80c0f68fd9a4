package seenkeys

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"

	"github.com/google/uuid"
)

// Key is one object a plugin has: the binding's resource name (as the
// config names it), the object's namespace ("" when cluster-scoped),
// name and uid.
type Key struct {
	Resource, Namespace, Name, UID string
}

// uid is a uid as kept: a UUID's 16 bytes (every uid the apiserver
// gives), or, for anything else, the string itself (kept apart, in
// odd).
type uid [16]byte

// Set is one plugin's keys. Safe for concurrent use; its lock is a leaf.
type Set struct {
	mu sync.Mutex
	// byRes: resource name → namespace → name → uid. The namespace and
	// resource strings are held once, not once per key.
	byRes map[string]map[string]map[string]uid
	// odd holds the uids that are not UUIDs, by key without uid (tests
	// and fakes make them; the apiserver never does).
	odd   map[Key]string
	n     int
	dirty bool
	// gen counts changes, so a flush knows whether the set changed while
	// it was being written.
	gen uint64
}

// NewSet returns an empty set.
func NewSet() *Set { return &Set{byRes: map[string]map[string]map[string]uid{}} }

func parseUID(s string) (uid, bool) {
	// Only the canonical form (36 characters, lower case) round-trips
	// through 16 bytes; checked without allocating, as Add runs on every
	// settled event.
	if len(s) != 36 {
		return uid{}, false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; c >= 'A' && c <= 'F' {
			return uid{}, false
		}
	}
	u, err := uuid.Parse(s)
	if err != nil {
		return uid{}, false
	}
	return uid(u), true
}

// Add records k (replacing the uid a key of the same name had).
func (s *Set) Add(k Key) {
	s.mu.Lock()
	defer s.mu.Unlock()
	byNS := s.byRes[k.Resource]
	if byNS == nil {
		byNS = map[string]map[string]uid{}
		s.byRes[k.Resource] = byNS
	}
	names := byNS[k.Namespace]
	if names == nil {
		names = map[string]uid{}
		byNS[k.Namespace] = names
	}
	oddKey := Key{Resource: k.Resource, Namespace: k.Namespace, Name: k.Name}
	old, had := names[k.Name]
	u, ok := parseUID(k.UID)
	if had && (ok && old == u && len(s.odd) == 0 || uidString(old, s.odd, oddKey) == k.UID) {
		return // an update: nothing changes
	}
	names[k.Name] = u
	if !ok {
		if s.odd == nil {
			s.odd = map[Key]string{}
		}
		s.odd[oddKey] = k.UID
	} else {
		delete(s.odd, oddKey)
	}
	if !had {
		s.n++
	}
	s.dirty = true
	s.gen++
}

// Remove forgets k if the set holds it with k.UID, or with any uid when
// k.UID is empty. It reports whether it removed it.
func (s *Set) Remove(k Key) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	names := s.byRes[k.Resource][k.Namespace]
	u, ok := names[k.Name]
	if !ok {
		return false
	}
	oddKey := Key{Resource: k.Resource, Namespace: k.Namespace, Name: k.Name}
	if k.UID != "" && uidString(u, s.odd, oddKey) != k.UID {
		return false
	}
	delete(names, k.Name)
	delete(s.odd, oddKey)
	if len(names) == 0 {
		delete(s.byRes[k.Resource], k.Namespace)
		if len(s.byRes[k.Resource]) == 0 {
			delete(s.byRes, k.Resource)
		}
	}
	s.n--
	s.dirty = true
	s.gen++
	return true
}

func uidString(u uid, odd map[Key]string, k Key) string {
	if o, ok := odd[k]; ok {
		return o
	}
	return uuid.UUID(u).String()
}

// Get returns the uid the set holds for resource/namespace/name.
func (s *Set) Get(resource, namespace, name string) (string, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	u, ok := s.byRes[resource][namespace][name]
	if !ok {
		return "", false
	}
	return uidString(u, s.odd, Key{Resource: resource, Namespace: namespace, Name: name}), true
}

// Keys returns the keys of resource ("" for every resource), sorted.
func (s *Set) Keys(resource string) []Key {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.keysLocked(resource)
}

func compareKeys(a, b Key) int {
	if c := strings.Compare(a.Resource, b.Resource); c != 0 {
		return c
	}
	if c := strings.Compare(a.Namespace, b.Namespace); c != 0 {
		return c
	}
	return strings.Compare(a.Name, b.Name)
}

// Missing returns the keys of resource whose object lookup does not
// find, or finds with another uid (deleted, and recreated): the deletes
// a consumer of the set missed. lookup is asked once per key, with the
// set's lock not held.
func (s *Set) Missing(resource string, lookup func(namespace, name string) (uid string, found bool)) []Key {
	var out []Key
	for _, k := range s.Keys(resource) {
		if uid, found := lookup(k.Namespace, k.Name); !found || uid != k.UID {
			out = append(out, k)
		}
	}
	return out
}

// Len is how many keys the set holds.
func (s *Set) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.n
}

// Clear forgets every key.
func (s *Set) Clear() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.n == 0 && len(s.byRes) == 0 {
		return
	}
	s.byRes, s.odd, s.n = map[string]map[string]map[string]uid{}, nil, 0
	s.dirty = true
	s.gen++
}

// snapshot returns the encoded set if it changed since the last
// snapshot that was marked written, with the change count it encodes.
func (s *Set) snapshot() (data []byte, gen uint64, dirty bool) {
	s.mu.Lock()
	if !s.dirty {
		s.mu.Unlock()
		return nil, 0, false
	}
	gen = s.gen
	keys := s.keysLocked("")
	s.mu.Unlock()
	return Encode(keys), gen, true
}

// generation returns the set's change count.
func (s *Set) generation() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.gen
}

// written marks the snapshot of gen as stored: the set is clean unless
// it changed since.
func (s *Set) written(gen uint64) {
	s.mu.Lock()
	if s.gen == gen {
		s.dirty = false
	}
	s.mu.Unlock()
}

func (s *Set) keysLocked(resource string) []Key {
	out := make([]Key, 0, s.n)
	for r, byNS := range s.byRes {
		if resource != "" && r != resource {
			continue
		}
		for ns, names := range byNS {
			for n, u := range names {
				k := Key{Resource: r, Namespace: ns, Name: n}
				k.UID = uidString(u, s.odd, k)
				out = append(out, k)
			}
		}
	}
	slices.SortFunc(out, compareKeys)
	return out
}

// load replaces the set's keys with keys, leaving it clean.
func (s *Set) load(keys []Key) {
	for _, k := range keys {
		s.Add(k)
	}
	s.mu.Lock()
	s.dirty = false
	s.mu.Unlock()
}

// The encoding, before gzip: the format byte, then for each key in
// order (resource, namespace, name) a header byte saying which of
// resource and namespace repeat the previous key's and how the uid is
// kept, then the strings that do not repeat (uvarint length and bytes),
// the name front-coded against the previous name (uvarint shared prefix
// length, uvarint suffix length, suffix), and the uid (16 bytes, or a
// uvarint length and the string). Sorted keys make most headers say
// "same resource, same namespace" and most names share a prefix with
// the one before, which is what makes the figure in RATIONALE.md small;
// the uids, random, are most of it.
const (
	formatV1 byte = 1

	sameResource  = 1 << 0
	sameNamespace = 1 << 1
	oddUID        = 1 << 2
)

// Encode returns keys (sorted by Keys' order) in the persisted form,
// gzip'd.
func Encode(keys []Key) []byte {
	var raw bytes.Buffer
	raw.WriteByte(formatV1)
	var tmp [binary.MaxVarintLen64]byte
	putString := func(s string) {
		raw.Write(tmp[:binary.PutUvarint(tmp[:], uint64(len(s)))])
		raw.WriteString(s)
	}
	var prev Key
	for i, k := range keys {
		var h byte
		if i > 0 && k.Resource == prev.Resource {
			h |= sameResource
		}
		if h&sameResource != 0 && k.Namespace == prev.Namespace {
			h |= sameNamespace
		}
		u, ok := parseUID(k.UID)
		if !ok {
			h |= oddUID
		}
		raw.WriteByte(h)
		if h&sameResource == 0 {
			putString(k.Resource)
		}
		if h&sameNamespace == 0 {
			putString(k.Namespace)
		}
		shared := 0
		if h&sameNamespace != 0 {
			for shared < len(k.Name) && shared < len(prev.Name) && k.Name[shared] == prev.Name[shared] {
				shared++
			}
		}
		raw.Write(tmp[:binary.PutUvarint(tmp[:], uint64(shared))])
		putString(k.Name[shared:])
		if ok {
			raw.Write(u[:])
		} else {
			putString(k.UID)
		}
		prev = k
	}
	var out bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&out, gzip.BestCompression)
	_, _ = zw.Write(raw.Bytes())
	_ = zw.Close()
	return out.Bytes()
}

// maxDecoded bounds what Decode inflates: far above any real set (50,000
// keys are a few MiB raw), far below what a hostile ConfigMap could make
// the daemon allocate.
const maxDecoded = 256 << 20

// Decode reads what Encode wrote.
func Decode(data []byte) ([]Key, error) {
	zr, err := gzip.NewReader(bytes.NewReader(data))
	if err != nil {
		return nil, fmt.Errorf("seen keys: not gzip: %w", err)
	}
	raw, err := io.ReadAll(io.LimitReader(zr, maxDecoded+1))
	if err != nil {
		return nil, fmt.Errorf("seen keys: gzip: %w", err)
	}
	if len(raw) > maxDecoded {
		return nil, errors.New("seen keys: more than 256 MiB inflated")
	}
	if len(raw) == 0 || raw[0] != formatV1 {
		return nil, errors.New("seen keys: unknown format (written by a newer informer-host?)")
	}
	r := bytes.NewReader(raw[1:])
	bad := func(what string) error {
		return fmt.Errorf("seen keys: truncated or corrupt at byte %d (%s)", len(raw)-r.Len(), what)
	}
	getString := func() (string, bool) {
		n, err := binary.ReadUvarint(r)
		if err != nil || n > uint64(r.Len()) {
			return "", false
		}
		b := make([]byte, n)
		_, _ = io.ReadFull(r, b)
		return string(b), true
	}
	var out []Key
	var prev Key
	for r.Len() > 0 {
		h, _ := r.ReadByte()
		var k Key
		var ok bool
		if h&sameResource != 0 {
			k.Resource = prev.Resource
		} else if k.Resource, ok = getString(); !ok {
			return nil, bad("resource")
		}
		if h&sameNamespace != 0 {
			k.Namespace = prev.Namespace
		} else if k.Namespace, ok = getString(); !ok {
			return nil, bad("namespace")
		}
		shared, err := binary.ReadUvarint(r)
		if err != nil || shared > uint64(len(prev.Name)) {
			return nil, bad("name prefix")
		}
		suffix, ok := getString()
		if !ok {
			return nil, bad("name")
		}
		k.Name = prev.Name[:shared] + suffix
		if h&oddUID != 0 {
			if k.UID, ok = getString(); !ok {
				return nil, bad("uid")
			}
		} else {
			var u uuid.UUID
			if _, err := io.ReadFull(r, u[:]); err != nil {
				return nil, bad("uid")
			}
			k.UID = u.String()
		}
		out = append(out, k)
		prev = k
	}
	return out, nil
}
