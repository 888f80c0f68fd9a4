// Package seenkeys remembers, per plugin, the keys of the objects the
// plugin has been handed and still has: binding resource, namespace,
// name and uid. The host adds a key when the plugin settles an add or
// update of it and removes it when the plugin settles its delete, so the
// set outlives the daemon, a reload, a quarantine and (with the
// ConfigMap backend) the member that kept it. After any of those, a key
// the set holds that the informer's synced store no longer has (or has
// with another uid) is a delete the plugin never got: the host delivers
// it late (host/missed.go, RATIONALE.md "Deletes seen after the fact").
//
// A Set is compact: per resource and namespace, a map from name to the
// uid's 16 bytes (BenchmarkSetMemory measures it). A Store keeps the
// sets of one daemon and writes the changed ones to its Backend at most
// once per flush interval and on Close: ConfigMaps in the daemon's
// namespace (ConfigMaps), a bucket of the local state file (StateFile),
// or nothing (Memory).
//
// Rule of direction: imports client-go (the ConfigMap client) and
// internal/state (the state file backend); imported by host and
// internal/daemon. It knows nothing of plugins beyond their names.
package seenkeys
