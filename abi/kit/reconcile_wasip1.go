//go:build wasip1

package kit

import "unsafe"

//go:wasmexport ih_reconcile
func ihReconcile(headerLen int32) int32 { return the.reconcile(headerLen) }

//go:wasmimport informer_host_v1 reconcile_requeue_after
func hReconcileRequeueAfter(millis int64) int32

//go:wasmimport informer_host_v1 children_apply
func hChildrenApply(ptr unsafe.Pointer, n int32) int32

//go:wasmimport informer_host_v1 status_apply
func hStatusApply(ptr unsafe.Pointer, n int32) int32

func (wasmHost) requeueAfter(millis int64) int32 { return hReconcileRequeueAfter(millis) }
func (wasmHost) childrenApply(body []byte) int32 {
	return hChildrenApply(bytesPtr(body), int32(len(body)))
}
func (wasmHost) statusApply(body []byte) int32 { return hStatusApply(bytesPtr(body), int32(len(body))) }
