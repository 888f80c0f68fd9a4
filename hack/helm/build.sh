#!/usr/bin/env bash
# Builds helm, which the chart tests (deploy/helm_test.go) run to lint and
# render deploy/helm/informer-host, at the release go.mod pins, once into
# the cache (hack/gotool.sh), with the version -X its release sets so that
# `helm version` names what was built.
exec "$(dirname "$0")/../gotool.sh" helm helm.sh/helm/v4 helm.sh/helm/v4/cmd/helm \
	"a few CPU-minutes on 2 shared cores" -ldflags="-w -s -X helm.sh/helm/v4/internal/version.version=@VERSION@"
