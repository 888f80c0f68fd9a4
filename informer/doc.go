// Package informer runs client-go's shared informer pipeline (Reflector,
// DeltaFIFO, Indexer, sharedProcessor, one processorListener per handler)
// for the resources named in config.yaml, and lets listeners attach to
// them.
//
// A Pipeline turns each configured resource into one dynamic shared
// informer per namespace (or one cluster-wide informer when no namespace
// is named), so built-in types and custom resources are handled alike.
// Identical watches, the same group/version/resource, namespace, selectors,
// transform and resync period, are shared by every configured resource
// that asks for them: the apiserver sees one list/watch.
//
// Usage:
//
//	p, err := informer.New(informer.Options{RESTConfig: cfg, Logger: log})
//	err = p.Apply(ctx, conf.Resources)   // start, stop and restart resources
//	reg, err := p.AddListener("pods", myListener)
//	...
//	reg.Remove()                          // returns once myListener is done
//	p.Stop()
//
// Why one informer per namespace rather than one cluster-wide informer
// filtered on the client: a daemon that watches two namespaces should need
// a Role in each of them, not a ClusterRole over the whole cluster, and it
// should not receive (and decode) every other namespace's objects only to
// throw them away. The cost is one watch connection per namespace.
//
// Listeners see client-go's semantics: events for one listener arrive in
// order, a listener registered after the informer started first receives
// the cache as adds with isInInitialList set, and a delete the watch missed
// (learned on a relist) arrives with finalStateUnknown set and the last
// state the cache held.
//
// A resource whose kind or resource is not served yet (a CRD not installed)
// is pending: it is resolved again periodically and starts by itself once
// discovery serves it. Listeners may attach to a pending resource; they are
// wired in before its informers start, so they get its initial list as it
// arrives (every object made while it was pending) and every change after.
// Why it is pending is a NotServedError naming the nearest resources
// discovery does serve, since a typo looks just like a CRD not installed.
//
// A resolved resource's event.ResourceRef carries its scope (Namespaced)
// as discovery reports it, so no listener guesses it from object keys.
//
// Rule of direction: informer is part of the embeddable daemon library
// (RATIONALE.md, "Project structure"). It imports event, the config schema
// (internal/config) and nearest, and never host, the engine or state: it
// knows listeners, not plugins. host, host/replay, internal/server and the
// daemon's command import it.
package informer
