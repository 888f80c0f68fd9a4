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
//     creates its object is authorized as a create too, but patch alone
//     on a subresource, which an apply never creates, delete → delete)
//     on the granted resources and subresources, in Roles where the grant
//     names namespaces; a grant naming none is narrowed to the watched
//     namespaces when every resource names namespaces and the written
//     resource is namespaced (built-in table, or a configured resource
//     with namespaces), else it is cluster-wide;
//   - for a controller-mode plugin with a writes grant (without one the
//     host writes nothing for it), what the host does as its identity
//     beside the writes its grant allows (config.Controller.Needs, which
//     config validation also uses to make the grant cover the children's
//     apply and delete and the finalizer's patch): patch on the primary
//     resource (the requeue time), get on it when a finalizer is managed
//     (a fresh read after a conflict), list with onRemove: release, and
//     update on <for>/finalizers when it owns resources (the children's
//     ownerReference sets blockOwnerDeletion, which the
//     OwnerReferencesPermissionEnforcement admission plugin allows only
//     to who may update the owner's finalizers); in the primary
//     resource's namespaces, else cluster-wide. status_apply is a write
//     the grant gates: a grant with subresources [status] gives it;
//   - create and patch on Events (core and events.k8s.io) when a plugin is
//     granted events;
//   - impersonate on exactly the ServiceAccounts plugins are granted as
//     their identity (grants.impersonate). Such a plugin's writes and
//     Events are made as that ServiceAccount, so the daemon itself is not
//     given them: they become that ServiceAccount's own RBAC (an
//     Identity: ClusterRole and Roles by the same rules, bound to it);
//   - get on the ConfigMap (by name, in its namespace) of each
//     configmap:// source, for the identity that reads it: the
//     grants.impersonate ServiceAccount when the module has one, else
//     the daemon (internal/pluginsource reads it as that identity);
//   - with Options.ServerAuth (run --server-auth=kubernetes), create on
//     tokenreviews and subjectaccessreviews;
//   - unless pluginResources.watch is off: get, list and watch on plugins
//     and clusterplugins (group informer-host.io), update on their status
//     subresources, and create and patch on events.events.k8s.io (the
//     status writer's Events about them);
//   - with tenancy ceilings (and plugin resources watched): impersonate on
//     serviceaccounts in exactly the ceilings' namespaces (any name: a
//     team's Plugin names any ServiceAccount of its namespace), in a Role
//     each, in the ClusterRole for a "*" ceiling; and create on
//     subjectaccessreviews, to review a tenant ServiceAccount's own access
//     before its plugin runs (internal/tenancy).
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
