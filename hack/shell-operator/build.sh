#!/usr/bin/env bash
# Builds shell-operator (the peer `make bench` runs next to the daemon)
# from the Go module proxy into a cache directory keyed by version, outside
# the repository, and prints the binary's path. A second run finds it and
# builds nothing.
#
# The build is the release's own but for libjq: without the use_libjq tag
# (and so without cgo) shell-operator runs the jq binary for a binding's
# jqFilter; the benchmark's hook sets none, so nothing it measures changes.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
version=$(sed -n 's/^require github.com\/flant\/shell-operator \(v[^ ]*\)$/\1/p' "$here/go.mod")
cache=${INFORMER_HOST_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/informer-host}
dir="$cache/shell-operator/$version"
mkdir -p "$dir"
if [ ! -x "$dir/shell-operator" ]; then
	echo "building shell-operator $version into $dir (about 4 minutes on 2 cores, once)" >&2
	(cd "$here" && GOWORK=off CGO_ENABLED=0 go build -trimpath \
		-ldflags "-X github.com/flant/shell-operator/pkg/app.Version=$version" \
		-o "$dir/shell-operator.tmp" github.com/flant/shell-operator/cmd/shell-operator)
	mv "$dir/shell-operator.tmp" "$dir/shell-operator"
fi
echo "$dir/shell-operator"
