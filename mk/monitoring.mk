# deploy/monitoring/check: every query of the Grafana dashboard and the
# alert rules parses with Prometheus's own PromQL parser and rulefmt, and
# names only series the daemon exposes (deploy/monitoring/metrics.txt,
# which internal/server's TestMetricNames keeps current). A module of its
# own, out of go.work, so github.com/prometheus/prometheus stays out of
# the daemon's go.mod: built with GOWORK=off from the module proxy (the
# module cache after the first time). Part of `make test`; needs no
# control plane.
.PHONY: monitoring-check
monitoring-check:
	cd deploy/monitoring/check && GOWORK=off $(GO) vet ./... && GOWORK=off $(GO) test $(TEST_FLAGS) ./...
