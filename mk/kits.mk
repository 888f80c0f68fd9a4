# mk/kits.mk: the Rust and AssemblyScript kits' examples and unit tests.
# Included by the top-level Makefile after mk/plugins.mk; adds to its
# `plugins` target:
#
#   build/plugins/pod-phase-rs.wasm    plugins/examples/pod-phase-rs, abi/rust, wasm32-wasi
#   build/kits/pod-phase-rs.wasm32-unknown-unknown.wasm   the same for wasm32-unknown-unknown
#   build/plugins/pod-logger-as.wasm   plugins/examples/pod-logger-as, abi/assemblyscript
#   build/plugins/service-per-pod-rs.wasm   plugins/examples/service-per-pod-rs (a controller), abi/rust
#   make kits-test                     the Rust kit's #[test]s, informer_host.h's helpers and
#                                      the C fake host, natively, and the AssemblyScript fake host's tests
#                                      under node (make test runs them)
#
# Rust: Debian's rustc (1.63, package rustc + libstd-rust-dev-wasm32), by
# its path: a rustup rustc earlier on PATH usually has no wasm targets.
# No cargo and no crates: the kit is one dependency-free crate.
# AssemblyScript: npm installs the pinned compiler into each package's
# node_modules (ignored by git; npm's download cache is ~/.npm).
RUSTC_WASM ?= /usr/bin/rustc
NPM ?= npm
KITS_OUT ?= build/kits
# -C strip=debuginfo drops DWARF (5 MB of std's) but keeps the name
# section, so the host's wasm stack traces name the functions.
RUST_PLUGIN_FLAGS ?= --edition 2021 -O -C strip=debuginfo

