// Command configmap-copy-events is configmap-copy written in event mode,
// as a plugin author had to before controller mode: every ConfigMap
// labelled sync=true in namespace src is copied to namespace dst, and the
// copy goes when the source does. Everything the host does for
// configmap-copy is done here by hand: the apply body, mapping a change
// of a copy back to its source, deleting the copy when the source goes,
// and an orphan sweep once both caches are synced, because a delete that
// happens while the daemon is down never arrives as an event. README.md
// in configmap-copy compares the two.
//
// Configuration (JSON, optional): {"to": "dst"}. Build: make plugins, or
//
//	GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o build/plugins/configmap-copy-events.wasm ./plugins/examples/configmap-copy-events
//
// and configure it with config.yaml in this directory.
package main

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/informer-host/informer-host/abi/kit"
)

const (
	src         = "configmaps-src" // the configured resources
	dst         = "configmaps-dst"
	sourceLabel = "copy.example.com/source"
)

var cfg = struct {
	To string `json:"to"`
}{To: "dst"}

// synced records which bindings have delivered their initial list: the
// sweep needs both caches whole.
var synced = map[string]bool{}

func init() {
	kit.OnInit(func([]byte) error { return kit.DecodeConfig(&cfg) })
	kit.Handle(handle)
	kit.OnSynced(func(res kit.Resource) {
		synced[res.Name] = true
		if synced[src] && synced[dst] {
			if err := sweep(); err != nil {
				kit.Warnf("orphan sweep: %v", err)
			}
		}
	})
}

func handle(ev *kit.Event) error {
	switch ev.Resource().Name {
	case src:
		if ev.Type() == kit.Delete {
			return settle(deleteCopy(ev.Name()))
		}
		return settle(applyCopy(ev))
	case dst:
		if ev.SelfWrite() {
			return nil // our own apply coming back
		}
		return settle(restore(ev))
	}
	return nil
}

// restore maps a changed or deleted copy back to its source and makes it
// what the source says again (or deletes it if the source is gone).
func restore(ev *kit.Event) error {
	from, ok := ev.Get(`metadata.labels["` + sourceLabel + `"]`)
	if !ok {
		return nil // not one of ours
	}
	source, err := kit.Cache().Get(src, from, ev.Name())
	switch {
	case errors.Is(err, kit.ErrNoObject):
		if ev.Type() == kit.Delete {
			return nil
		}
		return deleteCopy(ev.Name())
	case err != nil:
		return err
	}
	return applyCopy(source)
}

// object is what applyCopy reads a source through: an event or a cached
// object.
type object interface {
	Decode(v any) error
}

func applyCopy(source object) error {
	var cm struct {
		Metadata struct {
			Namespace string `json:"namespace"`
			Name      string `json:"name"`
		} `json:"metadata"`
		Data       map[string]string `json:"data,omitempty"`
		BinaryData map[string]string `json:"binaryData,omitempty"`
	}
	if err := source.Decode(&cm); err != nil {
		return err
	}
	body, err := json.Marshal(map[string]any{
		"apiVersion": "v1",
		"kind":       "ConfigMap",
		"metadata": map[string]any{
			"namespace": cfg.To,
			"name":      cm.Metadata.Name,
			"labels":    map[string]string{sourceLabel: cm.Metadata.Namespace},
		},
		"data":       cm.Data,
		"binaryData": cm.BinaryData,
	})
	if err != nil {
		return err
	}
	t := kit.Target{Resource: dst, Namespace: cfg.To, Name: cm.Metadata.Name}
	_, err = kit.K8s().Apply(t, body, true, kit.Preconditions{})
	return err
}

func deleteCopy(name string) error {
	err := kit.K8s().Delete(kit.Target{Resource: dst, Namespace: cfg.To, Name: name}, kit.Preconditions{})
	if errors.Is(err, kit.ErrNoObject) {
		return nil
	}
	return err
}

// sweep deletes the copies whose source is gone: deletes that happened
// while the daemon was down, or while the plugin was not loaded.
func sweep() error {
	copies, err := kit.Cache().List(dst, cfg.To, sourceLabel)
	if err != nil {
		return err
	}
	for _, key := range copies {
		ns, name := kit.SplitKey(key)
		c, err := kit.Cache().Get(dst, ns, name)
		if err != nil {
			continue
		}
		from, _ := c.Get(`metadata.labels["` + sourceLabel + `"]`)
		if _, err := kit.Cache().Get(src, from, name); errors.Is(err, kit.ErrNoObject) {
			if err := deleteCopy(name); err != nil {
				return fmt.Errorf("deleting orphan %s: %w", key, err)
			}
			kit.Infof("deleted orphan copy %s", key)
		}
	}
	return nil
}

// settle turns a write's error into the answer: transient ones retried.
func settle(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, kit.ErrRateLimited), errors.Is(err, kit.ErrTimeout),
		errors.Is(err, kit.ErrUnavailable), errors.Is(err, kit.ErrCanceled):
		return kit.Retry(err)
	}
	return err
}

func main() {}
