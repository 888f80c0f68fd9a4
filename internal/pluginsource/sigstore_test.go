package pluginsource

import (
	"context"
	"crypto/elliptic"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sigstore/sigstore/pkg/cryptoutils"

	"github.com/informer-host/informer-host/internal/config"
	"github.com/informer-host/informer-host/internal/ociartifact/registrytest"
	"github.com/informer-host/informer-host/internal/sigverify"
)

// testKey is a P-256 key pair: the private half as PEM for
// sigverify.SignWithKey, the public half as the PEM a policy's key file
// holds.
func testKey(t *testing.T) (privPEM, pubPEM []byte) {
	t.Helper()
	privPEM, pubPEM, err := cryptoutils.GeneratePEMEncodedECDSAKeyPair(elliptic.P256(), nil)
	if err != nil {
		t.Fatal(err)
	}
	return privPEM, pubPEM
}

// ociFor builds the registry client of a config naming registries
// (host: YAML flow mapping).
func ociFor(t *testing.T, registries map[string]string) *OCI {
	t.Helper()
	in := "apiVersion: informer-host/v1\nresources: [{name: pods, version: v1, resource: pods}]\nplugins:\n  registries:\n"
	for host, r := range registries {
		in += "    " + host + ": " + r + "\n"
	}
	cfg, err := config.Parse(filepath.Join(t.TempDir(), "config.yaml"), []byte(in))
	if err != nil {
		t.Fatal(err)
	}
	oci, err := NewOCI(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return oci
}

// A leaked key is revoked by replacing its file: the next verification
// reads the new key, and neither a verifier nor a result kept from the
// old key lets the module through.
func TestSigstoreReplacedKeyFileTakesEffect(t *testing.T) {
	reg := registrytest.GGCR(t)
	oci := ociFor(t, map[string]string{reg.Host: "{insecure: true}"})
	d, err := oci.Client.Push(t.Context(), append([]byte("\x00asm\x01\x00\x00\x00"), "signed"...), reg.Ref("org/a:v1"), nil)
	if err != nil {
		t.Fatal(err)
	}
	leakedPriv, leakedPub := testKey(t)
	if _, err := sigverify.SignWithKey(t.Context(), reg.Host+"/org/a", d.Digest, leakedPriv, sigverify.WithRemoteOptions(oci.Client.RemoteOptions(t.Context())...)); err != nil {
		t.Fatal(err)
	}
	keyFile := filepath.Join(t.TempDir(), "cosign.pub")
	if err := os.WriteFile(keyFile, leakedPub, 0o600); err != nil {
		t.Fatal(err)
	}
	s := NewSigstore(oci)
	p := config.Verify{Required: true, Keys: []string{keyFile}}
	r, err := s.Verify(t.Context(), p, reg.Host+"/org/a", d.Digest)
	if err != nil || !r.Verified {
		t.Fatalf("signed with the policy's key: %+v, %v", r, err)
	}

	_, newPub := testKey(t)
	if err := os.WriteFile(keyFile, newPub, 0o600); err != nil {
		t.Fatal(err)
	}
	r, err = s.Verify(t.Context(), p, reg.Host+"/org/a", d.Digest)
	if err != nil {
		t.Fatal(err)
	}
	if r.Verified || !strings.Contains(r.Reason, "wrong key") {
		t.Fatalf("after the key file was replaced, the module signed with the old key: %+v; want refused for the wrong key", r)
	}
}

// A registry that accepts the referrers request and never answers must
// not hold the verification past the caller's context: Manager.Stop and
// Apply cancel it and wait for it.
func TestSigstoreStalledReferrersFollowTheCallersContext(t *testing.T) {
	reg := registrytest.GGCR(t)
	oci := ociFor(t, map[string]string{reg.Host: "{insecure: true}"})
	d, err := oci.Client.Push(t.Context(), append([]byte("\x00asm\x01\x00\x00\x00"), "stalled"...), reg.Ref("org/a:v1"), nil)
	if err != nil {
		t.Fatal(err)
	}
	_, pub := testKey(t)
	keyFile := filepath.Join(t.TempDir(), "cosign.pub")
	if err := os.WriteFile(keyFile, pub, 0o600); err != nil {
		t.Fatal(err)
	}
	asked := hangReferrers(t, reg)

	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		_, err := NewSigstore(oci).Verify(ctx, config.Verify{Required: true, Keys: []string{keyFile}}, reg.Host+"/org/a", d.Digest)
		done <- err
	}()
	<-asked
	cancel()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "context canceled") {
			t.Fatalf("Verify after its context was cancelled: %v; want an error saying it was cancelled", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("Verify still waits on the stalled registry a minute after its context was cancelled")
	}
}

