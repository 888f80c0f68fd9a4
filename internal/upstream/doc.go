// Package upstream calls the HTTP endpoints the operator names in
// config.yaml (top-level upstreams) on behalf of plugins (ABI.md §17.3).
//
// A plugin never passes a URL: it names an upstream and a path under the
// upstream's base URL, so it can reach nothing the operator did not name
// (proxy-wasm's upstream model). Paths that would leave the base ("..",
// "//host", an absolute URL) are refused, and a redirect is followed only
// while it stays under the base; otherwise the plugin gets the 3xx.
//
// Header values that come from the daemon's environment or from a file
// (tokens) are read when a Set is built or updated and kept only in the
// request headers: they never appear in an error, a log line or a status
// page.
//
// A Set holds the upstreams of the current config; Client gives one plugin
// its view: the upstreams it is granted, at most its grant's concurrency
// in flight, and its metrics (requests by status class, latency) in the
// Set's collector.
//
// Rule of direction: upstream imports abi, config and tracing (a request
// made during a traced call is a span, and carries its traceparent); only
// host imports it.
package upstream
