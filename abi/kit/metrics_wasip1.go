//go:build wasip1

package kit

import "unsafe"

//go:wasmimport informer_host_v1 metric_declare
func hMetricDeclare(kind int32, ptr unsafe.Pointer, n int32) int32

//go:wasmimport informer_host_v1 metric_add
func hMetricAdd(id int32, v float64, ptr unsafe.Pointer, n int32) int32

//go:wasmimport informer_host_v1 metric_set
func hMetricSet(id int32, v float64, ptr unsafe.Pointer, n int32) int32

//go:wasmimport informer_host_v1 metric_observe
func hMetricObserve(id int32, v float64, ptr unsafe.Pointer, n int32) int32

func (wasmHost) metricDeclare(kind int32, decl []byte) int32 {
	return hMetricDeclare(kind, bytesPtr(decl), int32(len(decl)))
}

func (wasmHost) metricAdd(id int32, v float64, labels []byte) int32 {
	return hMetricAdd(id, v, bytesPtr(labels), int32(len(labels)))
}

func (wasmHost) metricSet(id int32, v float64, labels []byte) int32 {
	return hMetricSet(id, v, bytesPtr(labels), int32(len(labels)))
}

func (wasmHost) metricObserve(id int32, v float64, labels []byte) int32 {
	return hMetricObserve(id, v, bytesPtr(labels), int32(len(labels)))
}
