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

// An https:// source's user info and query (credentials, a pre-signed
// signature) appear in none of the config's messages about it: the
// warning for a directory file it shadows (logged by the host) and the
// refusal of a URL that does not parse (validate, a reload's log line).
func TestSourceSecretsStayOutOfMessages(t *testing.T) {
	const secrets = "hunter2|SECRETSIG"
	leaks := func(s string) bool { return strings.Contains(s, "hunter2") || strings.Contains(s, "SECRETSIG") }
	dir := t.TempDir()
	shadowing := withHead(
		"plugins:",
		"  sourceCache: cache",
		"  modules:",
		"  - file: https.wasm",
		"    source: https://user:hunter2@example.com/x.wasm?X-Amz-Signature=SECRETSIG",
		"    sha256: sha256:"+strings.Repeat("cd", 32),
	)
	c, err := Parse(filepath.Join(dir, "config.yaml"), []byte(shadowing))
	if err != nil {
		t.Fatal(err)
	}
	problems := c.ShadowedFiles(dir, []string{"https.wasm"})
	if len(problems) != 1 {
		t.Fatalf("ShadowedFiles: %v, want one warning", problems)
	}
	if msg := problems[0].String(); leaks(msg) || !strings.Contains(msg, "https://example.com/x.wasm?REDACTED") {
		t.Errorf("the shadowed-file warning shows the source as %q; want it without %s", msg, secrets)
	}
	for _, source := range []string{
		"https://user:hunter2%zz@example.com/x.wasm?X-Amz-Signature=SECRETSIG",
		"http://user:hunter2@example.com/x.wasm?X-Amz-Signature=SECRETSIG",
	} {
		in := withHead(
			"plugins:",
			"  sourceCache: cache",
			"  modules:",
			"  - file: https.wasm",
			"    source: "+source,
			"    sha256: sha256:"+strings.Repeat("cd", 32),
		)
		_, err := Parse(filepath.Join(dir, "config.yaml"), []byte(in))
		if err == nil {
			t.Fatalf("%s: accepted", source)
		}
		if leaks(err.Error()) {
			t.Errorf("the refusal of %s shows its secrets: %v", source, err)
		}
	}
}
