//go:build wasip1

// Command twofields is the benchmarks' typical small Go plugin: for every
// event it reads two fields of the object through field_read (the host
// walks its own copy of the object; no JSON crosses over).
//
// Configuration (JSON, all optional):
//
//	{"fields": ["metadata.labels.app", "data.seq"], "record": true}
//
// fields are the two paths to read (default: the label
// app.kubernetes.io/name and metadata.uid); record turns on the latency
// probe (package rec), which notes the value of the last field with each
// event.
package main

import (
	"encoding/json"
	"time"

	"github.com/informer-host/informer-host/abi/kit"
	"github.com/informer-host/informer-host/bench/plugins/internal/rec"
)

var fields = []string{`metadata.labels["app.kubernetes.io/name"]`, "metadata.uid"}

// sink keeps the reads from being optimised away.
var sink int

func init() {
	kit.OnInit(func(c []byte) error {
		if len(c) == 0 || string(c) == "null" {
			return nil
		}
		var cfg struct {
			Fields []string `json:"fields"`
			Record bool     `json:"record"`
		}
		if err := json.Unmarshal(c, &cfg); err != nil {
			return err
		}
		if len(cfg.Fields) > 0 {
			fields = cfg.Fields
		}
		rec.On = cfg.Record
		return nil
	})
	kit.Handle(func(ev *kit.Event) error {
		// The clock is read only when recording: a plugin that only reads
		// two fields would not read it (rec.Now is one WASI call).
		var entered time.Time
		if rec.On {
			entered = rec.Now()
		}
		var v string
		for _, f := range fields {
			v, _ = ev.Get(f)
			sink += len(v)
		}
		rec.Entered(ev, v, entered)
		return nil
	})
	kit.OnShutdown(rec.Flush)
}

func main() {}
