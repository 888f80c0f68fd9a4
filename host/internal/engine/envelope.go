package engine

import (
	"bytes"
	"encoding/json"
	"sync"
	"sync/atomic"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/informer-host/informer-host/abi"
	"github.com/informer-host/informer-host/event"
)

// Envelope is one event encoded for plugins. Build it once per event with
// NewEnvelope and hand the same Envelope to every plugin instance: it is
// safe for concurrent use by any number of instances.
//
// The header is encoded when the Envelope is built, into the Envelope
// itself (one allocation in all for a header of up to 192 bytes). The JSON
// of the object and of the old object is encoded on the first request for
// it, at most once, and shared by every plugin that asks. Field reads walk
// the unstructured object directly and never encode it.
//
// Concurrency: after NewEnvelope returns, the only mutable state is the two
// lazily encoded JSON documents, each allocated by compare-and-swap and
// guarded by its sync.Once; the event's objects are read-only (they belong
// to the informer cache).
type Envelope struct {
	header []byte // in headerBuf when it fits
	// namespace, name and rv are the new object's metadata.namespace,
	// .name and .resourceVersion (the object's own strings), read once
	// here for the header: the queue's key and the worker's version
	// checks take them from here instead of looking them up again.
	namespace, name, rv string
	// obj and old are the lazily encoded JSON documents, allocated by the
	// first plugin that asks (most events are never encoded).
	obj, old atomic.Pointer[lazyJSON]
	// event is NewEnvelope's copy of the event, and headerBuf holds the
	// header when it fits (nearly always: 80 bytes plus the names), so
	// that an Envelope is one allocation.
	event     event.Event
	headerBuf [inlineHeader]byte
}

// inlineHeader is the header size an Envelope holds without a second
// allocation: the 80 fixed bytes, a uid (36), a resourceVersion and about
// 60 bytes of resource, namespace and object names (a ConfigMap's or a
// Pod's header is typically 160-170 bytes). Larger headers take an
// allocation of their own. Every byte here is allocated per event.
const inlineHeader = 192

type lazyJSON struct {
	once sync.Once
	b    []byte
	err  error
}

// NewEnvelope encodes ev's header. The Envelope keeps a copy of *ev (the
// caller may reuse ev); the objects it points to must stay unchanged for
// as long as the Envelope is in use.
func NewEnvelope(ev *event.Event) *Envelope {
	e := &Envelope{event: *ev}
	ev = &e.event
	h := abi.Header{Type: uint8(ev.Type)}
	if ev.IsInInitialList {
		h.Flags |= abi.FlagInitialList
	}
	if ev.FinalStateUnknown {
		h.Flags |= abi.FlagFinalStateUnknown
	}
	if ev.HandedOver {
		h.Flags |= abi.FlagHandedOver
	}
	if ev.OldObject != nil {
		h.Flags |= abi.FlagHasOldObject
	}
	setResource(&h, ev.Resource)
	if o := ev.Object; o != nil && o.Object != nil {
		// What GetNamespace, GetName, GetUID and GetResourceVersion
		// return (the string, or "" if absent or not a string), with one
		// lookup of metadata instead of four.
		md, _ := o.Object["metadata"].(map[string]any)
		e.namespace, _ = md["namespace"].(string)
		e.name, _ = md["name"].(string)
		e.rv, _ = md["resourceVersion"].(string)
		h.Fields[abi.FieldNamespace], h.Fields[abi.FieldName], h.Fields[abi.FieldResourceVersion] = e.namespace, e.name, e.rv
		h.Fields[abi.FieldUID], _ = md["uid"].(string)
	}
	e.setHeader(&h)
	return e
}

// setResource puts r's strings into h (none for a nil r).
func setResource(h *abi.Header, r *event.ResourceRef) {
	if r == nil {
		return
	}
	h.Fields[abi.FieldResourceName] = r.Name
	h.Fields[abi.FieldGroup] = r.Group
	h.Fields[abi.FieldVersion] = r.Version
	h.Fields[abi.FieldResource] = r.Resource
	h.Fields[abi.FieldKind] = r.Kind
}

// setHeader encodes h into e, in e's own buffer when it fits.
func (e *Envelope) setHeader(h *abi.Header) {
	if h.Size() <= inlineHeader {
		e.header = abi.AppendHeader(e.headerBuf[:0], h)
	} else {
		e.header = abi.AppendHeader(nil, h)
	}
}

// Event returns the event e was built from.
func (e *Envelope) Event() *event.Event { return &e.event }

// Namespace, Name and ResourceVersion are those of the event's new object
// (GetNamespace, GetName, GetResourceVersion), "" without one.
func (e *Envelope) Namespace() string       { return e.namespace }
func (e *Envelope) Name() string            { return e.name }
func (e *Envelope) ResourceVersion() string { return e.rv }

// Header returns the encoded header. The caller must not modify it.
func (e *Envelope) Header() []byte { return e.header }

// object returns the unstructured object selected by which, or nil.
func (e *Envelope) object(which int32) *unstructured.Unstructured {
	var u *unstructured.Unstructured
	switch which {
	case abi.ObjectNew:
		u = e.event.Object
	case abi.ObjectOld:
		u = e.event.OldObject
	}
	if u == nil || u.Object == nil {
		return nil
	}
	return u
}

// json returns the JSON encoding of the selected object, encoding it on
// first use.
func (e *Envelope) json(which int32) ([]byte, error) {
	u := e.object(which)
	if u == nil {
		return nil, nil
	}
	p := &e.obj
	if which == abi.ObjectOld {
		p = &e.old
	}
	l := p.Load()
	if l == nil {
		// Racing plugins agree on the first lazyJSON stored.
		p.CompareAndSwap(nil, &lazyJSON{})
		l = p.Load()
	}
	l.once.Do(func() { l.b, l.err = encodeJSON(u.Object) })
	return l.b, l.err
}

// encodeJSON encodes v without HTML escaping, so plugins see the API
// server's text ("<" stays "<", not "\u003c").
func encodeJSON(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}
