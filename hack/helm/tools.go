//go:build tools

// Package tools pins helm.sh/helm/v4 so that `go build
// helm.sh/helm/v4/cmd/helm` resolves inside this module (hack/helm/build.sh;
// the chart tests' lint, template and install runs), and keeps helm's
// Kubernetes modules, newer than the daemon's, out of the main go.mod.
package tools

import _ "helm.sh/helm/v4/cmd/helm"
