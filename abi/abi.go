package abi

// Version is the ABI version this package describes.
const Version = 1

// Names of the host's import module and of the marker export. Both carry the
// version so a mismatch is found when a plugin is loaded, never while it runs.
const (
	// ImportModule is the wasm import module every host function lives in.
	ImportModule = "informer_host_v1"
	// ImportModulePrefix, followed by a decimal version, names the import
	// module of any ABI version. A host recognises the prefix to report
	// "speaks ABI v2" rather than "imports an unknown module".
	ImportModulePrefix = "informer_host_v"
	// MarkerExport is the function a v1 plugin must export. It has the
	// signature () -> () and is never called: it exists so that a plugin
	// states which ABI it was written against even when it imports nothing.
	MarkerExport = "informer_host_abi_v1"
	// MarkerExportPrefix, followed by a decimal version, names the marker of
	// any ABI version.
	MarkerExportPrefix = "informer_host_abi_v"
)

// Exports a plugin provides. All plugin-defined entry points share the
// prefix "ih_" so they cannot collide with a toolchain's own exports.
const (
	// ExportMemory is the plugin's linear memory; required. The host copies
	// data into it, only into ranges the plugin names in an import call.
	ExportMemory = "memory"
	// ExportInitialize is the WASI reactor initializer, () -> (); optional.
	// The host calls it once, before ih_init.
	ExportInitialize = "_initialize"
	// ExportStart is the WASI command entry point. A module that exports it
	// is refused: a command's runtime is torn down when _start returns, so
	// calling ih_handle afterwards is undefined.
	ExportStart = "_start"
	// ExportInit is ih_init(config_len i32) -> i32; optional.
	ExportInit = "ih_init"
	// ExportHandle is ih_handle(header_len i32) -> i32; required.
	ExportHandle = "ih_handle"
	// ExportShutdown is ih_shutdown() -> (); optional.
	ExportShutdown = "ih_shutdown"
	// ExportSynced is ih_synced(header_len i32) -> (); optional. The host
	// calls it once per binding when the plugin has handled the binding's
	// initial list (after a start, restart, reload or overflow repair).
	ExportSynced = "ih_synced"
	// ExportHandleBatch is ih_handle_batch(count i32) -> i32; optional,
	// since v1.4. When events wait, the host may hand up to count of them
	// (count >= 2) in one call instead of one ih_handle call each; the
	// plugin makes each current with batch_select, settles it with
	// batch_result and returns how many it settled (ABI.md §5).
	ExportHandleBatch = "ih_handle_batch"
	// ExportReconcile is ih_reconcile(header_len i32) -> i32; optional,
	// since v1.5, required of a plugin configured as a controller: the
	// host hands it one primary key at a time (ABI.md §18).
	ExportReconcile = "ih_reconcile"
	// ExportPrefix is the prefix reserved for ABI entry points.
	ExportPrefix = "ih_"
)

