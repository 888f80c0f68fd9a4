package reconcile

import (
	"errors"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/informer-host/informer-host/event"
	"github.com/informer-host/informer-host/internal/config"
)

// OwnerAnnotation is the annotation the host puts on every child it
// applies for a primary, "<resource>/<namespace>/<name>/<uid>" of the
// primary: it names the primary where no ownerReference can (a child in
// another namespace than its primary).
const OwnerAnnotation = "controller.informer-host.io/owner"

// Mapper maps the events of a controller plugin's bindings to the
// primary keys they enqueue. It is safe for concurrent use: listeners of
// different bindings call Map from their own goroutines.
type Mapper struct {
	primary *event.ResourceRef
}

// NewMapper compiles c for the primary resource primary (c.For resolved:
// its config name, group, version and kind). Its errors name the
// offending field (filter, watches[i].map, …) and CEL's message.
func NewMapper(c *config.Controller, primary *event.ResourceRef) (*Mapper, error) {
	return nil, errors.New("reconcile: NewMapper: not implemented yet")
}

// Map returns the primaries an event on an object of binding resource (a
// config resource name) enqueues, without duplicates: for the primary
// resource the object itself, for owned ones the primary named by the
// controller ownerReference or OwnerAnnotation, for watched ones what the
// watch names. An update maps both its old and its new object. Events of
// the primary resource also keep the referencedBy index up to date.
//
// The error joins the CEL evaluation errors met on the way, each naming
// its expression; the requests are those that could be mapped regardless,
// so the caller logs (and counts) the error and enqueues the requests.
func (m *Mapper) Map(resource string, ev *event.Event) ([]Request, error) {
	return nil, nil
}

// Admits reports whether the primary object obj passes the controller's
// filter (true when there is none). The loop asks it before reconciling
// a key whatever enqueued it; an absent primary is reconciled without
// asking.
func (m *Mapper) Admits(obj *unstructured.Unstructured) (bool, error) {
	return true, nil
}

// Resources returns the config resource names the controller binds to:
// its primary, then owns, then watches, each once.
func (m *Mapper) Resources() []string {
	return nil
}
