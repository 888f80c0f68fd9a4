// Package benchenv is what informer-host's benchmarks share: the objects
// they deliver, the benchmark plugins (built on demand, like the tests build
// theirs) and process CPU time. It is used by the *_bench_test.go files in
// host/ and host/internal/engine and by bench/cmd/bench; nothing in the
// daemon imports it.
//
// Rule of direction: benchenv imports event and nothing else of the
// daemon; only benchmarks import it.
package benchenv
