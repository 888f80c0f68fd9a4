// Package deploy holds the Kubernetes manifests (apply with
// `kubectl apply -k deploy/`, or deploy/sharded/ for sharding); its test
// applies them to a real apiserver and checks that the RBAC they grant covers what the daemon does.
//
// Rule of direction: nothing imports deploy; its test imports only the
// test environment (internal/testenv) and the config schema
// (internal/config), to run the daemon as the manifests do.
package deploy
