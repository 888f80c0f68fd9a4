//go:build tools

// Package tools pins oras.land/oras so that `go build
// oras.land/oras/cmd/oras` resolves inside this module (hack/oras/build.sh;
// the interop test's outside pusher and puller).
package tools

import _ "oras.land/oras/cmd/oras"
