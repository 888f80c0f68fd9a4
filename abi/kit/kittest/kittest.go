//go:build !wasip1

package kittest

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"testing"

	"github.com/informer-host/informer-host/abi"
	"github.com/informer-host/informer-host/abi/kit"
)

// Result codes of ih_handle.
const (
	OK    = abi.ResultOK
	Retry = abi.ResultRetry
	Drop  = abi.ResultDrop
	Error = abi.ResultError
)

// Result is what a handler returned: its code and set_error message.
type Result struct {
	Code    int32
	Message string
}

func (r Result) String() string { return fmt.Sprintf("result %d %q", r.Code, r.Message) }

// Host is the fake host. It is not safe for concurrent use (neither is a
// plugin).
type Host struct {
	t testing.TB
	// Config is what config_read returns (OnInit's configuration).
	Config []byte
	// Resources gives a resource name its API coordinates in the event
	// header; a name not here is version v1, resource = the name.
	Resources map[string]abi.Header
	// StateMaxBytes is the state quota (grants.state.maxBytes): the sum
	// of len(key)+len(value) past which state_set answers ERR_QUOTA, as
	// the host's store counts it. 0: no quota.
	StateMaxBytes int

	header   []byte
	obj, old []byte
	inEvent  bool
	errMsg   string
	logs     []string
	handles  [][]byte
	state    map[string]stateEntry
	version  int64
	cache    map[string]map[string][]byte // resource -> key -> JSON
	// granted are the resources whose cache the plugin may read: an
	// event or a write changes the cache (the informer's store, the
	// cluster), only GrantCache and Cache grant it.
	granted map[string]bool
	metrics []metric
	values  map[string]float64 // name + \x00 + labels

	resultMsg string        // result_message: the last §17 call's
	rv, uids  int64         // the last resourceVersion and uid a write made
	response  *HTTPResponse // the last http_request's, until the call returns
	writes    []WriteRequest
	events    []RecordedEvent
	requests  []HTTPRequest
	onWrite   func(WriteRequest) (int32, string)
	onEvent   func(RecordedEvent) (int32, string)
	upstreams map[string]func(HTTPRequest) HTTPResponse
	denied    map[string]bool // capabilities Deny took away
	loop      *Loop           // the controller loop, when Controller started one
}

type stateEntry struct {
	v   []byte
	ver int64
}

type metric struct {
	name string
	kind int32
}

// New installs a fake host for the test's duration.
func New(t testing.TB) *Host {
	h := &Host{t: t, state: map[string]stateEntry{}, cache: map[string]map[string][]byte{}, values: map[string]float64{}}
	t.Cleanup(kit.UseNative(h))
	return h
}

// Init calls the plugin's OnInit with h.Config; the error is its refusal.
func (h *Host) Init() error {
	h.errMsg, h.resultMsg = "", ""
	defer h.end()
	if rc := kit.NativeInit(int32(len(h.Config))); rc != abi.InitOK {
		return fmt.Errorf("ih_init returned %d: %s", rc, h.errMsg)
	}
	return nil
}

// Add, Update and Delete deliver an event; objects are JSON. As in the
// host, the cache holds the event's object when the handler runs: Add
// and Update put it there, Delete takes it out. An event does not grant
// its resource's cache (GrantCache, or Cache, does): as from the host, a
// plugin without the grant reads ERR_DENIED. Seed the cache with Cache
// for the objects the plugin reads but is not told of.
func (h *Host) Add(resource, obj string) Result {
	return h.deliver(abi.Header{Type: uint8(kit.Add)}, resource, obj, "")
}

// AddInitial delivers an add of the initial list.
func (h *Host) AddInitial(resource, obj string) Result {
	return h.deliver(abi.Header{Type: uint8(kit.Add), Flags: abi.FlagInitialList}, resource, obj, "")
}

func (h *Host) Update(resource, old, obj string) Result {
	return h.deliver(abi.Header{Type: uint8(kit.Update), Flags: abi.FlagHasOldObject}, resource, obj, old)
}

// SelfWrite delivers the plugin's own write coming back (header flag
// self write, ABI.md §17.1): an update of old to obj, or an add when old
// is "".
func (h *Host) SelfWrite(resource, old, obj string) Result {
	if old == "" {
		return h.deliver(abi.Header{Type: uint8(kit.Add), Flags: abi.FlagSelfWrite}, resource, obj, "")
	}
	return h.deliver(abi.Header{Type: uint8(kit.Update), Flags: abi.FlagHasOldObject | abi.FlagSelfWrite}, resource, obj, old)
}

