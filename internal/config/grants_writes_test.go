package config

import (
	"errors"
	"slices"
	"testing"
	"time"
)

func TestWritesGrantProblems(t *testing.T) {
	mod := func(lines ...string) string {
		return withHead(append([]string{"plugins:", "  modules:", "  - file: a.wasm", "    grants:"}, lines...)...)
	}
	cases := []struct {
		name string
		in   string
		want string
	}{
		{"no resources", mod("      writes: {qps: 1}"),
			`config.yaml:10: plugins.modules[0].grants.writes.resources: required: the resources the plugin may write`},
		{"unconfigured name", mod("      writes:", "        resources: [{resource: secrets, verbs: [patch]}]"),
			`config.yaml:11: plugins.modules[0].grants.writes.resources[0].resource: write grant names resource "secrets", which is neither a configured resource (configured: pods) nor "group/version/resource"`},
		{"malformed gvr", mod("      writes:", "        resources: [{resource: Apps/v1/deployments, verbs: [patch]}]"),
			`config.yaml:11: plugins.modules[0].grants.writes.resources[0].resource: "Apps/v1/deployments" is not "group/version/resource"`},
		{"too many slashes", mod("      writes:", "        resources: [{resource: a/b/c/d, verbs: [patch]}]"),
			`config.yaml:11: plugins.modules[0].grants.writes.resources[0].resource: "a/b/c/d" is not`},
		{"no verbs", mod("      writes:", "        resources: [{resource: pods}]"),
			`config.yaml:11: plugins.modules[0].grants.writes.resources[0].verbs: required: the verbs the plugin may use (create, patch, apply, delete)`},
		{"unknown verb", mod("      writes:", "        resources:", "        - resource: pods", "          verbs: [apply, update]"),
			`config.yaml:13: plugins.modules[0].grants.writes.resources[0].verbs[1]: unknown verb "update"; known: create, patch, apply, delete`},
		{"duplicate verb", mod("      writes:", "        resources:", "        - resource: pods", "          verbs: [apply, apply]"),
			`config.yaml:13: plugins.modules[0].grants.writes.resources[0].verbs[1]: duplicate "apply"`},
		{"duplicate resource", mod("      writes:", "        resources:", "        - {resource: pods, verbs: [apply]}", "        - {resource: pods, verbs: [patch]}"),
			`config.yaml:13: plugins.modules[0].grants.writes.resources[1].resource: duplicate write grant for resource "pods" (first at line 12)`},
		{"bad namespace", mod("      writes:", "        resources:", "        - {resource: v1/configmaps, verbs: [patch], namespaces: [Team_A]}"),
			`config.yaml:12: plugins.modules[0].grants.writes.resources[0].namespaces[0]: "Team_A" is not a namespace name`},
		{"bad subresource", mod("      writes:", "        resources:", "        - {resource: pods, verbs: [patch], subresources: [Status]}"),
			`config.yaml:12: plugins.modules[0].grants.writes.resources[0].subresources[0]: "Status" is not a subresource name`},
		{"qps zero", mod("      writes:", "        resources: [{resource: pods, verbs: [apply]}]", "        qps: 0"),
			`config.yaml:12: plugins.modules[0].grants.writes.qps: 0 is out of range; use a rate above 0 and at most 1000 requests a second (default 5)`},
		{"burst too big", mod("      writes:", "        resources: [{resource: pods, verbs: [apply]}]", "        burst: 100000"),
			`config.yaml:12: plugins.modules[0].grants.writes.burst: 100000 is out of range; must be between 1 and 10000`},
		{"timeout too long", mod("      writes:", "        resources: [{resource: pods, verbs: [apply]}]", "        timeout: 1h"),
			`config.yaml:12: plugins.modules[0].grants.writes.timeout: 1h0m0s is out of range; use a duration from 1ms to 5m0s (default 10s)`},
		{"impersonate not ns/name", mod("      impersonate: {serviceAccount: sa-a}"),
			`config.yaml:10: plugins.modules[0].grants.impersonate.serviceAccount: "sa-a" is not "namespace/name"`},
		{"impersonate bad namespace", mod("      impersonate: {serviceAccount: Team/sa-a}"),
			`config.yaml:10: plugins.modules[0].grants.impersonate.serviceAccount: "Team" is not a namespace name`},
		{"impersonate empty", mod("      impersonate: {}"),
			`config.yaml:10: plugins.modules[0].grants.impersonate.serviceAccount: required: the ServiceAccount the plugin acts as`},
		{"dropSelfNoop without updates", withHead("plugins:", "  modules:", "  - file: a.wasm",
			"    bindings: [{resource: pods, events: [add], dropSelfNoop: true}]"),
			`config.yaml:9: plugins.modules[0].bindings[0].dropSelfNoop: drops update events, but this binding asks for none (events: add)`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) { wantProblem(t, tc.in, tc.want) })
	}
}

