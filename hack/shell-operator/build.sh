#!/usr/bin/env bash
# Builds shell-operator (the peer `make bench` runs next to the daemon) at
# the release go.mod pins, once into the cache (hack/gotool.sh).
#
# The build is the release's own but for libjq: without the use_libjq tag
# (and so without cgo) shell-operator runs the jq binary for a binding's
# jqFilter; the benchmark's hook sets none, so nothing it measures changes.
exec "$(dirname "$0")/../gotool.sh" shell-operator github.com/flant/shell-operator \
	github.com/flant/shell-operator/cmd/shell-operator "about 4 minutes on 2 cores" \
	-ldflags="-X github.com/flant/shell-operator/pkg/app.Version=@VERSION@"
