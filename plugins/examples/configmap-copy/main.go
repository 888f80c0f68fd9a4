// Command configmap-copy is a controller in controller mode (ABI.md §18):
// every ConfigMap labelled sync=true in namespace src is copied to
// namespace dst, and the copy goes when the source does (or loses the
// label). The reconciler only says what the copy should be; the host
// finds the key, reads the source from its cache, applies the copy as the
// plugin's identity, maps a change of the copy back to its source and
// deletes the copies nobody wants any more, including those whose source
// went while the daemon was down. README.md compares it with
// configmap-copy-events, the same behaviour written by hand in event mode.
//
// Configuration (JSON, optional): {"to": "dst"}, the namespace of the
// copies. Build: make plugins, or
//
//	GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o build/plugins/configmap-copy.wasm ./plugins/examples/configmap-copy
//
// and configure it with config.yaml in this directory.
package main

import (
	"context"

	"github.com/informer-host/informer-host/abi/kit"
)

var cfg = struct {
	To string `json:"to"`
}{To: "dst"}

func init() {
	kit.OnInit(func([]byte) error { return kit.DecodeConfig(&cfg) })
	kit.HandleReconcile(kit.ReconcileFunc(reconcile))
}

// reconcile makes the copy of one source ConfigMap.
func reconcile(_ context.Context, req kit.Request) (kit.Result, error) {
	if req.Object == nil {
		// The source is gone, or lost its label (the resource's
		// selector): the host deletes the copy it applied for it.
		return kit.Result{}, nil
	}
	var src struct {
		Data       map[string]string `json:"data"`
		BinaryData map[string]string `json:"binaryData"`
	}
	if err := req.Decode(&src); err != nil {
		return kit.Result{}, err
	}
	want := kit.NewObj("v1", "ConfigMap", cfg.To, req.Name).
		Label("copy.example.com/source", req.Namespace).
		Set("data", src.Data).
		Set("binaryData", src.BinaryData)
	children := &kit.Children{}
	return kit.Result{Children: children}, children.Add(want)
}

func main() {}
