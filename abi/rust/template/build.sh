#!/bin/sh
# Builds build/my-plugin.wasm (wasm32-wasi; TARGET=wasm32-unknown-unknown
# works too) with Debian's rustc 1.63 or later, no cargo and no crates:
#
#   ./build.sh          the plugin
#   ./build.sh test     the plugin's #[test]s, natively, on the kit's fake host
#
# The kit (abi/rust of informer-host, one dependency-free crate) is taken
# from ./kit, else from the directory above (the template inside the repo).
set -eu
cd "$(dirname "$0")"
RUSTC=${RUSTC:-/usr/bin/rustc}
TARGET=${TARGET:-wasm32-wasi}
KIT=${INFORMER_HOST_RUST_KIT:-kit}
[ -f "$KIT/src/lib.rs" ] || KIT=..
if ! "$RUSTC" --print target-list | grep -qx "$TARGET" || [ ! -d "$("$RUSTC" --print sysroot)/lib/rustlib/$TARGET" ]; then
	echo "build.sh: $RUSTC cannot build for $TARGET; on Debian: apt-get install rustc libstd-rust-dev-wasm32 (then RUSTC=/usr/bin/rustc)" >&2
	exit 1
fi
mkdir -p build
# -C strip=debuginfo keeps the name section: the host's stack traces name functions.
FLAGS="--edition 2021 -O -C strip=debuginfo"
if [ "${1:-}" = test ]; then
	"$RUSTC" --edition 2021 --crate-type rlib --crate-name informer_host -o build/libinformer_host-native.rlib "$KIT/src/lib.rs"
	"$RUSTC" --edition 2021 --test --extern informer_host=build/libinformer_host-native.rlib -o build/plugin-test plugin.rs
	exec build/plugin-test
fi
"$RUSTC" $FLAGS --crate-type rlib --crate-name informer_host --target "$TARGET" -o "build/libinformer_host-$TARGET.rlib" "$KIT/src/lib.rs"
"$RUSTC" $FLAGS --crate-type cdylib --crate-name my_plugin --target "$TARGET" \
	--extern informer_host="build/libinformer_host-$TARGET.rlib" -o build/my-plugin.wasm plugin.rs
echo "build/my-plugin.wasm"
