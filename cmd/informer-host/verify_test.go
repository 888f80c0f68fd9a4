package main

import (
	"bytes"
	"context"
	"crypto/elliptic"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/sigstore/sigstore/pkg/cryptoutils"

	"github.com/informer-host/informer-host/internal/ociartifact/registrytest"
)

// sign then verify through the command line against go-containerregistry's
// registry on loopback: by tag (resolved to the digest) and by digest,
// the right key passing, another key and an unsigned artifact refused
// with exit 1.
func TestSignAndVerifyCommands(t *testing.T) {
	ctx := context.Background()
	srv := httptest.NewServer(registry.New(registry.WithReferrersSupport(true), registry.Logger(log.New(io.Discard, "", 0))))
	defer srv.Close()
	host := strings.TrimPrefix(srv.URL, "http://")
	push := func(tag string) string {
		img, err := random.Image(256, 1)
		if err != nil {
			t.Fatal(err)
		}
		ref, err := name.ParseReference(host + "/plugins/logger:" + tag)
		if err != nil {
			t.Fatal(err)
		}
		if err := remote.Write(ref, img); err != nil {
			t.Fatal(err)
		}
		d, _ := img.Digest()
		return d.String()
	}
	digest := push("v1")
	push("unsigned")

	dir := t.TempDir()
	priv, pub := writeKeyPair(t, dir, "cosign")
	_, otherPub := writeKeyPair(t, dir, "other")

	run := func(args ...string) (int, string, string) {
		var stdout, stderr bytes.Buffer
		code := Main(ctx, args, &stdout, &stderr)
		return code, stdout.String(), stderr.String()
	}
	if code, out, errOut := run("sign", "oci://"+host+"/plugins/logger:v1", "--key", priv, "--insecure"); code != 0 || !strings.Contains(out, "signed") {
		t.Fatalf("sign: exit %d\n%s%s", code, out, errOut)
	}
	for _, ref := range []string{"oci://" + host + "/plugins/logger:v1", "oci://" + host + "/plugins/logger@" + digest} {
		code, out, errOut := run("verify", ref, "--key", pub, "--insecure")
		if code != 0 || !strings.Contains(out, "verified, signed by key "+pub) {
			t.Fatalf("verify %s: exit %d\n%s%s", ref, code, out, errOut)
		}
	}
	if code, out, _ := run("verify", "--insecure", "--key", otherPub, "oci://"+host+"/plugins/logger:v1"); code != 1 || !strings.Contains(out, "wrong key") {
		t.Fatalf("verify with another key: exit %d, want 1 saying wrong key\n%s", code, out)
	}
	if code, out, _ := run("verify", "oci://"+host+"/plugins/logger:unsigned", "--key", pub, "--insecure"); code != 1 || !strings.Contains(out, "unsigned") {
		t.Fatalf("verify unsigned: exit %d, want 1 saying unsigned\n%s", code, out)
	}
	if code, _, errOut := run("verify", "oci://"+host+"/plugins/logger:v1"); code != 2 || !strings.Contains(errOut, "nothing to verify with") {
		t.Fatalf("verify without key or identity: exit %d, want 2\n%s", code, errOut)
	}
	if code, _, errOut := run("verify", "oci://"+host+"/plugins/logger:v1", "--identity", "no-equals-sign", "--trusted-root", "x"); code != 2 || !strings.Contains(errOut, "ISSUER=SUBJECT") {
		t.Fatalf("verify with a bad --identity: exit %d, want 2\n%s", code, errOut)
	}
}

