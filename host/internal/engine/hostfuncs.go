package engine

import (
	"context"
	"log/slog"
	"math"
	"strconv"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"

	"github.com/informer-host/informer-host/abi"
)

// The host functions of module informer_host_v1. Each is an
// api.GoModuleFunc: wazero hands it the calling instance and a stack of
// raw parameters, and it writes its result into stack[0]. They find the
// calling instance's state through the context of the call (stateOf), so a
// call allocates nothing.
//
// Invariants, which FuzzHostFunctions checks:
//   - no input makes a host function panic;
//   - every (ptr, len) pair is checked against the memory before use, a
//     negative len is ERR_BOUNDS, and nothing is written outside it;
//   - when a value does not fit, nothing is written and the size is returned.

// stateKey is the context key under which a call's *callState is found.
type stateKey struct{}

// stateOf returns the state of the instance being called, or nil for a
// call that did not come through this package (which cannot happen for
// instances the engine creates, but costs nothing to tolerate).
func stateOf(ctx context.Context) *callState {
	st, _ := ctx.Value(stateKey{}).(*callState)
	return st
}

func i32(v uint64) int32 { return int32(uint32(v)) }

func setI32(stack []uint64, v int32) { stack[0] = uint64(uint32(v)) }

// region returns the guest memory [ptr, ptr+n) as a slice aliasing it.
func region(mod api.Module, ptr uint32, n int32) ([]byte, bool) {
	if n < 0 {
		return nil, false
	}
	mem := mod.Memory()
	if mem == nil {
		return nil, ptr == 0 && n == 0
	}
	return mem.Read(ptr, uint32(n))
}

// copyOut implements the size protocol shared by every read function: the
// buffer must be valid; if data fits it is copied; the size is returned.
func copyOut(mod api.Module, ptr uint32, n int32, data []byte) int32 {
	buf, ok := region(mod, ptr, n)
	if !ok {
		return abi.ErrBounds
	}
	if len(data) > math.MaxInt32 {
		return abi.ErrInternal
	}
	if len(data) <= len(buf) {
		copy(buf, data)
	}
	return int32(len(data))
}

func copyOutString(mod api.Module, ptr uint32, n int32, data string) int32 {
	buf, ok := region(mod, ptr, n)
	if !ok {
		return abi.ErrBounds
	}
	if len(data) > math.MaxInt32 {
		return abi.ErrInternal
	}
	if len(data) <= len(buf) {
		copy(buf, data)
	}
	return int32(len(data))
}

// header_read(ptr, len i32) -> i32
func headerRead(ctx context.Context, mod api.Module, stack []uint64) {
	st := stateOf(ctx)
	ptr, n := uint32(stack[0]), i32(stack[1])
	if _, ok := region(mod, ptr, n); !ok {
		setI32(stack, abi.ErrBounds)
		return
	}
	if st == nil || st.env == nil {
		setI32(stack, abi.ErrNoEvent)
		return
	}
	size := copyOut(mod, ptr, n, st.env.header)
	if st.flags != 0 && size >= 3 && size <= n {
		// The plugin's own flags over the shared envelope's (HandleWith).
		b, _ := region(mod, ptr, n)
		b[2] |= st.flags
	}
	setI32(stack, size)
}

// object_read(which, ptr, len i32) -> i32
func objectRead(ctx context.Context, mod api.Module, stack []uint64) {
	st := stateOf(ctx)
	which, ptr, n := i32(stack[0]), uint32(stack[1]), i32(stack[2])
	if _, ok := region(mod, ptr, n); !ok {
		setI32(stack, abi.ErrBounds)
		return
	}
	obj, code := st.objectOf(which)
	if code != 0 {
		setI32(stack, code)
		return
	}
	var b []byte
	var err error
	if which >= abi.FirstHandle {
		b, err = encodeJSON(obj)
	} else {
		b, err = st.env.json(which)
	}
	if err != nil {
		st.logger.Error("encoding object for plugin", slog.Any("err", err))
		setI32(stack, abi.ErrInternal)
		return
	}
	setI32(stack, copyOut(mod, ptr, n, b))
}

