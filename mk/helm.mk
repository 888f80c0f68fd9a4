# mk/helm.mk: Helm v4, which the chart's tests (deploy/helm) run to lint
# and render deploy/helm/informer-host, built once from the Go module
# proxy at the release its nested module pins (hack/helm/go.mod, outside
# the main module: its Kubernetes modules are newer than the daemon's),
# cached by version like the control plane (the first time about 2
# minutes on 2 shared cores). `make test` builds it and hands its path to
# the tests as $HELM.
HELM_VERSION := $(shell sed -n 's|^require helm.sh/helm/v4 \(v[^ ]*\)$$|\1|p' hack/helm/go.mod)
HELM_BIN := $(CACHE_DIR)/helm/$(HELM_VERSION)/helm
HELM ?= $(HELM_BIN)
export HELM

.PHONY: helm helm-rbac
helm: $(HELM_BIN)
$(HELM_BIN):
	INFORMER_HOST_CACHE=$(CACHE_DIR) hack/helm/build.sh

# The RBAC the chart ships for its default config of each mode
# (deploy/helm/informer-host/files/rbac-<mode>.yaml): `informer-host rbac`'s
# output, written by the test that fails when it is not current.
helm-rbac: helm
	$(GO) test -count=1 -run TestShippedRBACIsGenerated ./deploy/helm -update