// Host functions, all in module ImportModule. Every pointer and length is an
// i32 into the plugin's own memory; see ABI.md for the full contract.
const (
	// ImportHeaderRead is header_read(ptr, len i32) -> i32.
	ImportHeaderRead = "header_read"
	// ImportObjectRead is object_read(which, ptr, len i32) -> i32.
	ImportObjectRead = "object_read"
	// ImportFieldRead is field_read(which, path_ptr, path_len, ptr, len i32) -> i64.
	ImportFieldRead = "field_read"
	// ImportConfigRead is config_read(ptr, len i32) -> i32.
	ImportConfigRead = "config_read"
	// ImportSetError is set_error(ptr, len i32) -> i32.
	ImportSetError = "set_error"
	// ImportLog is log(level, ptr, len i32) -> i32.
	ImportLog = "log"

	// Cache reads (capability "cache", ABI.md §16.1).

	// ImportCacheGet is cache_get(res_ptr, res_len, ns_ptr, ns_len,
	// name_ptr, name_len i32) -> i32: a handle (>= FirstHandle) usable as
	// which in object_read and field_read, or an error code.
	ImportCacheGet = "cache_get"
	// ImportCacheList is cache_list(res_ptr, res_len, ns_ptr, ns_len,
	// sel_ptr, sel_len, start, ptr, len i32) -> i64: a page of keys, packed
	// with PackList.
	ImportCacheList = "cache_list"
	// ImportCacheIndex is cache_index(res_ptr, res_len, index_ptr,
	// index_len, value_ptr, value_len, start, ptr, len i32) -> i64: a page
	// of keys, packed with PackList.
	ImportCacheIndex = "cache_index"
	// State (ABI.md §16.2), granted by grants.state.

	// ImportStateGet is state_get(key_ptr, key_len, ptr, len, version_ptr i32) -> i32.
	ImportStateGet = "state_get"
	// ImportStateSet is state_set(key_ptr, key_len, val_ptr, val_len i32, if_version i64) -> i64.
	ImportStateSet = "state_set"
	// ImportStateDelete is state_delete(key_ptr, key_len i32, if_version i64) -> i32.
	ImportStateDelete = "state_delete"
	// ImportStateList is state_list(prefix_ptr, prefix_len, after_ptr, after_len, max, ptr, len i32) -> i64.
	ImportStateList = "state_list"

	// Metrics capability (ABI.md §16.3), granted per plugin.

	// ImportMetricDeclare is metric_declare(kind, ptr, len i32) -> i32.
	ImportMetricDeclare = "metric_declare"
	// ImportMetricAdd is metric_add(id i32, value f64, labels_ptr, labels_len i32) -> i32.
	ImportMetricAdd = "metric_add"
	// ImportMetricSet is metric_set(id i32, value f64, labels_ptr, labels_len i32) -> i32.
	ImportMetricSet = "metric_set"
	// ImportMetricObserve is metric_observe(id i32, value f64, labels_ptr, labels_len i32) -> i32.
	ImportMetricObserve = "metric_observe"

	// ImportResultMessage is result_message(ptr, len i32) -> i32: the
	// message of the last call of a capabilities II function (ABI.md §17)
	// in the current export call, with the size protocol; 0 when that call
	// succeeded or none was made. Every plugin may call it.
	ImportResultMessage = "result_message"

	// Batches (ih_handle_batch, ABI.md §5), since v1.4. Every plugin may
	// call them; outside ih_handle_batch they return ERR_NO_EVENT.

	// ImportBatchSelect is batch_select(index i32) -> i32: makes event
	// index of the batch the current event of header_read, object_read,
	// field_read and event_record, and returns its header's size.
	ImportBatchSelect = "batch_select"
	// ImportBatchResult is batch_result(code i32) -> i32: settles the
	// current event with code (an ih_handle result) and the set_error
	// message given since batch_select; 0 or an error code.
	ImportBatchResult = "batch_result"

	// Controller mode (ABI.md §18), since v1.5; outside ih_reconcile
	// each returns ErrNoEvent.

	// ImportReconcileRequeueAfter is reconcile_requeue_after(millis i64)
	// -> i32: reconcile the key again after millis once the call answers
	// OK (0 clears); every plugin may call it.
	ImportReconcileRequeueAfter = "reconcile_requeue_after"
	// ImportChildrenApply is children_apply(ptr, len i32) -> i32: the
	// complete set of the key's children, a JSON array, applied and the
	// stale ones pruned; the number that failed, or an error code.
	// Capability "writes".
	ImportChildrenApply = "children_apply"
	// ImportStatusApply is status_apply(ptr, len i32) -> i32: the status
	// fields the plugin owns, conditions completed by the host, applied
	// to the primary's status subresource. Capability "writes".
	ImportStatusApply = "status_apply"

	// Kubernetes writes (capability "writes", ABI.md §17.1), since v1.2.

	// ImportK8sWrite is k8s_write(op, res_ptr, res_len, ns_ptr, ns_len,
	// name_ptr, name_len, sub_ptr, sub_len, body_ptr, body_len, uid_ptr,
	// uid_len, rv_ptr, rv_len, flags i32) -> i32: a handle to the object
	// the apiserver returned (>= FirstHandle), 0 for a delete, or an
	// error code; result_message has the apiserver's message.
	ImportK8sWrite = "k8s_write"
	// Events (capability "events", ABI.md §17.2), since v1.2.

	// ImportEventRecord is event_record(which, type, reason_ptr,
	// reason_len, msg_ptr, msg_len i32) -> i32: 0 or an error code.
	ImportEventRecord = "event_record"

	// HTTP upstreams (capability "http", ABI.md §17.3), since v1.2.

	// ImportHTTPRequest is http_request(up_ptr, up_len, method_ptr,
	// method_len, path_ptr, path_len, headers_ptr, headers_len, body_ptr,
	// body_len i32) -> i32: the response's HTTP status or an error code.
	ImportHTTPRequest = "http_request"
	// ImportHTTPResponseRead is http_response_read(which_part, ptr, len
	// i32) -> i32: a part of the last response, with the size protocol.
	ImportHTTPResponseRead = "http_response_read"
)