// objectOf resolves the which argument of object_read and field_read: the
// event's object or old object, or a cache_get handle of the current call.
// Errors in the documented order: an unknown which (including a handle not
// issued in this call) is ERR_INVALID, the event's objects outside
// ih_handle ERR_NO_EVENT, a missing one ERR_ABSENT.
func (st *callState) objectOf(which int32) (map[string]any, int32) {
	if which >= abi.FirstHandle {
		if st != nil {
			if obj := st.handleObject(which); obj != nil {
				return obj, 0
			}
		}
		return nil, abi.ErrInvalid
	}
	if which != abi.ObjectNew && which != abi.ObjectOld {
		return nil, abi.ErrInvalid
	}
	if st == nil || st.env == nil {
		return nil, abi.ErrNoEvent
	}
	u := st.env.object(which)
	if u == nil {
		return nil, abi.ErrAbsent
	}
	return u.Object, 0
}

// field_read(which, path_ptr, path_len, ptr, len i32) -> i64
func fieldRead(ctx context.Context, mod api.Module, stack []uint64) {
	st := stateOf(ctx)
	which, pathPtr, pathLen, ptr, n := i32(stack[0]), uint32(stack[1]), i32(stack[2]), uint32(stack[3]), i32(stack[4])
	fail := func(code int32) { stack[0] = uint64(int64(code)) }
	path, ok := region(mod, pathPtr, pathLen)
	if !ok {
		fail(abi.ErrBounds)
		return
	}
	if _, ok := region(mod, ptr, n); !ok {
		fail(abi.ErrBounds)
		return
	}
	obj, code := st.objectOf(which)
	if code != 0 {
		fail(code)
		return
	}
	v, code := lookup(obj, &st.path, path)
	if code != 0 {
		fail(code)
		return
	}
	kind, text, str, code := st.formatValue(v)
	if code != 0 {
		fail(code)
		return
	}
	var size int32
	if kind == abi.KindString {
		size = copyOutString(mod, ptr, n, str)
	} else {
		size = copyOut(mod, ptr, n, text)
	}
	if size < 0 {
		fail(size)
		return
	}
	stack[0] = uint64(abi.PackField(kind, uint32(size)))
}

// lookup walks obj along path. It always scans the whole path, so a syntax
// error is reported as ERR_BAD_PATH whatever the object holds.
func lookup(obj map[string]any, sc *abi.PathScanner, path []byte) (any, int32) {
	sc.Reset(path)
	var cur any = obj
	found := true
	for {
		key, idx, isIdx, ok := sc.Next()
		if !ok {
			break
		}
		if !found {
			continue
		}
		switch c := cur.(type) {
		case map[string]any:
			if isIdx {
				found = false
				break
			}
			cur, found = c[string(key)]
		case []any:
			if !isIdx || idx >= len(c) {
				found = false
				break
			}
			cur = c[idx]
		default:
			found = false
		}
	}
	if sc.Err() != nil {
		return nil, abi.ErrBadPath
	}
	if !found {
		return nil, abi.ErrNotFound
	}
	return cur, 0
}

// formatValue renders a field value: a string as itself (str), anything
// else as JSON text in the state's scratch buffer or a fresh encoding.
func (st *callState) formatValue(v any) (kind int32, text []byte, str string, code int32) {
	b := st.scratch[:0]
	switch x := v.(type) {
	case string:
		return abi.KindString, nil, x, 0
	case bool:
		return abi.KindBool, strconv.AppendBool(b, x), "", 0
	case nil:
		return abi.KindNull, append(b, "null"...), "", 0
	case int64:
		b = strconv.AppendInt(b, x, 10)
	case int:
		b = strconv.AppendInt(b, int64(x), 10)
	case int32:
		b = strconv.AppendInt(b, int64(x), 10)
	case uint64:
		b = strconv.AppendUint(b, x, 10)
	case float64:
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return 0, nil, "", abi.ErrInternal
		}
		b = strconv.AppendFloat(b, x, 'g', -1, 64)
	default:
		j, err := encodeJSON(v)
		if err != nil || len(j) == 0 {
			return 0, nil, "", abi.ErrInternal
		}
		switch j[0] {
		case '{':
			kind = abi.KindObject
		case '[':
			kind = abi.KindArray
		case '"':
			kind = abi.KindString
			return kind, nil, string(j[1 : len(j)-1]), 0 // json.Number-like oddities; not produced by unstructured
		case 't', 'f':
			kind = abi.KindBool
		case 'n':
			kind = abi.KindNull
		default:
			kind = abi.KindNumber
		}
		return kind, j, "", 0
	}
	st.scratch = b
	return abi.KindNumber, b, "", 0
}

