package config

import (
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"
)

// doc joins lines into a file; line n of the result is lines[n-1], which
// keeps the expected line numbers in the cases below easy to check.
func doc(lines ...string) string { return strings.Join(lines, "\n") + "\n" }

// withHead prefixes lines with lines 1-5 of most cases: a valid file with
// one resource, "pods".
func withHead(lines ...string) string {
	return doc(append([]string{
		"apiVersion: informer-host/v1", // 1
		"resources:",                   // 2
		"- name: pods",                 // 3
		"  version: v1",                // 4
		"  resource: pods",             // 5
	}, lines...)...)
}

func TestParseProblems(t *testing.T) {
	cases := []struct {
		name string
		in   string
		want []string // substrings of the error, each a whole "file:line: message" prefix
	}{
		// Decoding.
		{"empty document", "", []string{"config.yaml: empty document"}},
		{"only comments", "# nothing here\n", []string{"config.yaml: empty document"}},
		{"null document", "---\n~\n", []string{"config.yaml: empty document"}},
		{"not a mapping", "- a\n- b\n", []string{"config.yaml:1: expected a mapping at the top level, got a list"}},
		{"syntax error", withHead("  version: v1: x"), []string{"config.yaml:6: syntax error: mapping values are not allowed in this context"}},
		{"second document", withHead("---", "apiVersion: informer-host/v1"), []string{"config.yaml:7: a second YAML document"}},
		{"unknown field", withHead("  foo: bar"), []string{`config.yaml:6: unknown field "foo" in resources[0]`}},
		{"unknown field, case slip", withHead("  Kind: Pod"), []string{`config.yaml:6: unknown field "Kind" in resources[0]; did you mean "kind"?`}},
		{"unknown top-level field", withHead("plugin:", "  directory: x"), []string{`config.yaml:6: unknown top-level field "plugin"; did you mean "plugins"?`}},
		{"unknown field in inline module settings", withHead("plugins:", "  modules:", "  - file: a.wasm", "    limit: {}"),
			[]string{`config.yaml:9: unknown field "limit" in plugins.modules[0]; did you mean "limits"?`}},
		{"duplicate key", withHead("  version: v2"), []string{`config.yaml:6: resources[0]: duplicate key "version" (first at line 4)`}},
		{"string where list expected", withHead("  namespaces: demo"),
			[]string{`config.yaml:6: resources[0].namespaces: expected a list of strings, got string "demo"; write [demo]`}},
		{"string where int expected", withHead("plugins:", "  default:", "    delivery:", "      bufferSize: lots"),
			[]string{`config.yaml:9: plugins.default.delivery.bufferSize: expected an integer, got string "lots"`}},
		{"mapping where list expected", withHead("plugins:", "  default:", "    bindings: {resource: pods}"),
			[]string{`config.yaml:8: plugins.default.bindings: expected a list, got a mapping`}},
		{"negative uint", withHead("plugins:", "  default:", "    limits: {memoryPages: -1}"),
			[]string{`config.yaml:8: plugins.default.limits.memoryPages: expected a non-negative 32-bit integer, got integer -1`}},
		{"bool", withHead("  stripManagedFields: maybe"),
			[]string{`config.yaml:6: resources[0].stripManagedFields: expected true or false, got string "maybe"`}},
		{"bad duration", withHead("  resyncPeriod: abc"),
			[]string{`config.yaml:6: resources[0].resyncPeriod: cannot use "abc" as a duration`}},
		{"duration as a number", withHead("  resyncPeriod: 30"),
			[]string{`config.yaml:6: resources[0].resyncPeriod: 30 is a number; use a duration string like "30s"`}},
		{"duration as a list", withHead("  resyncPeriod: [1s]"),
			[]string{`config.yaml:6: resources[0].resyncPeriod: expected a duration string like "30s", got a list`}},

		{"module size in words", withHead("plugins:", "  maxModuleSize: big"),
			[]string{`config.yaml:7: plugins.maxModuleSize: cannot use "big" as a size; use a number of bytes or a quantity like 64Mi`}},
		{"module size as a list", withHead("plugins:", "  maxModuleSize: [1]"),
			[]string{`config.yaml:7: plugins.maxModuleSize: expected a size like 64Mi or a number of bytes, got a list`}},
		{"module size too small", withHead("plugins:", "  maxModuleSize: 64"),
			[]string{`config.yaml:7: plugins.maxModuleSize: 64 is out of range; use a size from 1Ki to 1Gi (default 64Mi)`}},
		{"zero fetch timeout", withHead("plugins:", "  fetchTimeout: 0s"),
			[]string{`config.yaml:7: plugins.fetchTimeout: must be greater than 0`}},
		{"negative fetch timeout", withHead("plugins:", "  fetchTimeout: -5s"),
			[]string{`config.yaml:7: plugins.fetchTimeout: must not be negative (got -5s)`}},
		{"module size too large", withHead("plugins:", "  maxModuleSize: 2Gi"),
			[]string{`config.yaml:7: plugins.maxModuleSize: 2Gi is out of range`}},

		// apiVersion.
		{"missing apiVersion", doc("resources: []"), []string{`config.yaml:1: apiVersion: required; set it to "informer-host/v1"`}},
		{"unknown apiVersion", doc("apiVersion: informer-host/v2"), []string{`config.yaml:1: apiVersion: unsupported version "informer-host/v2"`}},

		// Resources.
		{"selector", withHead("  labelSelector: 'app in (a'"),
			[]string{`config.yaml:6: resources[0].labelSelector: invalid label selector "app in (a": unable to parse requirement`}},
		{"field selector", withHead("  fieldSelector: metadata.name"),
			[]string{`config.yaml:6: resources[0].fieldSelector: invalid field selector "metadata.name": invalid selector`}},
		{"duplicate name", withHead("- name: pods", "  version: v1", "  kind: Pod"),
			[]string{`config.yaml:6: resources[1].name: duplicate resource name "pods" (first at line 3)`}},
		{"no name", withHead("- version: v1", "  kind: Pod"),
			[]string{`config.yaml:6: resources[1].name: required`}},
		{"empty name", withHead("- name:", "  version: v1", "  kind: Pod"),
			[]string{`config.yaml:6: resources[1].name: required`}},
		{"bad name", withHead("- name: Pods_2", "  version: v1", "  kind: Pod"),
			[]string{`config.yaml:6: resources[1].name: "Pods_2" is not a valid name`}},
		{"no version", withHead("- name: cm", "  resource: configmaps"),
			[]string{`config.yaml:6: resources[1].version: required`}},
		{"group in version", withHead("- name: deploy", "  version: apps/v1", "  kind: Deployment"),
			[]string{`config.yaml:7: resources[1].version: "apps/v1" is group and version in one; write group: apps and version: v1`}},
		{"core group", withHead("- name: cm", "  group: core", "  version: v1", "  kind: ConfigMap"),
			[]string{`config.yaml:7: resources[1].group: the core API group is ""`}},
		{"neither resource nor kind", withHead("- name: cm", "  version: v1"),
			[]string{`config.yaml:6: resources[1]: set one of resource (the plural name, e.g. "pods") or kind (e.g. "Pod")`}},
		{"both resource and kind", withHead("  kind: Pod"),
			[]string{`config.yaml:6: resources[0].kind: set either resource or kind, not both`}},
		{"resource not lower case", withHead("- name: cm", "  version: v1", "  resource: ConfigMaps"),
			[]string{`config.yaml:8: resources[1].resource: "ConfigMaps": resource is the plural lower-case name`}},
		{"subresource", withHead("- name: logs", "  version: v1", "  resource: pods/log"),
			[]string{`config.yaml:8: resources[1].resource: "pods/log" is a subresource`}},
		{"bad kind", withHead("- name: cm", "  version: v1", "  kind: Config Map"),
			[]string{`config.yaml:8: resources[1].kind: invalid kind "Config Map"`}},
		{"namespaces", withHead("  namespaces: [demo, '*', demo, Demo]"), []string{
			`config.yaml:6: resources[0].namespaces[1]: "*" is not a namespace`,
			`config.yaml:6: resources[0].namespaces[2]: duplicate namespace "demo" (first at line 6)`,
			`config.yaml:6: resources[0].namespaces[3]: invalid namespace "Demo"`,
		}},
		{"negative resync", withHead("  resyncPeriod: -1m"),
			[]string{`config.yaml:6: resources[0].resyncPeriod: must not be negative (got -1m0s)`}},

		// Plugins.
		{"binding to unknown resource", withHead("plugins:", "  default:", "    bindings:", "    - resource: podz"),
			[]string{`config.yaml:9: plugins.default.bindings[0].resource: binding refers to resource "podz", which is not configured (configured: pods)`}},
		{"binding without resource", withHead("plugins:", "  default:", "    bindings:", "    - events: [add]"),
			[]string{`config.yaml:9: plugins.default.bindings[0].resource: required`}},
		{"duplicate binding", withHead("plugins:", "  default:", "    bindings:", "    - resource: pods", "    - resource: pods"),
			[]string{`config.yaml:10: plugins.default.bindings[1].resource: duplicate binding for resource "pods" (first at line 9)`}},
		{"unknown event", withHead("plugins:", "  default:", "    bindings:", "    - resource: pods", "      events: [add, modify, add]"), []string{
			`config.yaml:10: plugins.default.bindings[0].events[1]: unknown event "modify"; expected add, update or delete`,
			`config.yaml:10: plugins.default.bindings[0].events[2]: duplicate event "add"`,
		}},
		{"unknown delivery mode", withHead("plugins:", "  modules:", "  - file: a.wasm", "    delivery:", "      mode: newest"),
			[]string{`config.yaml:10: plugins.modules[0].delivery.mode: unknown delivery mode "newest"; expected "every" or "latest"`}},
		{"ranges", withHead(
			"plugins:",                         // 6
			"  default:",                       // 7
			"    delivery:",                    // 8
			"      bufferSize: 0",              // 9
			"      maxRetries: -2",             // 10
			"    limits:",                      // 11
			"      memoryPages: 65537",         // 12
			"      maxConsecutiveFailures: 0",  // 13
			"  modules:",                       // 14
			"  - file: a.wasm",                 // 15
			"    delivery:",                    // 16
			"      bufferSize: 1000001",        // 17
			"      maxRetries: 101",            // 18
			"    limits:",                      // 19
			"      memoryPages: 0",             // 20
			"      maxConsecutiveFailures: -3", // 21
		), []string{
			`config.yaml:9: plugins.default.delivery.bufferSize: 0 is out of range; must be between 1 and 1000000`,
			`config.yaml:10: plugins.default.delivery.maxRetries: -2 is out of range; must be between 0 and 100`,
			`config.yaml:12: plugins.default.limits.memoryPages: 65537 is out of range; must be between 1 and 65536`,
			`config.yaml:13: plugins.default.limits.maxConsecutiveFailures: 0 is out of range; must be at least 1`,
			`config.yaml:17: plugins.modules[0].delivery.bufferSize: 1000001 is out of range`,
			`config.yaml:18: plugins.modules[0].delivery.maxRetries: 101 is out of range`,
			`config.yaml:20: plugins.modules[0].limits.memoryPages: 0 is out of range`,
			`config.yaml:21: plugins.modules[0].limits.maxConsecutiveFailures: -3 is out of range`,
		}},
		{"negative durations", withHead("plugins:", "  default:",
			"    delivery: {retryBackoff: -1s}", // 8
			"    limits:",                       // 9
			"      callTimeout: -5ms",           // 10
			"      restartBackoff: -1s",         // 11
		), []string{
			`config.yaml:8: plugins.default.delivery.retryBackoff: must not be negative (got -1s)`,
			`config.yaml:10: plugins.default.limits.callTimeout: must not be negative (got -5ms)`,
			`config.yaml:11: plugins.default.limits.restartBackoff: must not be negative (got -1s)`,
		}},
		{"zero restart backoff", withHead("plugins:", "  default:", "    limits: {restartBackoff: 0s}"),
			[]string{`config.yaml:8: plugins.default.limits.restartBackoff: must be greater than 0`}},
		{"max restart backoff below first", withHead("plugins:", "  default:", "    limits: {restartBackoff: 2m}", "  modules:", "  - file: a.wasm", "    limits:", "      maxRestartBackoff: 10s"), []string{
			`config.yaml:8: plugins.default.limits.restartBackoff: restartBackoff (2m0s) must not be more than maxRestartBackoff (1m0s)`,
			`config.yaml:12: plugins.modules[0].limits.maxRestartBackoff: maxRestartBackoff (10s) must not be less than restartBackoff (2m0s)`,
		}},
		{"convergence settings", withHead(
			"plugins:",   // 6
			"  default:", // 7
			"    delivery: {onError: ignore, maxRetryBackoff: 0s}", // 8
			"    limits: {parkAfter: 101, stablePeriod: 0s}",       // 9
			"  modules:",       // 10
			"  - file: a.wasm", // 11
			"    delivery: {retryBackoff: 1h, maxRetryBackoff: 1m}", // 12
			"    limits: {parkAfter: -1}",                           // 13
		), []string{
			`config.yaml:8: plugins.default.delivery.onError: unknown onError "ignore"; expected "retry" (retry the object with backoff) or "skip" (give up on the event)`,
			`config.yaml:8: plugins.default.delivery.maxRetryBackoff: must be greater than 0`,
			`config.yaml:9: plugins.default.limits.parkAfter: 101 is out of range; must be between 0 and 100`,
			`config.yaml:9: plugins.default.limits.stablePeriod: must be greater than 0`,
			`config.yaml:12: plugins.modules[0].delivery.maxRetryBackoff: maxRetryBackoff (1m0s) must not be less than retryBackoff (1h0m0s)`,
			`config.yaml:13: plugins.modules[0].limits.parkAfter: -1 is out of range; must be between 0 and 100`,
		}},
		{"missed deletes", withHead("plugins:", "  modules:", "  - file: a.wasm", "    delivery: {missedDeletes: drop}"), []string{
			`config.yaml:9: plugins.modules[0].delivery.missedDeletes: unknown missedDeletes "drop"; expected "deliver" (hand the plugin, late and flagged, the deletes it could not see) or "skip" (do not)`,
		}},
		{"duplicate module", withHead("plugins:", "  modules:", "  - file: a.wasm", "  - file: b.wasm", "  - file: a.wasm"),
			[]string{`config.yaml:10: plugins.modules[2].file: duplicate module file "a.wasm" (first at line 8)`}},
		{"module file with directory", withHead("plugins:", "  modules:", "  - file: plugins/a.wasm"),
			[]string{`config.yaml:8: plugins.modules[0].file: "plugins/a.wasm" must be a plain file name ending in ".wasm"`}},
		{"module file not wasm", withHead("plugins:", "  modules:", "  - file: a.so"),
			[]string{`config.yaml:8: plugins.modules[0].file: "a.so" must be a plain file name ending in ".wasm"`}},
		{"module without file", withHead("plugins:", "  modules:", "  - delivery: {mode: latest}"),
			[]string{`config.yaml:8: plugins.modules[0].file: required`}},
		{"config not JSON", withHead("plugins:", "  default:", "    config: {ratio: .nan}"),
			[]string{`config.yaml:8: plugins.default.config: cannot be handed to the plugin as JSON`}},

		// Server and leader election.
		{"server address", withHead("server:", "  address: 9090"),
			[]string{`config.yaml:7: server.address: invalid address "9090"; use "host:port", ":port" or "off" (did you mean ":9090"?)`}},
		{"server port", withHead("server: {address: 'localhost:99999'}"),
			[]string{`config.yaml:6: server.address: invalid port "99999"`}},
		{"lease timings", withHead("leaderElection:", "  enabled: true", "  renewDeadline: 20s"),
			[]string{`config.yaml:8: leaderElection.renewDeadline: renewDeadline (20s) must be less than leaseDuration (15s)`}},
		{"retry period", withHead("leaderElection:", "  retryPeriod: 9s"),
			[]string{`config.yaml:7: leaderElection.retryPeriod: renewDeadline (10s) must be greater than 1.2 × retryPeriod (9s)`}},
		{"zero lease duration", withHead("leaderElection:", "  leaseDuration: 0s"),
			[]string{`config.yaml:7: leaderElection.leaseDuration: must be greater than 0`}},
		{"lease name", withHead("leaderElection:", "  leaseName: My_Lease"),
			[]string{`config.yaml:7: leaderElection.leaseName: invalid lease name "My_Lease"`}},

		// Sharding (sharding.go).
		{"sharding and leader election", withHead("leaderElection: {enabled: true}", "sharding:", "  enabled: true"),
			[]string{`config.yaml:8: sharding.enabled: sharding and leaderElection exclude each other`}},
		{"sharding key", withHead("sharding:", "  key: name"),
			[]string{`config.yaml:7: sharding.key: unknown key "name"; use "namespace" (a namespace's objects together) or "namespace/name"`}},
		{"sharding lease timings", withHead("sharding:", "  leaseDuration: 5s"),
			[]string{`config.yaml:7: sharding.leaseDuration: renewDeadline (10s) must be less than leaseDuration (5s)`}},
		{"sharding lease prefix", withHead("sharding:", "  leasePrefix: Shards"),
			[]string{`config.yaml:7: sharding.leasePrefix: invalid lease prefix "Shards"`}},

		// Plugin sources (sources.go).
		{"source with an unknown scheme", withHead("plugins:", "  modules:", "  - file: a.wasm", "    source: ftp://host/a.wasm"),
			[]string{`config.yaml:9: plugins.modules[0].source: "ftp://host/a.wasm": unknown scheme "ftp"; use oci://, https://, file:// or configmap://`}},
		{"source without a scheme", withHead("plugins:", "  modules:", "  - file: a.wasm", "    source: ghcr.io/org/a:v1"),
			[]string{`config.yaml:9: plugins.modules[0].source: "ghcr.io/org/a:v1" has no scheme`}},
		{"source over plain http", withHead("plugins:", "  modules:", "  - file: a.wasm", "    source: http://example.com/a.wasm"),
			[]string{`config.yaml:9: plugins.modules[0].source: "http://example.com/a.wasm": plain http:// is refused`}},
		{"oci source without a tag", withHead("plugins:", "  modules:", "  - file: a.wasm", "    source: oci://ghcr.io/org/a"),
			[]string{`config.yaml:9: plugins.modules[0].source: "oci://ghcr.io/org/a" names no tag or digest`}},
		{"oci source with a short digest", withHead("plugins:", "  modules:", "  - file: a.wasm", "    source: oci://ghcr.io/org/a@sha256:abc"),
			[]string{`config.yaml:9: plugins.modules[0].source: "oci://ghcr.io/org/a@sha256:abc": the digest must be sha256:<64 hex digits>`}},
		{"https without sha256", withHead("plugins:", "  modules:", "  - file: a.wasm", "    source: https://example.com/a.wasm"),
			[]string{`config.yaml:9: plugins.modules[0].source: an https:// source needs sha256`}},
		{"https with a bad sha256", withHead("plugins:", "  modules:", "  - file: a.wasm", "    source: https://example.com/a.wasm", "    sha256: xyz"),
			[]string{`config.yaml:10: plugins.modules[0].sha256: "xyz" is not a sha256 digest`}},
		{"digest with refreshInterval", withHead("plugins:", "  modules:", "  - file: a.wasm",
			"    source: oci://ghcr.io/org/a@sha256:"+strings.Repeat("ab", 32), "    refreshInterval: 1m"),
			[]string{`config.yaml:10: plugins.modules[0].refreshInterval: the source is pinned (a digest or sha256), so it never changes`}},
		{"refreshInterval without pullPolicy Always", withHead("plugins:", "  modules:", "  - file: a.wasm",
			"    source: oci://ghcr.io/org/a:v1", "    pullPolicy: IfNotPresent", "    refreshInterval: 1m"),
			[]string{`config.yaml:11: plugins.modules[0].refreshInterval: a refresh needs pullPolicy: Always (this one is IfNotPresent)`}},
		{"refreshInterval too short", withHead("plugins:", "  modules:", "  - file: a.wasm", "    source: oci://ghcr.io/org/a:v1", "    refreshInterval: 5ms"),
			[]string{`config.yaml:10: plugins.modules[0].refreshInterval: 5ms is below the minimum of 1s`}},
		{"unknown pullPolicy", withHead("plugins:", "  modules:", "  - file: a.wasm", "    source: oci://ghcr.io/org/a:v1", "    pullPolicy: Sometimes"),
			[]string{`config.yaml:10: plugins.modules[0].pullPolicy: unknown pull policy "Sometimes"; use Always, IfNotPresent or Never`}},
		{"unknown failurePolicy", withHead("plugins:", "  modules:", "  - file: a.wasm", "    source: oci://ghcr.io/org/a:v1", "    failurePolicy: open"),
			[]string{`config.yaml:10: plugins.modules[0].failurePolicy: unknown failure policy "open"`}},
		{"pullPolicy without a source", withHead("plugins:", "  modules:", "  - file: a.wasm", "    pullPolicy: Always"),
			[]string{`config.yaml:9: plugins.modules[0].pullPolicy: applies only to a module with a source`}},
		{"verify key file missing", withHead("plugins:", "  modules:", "  - file: a.wasm", "    source: oci://ghcr.io/org/a:v1",
			"    verify: {required: true, keys: [no-such-key.pem]}"),
			[]string{`config.yaml:10: plugins.modules[0].verify.keys[0]: cannot read no-such-key.pem`}},
		{"verify required with nothing to verify against", withHead("plugins:", "  default:", "    verify: {required: true}"),
			[]string{`config.yaml:8: plugins.default.verify: required: true needs keys or identities`}},
		{"verify identity without subject", withHead("plugins:", "  modules:", "  - file: a.wasm", "    source: oci://ghcr.io/org/a:v1",
			"    verify:", "      identities: [{issuer: https://accounts.example.com}]"),
			[]string{`config.yaml:11: plugins.modules[0].verify.identities[0].subject: required`, `config.yaml:11: plugins.modules[0].verify.identities: keyless signatures`}},
		{"keyless verify without a trusted root", withHead("plugins:", "  modules:", "  - file: a.wasm", "    source: oci://ghcr.io/org/a:v1",
			"    verify:", "      required: true", "      identities: [{issuer: https://accounts.example.com, subject: me@example.com}]"),
			[]string{`config.yaml:12: plugins.modules[0].verify.identities: keyless signatures are checked against a trusted root read from disk, never fetched: mount a trusted_root.json and set plugins.modules[0].verify.trustedRoot`}},
		{"keyless default verify without a trusted root", withHead("plugins:", "  default:", "    verify:", "      keys: []",
			"      identities: [{issuer: https://accounts.example.com, subject: me@example.com}]"),
			[]string{"config.yaml:10: plugins.default.verify.identities: keyless signatures are checked against a trusted root read from disk, never fetched: " +
				"mount a trusted_root.json and set plugins.default.verify.trustedRoot (for the public sigstore instance, the trusted_root.json target of its TUF repository, " +
				"tuf-repo-cdn.sigstore.dev; for your own instance, `cosign trusted-root create` writes one)"}},
		{"insecure remote registry", withHead("plugins:", "  registries:", "    ghcr.io: {insecure: true}"),
			[]string{`config.yaml:8: plugins.registries.ghcr.io.insecure: plain HTTP to ghcr.io, which is not loopback`}},
		{"registry key with a path", withHead("plugins:", "  registries:", "    ghcr.io/org: {}"),
			[]string{`config.yaml:8: plugins.registries.ghcr.io/org: "ghcr.io/org" is not a registry host`}},
		{"registry CA bundle missing", withHead("plugins:", "  registries:", "    localhost:5000: {caBundle: no-ca.pem}"),
			[]string{`config.yaml:8: plugins.registries.localhost:5000.caBundle: cannot read no-ca.pem`}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Parse("config.yaml", []byte(tc.in))
			if err == nil {
				t.Fatalf("no error; config: %+v", c)
			}
			if c != nil {
				t.Errorf("got a config along with the error")
			}
			var errs Errors
			if !errors.As(err, &errs) {
				t.Fatalf("error is %T, want Errors: %v", err, err)
			}
			got := err.Error()
			for _, w := range tc.want {
				if !containsLinePrefix(got, w) {
					t.Errorf("missing problem\n  want: %s\n  got:\n%s", w, indent(got))
				}
			}
			if n := strings.Count(got, "\n") + 1; n != len(tc.want) {
				t.Errorf("got %d problems, want %d:\n%s", n, len(tc.want), indent(got))
			}
		})
	}
}

