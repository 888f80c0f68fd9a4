// Command labeller-go labels each Pod with the Deployment it belongs to,
// found in the host's caches through the Pod's ReplicaSet, and records a
// Kubernetes Event on the Pod saying so.
//
//	make        build labeller-go.wasm
//	make test   run main_test.go natively, then replay testdata/events.jsonl
//
// config.yaml grants it cache reads of pods, replicasets and deployments,
// apply on pods and Events.
package main

import (
	"errors"
	"fmt"

	"github.com/informer-host/informer-host/abi/kit"
)

// label is the Pod label that names the Pod's Deployment.
const label = "deployment"

func init() {
	kit.Handle(handle)
}

func handle(ev *kit.Event) error {
	if ev.Type() == kit.Delete {
		return nil
	}
	ns := ev.Namespace()
	rsName, ok := owner(ev.Get, "ReplicaSet")
	if !ok {
		kit.Infof("%s: not owned by a ReplicaSet", ev.Key())
		return nil
	}
	rs, err := kit.Cache().Get("replicasets", ns, rsName)
	if errors.Is(err, kit.ErrNoObject) {
		// The ReplicaSet's informer has not seen it yet: it will.
		return kit.Retry(fmt.Errorf("ReplicaSet %s/%s of %s not in the cache yet", ns, rsName, ev.Key()))
	} else if err != nil {
		return fmt.Errorf("read ReplicaSet %s/%s: %w", ns, rsName, err)
	}
	depName, ok := owner(rs.Get, "Deployment")
	if !ok {
		kit.Infof("%s: ReplicaSet %s has no Deployment", ev.Key(), rsName)
		return nil
	}
	if _, err := kit.Cache().Get("deployments", ns, depName); errors.Is(err, kit.ErrNoObject) {
		return kit.Retry(fmt.Errorf("Deployment %s/%s of %s not in the cache yet", ns, depName, ev.Key()))
	} else if err != nil {
		return fmt.Errorf("read Deployment %s/%s: %w", ns, depName, err)
	}
	// The update that our own apply causes comes back with the label
	// set: acting only when it differs ends the loop there.
	if v, _ := ev.Get("metadata.labels." + label); v == depName {
		return nil
	}
	// Kubernetes names are DNS subdomains: nothing in them needs quoting.
	body := fmt.Sprintf(`{"apiVersion":"v1","kind":"Pod","metadata":{"name":%q,"namespace":%q,"labels":{%q:%q}}}`,
		ev.Name(), ns, label, depName)
	// MustExist: a Pod deleted since the event is not created anew.
	target := kit.Target{Resource: "pods", Namespace: ns, Name: ev.Name()}
	if _, err := kit.K8s().ApplyWith(target, []byte(body), kit.ApplyOptions{MustExist: true}, kit.Preconditions{}); err != nil {
		return err
	}
	return ev.RecordEvent(kit.Normal, "Labelled", fmt.Sprintf("%s=%s (through ReplicaSet %s)", label, depName, rsName))
}

// owner returns the name of the object's first ownerReference when it is
// of kind, read with get (an Event's or a cached object's Get).
func owner(get func(path string) (string, bool), kind string) (string, bool) {
	if k, _ := get("metadata.ownerReferences[0].kind"); k != kind {
		return "", false
	}
	return get("metadata.ownerReferences[0].name")
}

func main() {}