func (h *Host) Delete(resource, obj string) Result {
	return h.deliver(abi.Header{Type: uint8(kit.Delete)}, resource, obj, "")
}

// Synced calls OnSynced for resource.
func (h *Host) Synced(resource string) {
	hd := h.resourceHeader(abi.Header{}, resource)
	h.header = abi.AppendHeader(nil, &hd)
	h.obj, h.old = nil, nil
	h.inEvent, h.resultMsg = true, ""
	defer h.end()
	kit.NativeSynced(int32(len(h.header)))
}

// Shutdown calls OnShutdown.
func (h *Host) Shutdown() {
	h.resultMsg = ""
	defer h.end()
	kit.NativeShutdown()
}

func (h *Host) resourceHeader(hd abi.Header, resource string) abi.Header {
	if r, ok := h.Resources[resource]; ok {
		hd.Fields = r.Fields
	} else {
		hd.Fields[abi.FieldVersion], hd.Fields[abi.FieldResource] = "v1", resource
	}
	hd.Fields[abi.FieldResourceName] = resource
	return hd
}

func (h *Host) deliver(hd abi.Header, resource, obj, old string) Result {
	var o struct {
		Metadata struct{ Namespace, Name, UID, ResourceVersion string }
	}
	if err := json.Unmarshal([]byte(obj), &o); err != nil {
		h.t.Fatalf("kittest: object: %v", err)
	}
	// The host's cache holds an event's object when the plugin is
	// called (the informer's store is updated first), and has lost a
	// deleted one; a plugin without the cache grant reads neither.
	if hd.Type == uint8(kit.Delete) {
		h.Uncache(resource, o.Metadata.Namespace, o.Metadata.Name)
	} else {
		h.cached(resource, o.Metadata.Namespace, o.Metadata.Name, obj)
	}
	hd = h.resourceHeader(hd, resource)
	hd.Fields[abi.FieldNamespace], hd.Fields[abi.FieldName] = o.Metadata.Namespace, o.Metadata.Name
	hd.Fields[abi.FieldUID], hd.Fields[abi.FieldResourceVersion] = o.Metadata.UID, o.Metadata.ResourceVersion
	h.header = abi.AppendHeader(nil, &hd)
	h.obj, h.old = []byte(obj), nil
	if old != "" {
		h.old = []byte(old)
	}
	h.errMsg, h.resultMsg = "", ""
	h.inEvent = true
	defer h.end()
	rc := kit.NativeHandle(int32(len(h.header)))
	return Result{Code: rc, Message: h.errMsg}
}

// end ends an export call: its handles and HTTP response go with it.
func (h *Host) end() { h.inEvent, h.handles, h.response = false, nil, nil }

// Logs returns the lines logged so far, each "LEVEL message".
func (h *Host) Logs() []string { return h.logs }

// State returns key's value and whether it exists; SetState seeds it.
func (h *Host) State(key string) (string, bool) {
	e, ok := h.state[key]
	return string(e.v), ok
}

func (h *Host) SetState(key, value string) {
	h.version++
	h.state[key] = stateEntry{v: []byte(value), ver: h.version}
}

// GrantCache grants the plugin the cache of each resource (grants.cache),
// empty until Cache or an event fills it: reads of a resource not
// granted answer ERR_DENIED, as the host's do.
func (h *Host) GrantCache(resources ...string) {
	if h.granted == nil {
		h.granted = map[string]bool{}
	}
	for _, r := range resources {
		h.granted[r] = true
	}
}

// Cache puts an object (JSON) into resource's cache, granting it
// (GrantCache).
func (h *Host) Cache(resource, obj string) {
	var o struct {
		Metadata struct{ Namespace, Name string }
	}
	if err := json.Unmarshal([]byte(obj), &o); err != nil {
		h.t.Fatalf("kittest: cached object: %v", err)
	}
	h.GrantCache(resource)
	h.cached(resource, o.Metadata.Namespace, o.Metadata.Name, obj)
}

func (h *Host) cached(resource, ns, name, obj string) {
	if h.cache[resource] == nil {
		h.cache[resource] = map[string][]byte{}
	}
	h.cache[resource][key(ns, name)] = []byte(obj)
}

