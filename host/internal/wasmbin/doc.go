// Package wasmbin reads and rewrites WebAssembly binaries, bytes in and
// bytes out, before the engine compiles them (as wazero keeps its decoder,
// internal/wasm/binary, apart from its engines):
//
//   - Decode reads what the ABI check needs of a module: its types,
//     imports, functions and exports (module.go);
//   - Instrument injects the termination checks that bound a call's CPU
//     time (checks.go);
//   - MergeData merges the many small data segments Go's linker writes
//     into few, which costs every instance less (datamerge.go);
//   - Reader, Sections, SectionRank and AppendSection are the pieces they
//     are built from, for tests that take modules apart.
//
// Every read is bounds-checked: malformed input is an error, never a
// panic. A rewrite never validates: the engine has wazero validate the
// original first, and compiles what wasmbin returns.
//
// Its tests compile and run what it writes with plain wazero runtimes,
// the oracle of "valid" and "does the same"; the engine's tests cover it
// under the engine.
//
// Rule of direction: wasmbin imports the standard library and the abi
// module only, no wazero and no daemon package; the engine
// (host/internal/engine) imports it, and nothing in it knows the engine.
package wasmbin
