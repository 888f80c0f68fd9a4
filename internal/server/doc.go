// Package server is informer-host's HTTP endpoint: Prometheus metrics,
// liveness, readiness and a JSON view of the plugins.
//
//	/metrics         Prometheus metrics of the plugins, the resources, the Go runtime,
//	                 and /readyz's answer (informer_host_ready, informer_host_standby)
//	/healthz         200 while the process runs
//	/readyz          200 once every resource has synced and every plugin is
//	                 loaded and synced, or deliberately quarantined, and no
//	                 resource's list/watch has failed for longer than its
//	                 grace; else 503 with the reasons, one per line. A standby replica (leader
//	                 election) answers 200 and says it is one.
//	/debug/plugins   every plugin's file, sha256, ABI version, bindings, state,
//	                 counters, last error, load time and last event time, as
//	                 JSON with lowerCamelCase keys
//
// The JSON shape of /debug/plugins is this package's (plugins.go): the
// host reports facts (host.PluginStatus, host.ShardStatus) without tags,
// and the server decides how an operator reads them.
//
// deploy/monitoring/metrics.txt lists every series name and label the
// registry Start builds can serve with what the daemon attaches to it;
// TestMetricNames writes it and fails when it is stale, and the
// dashboard's and alerts' queries are checked against it.
//
// Rule of direction: imported by the daemon (cmd/informer-host) only; it
// reads the host and the informer pipeline, which never import it.
//
// The server has read, write and idle timeouts, and a connection limit
// that sheds waiting connections rather than queueing new ones, so the
// probes answer under a connection flood (limit.go). Clients of /metrics
// and /debug/plugins cannot take the daemon's memory (bounded.go): each
// endpoint serves a few requests at once (503 past them), renders each
// response into a bounded buffer before writing it within the scrape
// timeout, and every connection's kernel send buffer is fixed, so a
// client that never reads holds little and not for long. With
// Options.AuthClient, /metrics and /debug/plugins require a Kubernetes
// bearer token allowed to get them (auth.go); the probes never do.
//
// Usage:
//
//	srv, err := server.Start(ctx, server.Options{Address: ":9090"})
//	srv.Standby("standby: waiting for the lease") // a replica that does not lead
//	err = srv.Attach(pipeline, host, resourceNames)
//	...
//	srv.Shutdown(ctx)
//
// Rule of direction: server imports host, informer and event, and
// internal/pluginsource for the sources' Status, for what it reports;
// only the daemon's command imports it.
package server
