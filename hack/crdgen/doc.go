// Command crdgen writes the CustomResourceDefinitions of the plugin
// resources (Plugin, ClusterPlugin; internal/pluginapi/v1alpha1) to
// deploy/crds: `make crds`, or `go run ./hack/crdgen`.
//
// The schema is made by reflection, not by hand or by controller-gen: a
// spec's module fields are config.PluginSettings' own (their yaml keys,
// the keys config.ParseModule reads), walked field by field, so a field
// config.yaml gains is one the CRDs gain at the next `make crds`, and
// the tests fail until it is run (crdgen_test.go: the committed files are
// what this makes now, and every module field is in them). controller-gen
// reads json tags and markers; the module fields have yaml tags and
// custom decoders (config.Duration, config.Size) whose wire forms it
// cannot know. The descriptions are the fields' Go doc comments, read
// from the source with go/parser, so `kubectl explain` says what the
// README does.
//
// Rule of direction: it imports internal/config, internal/pluginapi/v1alpha1
// and apiextensions' types; nothing imports it. Its tests also start the
// control plane (internal/testenv) to install the CRDs and exercise them
// with the real kubectl.
package main
