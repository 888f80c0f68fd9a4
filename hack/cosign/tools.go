//go:build tools

// Package tools pins github.com/sigstore/cosign/v2 so that `go build
// github.com/sigstore/cosign/v2/cmd/cosign` resolves inside this module
// (hack/cosign/build.sh; the interop test's signer and verifier).
package tools

import _ "github.com/sigstore/cosign/v2/cmd/cosign"
