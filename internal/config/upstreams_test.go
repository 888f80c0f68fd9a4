package config

import (
	"encoding/json"
	"strings"
	"testing"
)

// upstreamHead is withHead plus one valid upstream "hook" at lines 6-8.
func upstreamHead(lines ...string) string {
	return withHead(append([]string{
		"upstreams:",                             // 6
		"- name: hook",                           // 7
		"  url: https://hooks.example.com/base/", // 8
	}, lines...)...)
}

func TestUpstreamProblems(t *testing.T) {
	for _, tc := range []struct {
		name  string
		lines []string
		want  string
	}{
		{"duplicate name", []string{"- name: hook", "  url: http://b"},
			`config.yaml:9: upstreams[1].name: duplicate upstream "hook" (first at line 7)`},
		{"missing url", []string{"- name: b"}, `config.yaml:9: upstreams[1].url: required`},
		{"not http", []string{"- name: b", "  url: ftp://x/"}, `config.yaml:10: upstreams[1].url: "ftp://x/": the scheme must be http or https`},
		{"credentials in url", []string{"- name: b", "  url: https://u:secret@x/"},
			`config.yaml:10: upstreams[1].url: "https://u:xxxxx@x/" carries credentials`},
		{"unknown method", []string{"  methods: [POST, FETCH]"}, `config.yaml:9: upstreams[0].methods[1]: unknown method "FETCH"`},
		{"header without value", []string{"  headers:", "  - name: Authorization"},
			`config.yaml:10: upstreams[0].headers[0]: header "Authorization" needs exactly one of value, valueFromEnv and valueFromFile (it has 0)`},
		{"header with two values", []string{"  headers:", "  - {name: X-Token, value: s3cret, valueFromEnv: TOKEN}"},
			`config.yaml:10: upstreams[0].headers[0]: header "X-Token" needs exactly one of value, valueFromEnv and valueFromFile (it has 2)`},
		{"bad header name", []string{"  headers:", "  - {name: 'a b', value: x}"}, `config.yaml:10: upstreams[0].headers[0].name: "a b" is not a valid HTTP header name`},
		{"timeout out of range", []string{"  timeout: 1h"}, `config.yaml:9: upstreams[0].timeout: 1h0m0s is out of range`},
		{"size out of range", []string{"  maxResponseBytes: 1Gi"}, `config.yaml:9: upstreams[0].maxResponseBytes: 1Gi is out of range`},
		{"missing CA file", []string{"  tls: {caFile: nope.pem}"}, `config.yaml:9: upstreams[0].tls.caFile: cannot read nope.pem`},
		{"grant names an unknown upstream", []string{"plugins:", "  modules:", "  - file: a.wasm", "    grants: {http: {upstreams: [hook, slack]}}"},
			`config.yaml:12: plugins.modules[0].grants.http.upstreams[1]: unknown upstream "slack" (configured: hook)`},
		{"grant without upstreams", []string{"plugins:", "  default:", "    grants: {http: {concurrency: 2}}"},
			`config.yaml:11: plugins.default.grants.http.upstreams: required`},
		{"concurrency out of range", []string{"plugins:", "  default:", "    grants: {http: {upstreams: [hook], concurrency: 0}}"},
			`config.yaml:11: plugins.default.grants.http.concurrency: 0 is out of range`},
	} {
		t.Run(tc.name, func(t *testing.T) { oneProblem(t, upstreamHead(tc.lines...), tc.want) })
	}
}

// TestUpstreamSecretsNotShown: a header value given in the file is a
// secret: neither an error nor the JSON dump (/debug/plugins, config
// dumps) carries it.
func TestUpstreamSecretsNotShown(t *testing.T) {
	_, err := Parse("config.yaml", []byte(upstreamHead("  headers:", "  - {name: X-Token, value: s3cret, valueFromFile: f}")))
	if err == nil || strings.Contains(err.Error(), "s3cret") {
		t.Fatalf("want an error without the value, got %v", err)
	}
	c, err := Parse("config.yaml", []byte(upstreamHead("  headers:", "  - {name: X-Token, value: s3cret}")))
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(b), "s3cret") {
		t.Fatalf("the config's JSON shows a header value: %s", b)
	}
}

func TestUpstreamDefaults(t *testing.T) {
	c, err := Parse("config.yaml", []byte(upstreamHead()))
	if err != nil {
		t.Fatal(err)
	}
	u, ok := c.Upstream("hook")
	if !ok {
		t.Fatal("no upstream hook")
	}
	req, resp := u.Limits()
	if u.EffectiveTimeout() != DefaultUpstreamTimeout || req != int64(DefaultUpstreamMaxRequestBytes) || resp != int64(DefaultUpstreamMaxResponseBytes) {
		t.Errorf("defaults: timeout %s, limits %d %d", u.EffectiveTimeout(), req, resp)
	}
	if !u.Allows("POST") || u.Allows("GET") {
		t.Error("an upstream without methods allows POST only")
	}
}

// TestOutboundGrantsMerge: events and http grants merge over
// plugins.default like state: a module's mapping replaces the default's,
// a module that says nothing inherits it.
func TestOutboundGrantsMerge(t *testing.T) {
	c, err := Parse("config.yaml", []byte(upstreamHead(
		"- name: other",        // 9
		"  url: http://other/", // 10
		"plugins:",
		"  default:",
		"    grants: {events: {}, http: {upstreams: [hook], concurrency: 2}}",
		"  modules:",
		"  - file: a.wasm",
		"    grants: {http: {upstreams: [other]}}",
		"  - file: b.wasm",
	)))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		file        string
		upstreams   string
		concurrency int
	}{{"a.wasm", "other", DefaultHTTPConcurrency}, {"b.wasm", "hook", 2}, {"x.wasm", "hook", 2}} {
		g := c.SettingsFor(tc.file).Grants
		if g.Events == nil {
			t.Errorf("%s: events grant not inherited", tc.file)
		}
		if g.HTTP == nil {
			t.Fatalf("%s: no http grant", tc.file)
		}
		if got := strings.Join(g.HTTP.Upstreams, ","); got != tc.upstreams || g.HTTP.EffectiveConcurrency() != tc.concurrency {
			t.Errorf("%s: upstreams %s concurrency %d, want %s %d", tc.file, got, g.HTTP.EffectiveConcurrency(), tc.upstreams, tc.concurrency)
		}
		if got := strings.Join(g.Granted(), ","); got != "events,http" {
			t.Errorf("%s: granted %s", tc.file, got)
		}
	}
}

// oneProblem parses text and wants exactly one problem, starting with want.
func oneProblem(t *testing.T, text, want string) {
	t.Helper()
	_, err := Parse("config.yaml", []byte(text))
	switch {
	case err == nil:
		t.Fatal("no error")
	case !containsLinePrefix(err.Error(), want):
		t.Errorf("want %s\ngot:\n%s", want, indent(err.Error()))
	case strings.Count(err.Error(), "\n") != 0:
		t.Errorf("want one problem:\n%s", indent(err.Error()))
	}
}
