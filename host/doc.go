// Package host runs informer-host's plugins: a Host loads every *.wasm
// file of the plugin directory, attaches each to the informer pipeline's
// resources its bindings name, delivers their events one at a time per
// plugin in order, and keeps each plugin isolated: a plugin that fails,
// traps or falls behind is retried, restarted or parked on its own, and
// a changed file or config is reloaded without losing events. It serves
// the plugins' granted capabilities (cache reads, state, metrics, writes,
// Events, HTTP upstreams) and reports their status for /debug/plugins
// and /metrics.
//
// Rule of direction: host is the embeddable daemon library's centre
// (RATIONALE.md, "Project structure"). It imports the engine
// (host/internal/engine), informer, event, abi and the internal/ packages
// that back the capabilities; the daemon's command and internal/server
// import it. The engine never imports host.
package host