// containsLinePrefix reports whether some line of s starts with want.
func containsLinePrefix(s, want string) bool {
	for _, l := range strings.Split(s, "\n") {
		if strings.HasPrefix(l, want) {
			return true
		}
	}
	return false
}

func indent(s string) string { return "    " + strings.ReplaceAll(s, "\n", "\n    ") }

// A broken file must show everything wrong with it in one go, in file
// order, and a value the decoder could not read must not also be reported
// as missing.
func TestParseReportsAllProblems(t *testing.T) {
	in := doc(
		"apiVersion: informer-host/v1", // 1
		"resources:",                   // 2
		"- name: [pods]",               // 3: wrong type, and not also "name: required"
		"  version: v1",                // 4
		"  resource: pods",             // 5
		"  labelSelector: 'a=(b'",      // 6
		"  colour: blue",               // 7
		"- name: cm",                   // 8
		"  version: v1",                // 9
		"  resource: configmaps",       // 10
		"  resyncPeriod: 5",            // 11
		"plugins:",                     // 12
		"  modules:",                   // 13
		"  - file: x.wasm",             // 14
		"    bindings:",                // 15
		"    - resource: cm",           // 16
		"      events: [create]",       // 17
		"    delivery: {mode: all, bufferSize: -1}", // 18
		"server:",           // 19
		"  adress: ':8080'", // 20
	)
	_, err := Parse("conf/config.yaml", []byte(in))
	want := []string{
		`conf/config.yaml:3: resources[0].name: expected a string, got a list`,
		`conf/config.yaml:6: resources[0].labelSelector: invalid label selector "a=(b"`,
		`conf/config.yaml:7: unknown field "colour" in resources[0]`,
		`conf/config.yaml:11: resources[1].resyncPeriod: 5 is a number; use a duration string like "30s"`,
		`conf/config.yaml:17: plugins.modules[0].bindings[0].events[0]: unknown event "create"`,
		`conf/config.yaml:18: plugins.modules[0].delivery.mode: unknown delivery mode "all"`,
		`conf/config.yaml:18: plugins.modules[0].delivery.bufferSize: -1 is out of range`,
		`conf/config.yaml:20: unknown field "adress" in server; did you mean "address"?`,
	}
	if err == nil {
		t.Fatal("no error")
	}
	lines := strings.Split(err.Error(), "\n")
	if len(lines) != len(want) {
		t.Fatalf("got %d problems, want %d:\n%s", len(lines), len(want), indent(err.Error()))
	}
	for i, w := range want {
		if !strings.HasPrefix(lines[i], w) {
			t.Errorf("problem %d:\n  want: %s\n  got:  %s", i, w, lines[i])
		}
	}
	var errs Errors
	if !errors.As(err, &errs) {
		t.Fatalf("error is %T, want Errors", err)
	}
	if errs[0].File != "conf/config.yaml" || errs[0].Line != 3 {
		t.Errorf("first problem = %+v", errs[0])
	}
}

