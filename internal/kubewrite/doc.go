// Package kubewrite performs plugins' Kubernetes writes (k8s_write, ABI.md
// §17.1) with client-go's dynamic client: create, JSON merge patch, JSON
// patch, server-side apply and delete, of an object or a subresource,
// with optional uid and resourceVersion preconditions.
//
// A Client is built once per daemon from its rest.Config; Client.For
// returns one plugin's Writer, which holds everything the plugin's grant
// decides: the resources, verbs, subresources and namespaces it may
// write, its API budget (a REST client of its own whose rate limiter is
// a Budget at the grant's qps and burst: writes past it wait within the
// I/O timeout, and the waits and refusals are counted per plugin), its
// I/O timeout, its identity (the daemon's, or a
// ServiceAccount it impersonates) and dry run. Every write carries
// the field manager "informer-host/<plugin>", so managedFields and the
// audit log say which plugin wrote what.
//
// Writer knows nothing of WebAssembly: the host adapts the engine's
// ClusterWriter calls to Check and Do (host/writes.go), so a tool that
// replays a recording can serve the same calls without a cluster.
//
// SelfWrites remembers, per plugin, the resourceVersion each successful
// write returned for each object, in bounded memory, so the host can
// mark the events those writes cause (header flag FlagSelfWrite).
//
// Rule of direction: kubewrite imports abi, config and tracing (a write
// made during a traced call is a span); host, host/replay and kubeevents
// import it. It knows requests, not plugins or the engine.
package kubewrite
