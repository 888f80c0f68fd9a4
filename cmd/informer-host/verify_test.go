package main

import (
	"bytes"
	"context"
	"crypto/elliptic"
	"io"
	"log"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/sigstore/sigstore/pkg/cryptoutils"
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
	if code, out, errOut := run("sign", "oci://"+host+"/plugins/logger:v1", "--key", priv); code != 0 || !strings.Contains(out, "signed") {
		t.Fatalf("sign: exit %d\n%s%s", code, out, errOut)
	}
	for _, ref := range []string{"oci://" + host + "/plugins/logger:v1", "oci://" + host + "/plugins/logger@" + digest} {
		code, out, errOut := run("verify", ref, "--key", pub)
		if code != 0 || !strings.Contains(out, "verified, signed by key "+pub) {
			t.Fatalf("verify %s: exit %d\n%s%s", ref, code, out, errOut)
		}
	}
	if code, out, _ := run("verify", "--key", otherPub, "oci://"+host+"/plugins/logger:v1"); code != 1 || !strings.Contains(out, "wrong key") {
		t.Fatalf("verify with another key: exit %d, want 1 saying wrong key\n%s", code, out)
	}
	if code, out, _ := run("verify", "oci://"+host+"/plugins/logger:unsigned", "--key", pub); code != 1 || !strings.Contains(out, "unsigned") {
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
