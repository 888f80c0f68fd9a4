// Package kit is the Go plugin kit for informer-host: write an event
// handler in Go, build it for wasip1, and drop the .wasm file in the
// host's plugin directory.
//
//	package main
//
//	import "github.com/informer-host/informer-host/abi/kit"
//
//	func init() {
//		kit.Handle(func(ev *kit.Event) error {
//			phase, _ := ev.Get("status.phase")
//			kit.Infof("%s %s phase=%s", ev.Type(), ev.Key(), phase)
//			return nil
//		})
//	}
//
//	func main() {}
//
// It has no wasip1 build tag, so that go test can run the handler
// natively on kittest; build it as a WASI reactor:
//
//	GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o my-plugin.wasm .
//
// Register handlers in init functions, not in main: a reactor's main is
// never called. The host runs package initialisation (through _initialize)
// once per instance, then ih_init with the plugin's configuration (see
// OnInit), then ih_handle for each event, one at a time.
//
// The kit owns the ABI exports (ih_init, ih_handle, ih_shutdown, ih_synced,
// ih_handle_batch, ih_reconcile and the informer_host_abi_v1 marker) and the
// informer_host_v1 imports; a plugin
// that uses it must not define them itself. abi/ABI.md is the contract
// the kit implements.
//
// # Controller mode
//
// A plugin configured with a controller: block (ABI.md §18) registers a
// Reconciler with HandleReconcile instead of (or beside) an event
// handler: the host hands it one key of its primary resource at a time,
// and its Result asks for a requeue timer, the complete set of children
// (Children) and the status it owns (Status, with conditions). Apply,
// NewObj and Obj build the bodies from maps or typed values. KITS.md,
// "Controller mode", has the rules; kittest's Loop runs the controller
// loop offline.
//
// # Results
//
// A handler returns nil when the event was handled, Retry(err) to have the
// host deliver it again later, Drop(err) to give up on it, or any other
// error to report a failure (the host logs it and drops the event). A
// panic in a handler is recovered and reported as a failure with the panic
// text and where it was raised ("(main.go:42 in main.reconcile)"), its
// goroutine trace written to stderr (the plugin's log) the first time that
// site panics; the plugin stays up.
//
// # Costs
//
// The header (type, resource, namespace, name, uid, resourceVersion,
// flags) is read into a reused buffer: no allocation per event. Get reads
// one field, computed by the host, without transferring the object.
// Decode transfers the whole object as JSON and decodes it with
// encoding/json: use it when you need many fields.
//
// A reactor's goroutines, the garbage collector's background workers among
// them, run only while the host is calling into the plugin. So the kit ends
// calls by yielding (runtime.Gosched) to let them run; as a yield costs
// about 15µs, it does so at most every 10ms of handler activity, and
// always after OnInit. While calls come fast it reads the clock (a host
// call) only every 16th call.
//
// On platforms other than wasip1 the package compiles, so code using it
// can be vetted and unit tested natively, but there is no host: events
// never arrive and logging goes to standard error. Package kittest is a
// fake host for those tests, with every capability.
//
// Rule of direction: kit imports abi and the standard library only; it
// is imported by plugins (and kittest), never by the daemon.
package kit
