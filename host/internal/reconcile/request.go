package reconcile

import "time"

// Request is one primary key: the object a controller plugin reconciles.
// Namespace is empty for a cluster-scoped primary.
type Request struct {
	Namespace, Name string
}

// String returns the key as client-go's cache writes it: "namespace/name",
// or "name" for a cluster-scoped object.
func (r Request) String() string {
	if r.Namespace == "" {
		return r.Name
	}
	return r.Namespace + "/" + r.Name
}

// Due is a delayed add armed on a queue (a requeue-after timer, or a
// backoff): the key is added back at At.
type Due struct {
	Request
	At time.Time
}