// The binding check must not blame a binding for a resource whose name
// could not be decoded.
func TestNoUnknownBindingAfterBrokenName(t *testing.T) {
	_, err := Parse("config.yaml", []byte(doc(
		"apiVersion: informer-host/v1",
		"resources:",
		"- name: {x: 1}",
		"  version: v1",
		"  resource: pods",
		"plugins:",
		"  default:",
		"    bindings: [{resource: pods}]",
	)))
	if err == nil || strings.Contains(err.Error(), "not configured") || strings.Count(err.Error(), "\n") != 0 {
		t.Fatalf("want only the type error, got:\n%v", err)
	}
}

const validConfig = `apiVersion: informer-host/v1
resources:
  - name: pods
    version: v1
    kind: Pod
    namespaces: [demo, other]
    labelSelector: app=demo,tier!=cache
    fieldSelector: status.phase=Running
    resyncPeriod: 10m
  - name: deployments
    group: apps
    version: v1
    resource: deployments
    stripManagedFields: false
plugins:
  directory: wasm
  default:
    bindings:
      - resource: deployments
        events: [delete, add]
    delivery:
      maxRetries: 5
    limits:
      callTimeout: 0s          # trusted: no deadline for anyone by default
      memoryPages: 256
    config: {shared: true}
  modules:
    - file: a.wasm             # sets nothing: everything from default
    - file: b.wasm
      bindings:
        - resource: pods
      delivery:
        mode: latest
        maxRetries: 0          # explicit zero wins over default's 5
      limits:
        callTimeout: 250ms
      config:
        logEvery: 1
        nested: {1: one, list: [x, 2]}
    - file: c.wasm
      limits:
        callTimeout:           # null: same as absent, so default's 0s
      config:                  # null: inherits default's config
leaderElection:
  enabled: true
  leaseDuration: 30s
`

