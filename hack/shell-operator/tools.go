//go:build tools

// Package tools pins github.com/flant/shell-operator so that `go build
// github.com/flant/shell-operator/cmd/shell-operator` resolves inside this
// module (hack/shell-operator/build.sh; the benchmarks' peer).
package tools

import _ "github.com/flant/shell-operator/cmd/shell-operator"