// Signatures are looked up where pulls go: the air-gapped flow copies the
// module and its signature to an on-site registry named as a mirror, and
// the origin is unreachable.
func TestSigstoreFindsTheSignatureAtAMirror(t *testing.T) {
	origin := registrytest.GGCR(t)
	mirror := registrytest.GGCR(t)
	oci := ociFor(t, map[string]string{
		origin.Host: "{insecure: true, mirrors: [" + mirror.Host + "/onsite]}",
		mirror.Host: "{insecure: true}",
	})
	d, err := oci.Client.Push(t.Context(), append([]byte("\x00asm\x01\x00\x00\x00"), "mirrored"...), mirror.Ref("onsite/org/a:v1"), nil)
	if err != nil {
		t.Fatal(err)
	}
	priv, pub := testKey(t)
	if _, err := sigverify.SignWithKey(t.Context(), mirror.Host+"/onsite/org/a", d.Digest, priv, sigverify.WithRemoteOptions(oci.Client.RemoteOptions(t.Context())...)); err != nil {
		t.Fatal(err)
	}
	keyFile := filepath.Join(t.TempDir(), "cosign.pub")
	if err := os.WriteFile(keyFile, pub, 0o600); err != nil {
		t.Fatal(err)
	}
	origin.Close()
	if _, err := oci.Client.Pull(t.Context(), origin.Host+"/org/a@"+d.Digest); err != nil {
		t.Fatalf("the pull through the mirror: %v", err)
	}
	r, err := NewSigstore(oci).Verify(t.Context(), config.Verify{Required: true, Keys: []string{keyFile}}, origin.Host+"/org/a", d.Digest)
	if err != nil || !r.Verified {
		t.Fatalf("signed at the mirror the module is pulled from: %+v, %v; want verified", r, err)
	}
	if !strings.Contains(r.Reason, mirror.Host) {
		t.Errorf("reason %q does not say the signature was found at the mirror %s", r.Reason, mirror.Host)
	}
}

// The daemon's side of a stalled signature lookup: a registry that
// serves the module but never answers the referrers request holds
// neither Manager.Stop (the daemon's shutdown) nor an Apply that drops
// the plugin (a config reload). The lookup's own bound (fetchTimeout,
// which NewSigstore passes on) is an hour here, so only the callers'
// contexts can end it.
func TestStalledSignatureLookupHoldsNeitherStopNorReload(t *testing.T) {
	for _, how := range []string{"stop", "reload dropping the plugin"} {
		t.Run(how, func(t *testing.T) {
			reg := registrytest.GGCR(t)
			dir := t.TempDir()
			in := "apiVersion: informer-host/v1\nresources: [{name: pods, version: v1, resource: pods}]\nplugins:\n" +
				"  fetchTimeout: 1h\n  registries:\n    " + reg.Host + ": {insecure: true}\n" +
				"  default:\n    verify: {required: true, keys: [cosign.pub]}\n"
			withModule := in + "  modules:\n  - file: a.wasm\n    source: oci://" + reg.Host + "/org/a:v1\n"
			writeKeyPair(t, dir, "cosign.pub")
			cfg, err := config.Parse(filepath.Join(dir, "config.yaml"), []byte(withModule))
			if err != nil {
				t.Fatal(err)
			}
			oci, err := NewOCI(cfg)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := oci.Client.Push(t.Context(), append([]byte("\x00asm\x01\x00\x00\x00"), "stalled"...), reg.Ref("org/a:v1"), nil); err != nil {
				t.Fatal(err)
			}
			asked := hangReferrers(t, reg)
			m, err := New(Options{Host: newFakeHost(), Fetcher: &Fetchers{OCI: oci, Timeout: cfg.FetchTimeoutOrDefault()}, Store: store(t),
				Verifier: NewSigstore(oci)})
			if err != nil {
				t.Fatal(err)
			}
			m.Apply(t.Context(), cfg)
			<-asked
			done := make(chan struct{})
			go func() {
				defer close(done)
				if how == "stop" {
					m.Stop()
					return
				}
				without, err := config.Parse(filepath.Join(dir, "config.yaml"), []byte(in))
				if err != nil {
					panic(err)
				}
				m.Apply(t.Context(), without)
			}()
			select {
			case <-done:
			case <-time.After(time.Minute):
				t.Fatalf("the %s still waits on the stalled signature lookup a minute later", how)
			}
			m.Stop()
		})
	}
}

// hangReferrers makes reg accept every referrers request and never
// answer it (until the test ends); the channel has a value once one was
// asked.
func hangReferrers(t *testing.T, reg *registrytest.Server) <-chan struct{} {
	asked := make(chan struct{}, 1)
	release := make(chan struct{})
	t.Cleanup(func() { close(release) }) // before the server's own cleanup waits for its handlers
	reg.Tamper(func(w http.ResponseWriter, r *http.Request) bool {
		if !strings.Contains(r.URL.Path, "/referrers/") {
			return false
		}
		select {
		case asked <- struct{}{}:
		default:
		}
		registrytest.Hang(r, release)
		return true
	})
	return asked
}
