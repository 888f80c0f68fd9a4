//go:build wasip1

// Command team-labeler is a controller written as a plugin: every Pod
// carries the label "team" of the Deployment that owns it, through its
// ReplicaSet, read from the host's cache (ABI.md §16.1), and set by
// server-side apply as field manager "informer-host/team-labeler.wasm"
// (ABI.md §17.1).
//
// It is level-triggered, the way a client-go or controller-runtime
// controller is: each event is only a reason to look at one Pod again. The
// handler computes the Pod's desired label from the cluster's current
// state, compares it with what the Pod has and writes only the
// difference; it never asks why it was called (an initial list, a replay
// after a restart, its own write coming back, a handover between
// replicas). Whatever it cannot finish now it answers RETRY for, and the
// host brings the Pod back after a capped, growing backoff (ABI.md §10):
// an owner not in the cache yet, a rate limit, a timeout, a call the host
// canceled.
//
// The apply must find the Pod (ApplyOptions.MustExist) with the event's
// uid, so a Pod deleted meanwhile is ERR_ABSENT rather than a Pod created
// again from the label alone. When a
// person or another controller owns the label (kubectl label --overwrite),
// the apply ends in ERR_FIELD_CONFLICT: the team label is this
// controller's to keep, so it applies again with force and logs
// "took over ns/name from another field manager".
//
// Each write is one log line "labelled ns/name team=T". Built with
// -ldflags=-X=main.trapOn=NAME, the instance dies (exits) on the Pod named
// NAME: a version with a bug on one object, for the convergence test.
//
// Configuration (JSON, all optional):
//
//	{"label": "team", "pods": "pods", "replicaSets": "replicasets", "deployments": "deployments"}
//
// the label's key, and the configured names of the three resources.
//
// Build (or `make plugins`):
//
//	GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o build/plugins/team-labeler.wasm ./plugins/examples/team-labeler
//
// Configure it on Pods, reading ReplicaSets and Deployments from the cache,
// with apply granted on Pods:
//
//	plugins:
//	  modules:
//	  - file: team-labeler.wasm
//	    bindings: [{resource: pods, events: [add, update]}]
//	    grants:
//	      cache: [{resource: replicasets}, {resource: deployments}]
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

// trapOn names a Pod the instance dies on (set with -ldflags -X).
var trapOn string

var cfg = struct {
	Label       string `json:"label"`
	Pods        string `json:"pods"`
	ReplicaSets string `json:"replicaSets"`
	Deployments string `json:"deployments"`
}{"team", "pods", "replicasets", "deployments"}

func init() {
	kit.OnInit(func(raw []byte) error {
		if len(bytes.TrimSpace(raw)) > 0 {
			if err := json.Unmarshal(raw, &cfg); err != nil {
				return fmt.Errorf("config: %w", err)
			}
		}
		if cfg.Label == "" {
			return errors.New(`config: "label" is empty`)
		}
		return nil
	})
	kit.Handle(reconcile)
}

// reconcile brings one Pod's label to the desired value.
func reconcile(ev *kit.Event) error {
	if ev.Type() == kit.Delete {
		return nil
	}
	if trapOn != "" && ev.Name() == trapOn {
		// A failure the kit cannot turn into an ERROR answer, as a
		// fatal runtime error is: the instance dies (a trap).
		kit.Warnf("built to fail on %s: exiting", trapOn)
		os.Exit(3)
	}
	want, ok, err := desiredTeam(ev)
	if err != nil || !ok {
		return err // nil: the Pod has no team to carry
	}
	have, _ := ev.Get("metadata.labels[" + strconv.Quote(cfg.Label) + "]")
	if have == want {
		return nil // already as desired, whoever wrote it
	}
	err = apply(ev, want, false)
	if errors.Is(err, kit.ErrFieldConflict) {
		kit.Infof("took over %s from another field manager", ev.Key())
		err = apply(ev, want, true)
	}
	switch {
	case err == nil:
		kit.Infof("labelled %s %s=%s", ev.Key(), cfg.Label, want)
		return nil
	case errors.Is(err, kit.ErrNoObject), errors.Is(err, kit.ErrConflict):
		return nil // deleted, or deleted and created again: its own events follow
	case errors.Is(err, kit.ErrRateLimited), errors.Is(err, kit.ErrTimeout),
		errors.Is(err, kit.ErrUnavailable), errors.Is(err, kit.ErrCanceled):
		return kit.Retry(err)
	}
	return fmt.Errorf("apply %s: %w", ev.Key(), err) // ERROR: the host retries it with backoff
}

// desiredTeam follows the Pod's controller chain, Pod → ReplicaSet →
// Deployment, through the cache and returns the Deployment's label. A
// missing link that may still arrive (an owner not in the cache yet)
// asks for a retry; a Pod without such owners, or a Deployment without
// the label, has nothing to carry.
func desiredTeam(ev *kit.Event) (string, bool, error) {
	rsName, ok := controllerOf(ev.Get, "ReplicaSet")
	if !ok {
		return "", false, nil
	}
	c := kit.Cache()
	rs, err := c.Get(cfg.ReplicaSets, ev.Namespace(), rsName)
	if errors.Is(err, kit.ErrNoObject) {
		return "", false, kit.Retry(fmt.Errorf("replicaset %s/%s not in the cache yet", ev.Namespace(), rsName))
	}
	if err != nil {
		return "", false, fmt.Errorf("replicaset %s/%s: %w", ev.Namespace(), rsName, err)
	}
	depName, ok := controllerOf(rs.Get, "Deployment")
	if !ok {
		return "", false, nil
	}
	dep, err := c.Get(cfg.Deployments, ev.Namespace(), depName)
	if errors.Is(err, kit.ErrNoObject) {
		return "", false, kit.Retry(fmt.Errorf("deployment %s/%s not in the cache yet", ev.Namespace(), depName))
	}
	if err != nil {
		return "", false, fmt.Errorf("deployment %s/%s: %w", ev.Namespace(), depName, err)
	}
	team, ok := dep.Get("metadata.labels[" + strconv.Quote(cfg.Label) + "]")
	return team, ok, nil
}

// controllerOf returns the name of the owner of the given kind among the
// first owner references.
func controllerOf(get func(path string) (string, bool), kind string) (string, bool) {
	for i := 0; i < 4; i++ {
		k, ok := get(fmt.Sprintf("metadata.ownerReferences[%d].kind", i))
		if !ok {
			return "", false
		}
		if k == kind {
			return get(fmt.Sprintf("metadata.ownerReferences[%d].name", i))
		}
	}
	return "", false
}

// apply sets the label on the Pod as it exists: a Pod deleted meanwhile
// is ErrNoObject (MustExist), not created again from the label alone, and
// one deleted and created again under its name is ErrConflict (the uid
// precondition).
func apply(ev *kit.Event, team string, force bool) error {
	body, _ := json.Marshal(map[string]any{
		"apiVersion": "v1", "kind": "Pod",
		"metadata": map[string]any{"name": ev.Name(), "namespace": ev.Namespace(), "labels": map[string]string{cfg.Label: team}},
	})
	t := kit.Target{Resource: cfg.Pods, Namespace: ev.Namespace(), Name: ev.Name()}
	_, err := kit.K8s().ApplyWith(t, body, kit.ApplyOptions{Force: force, MustExist: true}, kit.Preconditions{UID: ev.UID()})
	return err
}

func main() {}