// Uncache takes the object resource namespace/name out of the cache (the
// grant stays as it is), as the
// informer's store loses an object deleted while the plugin was not told
// (a test of a missed delete).
func (h *Host) Uncache(resource, namespace, name string) {
	delete(h.cache[resource], key(namespace, name))
}

// Deny takes capabilities away, as an operator who did not grant them:
// "cache" (every resource; a resource not granted is denied anyway), "state" and "metrics" then answer ERR_DENIED.
func (h *Host) Deny(capabilities ...string) {
	if h.denied == nil {
		h.denied = map[string]bool{}
	}
	for _, c := range capabilities {
		switch c {
		case "cache", "state", "metrics":
			h.denied[c] = true
		default:
			h.t.Fatalf("kittest: Deny(%q): not a capability it can deny (cache, state, metrics)", c)
		}
	}
}

// Metric returns the value of the metric name with the label values
// given (a counter's or gauge's value; a histogram's sum).
func (h *Host) Metric(name string, labelValues ...string) float64 {
	return h.values[name+"\x00"+strings.Join(labelValues, "\x00")]
}

func key(ns, name string) string {
	if ns == "" {
		return name
	}
	return ns + "/" + name
}

func copySized(buf, data []byte) int32 {
	if len(data) <= len(buf) {
		copy(buf, data)
	}
	return int32(len(data))
}

func (h *Host) HeaderRead(buf []byte) int32 {
	if !h.inEvent {
		return abi.ErrNoEvent
	}
	return copySized(buf, h.header)
}

func (h *Host) pick(which int32) ([]byte, int32) {
	switch {
	case !h.inEvent && which < abi.FirstHandle:
		return nil, abi.ErrNoEvent
	case which == abi.ObjectNew && h.obj != nil:
		return h.obj, 0
	case which == abi.ObjectOld && h.old != nil:
		return h.old, 0
	case which >= abi.FirstHandle && int(which-abi.FirstHandle) < len(h.handles):
		return h.handles[which-abi.FirstHandle], 0
	}
	return nil, abi.ErrAbsent
}

func (h *Host) ObjectRead(which int32, buf []byte) int32 {
	o, code := h.pick(which)
	if code != 0 {
		return code
	}
	return copySized(buf, o)
}

func (h *Host) FieldRead(which int32, path string, buf []byte) int64 {
	o, code := h.pick(which)
	if code != 0 {
		return int64(code)
	}
	return kit.NativeFieldRead(o, path, buf)
}

func (h *Host) ConfigRead(buf []byte) int32 { return copySized(buf, h.Config) }
func (h *Host) SetError(msg string) int32   { h.errMsg = msg; return 0 }

func (h *Host) Log(level int32, msg string) int32 {
	h.logs = append(h.logs, levelName(level)+" "+msg)
	h.t.Logf("plugin: %s %s", levelName(level), msg)
	return 0
}

func levelName(l int32) string {
	switch l {
	case abi.LogDebug:
		return "DEBUG"
	case abi.LogInfo:
		return "INFO"
	case abi.LogWarn:
		return "WARN"
	}
	return "ERROR"
}

func (h *Host) StateGet(k string, buf []byte, version *int64) int32 {
	if h.denied["state"] {
		return abi.ErrDenied
	}
	e, ok := h.state[k]
	if !ok {
		return abi.ErrAbsent
	}
	*version = e.ver
	return copySized(buf, e.v)
}

func (h *Host) StateSet(k string, v []byte, ifVersion int64) int64 {
	if h.denied["state"] {
		return int64(abi.ErrDenied)
	}
	e, ok := h.state[k]
	switch {
	case ifVersion == 0 && ok, ifVersion > 0 && (!ok || e.ver != ifVersion):
		return int64(abi.ErrConflict)
	}
	if h.StateMaxBytes > 0 {
		used := len(k) + len(v)
		for key, e := range h.state {
			if key != k {
				used += len(key) + len(e.v)
			}
		}
		if used > h.StateMaxBytes {
			return int64(abi.ErrQuota)
		}
	}
	h.version++
	h.state[k] = stateEntry{v: append([]byte(nil), v...), ver: h.version}
	return h.version
}

