//go:build wasip1

package kit

import "unsafe"

//go:wasmimport informer_host_v1 event_record
func hEventRecord(which, typ int32, reason unsafe.Pointer, reasonLen int32, msg unsafe.Pointer, msgLen int32) int32

//go:wasmimport informer_host_v1 http_request
func hHTTPRequest(up unsafe.Pointer, upLen int32, method unsafe.Pointer, methodLen int32, path unsafe.Pointer, pathLen int32,
	hdr unsafe.Pointer, hdrLen int32, body unsafe.Pointer, bodyLen int32) int32

//go:wasmimport informer_host_v1 http_response_read
func hHTTPResponseRead(part int32, ptr unsafe.Pointer, n int32) int32

func (wasmHost) eventRecord(which, typ int32, reason, msg string) int32 {
	return hEventRecord(which, typ, stringPtr(reason), int32(len(reason)), stringPtr(msg), int32(len(msg)))
}

func (wasmHost) httpRequest(up, method, path string, hdr, body []byte) int32 {
	return hHTTPRequest(stringPtr(up), int32(len(up)), stringPtr(method), int32(len(method)), stringPtr(path), int32(len(path)),
		bytesPtr(hdr), int32(len(hdr)), bytesPtr(body), int32(len(body)))
}

func (wasmHost) httpResponseRead(part int32, buf []byte) int32 {
	return hHTTPResponseRead(part, bytesPtr(buf), int32(len(buf)))
}
