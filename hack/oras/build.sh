#!/usr/bin/env bash
# Builds oras, the interop test's outside pusher and puller, at the release
# go.mod pins, once into the cache (hack/gotool.sh). Its version is in its
# source, so `oras version` names what was built without an -X.
exec "$(dirname "$0")/../gotool.sh" oras oras.land/oras oras.land/oras/cmd/oras \
	"under a minute on 2 shared cores" -ldflags=-w
