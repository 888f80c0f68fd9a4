#!/usr/bin/env bash
# Builds kube-apiserver, kube-controller-manager and etcd from the Go module
# proxy into a cache directory keyed by version, outside the repository,
# and prints that directory. A second run finds the binaries and builds
# nothing.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
k8s_version=1.37.2
etcd_version=3.6.16
cache=${INFORMER_HOST_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/informer-host}
dir="$cache/controlplane/k8s-$k8s_version-etcd-$etcd_version"
mkdir -p "$dir"
if [ ! -x "$dir/kube-apiserver" ]; then
	echo "building kube-apiserver v$k8s_version into $dir (about 9 minutes on 2 cores, once)" >&2
	(cd "$here/kubernetes" && GOWORK=off go build -trimpath -o "$dir/kube-apiserver.tmp" k8s.io/kubernetes/cmd/kube-apiserver)
	mv "$dir/kube-apiserver.tmp" "$dir/kube-apiserver"
fi
# The same module as kube-apiserver, so the same dependency graph: the
# packages they share come from the build cache.
if [ ! -x "$dir/kube-controller-manager" ]; then
	echo "building kube-controller-manager v$k8s_version into $dir (a few minutes after kube-apiserver, once)" >&2
	(cd "$here/kubernetes" && GOWORK=off go build -trimpath -o "$dir/kube-controller-manager.tmp" k8s.io/kubernetes/cmd/kube-controller-manager)
	mv "$dir/kube-controller-manager.tmp" "$dir/kube-controller-manager"
fi
if [ ! -x "$dir/etcd" ]; then
	echo "building etcd v$etcd_version into $dir (about a minute, once)" >&2
	(cd "$here/etcd" && GOWORK=off go build -trimpath -o "$dir/etcd.tmp" .)
	mv "$dir/etcd.tmp" "$dir/etcd"
fi
echo "$dir"