// Event types, the type argument of event_record.
const (
	KubeEventNormal  int32 = 0
	KubeEventWarning int32 = 1
)

// Parts of an HTTP response, the which_part argument of
// http_response_read.
const (
	HTTPBody   int32 = 0 // the body, as received
	HTTPHeader int32 = 1 // "Name: value\n" lines, canonical names, sorted
)

// MaxEventReason and MaxEventMessage bound event_record's text, as the
// Events API does (reason 128 characters, note 1 KiB).
const (
	MaxEventReason  = 128
	MaxEventMessage = 1024
)

// Operations of k8s_write (its op argument), ABI.md §17.1. Each needs
// its verb in the plugin's writes grant.
const (
	WriteCreate     int32 = 1 // POST the body; verb create
	WriteMergePatch int32 = 2 // JSON merge patch (RFC 7386); verb patch
	WriteJSONPatch  int32 = 3 // JSON patch (RFC 6902); verb patch
	WriteApply      int32 = 4 // server-side apply; verb apply
	WriteDelete     int32 = 5 // DELETE, body empty; verb delete
)

// Flags of k8s_write (its flags argument). Other bits are ERR_INVALID.
const (
	// WriteForce takes over conflicting fields on an apply (force=true).
	WriteForce int32 = 1 << 0
	// WriteMustExist makes an apply update an existing object only: if
	// there is none (deleted meanwhile) it is ErrAbsent rather than a
	// create. Since v1.3.
	WriteMustExist int32 = 1 << 1
	// WriteFlagsKnown is every flag a v1.3 host knows.
	WriteFlagsKnown = WriteForce | WriteMustExist
)

// WriteVerb returns the grant verb of a k8s_write op ("create", "patch",
// "apply", "delete"), or "" for an unknown op.
func WriteVerb(op int32) string {
	switch op {
	case WriteCreate:
		return "create"
	case WriteMergePatch, WriteJSONPatch:
		return "patch"
	case WriteApply:
		return "apply"
	case WriteDelete:
		return "delete"
	}
	return ""
}

// WriteOpName names a k8s_write op as logs, errors and the kits' fakes
// do: "create", "merge-patch", "json-patch", "apply", "delete"; "" for
// an unknown op.
func WriteOpName(op int32) string {
	switch op {
	case WriteMergePatch:
		return "merge-patch"
	case WriteJSONPatch:
		return "json-patch"
	}
	return WriteVerb(op)
}

// State limits and conventions (ABI.md §16.2).
const (
	// StateAnyVersion as if_version writes or deletes whatever version
	// the key is at.
	StateAnyVersion int64 = -1
	// StateMaxKeyLen is the longest state key, in bytes.
	StateMaxKeyLen = 1024
	// StateMaxList is the most keys one state_list call returns.
	StateMaxList = 1000
)

