//go:build tools

// Package tools pins k8s.io/kubernetes so that `go build
// k8s.io/kubernetes/cmd/kube-apiserver` and `go build
// k8s.io/kubernetes/cmd/kube-controller-manager` resolve inside this
// module: one dependency graph for both, so the second build reuses the
// first one's compiled packages.
package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
)
