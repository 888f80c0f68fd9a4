#!/usr/bin/env bash
# Builds cosign, the interop test's outside signer and verifier, at the
# release go.mod pins, once into the cache (hack/gotool.sh), with the
# version -X its release sets so that `cosign version` names what was built.
exec "$(dirname "$0")/../gotool.sh" cosign github.com/sigstore/cosign/v2 github.com/sigstore/cosign/v2/cmd/cosign \
	"about 5 CPU-minutes: 19 minutes on 2 cores shared with other builds" -ldflags="-X sigs.k8s.io/release-utils/version.gitVersion=@VERSION@"