// wantProblem parses in and fails unless one line of the error starts
// with want.
func wantProblem(t *testing.T, in, want string) {
	t.Helper()
	_, err := Parse("config.yaml", []byte(in))
	var errs Errors
	if !errors.As(err, &errs) {
		t.Fatalf("Parse: %v, want Errors", err)
	}
	if !containsLinePrefix(err.Error(), want) {
		t.Fatalf("got\n%s\nwant a line starting with\n%s", indent(err.Error()), want)
	}
}

func TestWritesGrantMerge(t *testing.T) {
	c, err := Parse("config.yaml", []byte(withHead(
		"plugins:",
		"  default:",
		"    grants:",
		"      writes:",
		"        resources: [{resource: pods, verbs: [apply]}]",
		"      impersonate: {serviceAccount: ops/default-sa}",
		"      dryRun: true",
		"  modules:",
		"  - file: own.wasm", // replaces each of the three as a whole
		"    grants:",
		"      writes:",
		"        resources: [{resource: v1/configmaps, verbs: [create, delete], namespaces: [a]}]",
		"        qps: 20",
		"        burst: 40",
		"        timeout: 3s",
		"      impersonate: {serviceAccount: a/sa-a}",
		"      dryRun: false",
		"  - file: inherits.wasm",
		"    limits: {memoryPages: 10}",
		"  - file: keeps.wasm",
		"    grants:",
		"      cache: [{resource: pods}]",
		"    bindings: [{resource: pods, dropSelfNoop: true}]",
	)))
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		file     string
		resource string
		verbs    []string
		sa       string
		dryRun   bool
		qps      float64
		burst    int
		timeout  time.Duration
	}{
		{"own.wasm", "v1/configmaps", []string{VerbCreate, VerbDelete}, "a/sa-a", false, 20, 40, 3 * time.Second},
		{"inherits.wasm", "pods", []string{VerbApply}, "ops/default-sa", true, DefaultWritesQPS, DefaultWritesBurst, DefaultWritesTimeout},
		{"keeps.wasm", "pods", []string{VerbApply}, "ops/default-sa", true, DefaultWritesQPS, DefaultWritesBurst, DefaultWritesTimeout},
		{"unnamed.wasm", "pods", []string{VerbApply}, "ops/default-sa", true, DefaultWritesQPS, DefaultWritesBurst, DefaultWritesTimeout},
	}
	for _, tc := range cases {
		g := c.SettingsFor(tc.file).Grants
		if g.Writes == nil || len(g.Writes.Resources) != 1 {
			t.Fatalf("%s: writes %+v", tc.file, g.Writes)
		}
		w := g.Writes.Resources[0]
		if w.Resource != tc.resource || !slices.Equal(w.Verbs, tc.verbs) {
			t.Errorf("%s: grant %+v", tc.file, w)
		}
		if g.Impersonate == nil || g.Impersonate.ServiceAccount != tc.sa {
			t.Errorf("%s: impersonate %+v", tc.file, g.Impersonate)
		}
		if g.DryRunOn() != tc.dryRun {
			t.Errorf("%s: dryRun %v", tc.file, g.DryRunOn())
		}
		if q, b, to := g.Writes.Limits(); q != tc.qps || b != tc.burst || to != tc.timeout {
			t.Errorf("%s: limits %g %d %s", tc.file, q, b, to)
		}
		if !slices.Contains(g.Granted(), CapabilityWrites) {
			t.Errorf("%s: Granted %v lacks writes", tc.file, g.Granted())
		}
	}
	// SettingsFor hands out copies.
	c.SettingsFor("own.wasm").Grants.Writes.Resources[0].Verbs[0] = "x"
	if c.SettingsFor("own.wasm").Grants.Writes.Resources[0].Verbs[0] != VerbCreate {
		t.Error("SettingsFor shares the grant's slices with the Config")
	}
	if !c.SettingsFor("keeps.wasm").Bindings[0].DropSelfNoop {
		t.Error("dropSelfNoop lost")
	}
	if u := (Impersonation{ServiceAccount: "a/sa-a"}).ServiceAccountUser(); u != "system:serviceaccount:a:sa-a" {
		t.Error(u)
	}
}

func TestParseGVR(t *testing.T) {
	for in, ok := range map[string]bool{
		"v1/configmaps": true, "apps/v1/deployments": true, "x.example.com/v1alpha1/widgets": true,
		"configmaps": false, "/v1/x": false, "V1/pods": false, "a/b/c/d": false, "apps//deployments": false,
	} {
		if _, got := ParseGVR(in); got != ok {
			t.Errorf("ParseGVR(%q) = %v, want %v", in, got, ok)
		}
	}
}
