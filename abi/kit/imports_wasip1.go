//go:build wasip1

package kit

import "unsafe"

// The ABI exports. The host calls them one at a time.

//go:wasmexport informer_host_abi_v1
func abiMarker() {}

//go:wasmexport ih_init
func ihInit(configLen int32) int32 { return the.init(configLen) }

//go:wasmexport ih_handle
func ihHandle(headerLen int32) int32 { return the.handle(headerLen) }

//go:wasmexport ih_shutdown
func ihShutdown() { the.shutdown() }

//go:wasmexport ih_synced
func ihSynced(headerLen int32) { the.synced(headerLen) }

//go:wasmexport ih_handle_batch
func ihHandleBatch(count int32) int32 { return the.handleBatch(wasmBatch{}, count) }

// The imports, module informer_host_v1 (abi.ImportModule). The host checks
// at load that every name and signature matches ABI v1.

//go:wasmimport informer_host_v1 header_read
func hHeaderRead(ptr unsafe.Pointer, n int32) int32

//go:wasmimport informer_host_v1 object_read
func hObjectRead(which int32, ptr unsafe.Pointer, n int32) int32

//go:wasmimport informer_host_v1 field_read
func hFieldRead(which int32, pathPtr unsafe.Pointer, pathLen int32, ptr unsafe.Pointer, n int32) int64

//go:wasmimport informer_host_v1 config_read
func hConfigRead(ptr unsafe.Pointer, n int32) int32

//go:wasmimport informer_host_v1 set_error
func hSetError(ptr unsafe.Pointer, n int32) int32

//go:wasmimport informer_host_v1 log
func hLog(level int32, ptr unsafe.Pointer, n int32) int32

//go:wasmimport informer_host_v1 batch_select
func hBatchSelect(index int32) int32

//go:wasmimport informer_host_v1 batch_result
func hBatchResult(code int32) int32

// wasmBatch is the host's batch imports (ABI.md §5, ih_handle_batch).
type wasmBatch struct{}

func (wasmBatch) selectEvent(index int32) int32 { return hBatchSelect(index) }
func (wasmBatch) result(code int32) int32       { return hBatchResult(code) }

// wasmHost calls the real imports. Pointers into Go memory are wasm
// addresses in the plugin's memory, which is what the host expects.
type wasmHost struct{}

func defaultHost() hostAPI { return wasmHost{} }

func bytesPtr(b []byte) unsafe.Pointer {
	if len(b) == 0 {
		return nil
	}
	return unsafe.Pointer(unsafe.SliceData(b))
}

func stringPtr(s string) unsafe.Pointer {
	if len(s) == 0 {
		return nil
	}
	return unsafe.Pointer(unsafe.StringData(s))
}

func (wasmHost) headerRead(buf []byte) int32 { return hHeaderRead(bytesPtr(buf), int32(len(buf))) }

func (wasmHost) objectRead(which int32, buf []byte) int32 {
	return hObjectRead(which, bytesPtr(buf), int32(len(buf)))
}

func (wasmHost) fieldRead(which int32, path string, buf []byte) int64 {
	return hFieldRead(which, stringPtr(path), int32(len(path)), bytesPtr(buf), int32(len(buf)))
}

func (wasmHost) configRead(buf []byte) int32 { return hConfigRead(bytesPtr(buf), int32(len(buf))) }

func (wasmHost) setError(msg string) int32 { return hSetError(stringPtr(msg), int32(len(msg))) }

func (wasmHost) log(level int32, msg string) int32 {
	return hLog(level, stringPtr(msg), int32(len(msg)))
}

//go:wasmimport informer_host_v1 state_get
func hStateGet(keyPtr unsafe.Pointer, keyLen int32, ptr unsafe.Pointer, n int32, versionPtr unsafe.Pointer) int32

//go:wasmimport informer_host_v1 state_set
func hStateSet(keyPtr unsafe.Pointer, keyLen int32, valPtr unsafe.Pointer, valLen int32, ifVersion int64) int64

//go:wasmimport informer_host_v1 state_delete
func hStateDelete(keyPtr unsafe.Pointer, keyLen int32, ifVersion int64) int32

//go:wasmimport informer_host_v1 state_list
func hStateList(prefixPtr unsafe.Pointer, prefixLen int32, afterPtr unsafe.Pointer, afterLen int32, max int32, ptr unsafe.Pointer, n int32) int64

var stateHost stateAPI = wasmHost{}

func (wasmHost) get(key string, buf []byte, version *int64) int32 {
	return hStateGet(stringPtr(key), int32(len(key)), bytesPtr(buf), int32(len(buf)), unsafe.Pointer(version))
}

func (wasmHost) set(key string, value []byte, ifVersion int64) int64 {
	return hStateSet(stringPtr(key), int32(len(key)), bytesPtr(value), int32(len(value)), ifVersion)
}

func (wasmHost) del(key string, ifVersion int64) int32 {
	return hStateDelete(stringPtr(key), int32(len(key)), ifVersion)
}

func (wasmHost) list(prefix, after string, max int32, buf []byte) int64 {
	return hStateList(stringPtr(prefix), int32(len(prefix)), stringPtr(after), int32(len(after)), max, bytesPtr(buf), int32(len(buf)))
}
