//go:build wasip1

// Command label-enforcer shows Kubernetes writes: it adds a required label
// to every Pod that lacks it, by server-side apply, as field manager
// "informer-host/label-enforcer.wasm".
//
// It is level-triggered: it compares each Pod with the desired state (the
// label present) and writes only when they differ, so the update its own
// write causes finds the label and ends there. It does not skip events
// for the header flag "caused by this plugin's own write" (ev.SelfWrite),
// which it only logs: the flag marks a live change, and a Pod's desired
// state is decided by the Pod, not by who wrote it last.
//
// Each apply is conditional on the resourceVersion the plugin saw, so a
// stale view (the cache replayed to a fresh instance before the write's
// update arrived) ends in kit.ErrConflict, not a second write: the newer
// event follows. A rate limit, a timeout or the host stopping the call
// answers RETRY, which the host retries with backoff until it succeeds.
//
// Every outcome is one log line: "labelled ns/name", "own write ns/name",
// "stale ns/name", "canceled ns/name". With config {"trapOn": "x"} the
// plugin exits (a trap) right after labelling a Pod named x (a crash after
// the write, for tests); the replay then finds it labelled.
//
// Configuration (JSON):
//
//	{"key": "team", "value": "unowned"}   the label (these are the defaults)
//
// Build (or `make plugins`):
//
//	GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o build/plugins/label-enforcer.wasm ./plugins/examples/label-enforcer
//
// Configure it on Pods, with apply granted (resource is the configured
// resource's name, or "v1/pods"):
//
//	plugins:
//	  modules:
//	  - file: label-enforcer.wasm
//	    bindings: [{resource: pods, events: [add, update]}]
//	    config: {key: team, value: unowned}
//	    grants:
//	      writes:
//	        resources: [{resource: pods, verbs: [apply]}]
package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strconv"

	"github.com/informer-host/informer-host/abi/kit"
)

var cfg struct {
	Key      string `json:"key"`
	Value    string `json:"value"`
	Resource string `json:"resource"` // the granted resource; default "pods"
	TrapOn   string `json:"trapOn"`
}

func init() {
	kit.OnInit(func(raw []byte) error {
		cfg.Key, cfg.Value = "team", "unowned"
		if len(bytes.TrimSpace(raw)) > 0 {
			if err := json.Unmarshal(raw, &cfg); err != nil {
				return fmt.Errorf("config: %w", err)
			}
		}
		if cfg.Key == "" {
			return errors.New(`config: "key", the required label, is empty`)
		}
		if cfg.Resource == "" {
			cfg.Resource = "pods"
		}
		return nil
	})
	kit.Handle(func(ev *kit.Event) error {
		if ev.Type() == kit.Delete {
			return nil
		}
		key := ev.Key()
		if _, ok := ev.Get("metadata.labels[" + strconv.Quote(cfg.Key) + "]"); ok {
			if ev.SelfWrite() {
				kit.Infof("own write %s", key)
			}
			return nil // the desired state: nothing to write
		}
		body, _ := json.Marshal(map[string]any{
			"apiVersion": "v1", "kind": "Pod",
			"metadata": map[string]any{"name": ev.Name(), "namespace": ev.Namespace(), "labels": map[string]string{cfg.Key: cfg.Value}},
		})
		t := kit.Target{Resource: cfg.Resource, Namespace: ev.Namespace(), Name: ev.Name()}
		_, err := kit.K8s().Apply(t, body, false, kit.Preconditions{ResourceVersion: ev.ResourceVersion()})
		switch {
		case err == nil:
			kit.Infof("labelled %s", key)
			if cfg.TrapOn != "" && ev.Name() == cfg.TrapOn {
				// A crash the kit cannot turn into an error result:
				// the instance dies (a trap), as on a fatal runtime error.
				os.Exit(3)
			}
			return nil
		case errors.Is(err, kit.ErrConflict):
			kit.Infof("stale %s", key) // the object changed since this event: its next event follows
			return nil
		case errors.Is(err, kit.ErrNoObject):
			return nil // deleted meanwhile
		case errors.Is(err, kit.ErrCanceled):
			kit.Infof("canceled %s", key)
			return kit.Retry(err)
		case errors.Is(err, kit.ErrRateLimited), errors.Is(err, kit.ErrTimeout), errors.Is(err, kit.ErrUnavailable):
			return kit.Retry(err)
		}
		return err
	})
}

func main() {}