// Capabilities a plugin may be granted (ABI.md §16). A module requests one
// by importing a function whose name starts with the capability and "_".
const (
	CapabilityCache   = "cache"
	CapabilityState   = "state"
	CapabilityMetrics = "metrics"
	// Capabilities II (ABI.md §17), since v1.2.
	CapabilityWrites = "writes" // k8s_*: create, patch, apply, delete
	CapabilityEvents = "events" // event_*: Kubernetes Events
	CapabilityHTTP   = "http"   // http_*: named upstreams
)

// CapabilityOf returns the capability the host function importName
// belongs to ("cache", "state", "metrics", "writes", "events", "http"), or "" for a function every
// plugin may call. The mapping is by name prefix, so it covers functions
// a later host adds to a capability.
func CapabilityOf(importName string) string {
	for _, c := range [...]struct{ prefix, capability string }{
		{"cache_", CapabilityCache},
		{"state_", CapabilityState},
		{"metric_", CapabilityMetrics},
		{"k8s_", CapabilityWrites},
		{"children_", CapabilityWrites},
		{"status_", CapabilityWrites},
		{"event_", CapabilityEvents},
		{"http_", CapabilityHTTP},
	} {
		if len(importName) > len(c.prefix) && importName[:len(c.prefix)] == c.prefix {
			return c.capability
		}
	}
	return ""
}

// Handles of cached objects (cache_get) are which values from FirstHandle
// on, valid until the export call that obtained them returns; at most
// MaxHandles are live at once.
const (
	FirstHandle int32 = 2
	MaxHandles        = 1024
)

// MaxListPage is the most keys one cache_list or cache_index call
// returns; start pages through the rest.
const MaxListPage = 1000

// PackList packs the result of cache_list and cache_index (the total
// number of matching objects in the high 32 bits) and of state_list (the
// number of keys on this page there); the size of the page's encoding is
// in the low 32 bits. The result is never negative.
func PackList(total, size uint32) int64 { return int64(total&0x7fffffff)<<32 | int64(size) }

// UnpackList splits PackList's result. If r is negative it is an error
// code and total and size are zero.
func UnpackList(r int64) (total, size uint32, errCode int32) {
	if r < 0 {
		return 0, 0, int32(r)
	}
	return uint32(r >> 32), uint32(r), 0
}

// Results of ih_handle. Any other value is treated as ResultError.
const (
	ResultOK    int32 = 0 // handled
	ResultRetry int32 = 1 // not handled now: deliver this event again later
	ResultDrop  int32 = 2 // cannot be handled: do not deliver it again
	ResultError int32 = 3 // the handler failed: logged with the set_error message, then dropped
)

// Results of ih_init: zero accepts the configuration, anything else refuses
// it (the message comes from set_error).
const (
	InitOK      int32 = 0
	InitRefused int32 = 1
)

