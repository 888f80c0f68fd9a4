//go:build wasip1

// Command decode is a Go plugin that decodes every object into
// map[string]any with encoding/json: what a guest pays for the whole
// object (object_read plus the decode).
package main

import "github.com/informer-host/informer-host/abi/kit"

func init() {
	kit.Handle(func(ev *kit.Event) error {
		var v map[string]any
		return ev.Decode(&v)
	})
}

func main() {}