// writeKeyPair writes a new ECDSA key pair as dir/base.key (PEM, no
// password) and dir/base.pub and returns their paths.
func writeKeyPair(t *testing.T, dir, base string) (privFile, pubFile string) {
	t.Helper()
	priv, pub, err := cryptoutils.GeneratePEMEncodedECDSAKeyPair(elliptic.P256(), nil)
	if err != nil {
		t.Fatal(err)
	}
	privFile, pubFile = filepath.Join(dir, base+".key"), filepath.Join(dir, base+".pub")
	if err := os.WriteFile(privFile, priv, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(pubFile, pub, 0o600); err != nil {
		t.Fatal(err)
	}
	return privFile, pubFile
}

// sign and verify follow push and pull's rules for a registry: plain HTTP
// only with --insecure (and only to loopback), credentials only from
// --docker-config. Without --insecure nothing reaches the registry.
func TestSignAndVerifyRegistryFlags(t *testing.T) {
	reg := registrytest.GGCR(t)
	dir := t.TempDir()
	refs, _ := pushFixtures(t, reg, dir, "healthy")
	ref := refs[0]
	priv, pub := writeKeyPair(t, dir, "cosign")
	before := len(reg.Requests())
	for _, args := range [][]string{
		{"sign", ref, "--key", priv},
		{"verify", ref, "--key", pub},
	} {
		code, out, errOut := run(t, args...)
		if code != 1 || !strings.Contains(errOut, "plain HTTP to "+reg.Host+" refused") || !strings.Contains(errOut, "--insecure") {
			t.Errorf("%s without --insecure: exit %d, want 1 refusing plain HTTP:\n%s%s", args[0], code, out, errOut)
		}
	}
	if got := reg.Requests()[before:]; len(got) > 0 {
		t.Errorf("sign and verify without --insecure reached the registry: %q", got)
	}
	if code, out, errOut := run(t, "sign", "--insecure", ref, "--key", priv); code != 0 {
		t.Fatalf("sign --insecure: exit %d\n%s%s", code, out, errOut)
	}
	if code, out, errOut := run(t, "verify", "--insecure", ref, "--key", pub); code != 0 || !strings.Contains(out, "verified") {
		t.Fatalf("verify --insecure: exit %d\n%s%s", code, out, errOut)
	}
	if code, _, errOut := run(t, "sign", "--insecure", "oci://registry.example.com/x:v1", "--key", priv); code != 1 || !strings.Contains(errOut, "only for a loopback host") {
		t.Errorf("sign --insecure for a remote registry: exit %d: %s", code, errOut)
	}
	priv2 := registrytest.Distribution(t, registrytest.Options{User: "u", Password: "p"})
	privRefs, _ := pushFixturesTo(t, priv2, dir, priv2.DockerConfig(t, "u", "p"), "healthy")
	if code, _, errOut := run(t, "sign", "--insecure", privRefs[0], "--key", priv); code != 1 || !strings.Contains(errOut, "wants credentials") {
		t.Errorf("sign without credentials: exit %d: %s", code, errOut)
	}
	if code, out, errOut := run(t, "sign", "--insecure", "--docker-config", priv2.DockerConfig(t, "u", "p"), privRefs[0], "--key", priv); code != 0 {
		t.Errorf("sign with --docker-config: exit %d: %s%s", code, out, errOut)
	}
}

// A registry that accepts a connection and never answers does not hold
// sign or verify: --timeout bounds the whole command, and the error says
// so. Every registry command has the flag.
func TestRegistryCommandsTimeout(t *testing.T) {
	reg := registrytest.GGCR(t)
	dir := t.TempDir()
	refs, _ := pushFixtures(t, reg, dir, "healthy")
	priv, pub := writeKeyPair(t, dir, "cosign")
	stop := make(chan struct{})
	reg.Tamper(func(w http.ResponseWriter, r *http.Request) bool {
		select {
		case <-r.Context().Done():
		case <-stop:
		}
		return true
	})
	t.Cleanup(func() { close(stop) })
	for _, args := range [][]string{
		{"sign", refs[0], "--key", priv},
		{"verify", refs[0], "--key", pub},
		{"pull", "-o", filepath.Join(dir, "x.wasm"), refs[0]},
		{"inspect", refs[0]},
		{"push", filepath.Join(dir, "healthy.wasm"), refs[0]},
	} {
		t.Run(args[0], func(t *testing.T) {
			done := make(chan struct{})
			var code int
			var errOut string
			go func() {
				defer close(done)
				code, _, errOut = run(t, append(args, "--insecure", "--timeout", "200ms")...)
			}()
			select {
			case <-done:
			case <-time.After(time.Minute):
				t.Fatalf("%s against a registry that never answers has not returned after a minute with --timeout 200ms", args[0])
			}
			if code != 1 || !strings.Contains(errOut, "no answer within --timeout 200ms") {
				t.Errorf("%s: exit %d, want 1 saying the registry did not answer within --timeout:\n%s", args[0], code, errOut)
			}
		})
	}
}
