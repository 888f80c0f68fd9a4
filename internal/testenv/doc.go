// Package testenv starts the real control plane the integration tests run
// against: kube-apiserver and etcd on loopback, through controller-runtime's
// envtest. Neither binary is downloaded; `make controlplane`
// (hack/controlplane/build.sh) builds both from the Go module proxy into a
// cache directory outside the repository.
//
// Start one control plane per test package, in TestMain, and give each test
// a namespace of its own:
//
//	var env *testenv.Env
//
//	func TestMain(m *testing.M) { os.Exit(testenv.Run(m, &env)) }
//
//	func TestX(t *testing.T) { ns := env.Namespace(t); ... }
//
// Every package starts its control plane this way, and only this way, so
// that -short (`make test-unit`) is decided in one place: under -short
// Run starts nothing, and a test skips at its first env.Namespace,
// env.User, env.ServiceAccount or env.Require (the last for a test that
// uses env.Config or env.Client first).
//
// Run records the processes of its control plane as this test binary's
// (reap.go); if the binary dies without stopping them, the next Start kills
// them. Nothing else is ever killed: not a control plane `make cluster`
// runs, even in the background.
//
// No controllers run unless asked for: env.StartControllers (or
// env.Controllers(t) in a test) adds kube-controller-manager, also built by
// `make controlplane`, with the controllers that make Deployments,
// ReplicaSets, Pods, ownerReferences and namespace deletion behave as in a
// cluster; there is still no scheduler or kubelet, so Pods stay Pending.
//
// It also has OutageProxy, a TCP proxy that takes the apiserver away
// (killed, or behind a partition) and brings it back, and WatchProxy, a
// loopback proxy in front of the apiserver that a test can use to cut
// watches and force a relist.
//
// For the tests of manifests (deploy/, deploy/helm/): DecodeObjects,
// FindObject and RBACObjects read what a kustomization or a chart renders,
// PodFiles lays out the files a pod would see in its ConfigMap, Secret and
// projected volumes, and env.ServiceAccountMay asks the apiserver what a
// ServiceAccount may do.
//
// Rule of direction: testenv imports nothing of informer-host; tests and
// the development commands (hack/cluster, hack/demo, bench) import it,
// never a package the daemon links.
package testenv