// Negative results of host functions. A non-negative result is a size in
// bytes (or, for field_read, a packed kind and size; for log, 0 or
// LogSuppressed). The values are stable across all v1 hosts.
const (
	// ErrAbsent: the requested object does not exist for this event (the
	// old object of an add or delete).
	ErrAbsent int32 = -1
	// ErrNotFound: the field path does not resolve in the object.
	ErrNotFound int32 = -2
	// ErrBadPath: the field path is not valid path syntax.
	ErrBadPath int32 = -3
	// ErrBounds: a (ptr, len) pair does not lie inside the plugin's memory,
	// or len is negative.
	ErrBounds int32 = -4
	// ErrInvalid: an argument is out of its domain (an unknown which or
	// log level).
	ErrInvalid int32 = -5
	// ErrNoEvent: an event function was called outside ih_handle.
	ErrNoEvent int32 = -6
	// ErrInternal: the host could not produce the value (for example the
	// object could not be encoded as JSON). Not the plugin's fault.
	ErrInternal int32 = -7
	// ErrDenied: the operator did not grant this capability to the plugin
	// (or not for this resource or index). Since v1.1.
	ErrDenied int32 = -8
	// ErrConflict: a compare-and-swap found the key at another version.
	ErrConflict int32 = -9
	// ErrQuota: the write would take the plugin past its quota.
	ErrQuota int32 = -10
	// ErrExists: a metric of that name is already declared, by another
	// plugin, with another kind or help; or the object a write creates
	// already exists (409 AlreadyExists).
	ErrExists int32 = -11

	// Codes of the functions that act outside the host (capabilities II,
	// ABI.md §17): Kubernetes writes, Events and HTTP upstreams. Each
	// names what an author must handle differently; result_message reads
	// the message that came with it. Since v1.2.

	// ErrForbidden: the apiserver refused the request (403), for example
	// because the plugin's own identity lacks the RBAC. The grant allowed
	// it; the cluster did not.
	ErrForbidden int32 = -12
	// ErrUnprocessable: the apiserver rejected the object as invalid (422)
	// or the request as malformed (400).
	ErrUnprocessable int32 = -13
	// ErrRateLimited: the plugin's rate limit (or the apiserver's 429)
	// stopped the request; nothing was sent or it was refused. Answer
	// RETRY to be delivered the event again later.
	ErrRateLimited int32 = -14
	// ErrTimeout: the request did not complete within its I/O timeout.
	ErrTimeout int32 = -15
	// ErrUnavailable: the peer could not be reached or answered 5xx.
	ErrUnavailable int32 = -16
	// ErrTooLarge: the request or the response is larger than the
	// operator's limit.
	ErrTooLarge int32 = -17
	// ErrCanceled: the host stopped the call (shutdown, reload, lost
	// lease) while it waited on the network. The plugin should return.
	ErrCanceled int32 = -18
	// ErrFieldConflict: a server-side apply would change fields another
	// field manager owns (409 Conflict with FieldManagerConflict causes).
	// Unlike ErrConflict no newer event settles it: the plugin decides
	// to force or to report. Since v1.3.
	ErrFieldConflict int32 = -19
)

// Metric kinds, the kind argument of metric_declare.
const (
	MetricCounter   int32 = 0
	MetricGauge     int32 = 1
	MetricHistogram int32 = 2
)

// MetricDropped is what metric_add, metric_set and metric_observe return
// when the update would create a series past the plugin's cap: the update
// is dropped and counted by the host. It is not an error.
const MetricDropped int32 = 1

// ErrorName returns the spec name of a host function's error code, or "" if
// code is not one.
func ErrorName(code int32) string {
	switch code {
	case ErrAbsent:
		return "ERR_ABSENT"
	case ErrNotFound:
		return "ERR_NOT_FOUND"
	case ErrBadPath:
		return "ERR_BAD_PATH"
	case ErrBounds:
		return "ERR_BOUNDS"
	case ErrInvalid:
		return "ERR_INVALID"
	case ErrNoEvent:
		return "ERR_NO_EVENT"
	case ErrInternal:
		return "ERR_INTERNAL"
	case ErrDenied:
		return "ERR_DENIED"
	case ErrConflict:
		return "ERR_CONFLICT"
	case ErrQuota:
		return "ERR_QUOTA"
	case ErrExists:
		return "ERR_EXISTS"
	case ErrForbidden:
		return "ERR_FORBIDDEN"
	case ErrUnprocessable:
		return "ERR_UNPROCESSABLE"
	case ErrRateLimited:
		return "ERR_RATE_LIMITED"
	case ErrTimeout:
		return "ERR_TIMEOUT"
	case ErrUnavailable:
		return "ERR_UNAVAILABLE"
	case ErrTooLarge:
		return "ERR_TOO_LARGE"
	case ErrCanceled:
		return "ERR_CANCELED"
	case ErrFieldConflict:
		return "ERR_FIELD_CONFLICT"
	}
	return ""
}

