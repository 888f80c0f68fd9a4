// Package stateport adapts the host's key-value store (internal/state) to
// the engine's state port (engine.StateBucket): the store's errors become
// the ABI's codes here, so the engine knows neither the store nor its
// errors.
//
// Rule of direction: the daemon (host) and the offline replay
// (host/replay) import it; it
// imports internal/state and the abi module, and never the engine: the
// port is an interface the adapter satisfies by its method set.
package stateport
