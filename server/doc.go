// Package server is informer-host's HTTP endpoint: Prometheus metrics,
// liveness, readiness and a JSON view of the plugins.
//
//	/metrics         Prometheus metrics of the plugins, the resources, the Go runtime
//	/healthz         200 while the process runs
//	/readyz          200 once every resource has synced and every plugin is
//	                 loaded and synced, or deliberately quarantined; else 503
//	                 with the reasons, one per line
//	/debug/plugins   every plugin's file, sha256, ABI version, bindings, state,
//	                 counters and last error, as JSON
//
// Usage:
//
//	srv, err := server.Start(ctx, server.Options{Address: ":9090"})
//	srv.Waiting("waiting to become the leader") // /readyz says so meanwhile
//	err = srv.Attach(pipeline, host, resourceNames)
//	...
//	srv.Shutdown(ctx)
package server
