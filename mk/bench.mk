# mk/bench.mk: the benchmarks. Included by the top-level
# Makefile; paths are relative to the repository root.
#
#   make bench         every benchmark: in-process (go test -bench) and end
#                      to end against a real kube-apiserver; prints one table
#                      and writes it to BENCHMARKS.md (about 20 minutes on 2
#                      cores, about 20 more for case 8, the peers, and 6
#                      for case 9, convergence; the
#                      first run also builds the plugins and compiles them,
#                      and shell-operator, a few minutes more)
#   make bench-smoke   every benchmark once, with tiny sizes, to keep them
#                      working (about 3 minutes; `make test` runs it). Its
#                      table goes to build/bench/BENCHMARKS.smoke.md and
#                      means nothing.
#
# Both need the control plane (`make controlplane`), clang for wasm32-wasi,
# wat2wasm, Debian's rustc and the AssemblyScript kit's pinned asc (the
# benchmark plugins in bench/plugins, noop-rs and noop-as among them, are
# built on demand into build/bench/plugins), and, for case 8, shell-operator (built once
# into the cache, below) with jq; case 9 the team-labeler example plugin
# (mk/plugins.mk); case 10 plugins/examples/configmap-copy (built by the
# harness; the case fails, naming it, while the tree lacks it) and
# bench/crcopy, its controller-runtime baseline, a module of its own built
# by the harness with GOWORK=off from the module proxy (the module cache
# after the first time). Case 10 is not part of bench-smoke, so not of
# `make test`. No benchmark asserts a time.
GO ?= go
BENCH_FLAGS ?=

.PHONY: bench bench-smoke
bench: controlplane deps shell-operator $(PLUGINS_OUT)/team-labeler.wasm abi/assemblyscript/node_modules/.kit-installed
	SHELL_OPERATOR=$(SHELL_OPERATOR_BIN) $(GO) run ./bench/cmd/bench $(BENCH_FLAGS)

bench-smoke: controlplane deps shell-operator $(PLUGINS_OUT)/team-labeler.wasm abi/assemblyscript/node_modules/.kit-installed
	SHELL_OPERATOR=$(SHELL_OPERATOR_BIN) $(GO) run ./bench/cmd/bench -smoke $(BENCH_FLAGS)

# shell-operator, the peer of case 8, built once from the Go module proxy
# at the release hack/shell-operator/go.mod pins (outside the main module,
# cached by version like the control plane; about 4 minutes the first
# time). Its hook needs bash and jq (hack/install-deps.sh).
SHELL_OPERATOR_VERSION := $(shell sed -n 's/^require github.com\/flant\/shell-operator \(v[^ ]*\)$$/\1/p' hack/shell-operator/go.mod)
SHELL_OPERATOR_BIN := $(CACHE_DIR)/shell-operator/$(SHELL_OPERATOR_VERSION)/shell-operator
.PHONY: shell-operator
shell-operator: $(SHELL_OPERATOR_BIN)
$(SHELL_OPERATOR_BIN):
	INFORMER_HOST_CACHE=$(CACHE_DIR) hack/shell-operator/build.sh
