//go:build wasip1

// Command k8sapi is a Go plugin importing k8s.io/api: it decodes every
// Pod and ConfigMap into its typed struct (corev1.Pod, corev1.ConfigMap)
// with encoding/json, as a plugin written against client-go's types would.
// It is the large module of the reload benchmark (about 15 MB).
//
// Configuration: {"record": true} turns on the latency probe (package
// rec).
package main

import (
	"encoding/json"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/informer-host/informer-host/abi/kit"
	"github.com/informer-host/informer-host/bench/plugins/internal/rec"
)

// sink keeps the decodes from being optimised away.
var sink int

func init() {
	kit.OnInit(func(c []byte) error {
		if len(c) == 0 || string(c) == "null" {
			return nil
		}
		var cfg struct {
			Record bool `json:"record"`
		}
		if err := json.Unmarshal(c, &cfg); err != nil {
			return err
		}
		rec.On = cfg.Record
		return nil
	})
	kit.Handle(func(ev *kit.Event) error {
		entered := time.Now()
		defer rec.Entered(ev, "", entered)
		switch ev.Resource().Kind {
		case "Pod":
			var p corev1.Pod
			if err := ev.Decode(&p); err != nil {
				return err
			}
			sink += len(p.Spec.Containers)
		case "ConfigMap":
			var cm corev1.ConfigMap
			if err := ev.Decode(&cm); err != nil {
				return err
			}
			sink += len(cm.Data)
		default:
			var v map[string]any
			return ev.Decode(&v)
		}
		return nil
	})
	kit.OnShutdown(rec.Flush)
}

func main() {}
