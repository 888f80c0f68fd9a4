#!/usr/bin/env bash
# Installs the Debian packages `make demo`, `make test` and .ci/run need and
# the machine lacks. Run by all three, so a fresh machine needs no manual
# step; a machine that has everything is left alone (no apt-get at all).
#
#   hack/install-deps.sh          install what is missing, when it can
#   hack/install-deps.sh --check  only say what is missing (exit 1 if anything)
#
# "When it can" means root, or sudo that needs no password. Otherwise it
# prints the exact command to run and exits 1, so make stops before a
# confusing "clang: command not found" further down.
set -euo pipefail

# One entry per package: the Debian package | how to tell it is there
# (cmd NAME... = any of these on PATH; path GLOB = a file or directory
# matching GLOB exists; under $INSTALL_DEPS_ROOT if set, for the tests) |
# why it is needed. Add new tools here.
deps=(
	"clang | cmd clang | C plugins and fixtures to wasm32-wasi"
	"lld | cmd wasm-ld wasm-ld-14 | the wasm linker clang calls"
	"wasi-libc | path /usr/lib/wasm32-wasi | libc for wasm32-wasi"
	"libclang-rt-14-dev-wasm32 | path /usr/lib/llvm-*/lib/clang/*/lib/wasi/libclang_rt.builtins-wasm32.a | the wasm32 compiler runtime"
	"wabt | cmd wat2wasm | WAT plugins and fixtures"
	# The Rust and AssemblyScript kits (abi/rust, abi/assemblyscript). Debian's
	# rustc (1.63) is checked by its path, not on PATH: a rustup toolchain
	# earlier on PATH usually lacks the wasm targets Debian's has.
	"rustc | path /usr/bin/rustc | the Rust kit and its example (mk/kits.mk)"
	"libstd-rust-dev-wasm32 | path /usr/lib/rustlib/wasm32-wasi/lib | Rust's std for wasm32-wasi and wasm32-unknown-unknown"
	# assemblyscript 0.28 declares node >= 20 (mk/kits.mk checks it): Debian 13
	# has it, Debian 12's nodejs is 18, so there NodeSource's nodejs 20 (which
	# brings npm) is needed instead.
	"nodejs | cmd node | runs asc, the AssemblyScript compiler (fetched by npm, pinned)"
	"npm | cmd npm | installs the pinned AssemblyScript compiler"
	"jq | cmd jq | the shell-operator hook of make bench and bench-smoke (case 8)"
)

check_only=false
case "${1:-}" in
"") ;;
--check) check_only=true ;;
-h | --help)
	sed -n '2,11s/^# \{0,1\}//p' "$0"
	exit 0
	;;
*)
	echo "install-deps: unknown argument $1 (use --check or nothing)" >&2
	exit 2
	;;
esac

present() { # kind args...
	local kind=$1
	shift
	case $kind in
	cmd)
		local c
		for c in "$@"; do
			command -v "$c" >/dev/null 2>&1 && return 0
		done
		return 1
		;;
	path) compgen -G "${INSTALL_DEPS_ROOT:-}$1" >/dev/null ;;
	*)
		echo "install-deps: bad check kind $kind in the deps list" >&2
		exit 2
		;;
	esac
}

missing=()
for entry in "${deps[@]}"; do
	IFS='|' read -r pkg check why <<<"$entry"
	read -r -a check <<<"$check" # kind, then its arguments; globs stay unexpanded
	present "${check[@]}" || missing+=("${pkg// /}")
done

if [ ${#missing[@]} -eq 0 ]; then
	exit 0
fi

cmd="sudo apt-get update && sudo apt-get install -y --no-install-recommends ${missing[*]}"
if $check_only; then
	echo "install-deps: missing: ${missing[*]}"
	echo "install-deps: to install them: $cmd"
	exit 1
fi
if ! command -v apt-get >/dev/null 2>&1; then
	echo "install-deps: missing: ${missing[*]} (Debian package names); this machine has no apt-get," >&2
	echo "install-deps: install their equivalents with its package manager, then run make again." >&2
	exit 1
fi
if [ "$(id -u)" = 0 ]; then
	as_root=()
elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
	as_root=(sudo -n)
else
	echo "install-deps: missing: ${missing[*]}; not root, and sudo needs a password. Run:" >&2
	echo "  $cmd" >&2
	echo "then run make again." >&2
	exit 1
fi
echo "install-deps: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
"${as_root[@]}" apt-get update -q
"${as_root[@]}" apt-get install -y -q --no-install-recommends "${missing[@]}"