// config_read(ptr, len i32) -> i32
func configRead(ctx context.Context, mod api.Module, stack []uint64) {
	st := stateOf(ctx)
	ptr, n := uint32(stack[0]), i32(stack[1])
	var cfg []byte
	if st != nil {
		cfg = st.config
	}
	setI32(stack, copyOut(mod, ptr, n, cfg))
}

// set_error(ptr, len i32) -> i32
func setError(ctx context.Context, mod api.Module, stack []uint64) {
	st := stateOf(ctx)
	ptr, n := uint32(stack[0]), i32(stack[1])
	msg, ok := region(mod, ptr, n)
	if !ok {
		setI32(stack, abi.ErrBounds)
		return
	}
	if st != nil {
		st.errMsg = append(st.errMsg[:0], truncateUTF8(msg, abi.MaxErrorLen)...)
		if len(msg) > abi.MaxErrorLen {
			st.errMsg = append(st.errMsg, "…"...)
		}
		st.errSet = true
	}
	setI32(stack, 0)
}

// log(level, ptr, len i32) -> i32
func logFn(ctx context.Context, mod api.Module, stack []uint64) {
	st := stateOf(ctx)
	level, ptr, n := i32(stack[0]), uint32(stack[1]), i32(stack[2])
	msg, ok := region(mod, ptr, n)
	if !ok {
		setI32(stack, abi.ErrBounds)
		return
	}
	var l slog.Level
	switch level {
	case abi.LogDebug:
		l = slog.LevelDebug
	case abi.LogInfo:
		l = slog.LevelInfo
	case abi.LogWarn:
		l = slog.LevelWarn
	case abi.LogError:
		l = slog.LevelError
	default:
		setI32(stack, abi.ErrInvalid)
		return
	}
	if st == nil || st.out.emit(l, "log", msg) {
		setI32(stack, 0)
		return
	}
	setI32(stack, abi.LogSuppressed)
}

// instantiateHostModule defines module informer_host_v1 in r.
func instantiateHostModule(ctx context.Context, r wazero.Runtime) (api.Module, error) {
	fns := map[string]api.GoModuleFunc{
		abi.ImportHeaderRead: headerRead,
		abi.ImportObjectRead: objectRead,
		abi.ImportFieldRead:  fieldRead,
		abi.ImportConfigRead: configRead,
		abi.ImportSetError:   setError,
		abi.ImportLog:        logFn,
		abi.ImportCacheGet:   cacheGet,
		abi.ImportCacheList:  cacheList,
		abi.ImportCacheIndex: cacheIndex,

		abi.ImportStateGet:    stateGet,
		abi.ImportStateSet:    stateSet,
		abi.ImportStateDelete: stateDelete,
		abi.ImportStateList:   stateList,

		abi.ImportResultMessage: resultMessage,
		abi.ImportK8sWrite:      k8sWrite,

		abi.ImportBatchSelect: batchSelect,
		abi.ImportBatchResult: batchResult,

		abi.ImportReconcileRequeueAfter: reconcileRequeueAfter,
		abi.ImportChildrenApply:         childrenApply,
		abi.ImportStatusApply:           statusApply,
	}
	for name, f := range metricFuncs() {
		fns[name] = f
	}
	for name, f := range outboundFuncs() {
		fns[name] = f
	}
	b := r.NewHostModuleBuilder(abi.ImportModule)
	for _, f := range abi.Imports() {
		b.NewFunctionBuilder().
			WithGoModuleFunction(counted(fns[f.Name]), valueTypes(f.Signature.Params), valueTypes(f.Signature.Results)).
			Export(f.Name)
	}
	return b.Instantiate(ctx)
}

// counted makes f count against the call's cap on host calls
// (Limits.MaxHostCallsPerCall) before it does anything. Every function of
// the module is counted, whatever it costs: the cap bounds how often a
// call may come back to the host, which CallTimeout does not when the
// calls wait on the network.
func counted(f api.GoModuleFunc) api.GoModuleFunc {
	return func(ctx context.Context, mod api.Module, stack []uint64) {
		if st := stateOf(ctx); st != nil {
			st.countHostCall()
		}
		f(ctx, mod, stack)
	}
}

func valueTypes(ts []abi.ValType) []api.ValueType {
	out := make([]api.ValueType, len(ts))
	for i, t := range ts {
		out[i] = api.ValueType(t)
	}
	return out
}
