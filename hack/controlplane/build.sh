#!/usr/bin/env bash
# Builds kube-apiserver and etcd from the Go module proxy into a cache
# directory keyed by version, outside the repository, and prints that
# directory. A second run finds the binaries and builds nothing.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
k8s_version=1.37.2
etcd_version=3.6.16
cache=${INFORMER_HOST_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/informer-host}
dir="$cache/controlplane/k8s-$k8s_version-etcd-$etcd_version"
mkdir -p "$dir"
if [ ! -x "$dir/kube-apiserver" ]; then
	echo "building kube-apiserver v$k8s_version into $dir (about 9 minutes on 2 cores, once)" >&2
	(cd "$here/kube-apiserver" && GOWORK=off go build -trimpath -o "$dir/kube-apiserver.tmp" k8s.io/kubernetes/cmd/kube-apiserver)
	mv "$dir/kube-apiserver.tmp" "$dir/kube-apiserver"
fi
if [ ! -x "$dir/etcd" ]; then
	echo "building etcd v$etcd_version into $dir (about a minute, once)" >&2
	(cd "$here/etcd" && GOWORK=off go build -trimpath -o "$dir/etcd.tmp" .)
	mv "$dir/etcd.tmp" "$dir/etcd"
fi
echo "$dir"
