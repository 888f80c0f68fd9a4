//go:build wasip1

package kit

import "unsafe"

//go:wasmimport informer_host_v1 k8s_write
func hK8sWrite(op int32, res unsafe.Pointer, resLen int32, ns unsafe.Pointer, nsLen int32, name unsafe.Pointer, nameLen int32,
	sub unsafe.Pointer, subLen int32, body unsafe.Pointer, bodyLen int32, uid unsafe.Pointer, uidLen int32,
	rv unsafe.Pointer, rvLen int32, flags int32) int32

//go:wasmimport informer_host_v1 result_message
func hResultMessage(ptr unsafe.Pointer, n int32) int32

func (wasmHost) k8sWrite(op int32, t Target, body []byte, p Preconditions, flags int32) int32 {
	return hK8sWrite(op, stringPtr(t.Resource), int32(len(t.Resource)), stringPtr(t.Namespace), int32(len(t.Namespace)),
		stringPtr(t.Name), int32(len(t.Name)), stringPtr(t.Subresource), int32(len(t.Subresource)),
		bytesPtr(body), int32(len(body)), stringPtr(p.UID), int32(len(p.UID)),
		stringPtr(p.ResourceVersion), int32(len(p.ResourceVersion)), flags)
}

func (wasmHost) resultMessage(buf []byte) int32 {
	return hResultMessage(bytesPtr(buf), int32(len(buf)))
}
