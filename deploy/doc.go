// Package deploy holds the Kubernetes manifests (apply with
// `kubectl apply -k deploy/`, or one of the overlays of deploy/base/:
// deploy/sharded/ for sharding, deploy/image-volume/ for plugins mounted
// from an image by the kubelet, deploy/registry/ for plugins the daemon
// pulls from an OCI registry); its test applies them to a real apiserver,
// validates each one's config as the daemon reads it in its pod (the
// files its ConfigMap, Secret and projected volumes put there), and
// checks that the RBAC they grant covers what the daemon does.
//
// Rule of direction: nothing imports deploy; its test imports only the
// test environment (internal/testenv), the config schema
// (internal/config), to run the daemon as the manifests do, and the RBAC
// generator (internal/rbacgen), to check that an overlay's config needs
// no RBAC beyond the base's.
package deploy
