package shard

import (
	"fmt"
	"slices"
	"sync/atomic"
	"time"
)

// Key says which part of an object's identity is hashed.
type Key string

const (
	// KeyNamespace keeps every object of a namespace on one member. A
	// cluster-scoped object is keyed by its name, so a Namespace object
	// lands on the member that owns the objects in it.
	KeyNamespace Key = "namespace"
	// KeyNamespaceName spreads objects one by one.
	KeyNamespaceName Key = "namespace/name"
)

// Assignment is one member's view of the group: who is live, and so
// which objects are whose. It never changes once published; a new view is
// a new Assignment.
type Assignment struct {
	// Self is this member's identity.
	Self string
	// Members are the live members' identities, sorted; Self is among
	// them only while Active.
	Members []string
	// Key is the hashed key.
	Key Key
	// Active: this member may own objects. False before the others have
	// let it in (see Member) and once it is fenced.
	Active bool
	// Since is when the Assignment was published.
	Since time.Time
	// Problem says why the member cannot take part in its group (it
	// cannot list the group's Leases or renew its own), "" when it can.
	// A member with a problem owns nothing once its validity runs out,
	// and never joins: the host reports it as not ready.
	Problem string

	// until is ValidUntil as nanoseconds after Since (-1: never valid),
	// so that comparisons keep Since's monotonic clock reading. The member
	// extends it in place while its view stays the same (one renewal
	// after another); it only grows.
	until atomic.Int64

	// seeds are the members' hash seeds, in Members' order; self is
	// Self's index in Members (-1 when not a member).
	seeds []uint64
	self  int
}

// NewAssignment builds an Assignment. members need not be sorted; Self
// is added when active and dropped otherwise.
func NewAssignment(self string, members []string, key Key, active bool, since, validUntil time.Time) *Assignment {
	ms := slices.Clone(members)
	ms = slices.DeleteFunc(ms, func(m string) bool { return m == self })
	if active {
		ms = append(ms, self)
	}
	slices.Sort(ms)
	ms = slices.Compact(ms)
	a := &Assignment{Self: self, Members: ms, Key: key, Active: active, Since: since, self: -1}
	a.until.Store(-1)
	if active && !validUntil.IsZero() {
		a.until.Store(int64(validUntil.Sub(since)))
	}
	for i, m := range ms {
		a.seeds = append(a.seeds, hashString(fnvOffset, m))
		if m == self {
			a.self = i
		}
	}
	return a
}

// ValidUntil is when the member's last successful renewal and list turn
// renewDeadline old: Owns says false from then on. Zero when inactive.
func (a *Assignment) ValidUntil() time.Time {
	u := a.until.Load()
	if u < 0 {
		return time.Time{}
	}
	return a.Since.Add(time.Duration(u))
}

// extend moves ValidUntil to t, if later.
func (a *Assignment) extend(t time.Time) {
	if !a.Active {
		return
	}
	n := int64(t.Sub(a.Since))
	for {
		u := a.until.Load()
		if n <= u || a.until.CompareAndSwap(u, n) {
			return
		}
	}
}

// valid reports whether now is before ValidUntil.
func (a *Assignment) valid(now time.Time) bool {
	u := a.until.Load()
	return u >= 0 && now.Sub(a.Since) < time.Duration(u)
}

// Owner returns the member that owns the object namespace/name in this
// view ("" when there is no live member). It ignores ValidUntil.
func (a *Assignment) Owner(namespace, name string) string {
	if i := a.owner(namespace, name); i >= 0 {
		return a.Members[i]
	}
	return ""
}

// OwnsKey reports whether this member owns namespace/name in this view,
// ignoring ValidUntil. A nil Assignment (no sharding) owns everything.
func (a *Assignment) OwnsKey(namespace, name string) bool {
	if a == nil {
		return true
	}
	return a.self >= 0 && a.owner(namespace, name) == a.self
}

// Owns is OwnsKey at the moment now: false from ValidUntil on.
func (a *Assignment) Owns(namespace, name string, now time.Time) bool {
	if a == nil {
		return true
	}
	return a.self >= 0 && a.valid(now) && a.owner(namespace, name) == a.self
}

// Valid reports whether the Assignment may still own anything at now.
func (a *Assignment) Valid(now time.Time) bool {
	return a == nil || (a.Active && a.valid(now))
}

// SameView reports whether a and b assign every object alike: the same
// members, key and activity.
func (a *Assignment) SameView(b *Assignment) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.Self == b.Self && a.Key == b.Key && a.Active == b.Active && slices.Equal(a.Members, b.Members)
}

// owner is the rendezvous (highest random weight) choice: the member
// whose seed mixed with the key's hash scores highest. A member that
// joins or leaves moves only the objects it wins or held, about 1/N of
// them, and every member computes the same owner from the same view with
// no coordination.
func (a *Assignment) owner(namespace, name string) int {
	if len(a.seeds) == 0 {
		return -1
	}
	k := a.keyHash(namespace, name)
	best, bestScore := -1, uint64(0)
	for i, s := range a.seeds {
		if sc := mix64(k ^ s); best < 0 || sc > bestScore {
			best, bestScore = i, sc
		}
	}
	return best
}

func (a *Assignment) keyHash(namespace, name string) uint64 {
	switch {
	case a.Key == KeyNamespace && namespace != "":
		return hashString(fnvOffset, namespace)
	case a.Key == KeyNamespace:
		return hashString(fnvOffset, name)
	}
	h := hashString(fnvOffset, namespace)
	h = (h ^ '/') * fnvPrime
	return hashString(h, name)
}

func (a *Assignment) String() string {
	return fmt.Sprintf("self=%s active=%t members=%v", a.Self, a.Active, a.Members)
}

// FNV-1a, inlined: hash/fnv would allocate a hasher per object.
const (
	fnvOffset uint64 = 14695981039346656037
	fnvPrime  uint64 = 1099511628211
)

func hashString(h uint64, s string) uint64 {
	for i := 0; i < len(s); i++ {
		h ^= uint64(s[i])
		h *= fnvPrime
	}
	return h
}

// mix64 is SplitMix64's finalizer: FNV's low bits are weak, and
// rendezvous hashing compares whole scores.
func mix64(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}