RUST_KIT_SRC := $(wildcard abi/rust/src/*.rs)
RUST_TARGETS := wasm32-wasi wasm32-unknown-unknown
AS_KIT_SRC := $(wildcard abi/assemblyscript/assembly/*.ts) abi/assemblyscript/package.json
AS_EXAMPLE := plugins/examples/pod-logger-as
# assemblyscript 0.28 declares node >= 20; Debian 12's nodejs is 18.
AS_NODE_CHECK = @node -e 'process.exit(+process.versions.node.split(".")[0] >= 20 ? 0 : 1)' || { \
	echo "AssemblyScript 0.28 needs node >= 20, this is node $$(node --version): on Debian 12 install NodeSource's nodejs 20 (it brings npm) or use Debian 13" >&2; exit 1; }

KIT_PLUGINS := $(PLUGINS_OUT)/pod-phase-rs.wasm $(KITS_OUT)/pod-phase-rs.wasm32-unknown-unknown.wasm \
	$(PLUGINS_OUT)/service-per-pod-rs.wasm $(KITS_OUT)/c-reconcile.wasm $(KITS_OUT)/as-reconcile-plugin.wasm \
	$(PLUGINS_OUT)/pod-logger-as.wasm $(KITS_OUT)/template-rs.wasm $(KITS_OUT)/template-as.wasm \
	$(KITS_OUT)/as-kit-test.wasm $(KITS_OUT)/rs-kit-test.wasm \
	$(KITS_OUT)/as-batch-test.wasm $(KITS_OUT)/rs-batch-test.wasm

.PHONY: kits-test
plugins: $(KIT_PLUGINS)
$(KIT_PLUGINS): | deps

# The kit as an rlib per target; plugins link it with --extern.
$(KITS_OUT)/rust/%/libinformer_host.rlib: $(RUST_KIT_SRC)
	@mkdir -p $(@D)
	$(RUSTC_WASM) $(RUST_PLUGIN_FLAGS) --crate-type rlib --crate-name informer_host --target $* -o $@ abi/rust/src/lib.rs

$(PLUGINS_OUT)/pod-phase-rs.wasm: plugins/examples/pod-phase-rs/plugin.rs $(KITS_OUT)/rust/wasm32-wasi/libinformer_host.rlib
	@mkdir -p $(@D)
	$(RUSTC_WASM) $(RUST_PLUGIN_FLAGS) --crate-type cdylib --target wasm32-wasi \
		--extern informer_host=$(KITS_OUT)/rust/wasm32-wasi/libinformer_host.rlib -o $@ $<

$(KITS_OUT)/pod-phase-rs.wasm32-unknown-unknown.wasm: plugins/examples/pod-phase-rs/plugin.rs $(KITS_OUT)/rust/wasm32-unknown-unknown/libinformer_host.rlib
	@mkdir -p $(@D)
	$(RUSTC_WASM) $(RUST_PLUGIN_FLAGS) --crate-type cdylib --target wasm32-unknown-unknown \
		--extern informer_host=$(KITS_OUT)/rust/wasm32-unknown-unknown/libinformer_host.rlib -o $@ $<

$(PLUGINS_OUT)/service-per-pod-rs.wasm: plugins/examples/service-per-pod-rs/plugin.rs $(KITS_OUT)/rust/wasm32-wasi/libinformer_host.rlib
	@mkdir -p $(@D)
	$(RUSTC_WASM) $(RUST_PLUGIN_FLAGS) --crate-type cdylib --target wasm32-wasi \
		--extern informer_host=$(KITS_OUT)/rust/wasm32-wasi/libinformer_host.rlib -o $@ $<

# The kit's unit tests run on this machine's own target, against the kit's
# in-memory host (abi/rust/src/fake.rs); so do the Rust examples' tests,
# linked with the kit built for this machine (its fake host included).
kits-test: $(KITS_OUT)/rust/kit-test $(KITS_OUT)/rust/service-per-pod-rs-test $(KITS_OUT)/c/helpers-test $(KITS_OUT)/c/fake-test \
		$(KITS_OUT)/c/reconcile-test $(KITS_OUT)/as-fake-plugin.wasm $(KITS_OUT)/as-reconcile-plugin.wasm
	$(KITS_OUT)/rust/kit-test
	$(KITS_OUT)/rust/service-per-pod-rs-test
	$(KITS_OUT)/c/helpers-test
	$(KITS_OUT)/c/fake-test
	$(KITS_OUT)/c/reconcile-test
	FAKE_PLUGIN=$(abspath $(KITS_OUT)/as-fake-plugin.wasm) node --test abi/assemblyscript/test/fake.test.mjs
	RECONCILE_PLUGIN=$(abspath $(KITS_OUT)/as-reconcile-plugin.wasm) node --test abi/assemblyscript/test/reconcile.test.mjs
$(KITS_OUT)/rust/kit-test: $(RUST_KIT_SRC) | deps
	@mkdir -p $(@D)
	$(RUSTC_WASM) --edition 2021 --test -o $@ abi/rust/src/lib.rs
$(KITS_OUT)/rust/native/libinformer_host.rlib: $(RUST_KIT_SRC) | deps
	@mkdir -p $(@D)
	$(RUSTC_WASM) --edition 2021 --crate-type rlib --crate-name informer_host -o $@ abi/rust/src/lib.rs
$(KITS_OUT)/rust/service-per-pod-rs-test: plugins/examples/service-per-pod-rs/plugin.rs $(KITS_OUT)/rust/native/libinformer_host.rlib
	$(RUSTC_WASM) --edition 2021 --test --extern informer_host=$(KITS_OUT)/rust/native/libinformer_host.rlib -o $@ $<
# informer_host.h's inline helpers, natively (the imports are only declared).
$(KITS_OUT)/c/helpers-test: abi/include/test/helpers_test.c abi/include/informer_host.h | deps
	@mkdir -p $(@D)
	$(CLANG) -Wall -Wno-unknown-attributes -Iabi/include -o $@ $<
# informer_host_fake.h, the C plugins' in-memory host, natively.
$(KITS_OUT)/c/fake-test: abi/include/test/fake_test.c abi/include/informer_host_fake.h abi/include/informer_host.h abi/include/informer_host_reconcile.h | deps
	@mkdir -p $(@D)
	$(CLANG) -Wall -Wextra -Wno-unknown-attributes -Iabi/include -o $@ $<
# The C kit's controller-mode plugin, run through the engine by
# host/internal/engine's TestKitReconcile (with the Rust and
# AssemblyScript kits' reconcilers).
$(KITS_OUT)/c-reconcile.wasm: abi/include/test/reconcile_plugin.c abi/include/informer_host_reconcile.h abi/include/informer_host.h | deps
	@mkdir -p $(@D)
	$(CLANG) $(PLUGIN_CLANG_FLAGS) -o $@ $<
# informer_host_reconcile.h (controller mode) over the C fake host's loop.
$(KITS_OUT)/c/reconcile-test: abi/include/test/reconcile_test.c abi/include/informer_host_fake.h abi/include/informer_host.h abi/include/informer_host_reconcile.h | deps
	@mkdir -p $(@D)
	$(CLANG) -Wall -Wextra -Wno-unknown-attributes -Iabi/include -o $@ $<
test: kits-test

# npm ci installs exactly the lock file's versions (assemblyscript pinned).
$(AS_EXAMPLE)/node_modules/.kit-installed: $(AS_EXAMPLE)/package.json $(AS_EXAMPLE)/package-lock.json $(AS_KIT_SRC) | deps
	$(AS_NODE_CHECK)
	cd $(AS_EXAMPLE) && $(NPM) ci --no-audit --no-fund
	@touch $@

# The flags are the package's build script: -O --debug (optimised, name
# section kept) and --use abort= the kit's abort.
$(PLUGINS_OUT)/pod-logger-as.wasm: $(AS_EXAMPLE)/assembly/index.ts $(AS_KIT_SRC) $(AS_EXAMPLE)/node_modules/.kit-installed
	@mkdir -p $(@D)
	cd $(AS_EXAMPLE) && $(NPM) run --silent build
	cp $(AS_EXAMPLE)/build/pod-logger-as.wasm $@

# The scaffold templates (`informer-host new --lang rust|assemblyscript`),
# built in place with their own one command, so they keep building. The
# binary embeds them file by file (abi/sources.go), with the kit that new
# copies into the project's kit/ (the template's fallback here is ..).
$(KITS_OUT)/template-rs.wasm: $(wildcard abi/rust/template/*) $(RUST_KIT_SRC)
	@mkdir -p $(@D)
	RUSTC=$(RUSTC_WASM) abi/rust/template/build.sh
	RUSTC=$(RUSTC_WASM) abi/rust/template/build.sh test
	cp abi/rust/template/build/my-plugin.wasm $@
$(KITS_OUT)/template-as.wasm: $(wildcard abi/assemblyscript/template/* abi/assemblyscript/template/assembly/*) $(AS_KIT_SRC)
	@mkdir -p $(@D)
	$(AS_NODE_CHECK)
	cd abi/assemblyscript/template && $(NPM) run --silent build
	cp abi/assemblyscript/template/build/my-plugin.wasm $@

# The AssemblyScript kit's test plugin (abi/assemblyscript/test/kit.ts),
# run by host/internal/engine's TestKitAssemblyScriptFunctions.
abi/assemblyscript/node_modules/.kit-installed: abi/assemblyscript/package.json abi/assemblyscript/package-lock.json | deps
	$(AS_NODE_CHECK)
	cd abi/assemblyscript && $(NPM) ci --no-audit --no-fund
	@touch $@
$(KITS_OUT)/as-kit-test.wasm: abi/assemblyscript/test/kit.ts $(AS_KIT_SRC) abi/assemblyscript/node_modules/.kit-installed
	@mkdir -p $(@D)
	cd abi/assemblyscript && node_modules/.bin/asc test/kit.ts -o $(abspath $@) -O --debug --use abort=assembly/index/abort

# The kits' batch test plugins (abi/assemblyscript/test/batch.ts,
# abi/rust/test/batch.rs: the optional ih_handle_batch export), run by
# host/internal/engine's TestKitBatch.
$(KITS_OUT)/as-batch-test.wasm: abi/assemblyscript/test/batch.ts $(AS_KIT_SRC) abi/assemblyscript/node_modules/.kit-installed
	@mkdir -p $(@D)
	cd abi/assemblyscript && node_modules/.bin/asc test/batch.ts -o $(abspath $@) -O --debug --use abort=assembly/index/abort
$(KITS_OUT)/rs-batch-test.wasm: abi/rust/test/batch.rs $(KITS_OUT)/rust/wasm32-wasi/libinformer_host.rlib
	@mkdir -p $(@D)
	$(RUSTC_WASM) $(RUST_PLUGIN_FLAGS) --crate-type cdylib --target wasm32-wasi \
		--extern informer_host=$(KITS_OUT)/rust/wasm32-wasi/libinformer_host.rlib -o $@ $<

# The AssemblyScript fake host's plugin (abi/assemblyscript/test/fake-plugin.ts),
# run under node against abi/assemblyscript/fake/host.mjs by kits-test.
$(KITS_OUT)/as-fake-plugin.wasm: abi/assemblyscript/test/fake-plugin.ts $(AS_KIT_SRC) abi/assemblyscript/node_modules/.kit-installed
	@mkdir -p $(@D)
	cd abi/assemblyscript && node_modules/.bin/asc test/fake-plugin.ts -o $(abspath $@) -O --debug --use abort=assembly/index/abort

# The AssemblyScript kit's controller-mode plugin (abi/assemblyscript/test/reconcile-plugin.ts),
# run under node against fake/host.mjs's controller loop by kits-test.
$(KITS_OUT)/as-reconcile-plugin.wasm: abi/assemblyscript/test/reconcile-plugin.ts $(AS_KIT_SRC) abi/assemblyscript/node_modules/.kit-installed
	@mkdir -p $(@D)
	cd abi/assemblyscript && node_modules/.bin/asc test/reconcile-plugin.ts -o $(abspath $@) -O --debug --use abort=assembly/index/abort

# The Rust kit's test plugin (abi/rust/test/kit.rs), run by
# host/internal/engine's TestKitRustFunctions.
$(KITS_OUT)/rs-kit-test.wasm: abi/rust/test/kit.rs $(KITS_OUT)/rust/wasm32-wasi/libinformer_host.rlib
	@mkdir -p $(@D)
	$(RUSTC_WASM) $(RUST_PLUGIN_FLAGS) --crate-type cdylib --target wasm32-wasi \
		--extern informer_host=$(KITS_OUT)/rust/wasm32-wasi/libinformer_host.rlib -o $@ $<
