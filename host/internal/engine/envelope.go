package engine

import (
	"bytes"
	"encoding/json"
	"sync"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/informer-host/informer-host/abi"
	"github.com/informer-host/informer-host/informer"
)

// Envelope is one event encoded for plugins. Build it once per event with
// NewEnvelope and hand the same Envelope to every plugin instance: it is
// safe for concurrent use by any number of instances.
//
// The header is encoded when the Envelope is built (one allocation of about
// 100-200 bytes). The JSON of the object and of the old object is encoded
// on the first request for it, at most once, and shared by every plugin
// that asks. Field reads walk the unstructured object directly and never
// encode it.
//
// Concurrency: after NewEnvelope returns, the only mutable state is the two
// lazily encoded JSON documents, each guarded by its sync.Once; the event's
// objects are read-only (they belong to the informer cache).
type Envelope struct {
	ev     *informer.Event
	header []byte
	obj    lazyJSON
	old    lazyJSON
}

type lazyJSON struct {
	once sync.Once
	b    []byte
	err  error
}

// NewEnvelope encodes ev's header. ev and its objects must stay unchanged
// for as long as the Envelope is in use.
func NewEnvelope(ev *informer.Event) *Envelope {
	h := abi.Header{Type: uint8(ev.Type)}
	if ev.IsInInitialList {
		h.Flags |= abi.FlagInitialList
	}
	if ev.FinalStateUnknown {
		h.Flags |= abi.FlagFinalStateUnknown
	}
	if ev.OldObject != nil {
		h.Flags |= abi.FlagHasOldObject
	}
	if r := ev.Resource; r != nil {
		h.Fields[abi.FieldResourceName] = r.Name
		h.Fields[abi.FieldGroup] = r.Group
		h.Fields[abi.FieldVersion] = r.Version
		h.Fields[abi.FieldResource] = r.Resource
		h.Fields[abi.FieldKind] = r.Kind
	}
	if o := ev.Object; o != nil && o.Object != nil {
		h.Fields[abi.FieldNamespace] = o.GetNamespace()
		h.Fields[abi.FieldName] = o.GetName()
		h.Fields[abi.FieldUID] = string(o.GetUID())
		h.Fields[abi.FieldResourceVersion] = o.GetResourceVersion()
	}
	return &Envelope{ev: ev, header: abi.AppendHeader(nil, &h)}
}

// Event returns the event e was built from.
func (e *Envelope) Event() *informer.Event { return e.ev }

// Header returns the encoded header. The caller must not modify it.
func (e *Envelope) Header() []byte { return e.header }

// object returns the unstructured object selected by which, or nil.
func (e *Envelope) object(which int32) *unstructured.Unstructured {
	var u *unstructured.Unstructured
	switch which {
	case abi.ObjectNew:
		u = e.ev.Object
	case abi.ObjectOld:
		u = e.ev.OldObject
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
	l := &e.obj
	if which == abi.ObjectOld {
		l = &e.old
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
