// Package kubeevents records plugins' Kubernetes Events (event_record,
// ABI.md §17.2) through client-go's EventRecorder (tools/record), so the
// Events get its aggregation of similar Events, its per-object spam
// filter and its background sending with retries, exactly as a
// controller's do.
//
// Each plugin has its own recorder, with source component (and
// reportingController) "informer-host/<plugin>", so its Events are told
// from the daemon's and from other plugins', and the spam filter, keyed
// by source and object, limits each plugin on its own. A plugin granted
// an identity (grants.impersonate) records through a client that
// impersonates that ServiceAccount, so the apiserver's RBAC and audit log
// see the plugin; a plugin in dry run (grants.dryRun) has its Events
// logged instead of recorded.
//
// Rule of direction: kubeevents imports abi, config, tracing and
// kubewrite (for the writes' identity and client); only host imports it.
package kubeevents
