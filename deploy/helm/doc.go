// Package helm holds the informer-host Helm chart (informer-host/: the
// daemon of deploy/base as a release, with values for leader election or
// sharding, plugins as resources, registry credentials, trust roots, an
// image volume and a ServiceMonitor) and its tests: Helm v4, built from
// the Go module proxy by hack/helm, lints and renders the chart for each
// main set of values; the rendered objects are applied to the real
// apiserver in a server-side dry run; the chart's RBAC is checked to be
// what `informer-host rbac` prints for the same config; and README's
// "Install with Helm" commands run as written.
//
// Rule of direction: nothing imports it; its tests import only the test
// environment (internal/testenv), the config schema (internal/config), to
// read the rendered config as the daemon does in its pod, and the plugin
// resources' types (internal/pluginapi/v1alpha1). The daemon itself is
// run as its built command, never imported.
package helm