func TestParseValid(t *testing.T) {
	c, err := Parse("etc/informer-host/config.yaml", []byte(validConfig))
	if err != nil {
		t.Fatal(err)
	}
	if c.File != "etc/informer-host/config.yaml" || c.Dir() != "etc/informer-host" {
		t.Errorf("File, Dir = %q, %q", c.File, c.Dir())
	}

	// Resources.
	pods, ok := c.Resource("pods")
	if !ok || pods.Kind != "Pod" || pods.ResyncPeriod.Duration != 10*time.Minute || !pods.StripsManagedFields() {
		t.Errorf("pods = %+v, %v", pods, ok)
	}
	if !reflect.DeepEqual(pods.Namespaces, []string{"demo", "other"}) {
		t.Errorf("namespaces = %v", pods.Namespaces)
	}
	deploy, _ := c.Resource("deployments")
	if deploy.StripsManagedFields() || deploy.GroupVersion().String() != "apps/v1" {
		t.Errorf("deployments = %+v", deploy)
	}
	if _, ok := c.Resource("nope"); ok {
		t.Error("found a resource that is not configured")
	}

	// Defaults outside plugins.
	if c.Server.Address != ":9090" {
		t.Errorf("server.address = %q", c.Server.Address)
	}
	le := c.LeaderElection
	if !le.Enabled || le.LeaseName != "informer-host" || le.Namespace != podNamespace(serviceAccountNamespaceFile) ||
		le.LeaseDuration.Duration != 30*time.Second || le.RenewDeadline.Duration != 10*time.Second || le.RetryPeriod.Duration != 2*time.Second {
		t.Errorf("leaderElection = %+v", le)
	}
	if got := c.PluginDir(); got != filepath.Join("etc", "informer-host", "wasm") {
		t.Errorf("PluginDir = %q", got)
	}

	all := []string{"add", "update", "delete"}
	// a.wasm: nothing of its own.
	a := c.SettingsFor("a.wasm")
	wantA := PluginSettings{
		Bindings: []Binding{{Resource: "deployments", Events: []string{"add", "delete"}}},
		Delivery: Delivery{Mode: "every", BufferSize: 10000, MaxRetries: 5, RetryBackoff: NewDuration(5 * time.Millisecond),
			MaxRetryBackoff: NewDuration(1000 * time.Second), OnError: OnErrorRetry, MissedDeletes: MissedDeletesDeliver},
		Limits: Limits{MemoryPages: 256, CallTimeout: NewDuration(0), MaxConsecutiveFailures: 5,
			RestartBackoff: NewDuration(time.Second), MaxRestartBackoff: NewDuration(time.Minute),
			StablePeriod: NewDuration(10 * time.Minute), ParkAfter: 3},
		Config: map[string]any{"shared": true},
	}
	if !reflect.DeepEqual(a, wantA) {
		t.Errorf("SettingsFor(a.wasm) =\n  %+v\nwant\n  %+v", a, wantA)
	}
	// A module the file does not name gets the default, the same as a.wasm.
	if other := c.SettingsFor("unnamed.wasm"); !reflect.DeepEqual(other, wantA) {
		t.Errorf("SettingsFor(unnamed.wasm) = %+v", other)
	}

	b := c.SettingsFor("b.wasm")
	if !reflect.DeepEqual(b.Bindings, []Binding{{Resource: "pods", Events: all}}) {
		t.Errorf("b bindings = %+v", b.Bindings)
	}
	if b.Delivery.Mode != "latest" || b.Delivery.MaxRetries != 0 || b.Delivery.BufferSize != 10000 {
		t.Errorf("b delivery = %+v", b.Delivery)
	}
	if b.Limits.CallTimeout.Duration != 250*time.Millisecond || b.Limits.MemoryPages != 256 {
		t.Errorf("b limits = %+v", b.Limits)
	}

	cs := c.SettingsFor("c.wasm")
	if !cs.Limits.CallTimeout.IsSet() || cs.Limits.CallTimeout.Duration != 0 {
		t.Errorf("c callTimeout = %+v, want explicit 0 from default", cs.Limits.CallTimeout)
	}

	// ConfigJSON.
	for file, want := range map[string]string{
		"a.wasm":       `{"shared":true}`,
		"b.wasm":       `{"logEvery":1,"nested":{"1":"one","list":["x",2]}}`,
		"c.wasm":       `{"shared":true}`,
		"unnamed.wasm": `{"shared":true}`,
	} {
		got, err := c.ConfigJSON(file)
		if err != nil || string(got) != want {
			t.Errorf("ConfigJSON(%s) = %s, %v; want %s", file, got, err, want)
		}
	}

	// The result is a copy.
	b.Bindings[0].Resource = "changed"
	b.Bindings[0].Events[0] = "changed"
	if again := c.SettingsFor("b.wasm"); again.Bindings[0].Resource != "pods" || again.Bindings[0].Events[0] != "add" {
		t.Errorf("SettingsFor result aliases the config: %+v", again.Bindings)
	}

	// Load has already resolved modules in place, and SettingsFor agrees.
	if m, _ := c.Module("b.wasm"); !reflect.DeepEqual(m.PluginSettings, c.SettingsFor("b.wasm")) {
		t.Errorf("modules[b.wasm] = %+v", m.PluginSettings)
	}
}

