// Package controllerwrites is the cluster-facing half of controller mode:
// what the host writes for a controller plugin, always as the plugin's
// identity and within its API budget, because it goes through the
// plugin's kubewrite.Writer (its impersonation, rate limit, I/O timeout,
// dry run, write metrics and error-to-ABI-code mapping).
//
//   - Children (children_apply): each desired child is server-side
//     applied (field manager "informer-host/<plugin>", force) with a
//     controller ownerReference to the primary when Kubernetes allows one
//     (same namespace, or a cluster-scoped primary), the label
//     LabelPlugin and the annotation AnnotationOwner; then the children
//     applied before for the same primary that are no longer wanted are
//     deleted. What was applied before is read from the cluster (the
//     owned resources' informer caches, through an OwnedLister), never
//     from host memory, ApplySet-style (KEP-3659): it survives restarts,
//     reloads and handovers with no host state.
//   - Status (status_apply): the status subresource, server-side applied
//     with only the fields the plugin gives; conditions get
//     observedGeneration and a lastTransitionTime kept while their status
//     is unchanged (meta.SetStatusCondition's rule).
//   - Managed finalizers: added and removed by JSON patches that cannot
//     drop another manager's finalizer under a race; Release removes one
//     from every object of a resource (onRemove: release, and the command
//     `informer-host finalizers release`).
//   - Requeue timers: the due time is an annotation on the primary
//     (AnnotationRequeuePrefix + the plugin's label), read back by
//     RequeueAt after a restart, reload or handover;
//     OnlyHostMetadataChanged tells an update that only the host's own
//     bookkeeping caused, which must not enqueue the key again.
//
// Rule of direction: controllerwrites imports abi and internal/kubewrite
// (and client-go, apimachinery); host and cmd/informer-host import it. It
// knows objects and keys, not the engine, the queue or generations.
package controllerwrites
