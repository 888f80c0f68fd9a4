# mk/clients.mk: the outside OCI clients the interop tests run against
# the daemon's commands (cmd/informer-host/interop_e2e_test.go): oras and
# cosign, each built once from the Go module proxy at the release its
# nested module pins (hack/oras/go.mod, hack/cosign/go.mod; outside the
# main module, cached by version like the control plane: the first time,
# under a minute for oras, about 5 CPU-minutes for cosign, which took 19
# minutes on 2 cores shared with other builds). `make test` builds them
# and hands their paths to the tests as $ORAS and $COSIGN.
ORAS_VERSION := $(shell sed -n 's|^require oras.land/oras \(v[^ ]*\)$$|\1|p' hack/oras/go.mod)
ORAS_BIN := $(CACHE_DIR)/oras/$(ORAS_VERSION)/oras
COSIGN_VERSION := $(shell sed -n 's|^require github.com/sigstore/cosign/v2 \(v[^ ]*\)$$|\1|p' hack/cosign/go.mod)
COSIGN_BIN := $(CACHE_DIR)/cosign/$(COSIGN_VERSION)/cosign
ORAS ?= $(ORAS_BIN)
COSIGN ?= $(COSIGN_BIN)
export ORAS COSIGN

.PHONY: clients
clients: $(ORAS_BIN) $(COSIGN_BIN)
$(ORAS_BIN):
	INFORMER_HOST_CACHE=$(CACHE_DIR) hack/oras/build.sh
$(COSIGN_BIN):
	INFORMER_HOST_CACHE=$(CACHE_DIR) hack/cosign/build.sh
