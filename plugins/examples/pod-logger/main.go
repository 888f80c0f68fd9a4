//go:build wasip1

// Command pod-logger is client-go's classic informer example as an
// informer-host plugin: it logs every pod added, updated and deleted, with
// its namespace/name and phase.
//
// Build (or `make plugins`):
//
//	GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o build/plugins/pod-logger.wasm ./plugins/examples/pod-logger
//
// Configure it on a resource of kind Pod. It takes no configuration.
package main

import "github.com/informer-host/informer-host/abi/kit"

func init() {
	kit.Handle(func(ev *kit.Event) error {
		// Get reads one field, computed by the host: no JSON crosses over.
		phase, _ := ev.Get("status.phase")
		switch ev.Type() {
		case kit.Add:
			how := "added"
			if ev.IsInInitialList() {
				how = "listed"
			}
			kit.Infof("pod %s: %s phase=%s", how, ev.Key(), phase)
		case kit.Update:
			old, _ := ev.GetOld("status.phase")
			if old != phase {
				kit.Infof("pod updated: %s phase=%s (was %s)", ev.Key(), phase, old)
			} else {
				kit.Infof("pod updated: %s phase=%s rv=%s", ev.Key(), phase, ev.ResourceVersion())
			}
		case kit.Delete:
			note := ""
			if ev.FinalStateUnknown() {
				note = " (missed by the watch; last known state)"
			}
			kit.Infof("pod deleted: %s phase=%s%s", ev.Key(), phase, note)
		}
		return nil
	})
}

func main() {}