// Selectors for the which argument of object_read and field_read.
const (
	ObjectNew int32 = 0 // the object: new state on add/update, last state on delete
	ObjectOld int32 = 1 // the old object of an update
)

// Log levels for the log import.
const (
	LogDebug int32 = 0
	LogInfo  int32 = 1
	LogWarn  int32 = 2
	LogError int32 = 3
)

// LogSuppressed is log's result when the line was dropped by the host's
// rate limit. Zero means it was logged.
const LogSuppressed int32 = 1

// Limits the host applies to plugin-supplied text.
const (
	// MaxErrorLen is the longest set_error message kept; longer ones are
	// truncated (at a UTF-8 boundary) and marked with "…".
	MaxErrorLen = 4096
	// MaxLogLineLen is the longest log line or output line kept.
	MaxLogLineLen = 4096
)

// MaxRequeueAfterMillis is the longest delay reconcile_requeue_after
// accepts, 366 days in milliseconds (ABI.md §18.4): far enough for a
// yearly schedule, near enough that a unit mistake (seconds given as
// microseconds) is refused rather than silently never firing.
const MaxRequeueAfterMillis int64 = 366 * 24 * 60 * 60 * 1000

// Field kinds, packed into field_read's result. A string comes back as its
// raw UTF-8 bytes, every other kind as JSON text.
const (
	KindString int32 = 1
	KindNumber int32 = 2
	KindBool   int32 = 3
	KindNull   int32 = 4
	KindObject int32 = 5
	KindArray  int32 = 6
)

// KindName returns a field kind's name ("string", "number", ...) or "".
func KindName(k int32) string {
	switch k {
	case KindString:
		return "string"
	case KindNumber:
		return "number"
	case KindBool:
		return "bool"
	case KindNull:
		return "null"
	case KindObject:
		return "object"
	case KindArray:
		return "array"
	}
	return ""
}

// PackField packs a field kind and a value size into field_read's result:
// kind in the high 32 bits, size in the low 32 bits. The result is always
// positive, so it is never mistaken for an error code.
func PackField(kind int32, size uint32) int64 {
	return int64(kind)<<32 | int64(size)
}

// UnpackField splits field_read's result. If r is negative, it is an error
// code (one of the Err constants) and kind and size are zero.
func UnpackField(r int64) (kind int32, size uint32, errCode int32) {
	if r < 0 {
		return 0, 0, int32(r)
	}
	return int32(r >> 32), uint32(r), 0
}

// ValType is a wasm value type as it appears in an ABI signature. i32 and
// i64 cross the boundary, and f64 for a metric's value.
type ValType byte

const (
	I32 ValType = 0x7f // wasm binary encoding of i32
	I64 ValType = 0x7e // wasm binary encoding of i64
	F64 ValType = 0x7c // wasm binary encoding of f64
)

func (v ValType) String() string {
	switch v {
	case I32:
		return "i32"
	case I64:
		return "i64"
	case 0x7d:
		return "f32"
	case 0x7c:
		return "f64"
	case 0x7b:
		return "v128"
	case 0x70:
		return "funcref"
	case 0x6f:
		return "externref"
	}
	return "?"
}

// Signature is a function type.
type Signature struct {
	Params  []ValType
	Results []ValType
}

// String renders s the way ABI.md and the host's errors do: "(i32, i32) -> i32",
// "() -> ()".
func (s Signature) String() string {
	return "(" + joinTypes(s.Params) + ") -> " + results(s.Results)
}

func results(r []ValType) string {
	if len(r) == 1 {
		return r[0].String()
	}
	return "(" + joinTypes(r) + ")"
}

func joinTypes(ts []ValType) string {
	s := ""
	for i, t := range ts {
		if i > 0 {
			s += ", "
		}
		s += t.String()
	}
	return s
}

