// Package daemon owns informer-host's lifecycle: what `informer-host run`
// starts, in which order, and how it stops. Run takes the configuration
// and the Options the command's flags set, and returns when the daemon
// has stopped; it keeps no package-level state, so tests run several
// daemons in one process (replicas side by side).
//
// A daemon is these runnables, started in this order:
//
//  1. the HTTP endpoint (internal/server): first, so /healthz answers and
//     a standby says it is one while the informers sync;
//  2. the informer pipeline (package informer): synced before anything is
//     built on its cache;
//  3. the plugin host (package host), as a warm standby under leader
//     election; then the election joins (a shard member hands the host
//     its first, empty Assignment before any plugin loads, so no plugin
//     sees an object that is not its member's), the endpoint is attached,
//     the plugin sources start (sources.go: before the directory, so each
//     sourced plugin runs its cached last good version at once, even with
//     its registry down, and the directory's same-named file is skipped),
//     and the plugin directory is loaded; then the election hears that
//     the plugins are loaded (a shard member writes its Lease, and so
//     takes a share, only once they are past their initial lists, but
//     for those bound to resources that cannot sync, and at the latest
//     4 leaseDurations after it started);
//  4. the plugin directory watch and the config file watch with the
//     reload loop: last, since a reload changes what 2 and 3 run; and
//     beside them, when plugin objects are watched, the writer of their
//     status (pluginstatus.go, a package of its own: internal/pluginstatus),
//     which a standby leaves alone;
//  5. the election's wait: none waits for the end of ctx; a Lease leader
//     activates the standby host when it gets the lease; a shard member
//     already delivers what it owns.
//
// They stop in the reverse order: the election ends (ctx ended, or a lost
// lease), the watches and the plugin sources stop (no reload or swap
// during a drain), the plugins drain
// for at most Options.DrainTimeout and run their shutdown exports, the
// election leaves (the lease is given up, the member's Lease deleted:
// after the drain, so two replicas never deliver the same objects), the
// endpoint is detached, the informers stop, the endpoint shuts down. A
// leader that loses its lease is the one exception: its plugins halt
// after their current event without draining (the new leader delivers
// the same events) and Run returns ErrLostLeadership.
//
// Config reload (reload.go) is one operation: the new file is validated,
// resources, plugin settings and the endpoint's event counters are
// applied live, and the settings that need a restart are named. The
// configuration applied is the file's with the admitted Plugin and
// ClusterPlugin objects' modules appended (pluginresources.go): a change
// of an object's spec is applied by the same path, 200ms after the last
// of a burst, so an object's plugin loads, reloads and unloads as a
// config.yaml module's does. The objects' watch runs with the other
// watches (4), once the apiserver serves their CRDs.
//
// Rule of direction: only cmd/informer-host (and its tests) import this
// package. It imports host, informer and the internal packages of the
// endpoint, the config, the file watch, sharding, the plugin sources and
// the plugin objects (internal/pluginresource) and their tenancy
// (internal/tenancy, whose Admit it hands the plugin objects);
// none of them import it.
package daemon
