package abi

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// Event types, the header's byte 1. The values equal event.EventType.
const (
	EventNone   uint8 = 0 // the header of an ih_synced call: no event
	EventAdd    uint8 = 1
	EventUpdate uint8 = 2
	EventDelete uint8 = 3
	// EventReconcile (since v1.5) is the header of an ih_reconcile call:
	// strings 0-8 describe a primary key of a controller-mode plugin
	// (ABI.md §18), not an event.
	EventReconcile uint8 = 4
)

// Header flags, the header's byte 2. Every bit is defined since v1.5.
const (
	// FlagInitialList is set on an add that comes from the informer's
	// initial list, or from the cache replay a plugin receives after it
	// was (re)started.
	FlagInitialList uint8 = 1 << 0
	// FlagFinalStateUnknown is set on a delete the watch missed; the object
	// is the last state the cache had and may be stale.
	FlagFinalStateUnknown uint8 = 1 << 1
	// FlagHasOldObject is set when object_read(ObjectOld, ...) has an
	// object to return (updates).
	FlagHasOldObject uint8 = 1 << 2
	// FlagSelfWrite is set on an event whose object is the result of one
	// of this plugin's own successful k8s_write calls: its
	// resourceVersion is one such a write returned for that object
	// (ABI.md §17.1). Since v1.2; zero before.
	FlagSelfWrite uint8 = 1 << 3
	// FlagHandedOver (since v1.2) is set on a delete that says the object
	// moved to another member of a sharding group: it left this replica's
	// share, not the cluster.
	FlagHandedOver uint8 = 1 << 4
	// FlagMissedDelete (since v1.5) is set, with FlagFinalStateUnknown, on
	// a delete the host inferred after the fact: an object the plugin was
	// handed that no longer existed when the host looked again (after a
	// restart, a reload, an unload, a quarantine or a handover). Its
	// object is a stub: apiVersion, kind, namespace, name and uid.
	FlagMissedDelete uint8 = 1 << 5
	// FlagAbsent (since v1.5, ih_reconcile only) says the key has no
	// object in the cache: object_read(0) is ERR_ABSENT.
	FlagAbsent uint8 = 1 << 6
	// FlagDeleting (since v1.5, ih_reconcile only) says the object's
	// metadata.deletionTimestamp is set.
	FlagDeleting uint8 = 1 << 7
)

// Header layout. All integers are little-endian.
//
//	offset  size  field
//	0       1     ABI version (1)
//	1       1     event type (1 add, 2 update, 3 delete)
//	2       1     flags
//	3       1     n, the number of string descriptors (9 in v1)
//	4       4     u32 total header length in bytes
//	8       8*n   n descriptors {u32 offset, u32 length}; offset from byte 0
//	8+8n    ...   the strings' UTF-8 bytes, not NUL-terminated
//
// A v1 host writes exactly HeaderFieldCount descriptors; a v1 plugin must
// accept n >= HeaderFieldCount and ignore descriptors past the ones it knows
// (a later v1 host may append fields) and any bytes it does not reference.
const (
	HeaderFixedSize  = 8
	HeaderFieldCount = 9
	// HeaderMinSize is the size of a v1 header whose strings are all empty.
	HeaderMinSize = HeaderFixedSize + 8*HeaderFieldCount

	offVersion = 0
	offType    = 1
	offFlags   = 2
	offCount   = 3
	offLength  = 4
)

// Indexes of the header's strings.
const (
	FieldResourceName    = 0 // the resource's name in config.yaml
	FieldGroup           = 1 // API group, "" for the core group
	FieldVersion         = 2 // API version, "v1"
	FieldResource        = 3 // plural resource, "pods"
	FieldKind            = 4 // kind, "Pod"
	FieldNamespace       = 5 // object namespace, "" if cluster-scoped
	FieldName            = 6 // object name
	FieldUID             = 7 // metadata.uid
	FieldResourceVersion = 8 // metadata.resourceVersion
)

// FieldNames are the spec names of the header's strings, by index.
func FieldNames() [HeaderFieldCount]string {
	return [HeaderFieldCount]string{
		"resource_name", "group", "version", "resource", "kind",
		"namespace", "name", "uid", "resource_version",
	}
}

// Header is the content of an event header, for encoding.
type Header struct {
	Type   uint8
	Flags  uint8
	Fields [HeaderFieldCount]string
}

// Size returns the encoded size of h.
func (h *Header) Size() int {
	n := HeaderMinSize
	for _, f := range h.Fields {
		n += len(f)
	}
	return n
}