// Equal reports whether s and o are the same function type.
func (s Signature) Equal(o Signature) bool {
	if len(s.Params) != len(o.Params) || len(s.Results) != len(o.Results) {
		return false
	}
	for i := range s.Params {
		if s.Params[i] != o.Params[i] {
			return false
		}
	}
	for i := range s.Results {
		if s.Results[i] != o.Results[i] {
			return false
		}
	}
	return true
}

// Func names one function of the ABI and its signature.
type Func struct {
	Name      string
	Signature Signature
	// Required is set on exports a plugin must provide.
	Required bool
}

func sig(params []ValType, res ...ValType) Signature {
	return Signature{Params: params, Results: res}
}

func i32s(n int) []ValType {
	p := make([]ValType, n)
	for i := range p {
		p[i] = I32
	}
	return p
}

// Imports returns the host functions of ABI v1, in module ImportModule. A
// fresh slice is returned on every call.
func Imports() []Func {
	return []Func{
		{Name: ImportHeaderRead, Signature: sig(i32s(2), I32)},
		{Name: ImportObjectRead, Signature: sig(i32s(3), I32)},
		{Name: ImportFieldRead, Signature: sig(i32s(5), I64)},
		{Name: ImportConfigRead, Signature: sig(i32s(2), I32)},
		{Name: ImportSetError, Signature: sig(i32s(2), I32)},
		{Name: ImportLog, Signature: sig(i32s(3), I32)},
		{Name: ImportCacheGet, Signature: sig(i32s(6), I32)},
		{Name: ImportCacheList, Signature: sig(i32s(9), I64)},
		{Name: ImportCacheIndex, Signature: sig(i32s(9), I64)},
		{Name: ImportStateGet, Signature: sig(i32s(5), I32)},
		{Name: ImportStateSet, Signature: sig(append(i32s(4), I64), I64)},
		{Name: ImportStateDelete, Signature: sig(append(i32s(2), I64), I32)},
		{Name: ImportStateList, Signature: sig(i32s(7), I64)},
		{Name: ImportMetricDeclare, Signature: sig(i32s(3), I32)},
		{Name: ImportMetricAdd, Signature: sig([]ValType{I32, F64, I32, I32}, I32)},
		{Name: ImportMetricSet, Signature: sig([]ValType{I32, F64, I32, I32}, I32)},
		{Name: ImportMetricObserve, Signature: sig([]ValType{I32, F64, I32, I32}, I32)},
		{Name: ImportResultMessage, Signature: sig(i32s(2), I32)},
		{Name: ImportK8sWrite, Signature: sig(i32s(16), I32)},
		{Name: ImportEventRecord, Signature: sig(i32s(6), I32)},
		{Name: ImportHTTPRequest, Signature: sig(i32s(10), I32)},
		{Name: ImportHTTPResponseRead, Signature: sig(i32s(3), I32)},
		{Name: ImportBatchSelect, Signature: sig(i32s(1), I32)},
		{Name: ImportBatchResult, Signature: sig(i32s(1), I32)},
		{Name: ImportReconcileRequeueAfter, Signature: sig([]ValType{I64}, I32)},
		{Name: ImportChildrenApply, Signature: sig(i32s(2), I32)},
		{Name: ImportStatusApply, Signature: sig(i32s(2), I32)},
	}
}

// Exports returns the function exports ABI v1 defines (memory, which must
// also be exported, is not a function and not listed). A fresh slice is
// returned on every call.
func Exports() []Func {
	return []Func{
		{Name: MarkerExport, Signature: sig(nil), Required: true},
		{Name: ExportHandle, Signature: sig(i32s(1), I32), Required: true},
		{Name: ExportInit, Signature: sig(i32s(1), I32)},
		{Name: ExportShutdown, Signature: sig(nil)},
		{Name: ExportSynced, Signature: sig(i32s(1))},
		{Name: ExportHandleBatch, Signature: sig(i32s(1), I32)},
		{Name: ExportReconcile, Signature: sig(i32s(1), I32)},
		{Name: ExportInitialize, Signature: sig(nil)},
	}
}
