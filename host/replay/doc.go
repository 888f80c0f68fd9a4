// Package replay runs one plugin offline, through the real engine, on a
// recorded event stream (informer-host replay): its ih_handle calls, or,
// for a controller-mode plugin, its ih_reconcile calls with what each gave
// the host (children, status, requeue-after), compared with the recorded
// ones. It defines that stream's file format (abi/REPLAY.md), which
// informer-host record writes.
//
// A replay is hermetic and reproducible: no cluster, the WASI clocks and
// random source fixed (engine.Determinism), cache reads served from the
// recording's cache lines, state in memory (optionally seeded), metrics
// kept in a private registry, and every other host capability answered
// from a stub file (Stubs) and recorded into the output (Call). Cassette,
// used by informer-host record in the live host, writes that stub file
// from the answers the live calls got.
//
// Rule of direction: replay is part of the embeddable daemon library. It
// imports the engine, informer (for the recorded cache), event, abi and the
// capability backends it fakes or runs (kubewrite, pluginmetrics, state);
// host (to record) and the daemon's command (replay) import it.
package replay
