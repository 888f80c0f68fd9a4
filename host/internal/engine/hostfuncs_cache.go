package engine

import (
	"context"
	"math"
	"sort"

	"github.com/tetratelabs/wazero/api"

	"github.com/informer-host/informer-host/abi"
)

// CacheReader serves a plugin's cache_* calls from the host's informer
// caches (ABI.md §16.1). The engine calls it on the instance's goroutine,
// during a call into the plugin; an implementation shared by instances
// must be safe for concurrent use. The []byte arguments alias the
// plugin's memory: they are valid only during the call and must not be
// kept.
//
// Every method checks the grant first and returns abi.ErrDenied for a
// resource or index the plugin was not granted, before looking at its
// other arguments (the documented order: bounds, denied, invalid).
type CacheReader interface {
	// Get returns the cached object namespace/name of the configured
	// resource, or abi.ErrAbsent. The object belongs to the cache and is
	// only read.
	Get(resource, namespace, name []byte) (obj map[string]any, code int32)
	// List appends to keys the store keys ("namespace/name", or "name"
	// for a cluster-scoped object) of the objects of resource in
	// namespace ("" = every namespace) whose labels match selector (label
	// selector syntax; "" = everything); abi.ErrInvalid for a selector that
	// does not parse. Order does not matter: the engine sorts.
	List(keys []string, resource, namespace, selector []byte) ([]string, int32)
	// Index appends to keys the store keys of the objects of resource
	// that index (abi index names: "namespace", "owner") maps to value;
	// abi.ErrInvalid for an unknown index name.
	Index(keys []string, resource, index, value []byte) ([]string, int32)
}

// denied reports a refused capability call to the host and returns the
// code for it.
func (st *callState) denied(capability, function string) int32 {
	if st.onDenied != nil {
		st.onDenied(capability, function)
	}
	return abi.ErrDenied
}

// handleObject returns the object behind a cache_get handle, or nil.
func (st *callState) handleObject(which int32) map[string]any {
	i := int64(which) - int64(abi.FirstHandle)
	if i < 0 || i >= int64(len(st.handles)) {
		return nil
	}
	return st.handles[i]
}

// dropHandles ends the handles of the call that returned, so the cache's
// objects are not kept alive by an idle instance, and its HTTP response.
func (st *callState) dropHandles() {
	st.httpCall.endCall()
	clear(st.handles)
	st.handles = st.handles[:0]
}

// cache_get(res_ptr, res_len, ns_ptr, ns_len, name_ptr, name_len i32) -> i32
func cacheGet(ctx context.Context, mod api.Module, stack []uint64) {
	st := stateOf(ctx)
	res, ok1 := region(mod, uint32(stack[0]), i32(stack[1]))
	ns, ok2 := region(mod, uint32(stack[2]), i32(stack[3]))
	name, ok3 := region(mod, uint32(stack[4]), i32(stack[5]))
	if !ok1 || !ok2 || !ok3 {
		setI32(stack, abi.ErrBounds)
		return
	}
	if st == nil {
		setI32(stack, abi.ErrNoEvent)
		return
	}
	if st.cache == nil {
		setI32(stack, st.denied(abi.CapabilityCache, abi.ImportCacheGet))
		return
	}
	obj, code := st.cache.Get(res, ns, name)
	// In the order of ABI.md section 16: denied, invalid (no handle left,
	// whether or not the object exists), then the lookup's own outcome.
	switch {
	case code == abi.ErrDenied:
		setI32(stack, st.denied(abi.CapabilityCache, abi.ImportCacheGet))
		return
	case len(st.handles) >= abi.MaxHandles:
		setI32(stack, abi.ErrInvalid)
		return
	case code != 0:
		setI32(stack, code)
		return
	case obj == nil:
		setI32(stack, abi.ErrAbsent)
		return
	}
	st.handles = append(st.handles, obj)
	setI32(stack, abi.FirstHandle+int32(len(st.handles)-1))
}

// cache_list(res_ptr, res_len, ns_ptr, ns_len, sel_ptr, sel_len, start, ptr, len i32) -> i64
func cacheList(ctx context.Context, mod api.Module, stack []uint64) {
	cacheKeys(ctx, mod, stack, abi.ImportCacheList)
}

// cache_index(res_ptr, res_len, index_ptr, index_len, value_ptr, value_len, start, ptr, len i32) -> i64
func cacheIndex(ctx context.Context, mod api.Module, stack []uint64) {
	cacheKeys(ctx, mod, stack, abi.ImportCacheIndex)
}

// cacheKeys is cache_list and cache_index, which differ only in what
// selects the keys: one sorted page of keys, each followed by '\n'.
func cacheKeys(ctx context.Context, mod api.Module, stack []uint64, fn string) {
	st := stateOf(ctx)
	fail := func(code int32) { stack[0] = uint64(int64(code)) }
	res, ok1 := region(mod, uint32(stack[0]), i32(stack[1]))
	a, ok2 := region(mod, uint32(stack[2]), i32(stack[3]))
	b, ok3 := region(mod, uint32(stack[4]), i32(stack[5]))
	start, ptr, n := i32(stack[6]), uint32(stack[7]), i32(stack[8])
	buf, ok4 := region(mod, ptr, n)
	if !ok1 || !ok2 || !ok3 || !ok4 {
		fail(abi.ErrBounds)
		return
	}
	if st == nil {
		fail(abi.ErrNoEvent)
		return
	}
	if st.cache == nil {
		fail(st.denied(abi.CapabilityCache, fn))
		return
	}
	var code int32
	if fn == abi.ImportCacheList {
		st.keys, code = st.cache.List(st.keys[:0], res, a, b)
	} else {
		st.keys, code = st.cache.Index(st.keys[:0], res, a, b)
	}
	keys := st.keys
	defer func() { clear(st.keys); st.keys = st.keys[:0] }()
	switch {
	case code == abi.ErrDenied:
		fail(st.denied(abi.CapabilityCache, fn))
		return
	case start < 0:
		fail(abi.ErrInvalid)
		return
	case code != 0:
		fail(code)
		return
	case len(keys) > math.MaxInt32:
		fail(abi.ErrInternal)
		return
	}
	// Keys from one client-go index come sorted already (IndexKeys
	// returns sets.List); checking is a tenth of sorting again.
	if !sort.StringsAreSorted(keys) {
		sort.Strings(keys)
	}
	page := keys[min(int(start), len(keys)):]
	page = page[:min(len(page), abi.MaxListPage)]
	size := 0
	for _, k := range page {
		size += len(k) + 1
	}
	if size > math.MaxInt32 {
		fail(abi.ErrInternal)
		return
	}
	if size <= len(buf) {
		w := buf[:0]
		for _, k := range page {
			w = append(append(w, k...), '\n')
		}
	}
	stack[0] = uint64(abi.PackList(uint32(len(keys)), uint32(size)))
}
