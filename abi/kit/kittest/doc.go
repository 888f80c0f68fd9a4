//go:build !wasip1

// Package kittest runs a Go plugin's handlers natively, in `go test`,
// against a host written in Go: events, the plugin's configuration, its
// logs, state (ABI.md §16.2), cache reads (§16.1), metrics (§16.3),
// Kubernetes writes (§17.1), Events (§17.2) and HTTP upstreams (§17.3),
// with the ABI's codes, size protocol and result messages. The calls
// that act outside the host are recorded (Writes, Events, HTTPRequests)
// and their answers programmable (OnWrite, OnEvent, OnHTTP); by default
// a write is applied to the fake cache, so a later cache read sees it,
// as with controller-runtime's fake client. The cache holds each
// delivered event's object (a deleted one is taken out), as the host's
// informer store does when the plugin is called. The plugin reads a
// resource's cache only once the test grants it (GrantCache, or seeding
// it with Cache): neither an event nor a write grants it, as in the
// host. Deny takes the cache, state or metrics away, for a plugin's
// handling of a missing grant. Put the handler in a file without the
// wasip1 build tag (register it in init as usual) and test it:
//
//	func TestHandler(t *testing.T) {
//		h := kittest.New(t)
//		h.Cache("pods", `{"metadata":{"name":"web-0","namespace":"shop"}}`)
//		if r := h.Add("pods", `{"metadata":{"name":"web-0","namespace":"shop"},"status":{"phase":"Running"}}`); r.Code != kittest.OK {
//			t.Fatal(r)
//		}
//		if v := h.Metric("pods", "shop", "Running"); v != 1 { ... }
//		if w := h.Writes(); len(w) != 1 || w[0].Op != "apply" { ... }
//	}
//
// Host.Controller runs the host's controller loop (ABI.md §18) for a
// reconciler registered with kit.HandleReconcile, over a fake cluster
// with a fake clock: keys enqueued by the changes a test makes, requeue
// timers and backoff firing as the clock advances, the managed finalizer,
// children applied with the host's bookkeeping and pruned, owned objects
// garbage collected, status with field ownership and lastTransitionTime
// kept while a condition's status does not change (KITS.md, "The
// controller loop, offline").
//
// It is a unit-test fake: informer-host replay runs the built .wasm
// through the real engine, and is the proof that the module works.
//
// Rule of direction: kittest imports abi, abi/kit and the standard
// library only (abi is its own module: no k8s.io); it is imported by
// plugins' tests, never by a plugin's wasip1 build (it is not built
// there) nor by the daemon.
package kittest
