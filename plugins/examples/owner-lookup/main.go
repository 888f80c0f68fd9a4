//go:build wasip1

// Command owner-lookup shows cache reads, what client-go's Listers give a
// controller: on every Pod event it finds the Pod's ReplicaSet and that
// ReplicaSet's Deployment in the host's informer caches, then counts the
// Deployment's pods through the owner index (Deployment -> ReplicaSets ->
// Pods), and logs "deployment <ns>/<name> pods=<n>". No API request is
// made: every read is served from the caches the host already runs.
//
// Build (or `make plugins`):
//
//	GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o build/plugins/owner-lookup.wasm ./plugins/examples/owner-lookup
//
// Configure it on Pods, with the cache of the three resources granted and
// the owner index on pods and replicasets (names are the resource names
// of config.yaml; these are the defaults, config may rename them):
//
//	plugins:
//	  modules:
//	  - file: owner-lookup.wasm
//	    bindings: [{resource: pods}]
//	    config: {pods: pods, replicaSets: replicasets, deployments: deployments}
//	    grants:
//	      cache:
//	      - {resource: pods, indexes: [owner]}
//	      - {resource: replicasets, indexes: [owner]}
//	      - {resource: deployments}
package main

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/informer-host/informer-host/abi/kit"
)

var names = struct {
	Pods        string `json:"pods"`
	ReplicaSets string `json:"replicaSets"`
	Deployments string `json:"deployments"`
}{"pods", "replicasets", "deployments"}

func init() {
	kit.OnInit(func(config []byte) error {
		if len(config) == 0 {
			return nil
		}
		return json.Unmarshal(config, &names)
	})
	kit.Handle(handle)
}

func handle(ev *kit.Event) error {
	ns := ev.Namespace()
	rsName, ok := controller(func(p string) (string, bool) { return ev.Get(p) }, "ReplicaSet")
	if !ok {
		return nil // not owned by a ReplicaSet
	}
	c := kit.Cache()
	rs, err := c.Get(names.ReplicaSets, ns, rsName)
	if errors.Is(err, kit.ErrNoObject) {
		return nil // not in the cache (yet, or any more)
	}
	if err != nil {
		return fmt.Errorf("replicaset %s/%s: %w", ns, rsName, err)
	}
	depName, ok := controller(rs.Get, "Deployment")
	if !ok {
		return nil
	}
	dep, err := c.Get(names.Deployments, ns, depName)
	if errors.Is(err, kit.ErrNoObject) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("deployment %s/%s: %w", ns, depName, err)
	}
	depUID, _ := dep.Get("metadata.uid")
	n, err := podsOf(c, depUID)
	if err != nil {
		return err
	}
	kit.Infof("deployment %s/%s pods=%d (via replicaset %s, after %s of %s)", ns, depName, n, rsName, ev.Type(), ev.Name())
	return nil
}

// controller returns the name of the owner of the given kind among the
// first few ownerReferences, read field by field through get.
func controller(get func(path string) (string, bool), kind string) (string, bool) {
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

// podsOf counts the pods of a Deployment: its ReplicaSets by the owner
// index, then theirs.
func podsOf(c kit.CacheReader, depUID string) (int, error) {
	rss, err := c.Owned(names.ReplicaSets, depUID)
	if err != nil {
		return 0, fmt.Errorf("replicasets owned by %s: %w", depUID, err)
	}
	n := 0
	for _, key := range rss {
		ns, name := kit.SplitKey(key)
		rs, err := c.Get(names.ReplicaSets, ns, name)
		if err != nil {
			continue // gone since the index was read
		}
		uid, _ := rs.Get("metadata.uid")
		pods, err := c.Owned(names.Pods, uid)
		if err != nil {
			return 0, fmt.Errorf("pods owned by %s: %w", uid, err)
		}
		n += len(pods)
	}
	return n, nil
}

func main() {}
