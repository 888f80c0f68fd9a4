// Command eventonly is an event-mode plugin for the kit's import test:
// it must import none of the controller-mode functions.
package main

import "github.com/informer-host/informer-host/abi/kit"

func init() { kit.Handle(func(*kit.Event) error { return nil }) }

func main() {}