func TestCallTimeoutPresence(t *testing.T) {
	for _, tc := range []struct {
		name, limits string
		want         time.Duration
	}{
		{"absent", "", DefaultCallTimeout},
		{"null", "      callTimeout:", DefaultCallTimeout},
		{"explicit zero", "      callTimeout: 0s", 0},
		{"explicit", "      callTimeout: 3s", 3 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Parse("", []byte(withHead("plugins:", "  modules:", "  - file: m.wasm", "    limits:", tc.limits)))
			if err != nil {
				t.Fatal(err)
			}
			got := c.SettingsFor("m.wasm").Limits.CallTimeout
			if got.Duration != tc.want || !got.IsSet() {
				t.Errorf("callTimeout = %+v, want %v", got, tc.want)
			}
		})
	}
}

func TestMinimalConfigDefaults(t *testing.T) {
	c, err := Parse("", []byte("apiVersion: informer-host/v1\n"))
	if err != nil {
		t.Fatal(err)
	}
	if c.PluginDir() != "plugins" || c.Plugins.Directory != "plugins" || c.Server.Address != ":9090" ||
		c.Plugins.MaxModuleSize != 64<<20 || c.ModuleSizeLimit() != 64<<20 {
		t.Errorf("defaults: %+v", c)
	}
	s := c.SettingsFor("x.wasm")
	if len(s.Bindings) != 0 || s.Delivery.Mode != "every" || s.Limits.MemoryPages != 1024 || s.Limits.CallTimeout.Duration != time.Second {
		t.Errorf("settings = %+v", s)
	}
	if b, err := c.ConfigJSON("x.wasm"); b != nil || err != nil {
		t.Errorf("ConfigJSON = %q, %v; want nothing", b, err)
	}
}

