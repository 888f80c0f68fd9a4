// Package rbacgen derives the least-privilege RBAC of the daemon from its
// config: what `informer-host rbac` prints and deploy/base/rbac.yaml holds.
//
// The daemon's identity (a ServiceAccount) gets exactly what the config
// makes it do, and nothing else:
//
//   - get, list and watch on every configured resource: in a Role per
//     namespace when the resource names namespaces, else in the ClusterRole;
//   - get and update on its leader-election Lease (by name) and create on
//     leases, in the Lease's namespace, when leader election is enabled;
//   - the write verbs each plugin is granted (grants.writes: create →
//     create, patch → patch, apply → patch and create, since an apply that
//     creates its object is authorized as a create too, delete → delete)
//     on the granted resources and subresources, in Roles where the grant
//     names namespaces; a grant naming none is narrowed to the watched
//     namespaces when every resource names namespaces and the written
//     resource is namespaced (built-in table, or a configured resource
//     with namespaces), else it is cluster-wide;
//   - create and patch on Events (core and events.k8s.io) when a plugin is
//     granted events;
//   - impersonate on exactly the ServiceAccounts plugins are granted as
//     their identity (grants.impersonate). Such a plugin's writes and
//     Events are made as that ServiceAccount, so the daemon itself is not
//     given them: they become that ServiceAccount's own RBAC (an
//     Identity: ClusterRole and Roles by the same rules, bound to it);
//   - with Options.ServerAuth (run --server-auth=kubernetes), create on
//     tokenreviews and subjectaccessreviews.
//
// Discovery needs nothing: the apiserver's default system:discovery role
// lets every authenticated user read it. A resource named by kind gets its
// plural from the table of built-in kinds (builtinResources), else from
// Options.Resolve (discovery), so a config of built-in kinds needs no
// cluster.
//
// plugins.default counts as a plugin: a module the config does not name
// gets its grants.
//
// Rule of direction: rbacgen imports config only; the daemon's command
// (informer-host rbac) imports it.
package rbacgen
