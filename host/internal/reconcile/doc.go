// Package reconcile holds the two host-side halves of controller mode
// (ABI.md §18) that know nothing of WebAssembly: the keyed queue a
// controller plugin's loop takes primary keys from (Queue), the mapping
// from informer events to those keys (Mapper), and the metrics both
// report under controller-runtime's names (Metrics).
//
// Queue is client-go's rate-limiting workqueue with the rules every
// Kubernetes controller relies on: a key is queued once however often it
// is added, it is never handed to two workers at once, and a key added
// while it is being processed is handed out again once Done. On top of it
// Queue remembers the requeue-after timers it armed, so that a debug page
// can list them (Due), which client-go's delaying queue does not expose.
//
// Mapper turns an event on an object of one of the controller's bindings
// into the primaries it concerns, as config.Controller describes: the
// object itself for the primary resource (for), the primary named by a
// child's controller ownerReference or by the host's owner annotation
// (owns), and for watches the primary named by a label, an annotation, a
// field, a CEL expression over the watched object (map), or the primaries
// whose CEL expression refers to the watched object (referencedBy).
//
// # Metrics
//
// Metrics is a prometheus.Collector the host registers once; every queue
// and every controller loop reports through it, labelled by plugin:
//
//	controller_runtime_reconcile_total{controller,result}   result: success | error | requeue | requeue_after
//	controller_runtime_reconcile_errors_total{controller}   result error: ERROR answers, traps and timeouts (RETRY is result requeue)
//	controller_runtime_terminal_reconcile_errors_total{controller}  DROP answered with an error
//	controller_runtime_reconcile_panics_total{controller}   traps (a plugin's panic)
//	controller_runtime_reconcile_timeouts_total{controller} calls that ran past their deadline
//	controller_runtime_reconcile_time_seconds{controller}
//	controller_runtime_active_workers{controller}
//	controller_runtime_max_concurrent_reconciles{controller}
//	workqueue_depth{name,controller,priority=""}
//	workqueue_adds_total{name,controller}
//	workqueue_retries_total{name,controller}
//	workqueue_queue_duration_seconds{name,controller}
//	workqueue_work_duration_seconds{name,controller}
//	workqueue_unfinished_work_seconds{name,controller}
//	workqueue_longest_running_processor_seconds{name,controller}
//
// controller and name are both the plugin's name, as controller-runtime
// sets both to the controller's name, so dashboards and alerts written
// for controller-runtime operators work unchanged.
//
// Rule of direction: imported by package host only; it imports the
// standard library, client-go (workqueue), apimachinery, cel-go,
// client_golang, the event type, internal/config (the controller block)
// and internal/filter (the primary's filter, field paths and CEL limits),
// and nothing of the host, the engine or wazero.
package reconcile
