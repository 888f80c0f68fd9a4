//go:build wasip1

// Command noop is the benchmarks' no-op Go plugin: its handler returns at
// once. What it costs is the kit's fixed cost per event (read and parse the
// header, recover, an occasional yield) plus the host's.
package main

import "github.com/informer-host/informer-host/abi/kit"

func init() {
	kit.Handle(func(*kit.Event) error { return nil })
}

func main() {}
