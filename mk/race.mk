# mk/race.mk: the race detector over the concurrent code. Included by the
# top-level Makefile; paths are relative to the repository root.
#
#   make test-race   go test -race over the packages and tests where
#                    goroutines meet: the delivery queue, the engine's
#                    watchdog and call bounds, shard, state, server, the
#                    host's reload, stop, standby, sharding and network
#                    wait tests, the pipeline, the capabilities II
#                    clients, the daemons side by side of
#                    internal/daemon, and cmd/informer-host. `make test`
#                    runs it: 2m41s on 2
#                    shared cores with the -race builds cached, and about
#                    6 minutes more to build them the first time; the whole
#                    of `make test` stays far inside CI's 90 minutes.
#
# Not everything runs under -race: it slows Go code several times over,
# and the rest (the engine's spec, kit and example tests, the host's
# example and record tests: plugins compiled and called one after
# another) exercises no concurrency the tests below do not. A test that
# starts goroutines belongs here.
GO ?= go
RACE_TIMEOUT ?= 30m
RACE_FLAGS ?=

# Whole packages: small, and concurrent throughout (the pipeline, the
# clients of capabilities II, the delivery queue, the daemons side by
# side in internal/daemon, the plugin sources' goroutine per source).
RACE_PACKAGES := ./internal/shard/... ./internal/state/... ./internal/server/... ./informer/... ./internal/upstream/... ./internal/kubewrite/... \
	./internal/kubeevents/... ./internal/pluginmetrics/... ./cmd/informer-host/ \
	./internal/daemon/ ./host/internal/delivery/ ./internal/pluginsource/
# The engine: the watchdog, the network waits, the call bounds, the
# start timer.
RACE_ENGINE_TESTS := TestWatchdog|TestIO|TestCallBound|TestMaxCallTime|TestInjectedChecksBoundInstantiation|TestHTTPFunctions|TestHandleBatch
# The host: the queue, and the e2e tests where workers, reloads, the
# directory watcher, leases and stops run at once.
# (One alternative per line; := joins them without spaces, which a -run
# pattern must not have.)
RACE_HOST_TESTS := TestPrepareNeverGoesBackwards|TestMemReleaser
RACE_HOST_TESTS := $(RACE_HOST_TESTS)|TestBatch|TestView|TestSourceMovesUnderChurnLoseNoEvent|TestSignedTagMovesInARegistryUnderChurn
RACE_HOST_TESTS := $(RACE_HOST_TESTS)|TestReloadsUnderChurnLoseNoEvent|TestReloadDuringAFailingCall
RACE_HOST_TESTS := $(RACE_HOST_TESTS)|TestStopDrainsBuffers|TestStopAbandonsAStuckPlugin|TestStopLeavesNoGoroutines
RACE_HOST_TESTS := $(RACE_HOST_TESTS)|TestStuckRetirementDoesNotWedgeTheWatcher|TestRestartKeepsListenersRegistered
RACE_HOST_TESTS := $(RACE_HOST_TESTS)|TestStandbyHoldsThenActivates|TestSharding
RACE_HOST_TESTS := $(RACE_HOST_TESTS)|TestDeliveryModesUnderABurstToASlowPlugin|TestOverflowIsRepairedFromTheCache
RACE_HOST_TESTS := $(RACE_HOST_TESTS)|TestWriteSlowerThanCallTimeout|TestCrashloopNotifierSlowWebhook|TestEventRecorder|TestCallBoundsStopARequestLoop
RACE_HOST_TESTS := $(RACE_HOST_TESTS)|TestLabelEnforcerExample|TestRestartedPluginGetsTheCacheAgain|TestStateSurvivesTrapsAndReloads
RACE_HOST_TESTS := $(RACE_HOST_TESTS)|TestControllerBoundToAPendingEmptyResourceSyncs

.PHONY: test-race
test-race: deps controlplane plugins fixtures
	$(GO) test -race -timeout $(RACE_TIMEOUT) $(RACE_FLAGS) $(RACE_PACKAGES)
	$(GO) test -race -timeout $(RACE_TIMEOUT) $(RACE_FLAGS) -run '$(RACE_ENGINE_TESTS)' ./host/internal/engine/
	$(GO) test -race -timeout $(RACE_TIMEOUT) $(RACE_FLAGS) -run '$(RACE_HOST_TESTS)' ./host/
