// Package pluginstatus writes the status of Plugin and ClusterPlugin
// objects: what each replica that runs the object's plugin sees (its
// host's PluginStatus, its source's Status, the object's Admission),
// turned into conditions a person can act on and merged with the other
// replicas' shares (Compute, a pure function), and written through the
// status subresource with optimistic concurrency and a bounded rate
// (Writer), with a Kubernetes Event on the object for each transition
// (loaded, swapped, refused, load failed, quarantined, parked).
//
// A plugin that fails is never Ready: Ready is True only when the
// admitted spec's version runs, has synced, and is neither degraded nor
// quarantined on any replica that reports it.
//
// Rule of direction: it imports host (for PluginStatus only),
// internal/pluginsource, internal/pluginresource, internal/pluginapi and
// client-go; internal/daemon imports it, and nothing else does.
package pluginstatus
