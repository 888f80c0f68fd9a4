// Package delivery owns a plugin's delivery queue (Queue): the buffer
// between the plugin's informer listeners and its worker, with the replay
// cursor that brings the plugin to the informer's store, the per-object
// retries and their order, coalescing (mode latest) and the overflow
// bookkeeping of a repair. It also names objects within a binding (Key)
// and reads the metadata the queue and the worker key events by.
//
// It decides nothing about what a plugin should see: which event to hand,
// ownership, backoff lengths and failure counts are the host's (package
// host, deliver.go and converge.go); the queue only keeps entries in the
// order and with the waits it is told.
//
// Rule of direction: imported by package host only; it imports the
// standard library, client-go's cache keys, the event type and
// host/internal/engine (for the envelope an entry carries), and nothing
// of the host.
package delivery
