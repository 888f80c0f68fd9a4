//go:build wasip1

// Command event-recorder records a Warning Event on every ConfigMap whose
// data is larger than a configured size (ABI.md §17.2), the way a
// controller reports a problem with an object: kubectl describe shows it,
// attributed to informer-host/event-recorder. It needs the events grant:
//
//	modules:
//	  - file: event-recorder.wasm
//	    bindings: [{resource: configmaps}]
//	    config: {maxBytes: 1024}
//	    grants: {events: {}}
//
// Size is the bytes of data and binaryData values. An update that leaves
// the size unchanged records nothing new; repeats are aggregated by the
// host (client-go's EventRecorder) anyway.
//
// Build (or `make plugins`):
//
//	GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o build/plugins/event-recorder.wasm ./plugins/examples/event-recorder
package main

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/informer-host/informer-host/abi/kit"
)

// maxBytes is the configured limit; default 1 MiB / 2, half of what etcd
// stores per object.
var maxBytes = 512 << 10

type configMap struct {
	Data       map[string]string `json:"data"`
	BinaryData map[string][]byte `json:"binaryData"`
}

func (c configMap) size() int {
	n := 0
	for _, v := range c.Data {
		n += len(v)
	}
	for _, v := range c.BinaryData {
		n += len(v)
	}
	return n
}

func main() {}

func init() {
	kit.OnInit(func(cfg []byte) error {
		if len(cfg) == 0 {
			return nil
		}
		var c struct {
			MaxBytes int `json:"maxBytes"`
		}
		if err := json.Unmarshal(cfg, &c); err != nil || c.MaxBytes < 0 {
			return fmt.Errorf(`config: want {"maxBytes": N}: %v`, err)
		}
		if c.MaxBytes > 0 {
			maxBytes = c.MaxBytes
		}
		return nil
	})
	kit.Handle(func(ev *kit.Event) error {
		if ev.Type() == kit.Delete {
			return nil
		}
		var cm configMap
		if err := ev.Decode(&cm); err != nil {
			return kit.Drop(err)
		}
		size := cm.size()
		if size <= maxBytes {
			return nil
		}
		var old configMap
		if ev.DecodeOld(&old) == nil && old.size() == size {
			return nil // reported when it got this size
		}
		err := ev.RecordEvent(kit.Warning, "ConfigMapTooLarge", fmt.Sprintf("data is %d bytes, over the limit of %d", size, maxBytes))
		if errors.Is(err, kit.ErrRateLimited) {
			return kit.Retry(err)
		}
		return err
	})
}
