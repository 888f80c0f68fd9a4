// Command reconciler is a controller-mode plugin for the kit's import
// test: it imports the controller-mode functions.
package main

import (
	"context"

	"github.com/informer-host/informer-host/abi/kit"
)

func init() {
	kit.HandleReconcile(kit.ReconcileFunc(func(context.Context, kit.Request) (kit.Result, error) { return kit.Result{}, nil }))
}

func main() {}
