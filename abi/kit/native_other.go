//go:build !wasip1

package kit

import (
	"encoding/json"
	"time"

	"github.com/informer-host/informer-host/abi"
)

// Native is the host's side of the ABI as Go methods, one per import
// (abi/ABI.md §6, §16, §17), with the imports' codes and size protocol. Package
// kittest implements it so that `go test` runs a plugin's handlers
// natively; plugins do not use it. Off wasip1 only.
type Native interface {
	HeaderRead(buf []byte) int32
	ObjectRead(which int32, buf []byte) int32
	FieldRead(which int32, path string, buf []byte) int64
	ConfigRead(buf []byte) int32
	SetError(msg string) int32
	Log(level int32, msg string) int32

	StateGet(key string, buf []byte, version *int64) int32
	StateSet(key string, value []byte, ifVersion int64) int64
	StateDelete(key string, ifVersion int64) int32
	StateList(prefix, after string, max int32, buf []byte) int64

	CacheGet(res, ns, name string) int32
	CacheList(res, ns, selector string, start int32, buf []byte) int64
	CacheIndex(res, index, value string, start int32, buf []byte) int64

	MetricDeclare(kind int32, decl []byte) int32
	MetricAdd(id int32, v float64, labels []byte) int32
	MetricSet(id int32, v float64, labels []byte) int32
	MetricObserve(id int32, v float64, labels []byte) int32

	// Capabilities II (§17); each sets the result message that
	// ResultMessage reads.
	K8sWrite(op int32, res, ns, name, sub string, body []byte, uid, rv string, flags int32) int32
	EventRecord(which, typ int32, reason, msg string) int32
	HTTPRequest(upstream, method, path string, header, body []byte) int32
	HTTPResponseRead(part int32, buf []byte) int32
	ResultMessage(buf []byte) int32
}

// NativeController is the host's side of controller mode (ABI.md §18),
// one method per import; a Native that implements it serves
// reconcile calls (kittest's controller loop). Kept apart from Native so
// that a Native written before v1.5 still compiles.
type NativeController interface {
	ReconcileRequeueAfter(millis int64) int32
	ChildrenApply(body []byte) int32
	StatusApply(body []byte) int32
}

// NativeClock is a Native's clock, when it keeps one (kittest's fake
// clock): kit.Now reads it.
type NativeClock interface{ Now() time.Time }

// nativeHost adapts a Native to the kit's import interfaces.
type nativeHost struct{ n Native }

func (h nativeHost) headerRead(buf []byte) int32                 { return h.n.HeaderRead(buf) }
func (h nativeHost) objectRead(w int32, buf []byte) int32        { return h.n.ObjectRead(w, buf) }
func (h nativeHost) fieldRead(w int32, p string, b []byte) int64 { return h.n.FieldRead(w, p, b) }
func (h nativeHost) configRead(buf []byte) int32                 { return h.n.ConfigRead(buf) }
func (h nativeHost) setError(msg string) int32                   { return h.n.SetError(msg) }
func (h nativeHost) log(level int32, msg string) int32           { return h.n.Log(level, msg) }
func (h nativeHost) get(k string, b []byte, v *int64) int32      { return h.n.StateGet(k, b, v) }
func (h nativeHost) set(k string, v []byte, iv int64) int64      { return h.n.StateSet(k, v, iv) }
func (h nativeHost) del(k string, iv int64) int32                { return h.n.StateDelete(k, iv) }
func (h nativeHost) list(p, a string, m int32, b []byte) int64 {
	return h.n.StateList(p, a, m, b)
}
func (h nativeHost) cacheGet(r, ns, name string) int32 { return h.n.CacheGet(r, ns, name) }
func (h nativeHost) cacheList(r, ns, s string, st int32, b []byte) int64 {
	return h.n.CacheList(r, ns, s, st, b)
}
func (h nativeHost) cacheIndex(r, i, v string, st int32, b []byte) int64 {
	return h.n.CacheIndex(r, i, v, st, b)
}
func (h nativeHost) metricDeclare(k int32, d []byte) int32         { return h.n.MetricDeclare(k, d) }
func (h nativeHost) metricAdd(id int32, v float64, l []byte) int32 { return h.n.MetricAdd(id, v, l) }
func (h nativeHost) metricSet(id int32, v float64, l []byte) int32 { return h.n.MetricSet(id, v, l) }
func (h nativeHost) metricObserve(id int32, v float64, l []byte) int32 {
	return h.n.MetricObserve(id, v, l)
}