// Configs built in code (tests elsewhere do this) have no YAML to say
// what was set; SettingsFor then treats non-zero values as set.
func TestSettingsForUnparsedConfig(t *testing.T) {
	c := &Config{Plugins: Plugins{
		Default: PluginSettings{
			Bindings: []Binding{{Resource: "pods"}},
			Limits:   Limits{CallTimeout: NewDuration(0), MemoryPages: 16},
		},
		Modules: []Module{{File: "m.wasm", PluginSettings: PluginSettings{Delivery: Delivery{BufferSize: 7}}}},
	}}
	s := c.SettingsFor("m.wasm")
	if s.Delivery.BufferSize != 7 || s.Delivery.MaxRetries != DefaultMaxRetries || s.Limits.MemoryPages != 16 ||
		!s.Limits.CallTimeout.IsSet() || s.Limits.CallTimeout.Duration != 0 || s.Limits.MaxRestartBackoff.Duration != time.Minute {
		t.Errorf("settings = %+v", s)
	}
	if !reflect.DeepEqual(s.Bindings, []Binding{{Resource: "pods", Events: []string{"add", "update", "delete"}}}) {
		t.Errorf("bindings = %+v", s.Bindings)
	}
}

func TestPaths(t *testing.T) {
	abs := filepath.Join(t.TempDir(), "p")
	c := &Config{File: filepath.Join("a", "config.yaml"), Plugins: Plugins{Directory: abs, CompilationCache: "cache"}}
	if c.PluginDir() != abs {
		t.Errorf("absolute PluginDir = %q", c.PluginDir())
	}
	if d, err := c.CompilationCacheDir(); err != nil || d != filepath.Join("a", "cache") {
		t.Errorf("CompilationCacheDir = %q, %v", d, err)
	}
	if c.KubeconfigPath() != "" {
		t.Errorf("KubeconfigPath = %q", c.KubeconfigPath())
	}
	c.Kubeconfig = "kube.yaml"
	if c.KubeconfigPath() != filepath.Join("a", "kube.yaml") {
		t.Errorf("KubeconfigPath = %q", c.KubeconfigPath())
	}
}

func TestDurationEncoding(t *testing.T) {
	d := NewDuration(90 * time.Second)
	j, err := json.Marshal(struct{ D Duration }{d})
	if err != nil || string(j) != `{"D":"1m30s"}` {
		t.Fatalf("json = %s, %v", j, err)
	}
	var back struct{ D Duration }
	if err := json.Unmarshal(j, &back); err != nil || back.D != d {
		t.Errorf("json round trip = %+v, %v", back.D, err)
	}
	y, err := yaml.Marshal(struct {
		D Duration `yaml:"d"`
	}{d})
	if err != nil || string(y) != "d: 1m30s\n" {
		t.Errorf("yaml = %q, %v", y, err)
	}
}

// A syntax error names the line the problem is on, not the line where the
// construct around it starts (yaml.v3's own number, one or more lines
// early).
func TestSyntaxErrorLines(t *testing.T) {
	head := []string{"plugins:", "  default:", "    delivery:"} // lines 6-8
	cases := []struct {
		name  string
		lines []string // from line 9
		want  string
	}{
		{"tab", []string{"      mode: every", "\tbufferSize: 3"}, "config.yaml:10: syntax error: found a tab character that violates indentation"},
		{"bad indentation", []string{"      mode: every", "     bufferSize: 3"}, "config.yaml:10: syntax error: did not find expected key"},
		{"less indentation", []string{"      mode: every", "   bufferSize: 3"}, "config.yaml:10: syntax error: did not find expected key"},
		{"unclosed bracket", []string{"      mode: [every", "      bufferSize: 3"}, "config.yaml:9: syntax error: did not find expected ',' or ']'"},
		{"unclosed quote", []string{`      mode: "every`, "      bufferSize: 3"}, "config.yaml:9: syntax error: found unexpected end of stream"},
		{"tab at the start", []string{"\tmode: every"}, "config.yaml:9: syntax error: found character that cannot start any token"},
		{"second document broken", []string{"      mode: every", "---", "a: b", "c: d: e"}, "config.yaml:12: syntax error: mapping values are not allowed in this context"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse("config.yaml", []byte(withHead(append(head, tc.lines...)...)))
			if err == nil || err.Error() != tc.want {
				t.Errorf("got  %v\nwant %s", err, tc.want)
			}
		})
	}
}

