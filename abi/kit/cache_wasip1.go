//go:build wasip1

package kit

import "unsafe"

//go:wasmimport informer_host_v1 cache_get
func hCacheGet(res unsafe.Pointer, resLen int32, ns unsafe.Pointer, nsLen int32, name unsafe.Pointer, nameLen int32) int32

//go:wasmimport informer_host_v1 cache_list
func hCacheList(res unsafe.Pointer, resLen int32, ns unsafe.Pointer, nsLen int32, sel unsafe.Pointer, selLen int32, start int32, ptr unsafe.Pointer, n int32) int64

//go:wasmimport informer_host_v1 cache_index
func hCacheIndex(res unsafe.Pointer, resLen int32, index unsafe.Pointer, indexLen int32, value unsafe.Pointer, valueLen int32, start int32, ptr unsafe.Pointer, n int32) int64

func (wasmHost) cacheGet(res, ns, name string) int32 {
	return hCacheGet(stringPtr(res), int32(len(res)), stringPtr(ns), int32(len(ns)), stringPtr(name), int32(len(name)))
}

func (wasmHost) cacheList(res, ns, sel string, start int32, buf []byte) int64 {
	return hCacheList(stringPtr(res), int32(len(res)), stringPtr(ns), int32(len(ns)), stringPtr(sel), int32(len(sel)), start, bytesPtr(buf), int32(len(buf)))
}

func (wasmHost) cacheIndex(res, index, value string, start int32, buf []byte) int64 {
	return hCacheIndex(stringPtr(res), int32(len(res)), stringPtr(index), int32(len(index)), stringPtr(value), int32(len(value)), start, bytesPtr(buf), int32(len(buf)))
}
