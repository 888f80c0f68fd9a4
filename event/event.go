package event

import (
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// EventType says what happened to an object. The numeric values are part
// of the plugin ABI (abi/ABI.md) and must not change.
type EventType uint8

const (
	EventAdd    EventType = 1
	EventUpdate EventType = 2
	EventDelete EventType = 3
)

func (t EventType) String() string {
	switch t {
	case EventAdd:
		return "add"
	case EventUpdate:
		return "update"
	case EventDelete:
		return "delete"
	}
	return "unknown"
}

// ResourceRef names a configured resource once it is resolved: the name it
// has in config.yaml and the API coordinates it stands for. One ResourceRef
// is shared by every event of that resource, so listeners may compare
// pointers.
type ResourceRef struct {
	Name     string // the resource's name in config.yaml
	Group    string
	Version  string
	Resource string // plural, lower case: "pods"
	Kind     string // "Pod"
	// Namespaced is the resource's scope as discovery (the pipeline's
	// RESTMapper) reports it. A ResourceRef made elsewhere (a replay's
	// recording) leaves it false: there it is not known.
	Namespaced bool
}

// GroupVersionResource returns the API coordinates of r.
func (r *ResourceRef) GroupVersionResource() schema.GroupVersionResource {
	return schema.GroupVersionResource{Group: r.Group, Version: r.Version, Resource: r.Resource}
}

// Event is one notification from a shared informer, in the form plugins
// see it. Objects come straight from the informer's cache and are shared
// with every other listener: they must be treated as read-only.
type Event struct {
	Type     EventType
	Resource *ResourceRef
	// Object is the new state for add and update, and the last known state
	// for delete.
	Object *unstructured.Unstructured
	// OldObject is the previous state on update, nil otherwise.
	OldObject *unstructured.Unstructured
	// IsInInitialList is set on adds that come from the informer's initial
	// list or, for a listener registered late, from the cache replay.
	IsInInitialList bool
	// FinalStateUnknown is set on a delete the watch missed: the informer
	// learned of it on a relist, and Object is the last state it had seen,
	// which may be stale (client-go's DeletedFinalStateUnknown).
	FinalStateUnknown bool
	// HandedOver is set on a delete that says the object left this
	// replica's share of a sharding group (another member owns it now),
	// not the cluster.
	HandedOver bool
}

// Key returns the object's cache key, "namespace/name" or "name".
func (e *Event) Key() string {
	if ns := e.Object.GetNamespace(); ns != "" {
		return ns + "/" + e.Object.GetName()
	}
	return e.Object.GetName()
}