// plugins.fetchTimeout is 1m when left out, what the file says
// otherwise, and 1m for a Config built in code.
func TestFetchTimeout(t *testing.T) {
	for in, want := range map[string]time.Duration{"": DefaultFetchTimeout, "plugins: {fetchTimeout: 5s}\n": 5 * time.Second} {
		c, err := Parse("", []byte("apiVersion: informer-host/v1\n"+in))
		if err != nil {
			t.Errorf("%q: %v", in, err)
			continue
		}
		if got := c.FetchTimeoutOrDefault(); got != want {
			t.Errorf("%q: fetch timeout %s, want %s", in, got, want)
		}
	}
	if got := (&Config{}).FetchTimeoutOrDefault(); got != DefaultFetchTimeout {
		t.Errorf("a Config built in code: %s", got)
	}
}

func TestModuleSize(t *testing.T) {
	for in, want := range map[string]int64{"128Mi": 128 << 20, "3000000": 3000000, "'2M'": 2000000, "1Gi": 1 << 30} {
		c, err := Parse("", []byte("apiVersion: informer-host/v1\nplugins: {maxModuleSize: "+in+"}\n"))
		if err != nil {
			t.Errorf("%s: %v", in, err)
			continue
		}
		if c.ModuleSizeLimit() != want {
			t.Errorf("%s: limit %d, want %d", in, c.ModuleSizeLimit(), want)
		}
	}
	if got := (&Config{}).ModuleSizeLimit(); got != int64(DefaultMaxModuleSize) {
		t.Errorf("a Config built in code: limit %d", got)
	}
	j, err := json.Marshal(struct{ S Size }{128 << 20})
	if err != nil || string(j) != `{"S":"128Mi"}` {
		t.Fatalf("json = %s, %v", j, err)
	}
	var back struct{ S Size }
	if err := json.Unmarshal(j, &back); err != nil || back.S != 128<<20 {
		t.Errorf("json round trip = %v, %v", back.S, err)
	}
}

func TestProblemFormat(t *testing.T) {
	errs := Errors{
		{File: "c.yaml", Line: 3, Message: "a"},
		{File: "c.yaml", Message: "b"},
		{Line: 4, Message: "c"},
		{Message: "d"},
	}
	if got, want := errs.Error(), "c.yaml:3: a\nc.yaml: b\nline 4: c\nd"; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
}

