package informer

import "github.com/informer-host/informer-host/event"

// The event types live in package event, so that packages that only look
// at events (filters, the plugin runtime) need not import the pipeline.
type (
	EventType   = event.EventType
	ResourceRef = event.ResourceRef
	Event       = event.Event
)

const (
	EventAdd    = event.EventAdd
	EventUpdate = event.EventUpdate
	EventDelete = event.EventDelete
)
