// Package kittest runs a Go plugin's handlers natively, in `go test`,
// against a host written in Go: events, the plugin's configuration, its
// logs, state (ABI.md §16.2), cache reads (§16.1) and metrics (§16.3),
// with the ABI's codes and size protocol. Put the handler in a file
// without the wasip1 build tag (register it in init as usual) and test it:
//
//	func TestHandler(t *testing.T) {
//		h := kittest.New(t)
//		h.Cache("pods", `{"metadata":{"name":"web-0","namespace":"shop"}}`)
//		if r := h.Add("pods", `{"metadata":{"name":"web-0","namespace":"shop"},"status":{"phase":"Running"}}`); r.Code != kittest.OK {
//			t.Fatal(r)
//		}
//		if v := h.Metric("pods", "shop", "Running"); v != 1 { ... }
//	}
//
// It is a unit-test fake: informer-host replay runs the built .wasm
// through the real engine, and is the proof that the module works.
//
// Rule of direction: kittest is in the abi module and imports only abi,
// abi/kit and the standard library (testing among it). Plugin authors'
// _test.go files import it; a plugin's own code and the daemon do not.
package kittest