// AppendHeader appends the encoding of h to dst and returns the extended
// slice. It allocates at most once, to grow dst to the exact size needed.
func AppendHeader(dst []byte, h *Header) []byte {
	size := h.Size()
	start := len(dst)
	if cap(dst)-start < size {
		n := make([]byte, start, start+size)
		copy(n, dst)
		dst = n
	}
	dst = dst[:start+size]
	b := dst[start:]
	b[offVersion] = Version
	b[offType] = h.Type
	b[offFlags] = h.Flags
	b[offCount] = HeaderFieldCount
	binary.LittleEndian.PutUint32(b[offLength:], uint32(size))
	off := HeaderMinSize
	for i, f := range h.Fields {
		d := HeaderFixedSize + 8*i
		binary.LittleEndian.PutUint32(b[d:], uint32(off))
		binary.LittleEndian.PutUint32(b[d+4:], uint32(len(f)))
		off += copy(b[off:], f)
	}
	return dst
}

// HeaderView is a decoded header. It refers to the bytes it was parsed
// from: it allocates nothing, and is valid as long as those bytes are
// unchanged.
type HeaderView struct {
	b []byte
	n int // number of descriptors
}

// ErrHeader is wrapped by every header decoding error.
var ErrHeader = errors.New("invalid event header")

// ParseHeader checks b and returns a view of it. It verifies the version,
// the length field, and that every descriptor lies inside b; it never
// panics, whatever b holds.
func ParseHeader(b []byte) (HeaderView, error) {
	if len(b) < HeaderFixedSize {
		return HeaderView{}, fmt.Errorf("%w: %d bytes, need at least %d", ErrHeader, len(b), HeaderFixedSize)
	}
	if b[offVersion] != Version {
		return HeaderView{}, fmt.Errorf("%w: ABI version %d, want %d", ErrHeader, b[offVersion], Version)
	}
	n := int(b[offCount])
	if n < HeaderFieldCount {
		return HeaderView{}, fmt.Errorf("%w: %d fields, need at least %d", ErrHeader, n, HeaderFieldCount)
	}
	total := binary.LittleEndian.Uint32(b[offLength:])
	if uint64(total) != uint64(len(b)) {
		return HeaderView{}, fmt.Errorf("%w: length field says %d bytes, have %d", ErrHeader, total, len(b))
	}
	if HeaderFixedSize+8*n > len(b) {
		return HeaderView{}, fmt.Errorf("%w: %d descriptors do not fit in %d bytes", ErrHeader, n, len(b))
	}
	for i := 0; i < n; i++ {
		d := HeaderFixedSize + 8*i
		off := binary.LittleEndian.Uint32(b[d:])
		l := binary.LittleEndian.Uint32(b[d+4:])
		if uint64(off)+uint64(l) > uint64(len(b)) {
			return HeaderView{}, fmt.Errorf("%w: field %d (%d+%d) past the end (%d)", ErrHeader, i, off, l, len(b))
		}
	}
	return HeaderView{b: b, n: n}, nil
}

// Bytes returns the header's encoding.
func (h HeaderView) Bytes() []byte { return h.b }

// Type returns the event type (EventAdd, EventUpdate, EventDelete).
func (h HeaderView) Type() uint8 { return h.b[offType] }

// Flags returns the flag byte.
func (h HeaderView) Flags() uint8 { return h.b[offFlags] }

// Has reports whether flag is set.
func (h HeaderView) Has(flag uint8) bool { return h.b[offFlags]&flag != 0 }

// NumFields returns the number of string descriptors.
func (h HeaderView) NumFields() int { return h.n }

// Field returns string i's bytes (a sub-slice of the header, not a copy), or
// nil if i is out of range.
func (h HeaderView) Field(i int) []byte {
	if i < 0 || i >= h.n {
		return nil
	}
	d := HeaderFixedSize + 8*i
	off := binary.LittleEndian.Uint32(h.b[d:])
	l := binary.LittleEndian.Uint32(h.b[d+4:])
	return h.b[off : off+l : off+l]
}

// Header copies the view into a Header.
func (h HeaderView) Header() Header {
	out := Header{Type: h.Type(), Flags: h.Flags()}
	for i := range out.Fields {
		out.Fields[i] = string(h.Field(i))
	}
	return out
}

// EventTypeName returns "add", "update", "delete", or "unknown".
func EventTypeName(t uint8) string {
	switch t {
	case EventAdd:
		return "add"
	case EventUpdate:
		return "update"
	case EventDelete:
		return "delete"
	}
	return "unknown"
}