func (h nativeHost) k8sWrite(op int32, t Target, body []byte, p Preconditions, flags int32) int32 {
	return h.n.K8sWrite(op, t.Resource, t.Namespace, t.Name, t.Subresource, body, p.UID, p.ResourceVersion, flags)
}
func (h nativeHost) eventRecord(w, typ int32, reason, msg string) int32 {
	return h.n.EventRecord(w, typ, reason, msg)
}
func (h nativeHost) httpRequest(up, method, path string, header, body []byte) int32 {
	return h.n.HTTPRequest(up, method, path, header, body)
}
func (h nativeHost) httpResponseRead(part int32, buf []byte) int32 {
	return h.n.HTTPResponseRead(part, buf)
}
func (h nativeHost) resultMessage(buf []byte) int32 { return h.n.ResultMessage(buf) }

func (h nativeHost) controller() NativeController {
	if c, ok := h.n.(NativeController); ok {
		return c
	}
	return nil
}
func (h nativeHost) requeueAfter(millis int64) int32 {
	if c := h.controller(); c != nil {
		return c.ReconcileRequeueAfter(millis)
	}
	return abi.ErrNoEvent
}
func (h nativeHost) childrenApply(body []byte) int32 {
	if c := h.controller(); c != nil {
		return c.ChildrenApply(body)
	}
	return abi.ErrNoEvent
}
func (h nativeHost) statusApply(body []byte) int32 {
	if c := h.controller(); c != nil {
		return c.StatusApply(body)
	}
	return abi.ErrNoEvent
}
func (h nativeHost) now() time.Time {
	if c, ok := h.n.(NativeClock); ok {
		return c.Now()
	}
	return time.Now()
}

// UseNative makes n the host of the plugin's handlers (kittest) and
// returns the function that puts the previous host back. Metrics declared
// before are declared again with n on their next use.
func UseNative(n Native) (restore func()) {
	prevHost, prevState := the.host, stateHost
	the.host = nativeHost{n}
	stateHost = nativeHost{n}
	the.hosts++
	return func() { the.host, stateHost = prevHost, prevState; the.hosts++ }
}

// NativeInit, NativeHandle, NativeSynced and NativeShutdown call the
// kit's exports (ih_init, ih_handle, ih_synced, ih_shutdown) as the host
// would, with the lengths the host would pass.
func NativeInit(configLen int32) int32   { return the.init(configLen) }
func NativeHandle(headerLen int32) int32 { return the.handle(headerLen) }
func NativeSynced(headerLen int32)       { the.synced(headerLen) }
func NativeShutdown()                    { the.shutdown() }

// NativeReconcile calls ih_reconcile as the host would.
func NativeReconcile(headerLen int32) int32 { return the.reconcile(headerLen) }

// NativeFieldRead is field_read over an object's JSON, as the host answers
// it (kinds, codes and the size protocol), for a Native that keeps objects
// as JSON: ERR_BAD_PATH for a path that does not parse, ERR_NOT_FOUND for
// one that does not resolve, ERR_INTERNAL for an object that is not JSON.
func NativeFieldRead(obj []byte, path string, buf []byte) int64 {
	segs, err := abi.ParsePath(path)
	if err != nil {
		return int64(abi.ErrBadPath)
	}
	var cur any
	if err := json.Unmarshal(obj, &cur); err != nil {
		return int64(abi.ErrInternal)
	}
	for _, s := range segs {
		switch c := cur.(type) {
		case map[string]any:
			v, ok := c[s.Key]
			if !ok || s.IsIndex {
				return int64(abi.ErrNotFound)
			}
			cur = v
		case []any:
			if !s.IsIndex || s.Index >= len(c) {
				return int64(abi.ErrNotFound)
			}
			cur = c[s.Index]
		default:
			return int64(abi.ErrNotFound)
		}
	}
	out := func(kind int32, data []byte) int64 {
		if len(data) <= len(buf) {
			copy(buf, data)
		}
		return abi.PackField(kind, uint32(len(data)))
	}
	if s, ok := cur.(string); ok {
		return out(abi.KindString, []byte(s))
	}
	b, _ := json.Marshal(cur)
	kind := abi.KindNumber
	switch b[0] {
	case '{':
		kind = abi.KindObject
	case '[':
		kind = abi.KindArray
	case 't', 'f':
		kind = abi.KindBool
	case 'n':
		kind = abi.KindNull
	}
	return out(kind, b)
}
