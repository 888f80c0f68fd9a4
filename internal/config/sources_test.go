package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// A sourced module gets its pull policy and refresh from what its source
// names (a tag moves, a digest does not), inherits plugins.default's
// verify, and is not looked for in the plugin directory.
func TestSourceDefaults(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "key.pem"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "local.wasm"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "trusted_root.json"), []byte("{}"), 0o600); err != nil {
		t.Fatal(err)
	}
	digest := "sha256:" + strings.Repeat("ab", 32)
	in := withHead(
		"plugins:",
		"  sourceCache: cache",
		"  registries:",
		"    localhost:5000: {insecure: true, mirrors: [mirror.example.com]}",
		"  default:",
		"    verify: {required: true, keys: [key.pem]}",
		"  modules:",
		"  - file: tag.wasm",
		"    source: oci://localhost:5000/org/tag:v1",
		"  - file: digest.wasm",
		"    source: oci://ghcr.io/org/digest@"+digest,
		"    failurePolicy: fail-open",
		"    verify: {identities: [{issuer: https://issuer.example.com, subject: me@example.com}], trustedRoot: trusted_root.json}",
		"  - file: https.wasm",
		"    source: https://example.com/x.wasm",
		"    sha256: "+strings.Repeat("CD", 32),
		"  - file: local.wasm",
		"    source: file://local.wasm",
		"    refreshInterval: 2s",
		"  - file: dir.wasm",
	)
	c, err := Parse(filepath.Join(dir, "config.yaml"), []byte(in))
	if err != nil {
		t.Fatal(err)
	}
	mod := func(f string) *Module {
		m, ok := c.Module(f)
		if !ok {
			t.Fatalf("no module %s", f)
		}
		return m
	}
	if m := mod("tag.wasm"); m.PullPolicy != PullAlways || m.RefreshInterval.Duration != DefaultRefreshInterval || m.FailurePolicy != FailClosed ||
		m.Verify == nil || !m.Verify.Required || m.Verify.Keys[0] != "key.pem" {
		t.Errorf("tag.wasm = %+v verify %+v", m, m.Verify)
	}
	if m := mod("digest.wasm"); m.PullPolicy != PullIfNotPresent || m.RefreshInterval.Duration != 0 || m.FailurePolicy != FailOpen ||
		m.Verify == nil || m.Verify.Required || len(m.Verify.Identities) != 1 {
		t.Errorf("digest.wasm = %+v verify %+v", m, m.Verify)
	}
	if m := mod("https.wasm"); m.PullPolicy != PullIfNotPresent || m.SHA256 != "sha256:"+strings.Repeat("cd", 32) {
		t.Errorf("https.wasm = %+v", m)
	}
	if m := mod("local.wasm"); m.PullPolicy != PullAlways || m.RefreshInterval.Duration != 2*time.Second {
		t.Errorf("local.wasm = %+v", m)
	}
	ref, ok := c.SourceRef(mod("local.wasm"))
	if !ok || ref.Path != filepath.Join(dir, "local.wasm") {
		t.Errorf("local.wasm ref = %+v, %v", ref, ok)
	}
	ref, _ = c.SourceRef(mod("tag.wasm"))
	if ref.Registry != "localhost:5000" || ref.Repository != "org/tag" || ref.Tag != "v1" || ref.Repo() != "localhost:5000/org/tag" {
		t.Errorf("tag.wasm ref = %+v", ref)
	}
	if !c.IsSourced("tag.wasm") || c.IsSourced("dir.wasm") || c.IsSourced("other.wasm") {
		t.Error("IsSourced")
	}
	if n := len(c.Sourced()); n != 4 {
		t.Errorf("%d sourced modules, want 4", n)
	}
	if d, err := c.SourceCacheDir(); err != nil || d != filepath.Join(dir, "cache") {
		t.Errorf("SourceCacheDir = %q, %v", d, err)
	}
	// A directory module still gets plugins.default's verify (it has no
	// effect there), and only it is looked for in the directory.
	un := c.UnmatchedModules(dir, []string{"local.wasm"})
	if len(un) != 1 || !strings.Contains(un[0].Message, `"dir.wasm"`) {
		t.Errorf("UnmatchedModules = %v", un)
	}
	sh := c.ShadowedFiles(dir, []string{"local.wasm", "dir.wasm"})
	if len(sh) != 1 || sh[0].Line != 22 || !strings.Contains(sh[0].Message, "local.wasm is ignored") {
		t.Errorf("ShadowedFiles = %v", sh)
	}
}