func TestLoad(t *testing.T) {
	if _, err := Load(filepath.Join(t.TempDir(), "missing.yaml")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("missing file: %v", err)
	}
	p := filepath.Join(t.TempDir(), "bad.yaml")
	if err := os.WriteFile(p, []byte("apiVersion: informer-host/v1\nbogus: 1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := Load(p)
	if err == nil || err.Error() != p+`:2: unknown top-level field "bogus"` {
		t.Errorf("Load = %v", err)
	}
}

func TestPodNamespace(t *testing.T) {
	f := filepath.Join(t.TempDir(), "namespace")
	if got := podNamespace(f); got != "default" {
		t.Errorf("no file: %q", got)
	}
	if err := os.WriteFile(f, []byte("demo\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if got := podNamespace(f); got != "demo" {
		t.Errorf("with file: %q", got)
	}
}

// The example shipped at the top of the repository must stay loadable,
// and say what its comments say.
func TestShippedConfig(t *testing.T) {
	c, err := Load(filepath.Join("..", "..", "config.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if got := c.PluginDir(); got != filepath.Join("..", "..", "build", "plugins") {
		t.Errorf("PluginDir = %q", got)
	}
	if _, ok := c.Resource("configmaps"); !ok {
		t.Error("no configmaps resource")
	}
	if pods, ok := c.Resource("pods"); !ok || pods.Kind != "Pod" {
		t.Errorf("pods = %+v", pods)
	}
	for file, want := range map[string]string{
		"pod-logger.wasm":  "pods",
		"pod-phases.wasm":  "pods",
		"counter-c.wasm":   "configmaps",
		"minimal-wat.wasm": "configmaps",
		"other.wasm":       "configmaps",
	} {
		s := c.SettingsFor(file)
		if len(s.Bindings) != 1 || s.Bindings[0].Resource != want {
			t.Errorf("%s bindings = %+v", file, s.Bindings)
		}
	}
	if s := c.SettingsFor("counter-c.wasm"); s.Delivery.Mode != DeliveryLatest {
		t.Errorf("counter-c mode = %q", s.Delivery.Mode)
	}
	if s := c.SettingsFor("minimal-wat.wasm"); !reflect.DeepEqual(s.Bindings[0].Events, []string{"add", "delete"}) {
		t.Errorf("minimal-wat events = %v", s.Bindings[0].Events)
	}
	if b, err := c.ConfigJSON("pod-phases.wasm"); err != nil || string(b) != `{"logEvery":1}` {
		t.Errorf("pod-phases config = %s, %v", b, err)
	}
	if c.Server.Address != ":9090" {
		t.Errorf("server.address = %q", c.Server.Address)
	}
}

// Binding filters are compiled at load: CEL's own message for a bad
// expression, and a refusal for one whose worst-case cost is too high, each
// at the line of the offending value.
func TestFilterProblems(t *testing.T) {
	cases := []struct {
		name string
		in   string
		want string
	}{
		{"syntax", withHead("plugins:", "  default:", "    bindings:", "    - resource: pods", "      filter: object.status.phase =="),
			"config.yaml:10: plugins.default.bindings[0].filter: ERROR: <input>:1:23: Syntax error"},
		{"undeclared variable", withHead("plugins:", "  default:", "    bindings:", "    - resource: pods", "      filter: pod.status.phase == 'x'"),
			"config.yaml:10: plugins.default.bindings[0].filter: ERROR: <input>:1:1: undeclared reference to 'pod'"},
		{"not a bool", withHead("plugins:", "  default:", "    bindings:", "    - resource: pods", "      filter: object.metadata.name"),
			"config.yaml:10: plugins.default.bindings[0].filter: the expression must evaluate to bool"},
		{"too expensive", withHead("plugins:", "  default:", "    bindings:", "    - resource: pods",
			"      filter: object.spec.containers.all(c, object.spec.containers.all(d, object.spec.containers.all(e, c.name != d.name)))"),
			"config.yaml:10: plugins.default.bindings[0].filter: the expression's estimated worst-case cost"},
		{"bad changed path", withHead("plugins:", "  modules:", "  - file: a.wasm", "    bindings:", "    - resource: pods",
			"      changed: [status.phase, 'metadata.labels[']"),
			"config.yaml:11: plugins.modules[0].bindings[0].changed[1]: invalid field path \"metadata.labels[\": unterminated '['"},
		{"single-quoted key in changed", withHead("plugins:", "  modules:", "  - file: a.wasm", "    bindings:", "    - resource: pods",
			`      changed: ["metadata.labels['app']"]`),
			"config.yaml:11: plugins.modules[0].bindings[0].changed[0]: invalid field path \"metadata.labels['app']\": expected an index or a quoted key after '[' at byte 16; single quotes are not path syntax"},
		{"bad onFilterError", withHead("plugins:", "  default:", "    bindings:", "    - resource: pods", "      onFilterError: maybe"),
			`config.yaml:10: plugins.default.bindings[0].onFilterError: must be "open" or "closed", not "maybe"`},
		{"generationChanged without updates", withHead("plugins:", "  default:", "    bindings:", "    - resource: pods", "      events: [add, delete]",
			"      generationChanged: true"),
			`config.yaml:11: plugins.default.bindings[0].generationChanged: drops update events, but this binding asks for none (events: add, delete)`},
		{"generationChanged with resyncs", withHead("plugins:", "  default:", "    bindings:", "    - resource: pods", "      resyncs: true",
			"      generationChanged: true"),
			`config.yaml:11: plugins.default.bindings[0].generationChanged: drops every update that leaves metadata.generation as it was, resyncs included`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse("config.yaml", []byte(tc.in))
			if err == nil {
				t.Fatal("no error")
			}
			if !containsLinePrefix(err.Error(), tc.want) {
				t.Errorf("missing problem\n  want: %s\n  got:\n%s", tc.want, indent(err.Error()))
			}
		})
	}
	ok := withHead("plugins:", "  default:", "    bindings:", "    - resource: pods",
		`      filter: 'object.metadata.?labels.?tier.orValue("") == "web"'`, "      changed: [status.phase]", "      resyncs: true")
	c, err := Parse("config.yaml", []byte(ok))
	if err != nil {
		t.Fatalf("valid filter refused: %v", err)
	}
	if b := c.SettingsFor("x.wasm").Bindings[0]; b.Filter == "" || len(b.Changed) != 1 || !b.Resyncs {
		t.Errorf("filter fields lost: %+v", b)
	}
	c, err = Parse("config.yaml", []byte(withHead("plugins:", "  default:", "    bindings: [{resource: pods, generationChanged: true}]")))
	if err != nil {
		t.Fatalf("generationChanged refused: %v", err)
	}
	if b := c.SettingsFor("x.wasm").Bindings[0]; !b.FilterSpec().GenerationChanged {
		t.Errorf("generationChanged lost: %+v", b)
	}
}

// The call bounds besides callTimeout: absent they stay zero (the
// engine's defaults, which follow callTimeout), a module inherits them
// from plugins.default like any limit, and values that would defeat them
// are refused.
func TestCallBoundLimits(t *testing.T) {
	c, err := Parse("", []byte(withHead("plugins:",
		"  default:",
		"    limits: {maxCallTime: 20s, maxHostCallsPerCall: 500}",
		"  modules:",
		"  - file: a.wasm",
		"  - file: b.wasm",
		"    limits: {maxHostCallsPerCall: 7}",
	)))
	if err != nil {
		t.Fatal(err)
	}
	for file, want := range map[string]Limits{
		"a.wasm": {MaxCallTime: NewDuration(20 * time.Second), MaxHostCallsPerCall: 500},
		"b.wasm": {MaxCallTime: NewDuration(20 * time.Second), MaxHostCallsPerCall: 7},
	} {
		if got := c.SettingsFor(file).Limits; got.MaxCallTime != want.MaxCallTime || got.MaxHostCallsPerCall != want.MaxHostCallsPerCall {
			t.Errorf("%s: maxCallTime %+v maxHostCallsPerCall %d, want %+v %d", file, got.MaxCallTime, got.MaxHostCallsPerCall, want.MaxCallTime, want.MaxHostCallsPerCall)
		}
	}
	bare, err := Parse("", []byte(withHead()))
	if err != nil {
		t.Fatal(err)
	}
	if l := bare.SettingsFor("x.wasm").Limits; l.MaxCallTime.Duration != 0 || l.MaxHostCallsPerCall != 0 {
		t.Errorf("absent: %+v, want zeros (the engine's defaults)", l)
	}

	for _, tc := range []struct{ limits, problem string }{
		{"{maxCallTime: 0s}", "limits.maxCallTime: must be greater than 0"},
		{"{maxCallTime: -1s}", "limits.maxCallTime: must not be negative"},
		{"{callTimeout: 2s, maxCallTime: 1s}", "limits.maxCallTime: 1s is below callTimeout (2s)"},
		{"{maxHostCallsPerCall: 0}", "limits.maxHostCallsPerCall: 0 is out of range"},
	} {
		_, err := Parse("", []byte(withHead("plugins:", "  default:", "    limits: "+tc.limits)))
		if err == nil || !strings.Contains(err.Error(), tc.problem) {
			t.Errorf("limits %s: %v, want a problem %q", tc.limits, err, tc.problem)
		}
	}
}

// Giving up on an object is an explicit opt-in: an unset maxRetries
// never gives up, whatever level sets it.
func TestMaxRetriesOptIn(t *testing.T) {
	for _, tc := range []struct {
		name, yaml string
		want       int
	}{
		{"unset", "", UnlimitedRetries},
		{"explicit zero", "    delivery: {maxRetries: 0}", 0},
		{"explicit", "    delivery: {maxRetries: 7}", 7},
		{"explicit unlimited", "    delivery: {maxRetries: -1}", UnlimitedRetries},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Parse("config.yaml", []byte(withHead("plugins:", "  default:", "    bindings: [{resource: pods}]", tc.yaml)))
			if err != nil {
				t.Fatal(err)
			}
			s := c.SettingsFor("a.wasm")
			if s.Delivery.MaxRetries != tc.want || s.Delivery.OnError != OnErrorRetry || s.Limits.ParkAfter != DefaultParkAfter {
				t.Errorf("delivery = %+v, limits = %+v; want maxRetries %d, onError retry, parkAfter %d", s.Delivery, s.Limits, tc.want, DefaultParkAfter)
			}
		})
	}
}
