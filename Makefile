# informer-host. `make demo` and `make test` do all the setup on a fresh
# machine: they install the system packages the plugins need
# (hack/install-deps.sh), build kube-apiserver, kube-controller-manager and
# etcd from the Go module proxy once (cached outside the repo, by version)
# and the example plugins.

GO ?= go
SHELL := /bin/bash
K8S_VERSION := 1.37.2
ETCD_VERSION := 3.6.16
CACHE_DIR ?= $(or $(INFORMER_HOST_CACHE),$(or $(XDG_CACHE_HOME),$(HOME)/.cache)/informer-host)
KUBEBUILDER_ASSETS ?= $(CACHE_DIR)/controlplane/k8s-$(K8S_VERSION)-etcd-$(ETCD_VERSION)
export KUBEBUILDER_ASSETS
# go test's own per-package limit; the e2e packages start a control plane.
TEST_TIMEOUT ?= 20m
TEST_FLAGS ?=

.PHONY: all build deps controlplane test test-unit vet fmt cluster demo bench image clean
all: build

build: bin/informer-host
# Every Go file of the module but tests and plugins: any package may be linked in.
bin/informer-host: $(shell find . -name '*.go' -not -name '*_test.go' -not -path './build/*' -not -path './plugins/*' 2>/dev/null) go.mod go.sum
	$(GO) build -o $@ ./cmd/informer-host

# The Debian packages for C and WAT plugins (clang, lld, wasi-libc, wabt):
# installed when missing and possible, else the exact command is printed
# and make stops. The plugin and fixture rules depend on it (mk/plugins.mk).
deps:
	@hack/install-deps.sh

# kube-apiserver, kube-controller-manager and etcd for the tests, `make
# cluster` and `make demo`.
CONTROLPLANE_BINARIES := $(addprefix $(KUBEBUILDER_ASSETS)/,kube-apiserver kube-controller-manager etcd)
controlplane: $(CONTROLPLANE_BINARIES)
$(CONTROLPLANE_BINARIES):
	INFORMER_HOST_CACHE=$(CACHE_DIR) hack/controlplane/build.sh

-include mk/plugins.mk
-include mk/kits.mk
-include mk/bench.mk
-include mk/toolkit.mk
-include mk/race.mk
-include mk/clients.mk

# Every test, the e2e ones against the real apiserver included (and the
# interop ones against oras and cosign, mk/clients.mk), the
# concurrent ones again under the race detector (mk/race.mk), then every
# benchmark once with tiny sizes so they keep working (no time is asserted).
test: deps controlplane clients plugins fixtures
	$(GO) vet ./... ./abi/...
	$(GO) test -timeout $(TEST_TIMEOUT) $(TEST_FLAGS) ./... ./abi/...
	$(MAKE) test-race
	$(MAKE) bench-smoke

# The unit tests, both modules, in minutes: under -short testenv.Run starts
# no control plane and every test that needs one skips, as do the tests
# that build binaries or plugins or run long.
test-unit:
	$(GO) test -short $(TEST_FLAGS) ./... ./abi/...

vet:
	$(GO) vet ./... ./abi/...
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

fmt:
	gofmt -w $$(git ls-files '*.go')

# A local control plane for a person, with the controllers that turn a
# Deployment into a ReplicaSet and Pods (no scheduler or kubelet: Pods stay
# Pending): writes build/kubeconfig, Ctrl-C stops it.
cluster: controlplane
	$(GO) build -o bin/cluster ./hack/cluster
	bin/cluster --kubeconfig build/kubeconfig

# A local control plane with controllers, the host with hack/demo/config.yaml
# (every example plugin, each granted what it uses) and objects changing so
# the plugins have something to do; it prints what their capabilities did.
# Ctrl-C stops all.
demo: deps controlplane build plugins
	$(GO) build -o bin/demo ./hack/demo
	bin/demo --host bin/informer-host --config hack/demo/config.yaml

# The container image without a container engine or a registry: the static
# binary on an empty base, as the non-root user of deploy/base/deployment.yaml,
# laid out by hack/image (go-containerregistry, its own go.mod) as an OCI
# layout in build/image/oci and a `docker load`/`podman load` tarball in
# build/image/informer-host.tar (IMAGE_DIR moves both). hack/image_test.go checks what it builds;
# the Dockerfile, for those with Docker, is not built here.
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
IMAGE_DIR ?= build/image
image:
	mkdir -p $(IMAGE_DIR)
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags "-s -w -X main.version=$(VERSION)" -o $(IMAGE_DIR)/informer-host ./cmd/informer-host
	cd hack/image && GOWORK=off $(GO) run . -binary $(abspath $(IMAGE_DIR))/informer-host -version $(VERSION) \
		-oci $(abspath $(IMAGE_DIR))/oci -tar $(abspath $(IMAGE_DIR))/informer-host.tar

# deploy/base/rbac.yaml is generated from deploy/base/config.yaml (the daemon's
# least-privilege RBAC); cmd/informer-host's TestDeployRBACIsGenerated
# fails when they drift.
.PHONY: rbac
rbac:
	$(GO) run ./cmd/informer-host rbac --config deploy/base/config.yaml --config-map-key config.yaml > deploy/base/rbac.yaml.tmp
	mv deploy/base/rbac.yaml.tmp deploy/base/rbac.yaml

# deploy/crds holds the Plugin and ClusterPlugin CRDs, generated from
# internal/pluginapi/v1alpha1 and config's module fields (hack/crdgen);
# its tests fail when the committed files drift from what it makes.
.PHONY: crds
crds:
	$(GO) run ./hack/crdgen -out deploy/crds

clean:
	rm -rf bin build

# The soak (hack/soak): two sharded daemons under a ground-truth checker
# plugin while objects churn and faults follow one another (reloads, cut
# watches, the apiserver unreachable, kube-apiserver, etcd and members
# SIGKILLed, a member SIGSTOPped); it prints objects lost, time to
# reconverge after each fault, RSS and goroutines, and fails on any loss
# or growth. make test runs one pass; SOAK_DURATION sets how long this runs.
SOAK_DURATION ?= 10m
.PHONY: soak
soak: controlplane
	$(GO) test -count=1 -timeout 0 -v -run TestSoak ./hack/soak -args -soak.duration=$(SOAK_DURATION)
