#!/usr/bin/env bash
# Builds a program from the Go module proxy at the release a nested module
# pins (hack/NAME/go.mod, with a tools.go importing the program, so its
# dependencies stay out of the daemon's go.mod) into a cache directory
# keyed by version, outside the repository, and prints the binary's path.
# A second run finds it and builds nothing. hack/NAME/build.sh calls it.
#
#   hack/gotool.sh NAME MODULE PACKAGE HOW-LONG [go build flags]
#
# @VERSION@ in a flag becomes the version, for the -X a release sets.
set -euo pipefail
name=$1 module=$2 pkg=$3 how_long=$4
shift 4
here=$(cd "$(dirname "$0")/$name" && pwd)
version=$(sed -n "s|^require $module \(v[^ ]*\)\$|\1|p" "$here/go.mod")
if [ -z "$version" ]; then
	echo "$here/go.mod has no 'require $module vX.Y.Z' line to build" >&2
	exit 1
fi
cache=${INFORMER_HOST_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/informer-host}
dir="$cache/$name/$version"
mkdir -p "$dir"
if [ ! -x "$dir/$name" ]; then
	echo "building $name $version into $dir ($how_long, once)" >&2
	(cd "$here" && GOWORK=off CGO_ENABLED=0 go build -trimpath "${@//@VERSION@/$version}" \
		-o "$dir/$name.tmp" "$pkg")
	mv "$dir/$name.tmp" "$dir/$name"
fi
echo "$dir/$name"
