// Package check holds deploy/monitoring's test: every PromQL query of the
// Grafana dashboard and of the alert rules parses (Prometheus's own
// parser, and rulefmt for the rule groups) and names only series the
// daemon exposes, as deploy/monitoring/metrics.txt lists them (a
// main-module test, internal/server's TestMetricNames, writes that file
// from the daemon's real registry and fails when it is stale).
//
// A module of its own, so that github.com/prometheus/prometheus stays out
// of the daemon's go.mod; kept out of go.work, as bench/crcopy and the
// nested modules under hack/ are; `make test` runs it (GOWORK=off).
//
// Rule of direction: it imports nothing of the daemon's and nothing
// imports it; it reads the files of its parent directory.
package check
