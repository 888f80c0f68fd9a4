// Package v1alpha1 is the API of informer-host's plugin resources, group
// informer-host.io, version v1alpha1: Plugin (namespaced: a team's plugin,
// confined to its namespace within the operator's ceilings) and
// ClusterPlugin (cluster-scoped: the operator's, as a plugins.modules
// entry of config.yaml). The CRDs in deploy/crds are this package's
// types; RATIONALE.md ("Plugin resources: v1alpha1 and what converts
// it") says how the version will move.
//
// A spec is a plugins.modules entry spelled in JSON, without file (the
// object's name names the plugin) and with a structured source; the
// daemon reads it through config.ParseModule, so a resource and a config
// file mean the same by the same words. The status is written by the
// replicas that run the plugin (internal/pluginstatus).
//
// Rule of direction: this package imports only apimachinery and
// internal/config; internal/pluginresource, internal/pluginstatus,
// internal/rbacgen and cmd/informer-host import it.
package v1alpha1
