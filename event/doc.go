// Package event defines the notification informer-host hands to
// listeners and plugins: an add, update or delete of one object of one
// configured resource. It is a leaf package so that everything that looks
// at events (the informer pipeline, host-side filters, the plugin runtime)
// can share the type without importing one another.
//
// Rule of direction: event imports apimachinery's object types and
// nothing of informer-host; every package of the daemon may import it.
package event
