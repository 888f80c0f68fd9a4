package config

import (
	"path/filepath"
	"strings"
	"testing"
)

// A configmap:// source names a namespace, a ConfigMap and a key, each
// checked as the apiserver would; what is wrong is named.
func TestParseConfigMapSource(t *testing.T) {
	cases := []struct {
		raw                  string
		namespace, name, key string
		err                  string
	}{
		{raw: "configmap://team-a/labeler/labeler.wasm", namespace: "team-a", name: "labeler", key: "labeler.wasm"},
		{raw: "configmap://kube-system/plugins.v2/a_b-c.wasm", namespace: "kube-system", name: "plugins.v2", key: "a_b-c.wasm"},
		{raw: "configmap://team-a/labeler", err: "configmap://<namespace>/<name>/<key>"},
		{raw: "configmap://team-a/labeler/", err: "configmap://<namespace>/<name>/<key>"},
		{raw: "configmap:///labeler/x.wasm", err: "configmap://<namespace>/<name>/<key>"},
		{raw: "configmap://team-a/labeler/dir/x.wasm", err: "configmap://<namespace>/<name>/<key>"},
		{raw: "configmap://Team_A/labeler/x.wasm", err: `namespace "Team_A" is not valid`},
		{raw: "configmap://team-a/Labeler/x.wasm", err: `ConfigMap name "Labeler" is not valid`},
		{raw: "configmap://team-a/labeler/x:wasm", err: `key "x:wasm" is not valid`},
	}
	for _, tc := range cases {
		t.Run(tc.raw, func(t *testing.T) {
			ref, err := ParseSource(tc.raw, "/etc")
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) || !strings.Contains(err.Error(), tc.raw) {
					t.Fatalf("ParseSource = %+v, %v; want an error naming the source and %q", ref, err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if ref.Scheme != SchemeConfigMap || ref.Namespace != tc.namespace || ref.Name != tc.name || ref.Key != tc.key || ref.Repo() != tc.raw {
				t.Errorf("ParseSource = %+v", ref)
			}
			if RedactSource(tc.raw) != tc.raw {
				t.Errorf("RedactSource changed %q to %q", tc.raw, RedactSource(tc.raw))
			}
		})
	}
}

// A ConfigMap is edited in place like a file: unpinned it is followed
// (Always, every 30s); a sha256 pins it; a bad one is reported at its
// line.
func TestConfigMapSourceModule(t *testing.T) {
	dir := t.TempDir()
	in := withHead(
		"plugins:",
		"  sourceCache: cache",
		"  modules:",
		"  - file: moving.wasm",
		"    source: configmap://team-a/labeler/labeler.wasm",
		"  - file: pinned.wasm",
		"    source: configmap://team-a/labeler/labeler.wasm",
		"    sha256: sha256:"+strings.Repeat("ab", 32),
	)
	c, err := Parse(filepath.Join(dir, "config.yaml"), []byte(in))
	if err != nil {
		t.Fatal(err)
	}
	m, _ := c.Module("moving.wasm")
	if m.PullPolicy != PullAlways || m.RefreshInterval.Duration != DefaultConfigMapRefreshInterval || m.Pinned() {
		t.Errorf("moving.wasm = pullPolicy %s refresh %s pinned %v; want Always, %s, unpinned", m.PullPolicy, m.RefreshInterval.Duration, m.Pinned(), DefaultConfigMapRefreshInterval)
	}
	m, _ = c.Module("pinned.wasm")
	if m.PullPolicy != PullIfNotPresent || m.RefreshInterval.Duration != 0 || !m.Pinned() {
		t.Errorf("pinned.wasm = pullPolicy %s refresh %s pinned %v", m.PullPolicy, m.RefreshInterval.Duration, m.Pinned())
	}
	bad := withHead(
		"plugins:",
		"  sourceCache: cache",
		"  modules:",
		"  - file: bad.wasm",
		"    source: configmap://team-a/labeler",
	)
	_, err = Parse(filepath.Join(dir, "config.yaml"), []byte(bad))
	if err == nil || !strings.Contains(err.Error(), "config.yaml:10: plugins.modules[0].source:") || !strings.Contains(err.Error(), "configmap://<namespace>/<name>/<key>") {
		t.Errorf("Parse = %v; want the source's line and the form to write", err)
	}
}