func (h *Host) StateDelete(k string, ifVersion int64) int32 {
	if h.denied["state"] {
		return abi.ErrDenied
	}
	e, ok := h.state[k]
	switch {
	case !ok:
		return abi.ErrAbsent
	case ifVersion > 0 && e.ver != ifVersion:
		return abi.ErrConflict
	}
	delete(h.state, k)
	return 0
}

func (h *Host) StateList(prefix, after string, max int32, buf []byte) int64 {
	if h.denied["state"] {
		return int64(abi.ErrDenied)
	}
	var keys []string
	for k := range h.state {
		if strings.HasPrefix(k, prefix) && k > after {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	if len(keys) > int(max) {
		keys = keys[:max]
	}
	var b []byte
	for _, k := range keys {
		b = binary.LittleEndian.AppendUint32(b, uint32(len(k)))
		b = append(b, k...)
	}
	return abi.PackList(uint32(len(keys)), uint32(copySized(buf, b)))
}

func (h *Host) CacheGet(res, ns, name string) int32 {
	objs := h.cache[res]
	if !h.granted[res] || h.denied["cache"] {
		return abi.ErrDenied
	}
	o, ok := objs[key(ns, name)]
	if !ok {
		return abi.ErrAbsent
	}
	h.handles = append(h.handles, o)
	return abi.FirstHandle + int32(len(h.handles)-1)
}

func (h *Host) keys(res string, start int32, buf []byte, match func(obj []byte) bool) int64 {
	objs := h.cache[res]
	if !h.granted[res] || h.denied["cache"] {
		return int64(abi.ErrDenied)
	}
	var keys []string
	for k, o := range objs {
		if match(o) {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	if int(start) < len(keys) {
		keys = keys[start:]
	} else {
		keys = nil
	}
	var b []byte
	for _, k := range keys {
		b = append(append(b, k...), '\n')
	}
	return abi.PackList(uint32(int(start)+len(keys)), uint32(copySized(buf, b)))
}

type meta struct {
	Metadata struct {
		Namespace       string
		Labels          map[string]string
		OwnerReferences []struct{ UID string }
	}
}

func decode(obj []byte) meta {
	var m meta
	_ = json.Unmarshal(obj, &m)
	return m
}

func (h *Host) CacheList(res, ns, selector string, start int32, buf []byte) int64 {
	sel, err := parseSelector(selector)
	if err != nil {
		return int64(abi.ErrInvalid)
	}
	return h.keys(res, start, buf, func(o []byte) bool {
		m := decode(o)
		return (ns == "" || m.Metadata.Namespace == ns) && sel.matches(m.Metadata.Labels)
	})
}

func (h *Host) CacheIndex(res, index, value string, start int32, buf []byte) int64 {
	switch index {
	case "namespace":
		return h.keys(res, start, buf, func(o []byte) bool { return decode(o).Metadata.Namespace == value })
	case "owner":
		return h.keys(res, start, buf, func(o []byte) bool {
			for _, r := range decode(o).Metadata.OwnerReferences {
				if r.UID == value {
					return true
				}
			}
			return false
		})
	}
	return int64(abi.ErrInvalid)
}

func (h *Host) MetricDeclare(kind int32, decl []byte) int32 {
	if h.denied["metrics"] {
		return abi.ErrDenied
	}
	var d struct{ Name string }
	if err := json.Unmarshal(decl, &d); err != nil || d.Name == "" {
		return abi.ErrInvalid
	}
	h.metrics = append(h.metrics, metric{name: d.Name, kind: kind})
	return int32(len(h.metrics) - 1)
}

func (h *Host) series(id int32, labels []byte) (string, bool) {
	if id < 0 || int(id) >= len(h.metrics) {
		return "", false
	}
	return h.metrics[id].name + "\x00" + string(labels), true
}

func (h *Host) MetricAdd(id int32, v float64, labels []byte) int32 {
	k, ok := h.series(id, labels)
	if !ok || v < 0 {
		return abi.ErrInvalid
	}
	h.values[k] += v
	return 0
}

func (h *Host) MetricSet(id int32, v float64, labels []byte) int32 {
	k, ok := h.series(id, labels)
	if !ok {
		return abi.ErrInvalid
	}
	h.values[k] = v
	return 0
}

func (h *Host) MetricObserve(id int32, v float64, labels []byte) int32 {
	return h.MetricAdd(id, v, labels)
}

var _ kit.Native = (*Host)(nil)
