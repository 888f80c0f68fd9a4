package ociartifact_test

import (
	"bytes"
	"context"
	"encoding/pem"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	ggcrregistry "github.com/google/go-containerregistry/pkg/registry"

	"github.com/informer-host/informer-host/internal/ociartifact"
	"github.com/informer-host/informer-host/internal/ociartifact/registrytest"
)

// insecure is for loopback hosts only, unless the operator allows it for
// remote ones; a registry named by more than a host is refused.
func TestNewChecksRegistries(t *testing.T) {
	for _, tc := range []struct {
		name string
		o    ociartifact.Options
		want string // "" = accepted
	}{
		{"loopback insecure", ociartifact.Options{Registries: map[string]ociartifact.Registry{"localhost:5000": {Insecure: true}, "127.0.0.1:1": {Insecure: true}, "[::1]:5000": {Insecure: true}}}, ""},
		{"remote insecure", ociartifact.Options{Registries: map[string]ociartifact.Registry{"registry.example.com": {Insecure: true}}}, "only for a loopback host"},
		{"remote insecure allowed", ociartifact.Options{AllowInsecureRemote: true, Registries: map[string]ociartifact.Registry{"registry.example.com": {Insecure: true}}}, ""},
		{"private address insecure", ociartifact.Options{Registries: map[string]ociartifact.Registry{"10.0.0.5:5000": {Insecure: true}}}, "only for a loopback host"},
		{"a path", ociartifact.Options{Registries: map[string]ociartifact.Registry{"ghcr.io/org": {}}}, "host[:port] alone"},
		{"missing CA", ociartifact.Options{Registries: map[string]ociartifact.Registry{"ghcr.io": {CAFile: "/nonexistent/ca.pem"}}}, "CA bundle"},
		{"missing docker config", ociartifact.Options{DockerConfig: "/nonexistent/config.json"}, "docker config"},
	} {
		_, err := ociartifact.New(tc.o)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: error %v, want one saying %q", tc.name, err, tc.want)
		}
	}
	bad := filepath.Join(t.TempDir(), "config.json")
	os.WriteFile(bad, []byte("not json"), 0o600)
	if _, err := ociartifact.New(ociartifact.Options{DockerConfig: bad}); err == nil || !strings.Contains(err.Error(), bad) || !strings.Contains(err.Error(), "not JSON") {
		t.Errorf("a docker config that is not JSON: %v", err)
	}
}

// go-containerregistry talks plain HTTP to loopback and private
// addresses by itself; the client refuses that unless the host is
// marked insecure.
func TestPlainHTTPRefusedUnlessInsecure(t *testing.T) {
	reg := registrytest.GGCR(t)
	c, err := ociartifact.New(ociartifact.Options{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Pull(context.Background(), reg.Ref("p:v1"))
	if err == nil || !strings.Contains(err.Error(), "plain HTTP to "+reg.Host+" refused") {
		t.Errorf("pull over plain HTTP from a host not marked insecure: %v", err)
	}
}

// A registry with a certificate from a private CA is trusted with its CA
// bundle, and not without.
func TestCABundle(t *testing.T) {
	srv := httptest.NewTLSServer(ggcrregistry.New())
	defer srv.Close()
	host := strings.TrimPrefix(srv.URL, "https://")
	ca := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	wasm := module("ca")
	c, err := ociartifact.New(ociartifact.Options{Registries: map[string]ociartifact.Registry{host: {CAFile: ca}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Push(ctx, wasm, host+"/tls/p:v1", nil); err != nil {
		t.Fatal(err)
	}
	a, err := c.Pull(ctx, host+"/tls/p:v1")
	if err != nil || !bytes.Equal(a.Bytes, wasm) {
		t.Fatalf("pull over TLS with the CA bundle: %v", err)
	}
	plain, err := ociartifact.New(ociartifact.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := plain.Pull(ctx, host+"/tls/p:v1"); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Errorf("pull over TLS without the CA bundle: %v", err)
	}
}
