# mk/plugins.mk: builds the example plugins and the engine's conformance
# fixtures. Included by the top-level Makefile; all paths are relative to
# the repository root.
#
#   make plugins    build/plugins/{pod-logger,pod-phases,owner-lookup,ns-counter,label-enforcer,team-labeler,event-recorder,configmap-copy,configmap-copy-events,cronjob,counter-c,crashloop-notifier,minimal-wat}.wasm
#   make fixtures   build/fixtures/*.wasm from host/testdata/fixtures/*.wat and *.c
#
# Tools: clang, lld, wasi-libc, the wasm32 compiler runtime and wabt;
# `make deps` (hack/install-deps.sh, run first by every rule here) installs
# them or says how.
GO ?= go
CLANG ?= clang
WAT2WASM ?= wat2wasm
# Debian's wasi-libc installs its sysroot under /usr (headers in
# /usr/include/wasm32-wasi, libraries in /usr/lib/wasm32-wasi); the upstream
# wasi-sdk layout is /opt/wasi-sdk/share/wasi-sysroot.
WASI_SYSROOT ?= /usr

PLUGINS_OUT ?= build/plugins
FIXTURES_OUT ?= build/fixtures

PLUGIN_CFLAGS ?= -Oz
PLUGIN_CLANG_FLAGS = --target=wasm32-wasi --sysroot=$(WASI_SYSROOT) -mexec-model=reactor \
	-Iabi/include $(PLUGIN_CFLAGS) -Wl,--strip-debug

# Every Go plugin depends on the ABI package, the kit and the module files.
PLUGIN_GO_DEPS := go.mod go.sum $(wildcard abi/*.go abi/kit/*.go)

GO_PLUGINS := pod-logger pod-phases owner-lookup ns-counter label-enforcer event-recorder team-labeler configmap-copy configmap-copy-events cronjob
PLUGINS := $(addprefix $(PLUGINS_OUT)/,$(addsuffix .wasm,$(GO_PLUGINS)) counter-c.wasm crashloop-notifier.wasm minimal-wat.wasm)

.PHONY: plugins fixtures clean-plugins
plugins: $(PLUGINS)

# One rule per Go plugin: it rebuilds when any of its own files changes.
define go_plugin_rule
$(PLUGINS_OUT)/$(1).wasm: $$(wildcard plugins/examples/$(1)/*.go) $$(PLUGIN_GO_DEPS)
	@mkdir -p $$(@D)
	GOOS=wasip1 GOARCH=wasm $$(GO) build -buildmode=c-shared -trimpath -o $$@ ./plugins/examples/$(1)
endef
$(foreach p,$(GO_PLUGINS),$(eval $(call go_plugin_rule,$(p))))

$(PLUGINS_OUT)/counter-c.wasm: plugins/examples/counter-c/counter.c abi/include/informer_host.h
	@mkdir -p $(@D)
	$(CLANG) $(PLUGIN_CLANG_FLAGS) -o $@ $<

$(PLUGINS_OUT)/crashloop-notifier.wasm: plugins/examples/crashloop-notifier/notifier.c abi/include/informer_host.h
	@mkdir -p $(@D)
	$(CLANG) $(PLUGIN_CLANG_FLAGS) -o $@ $<

$(PLUGINS_OUT)/minimal-wat.wasm: plugins/examples/minimal-wat/minimal.wat
	@mkdir -p $(@D)
	$(WAT2WASM) -o $@ $<

FIXTURE_WAT := $(wildcard host/testdata/fixtures/*.wat)
FIXTURE_C := $(wildcard host/testdata/fixtures/*.c)
FIXTURES := $(patsubst host/testdata/fixtures/%.wat,$(FIXTURES_OUT)/%.wasm,$(FIXTURE_WAT)) \
	$(patsubst host/testdata/fixtures/%.c,$(FIXTURES_OUT)/%.wasm,$(FIXTURE_C))

fixtures: $(FIXTURES)

# Order-only: the tools must be there, but installing them rebuilds nothing.
$(PLUGINS) $(FIXTURES): | deps

$(FIXTURES_OUT)/%.wasm: host/testdata/fixtures/%.wat
	@mkdir -p $(@D)
	$(WAT2WASM) -o $@ $<

$(FIXTURES_OUT)/%.wasm: host/testdata/fixtures/%.c abi/include/informer_host.h
	@mkdir -p $(@D)
	$(CLANG) $(PLUGIN_CLANG_FLAGS) -o $@ $<

clean-plugins:
	rm -rf $(PLUGINS_OUT) $(FIXTURES_OUT)
