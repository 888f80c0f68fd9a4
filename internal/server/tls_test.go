package server_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/informer-host/informer-host/internal/server"
	"github.com/informer-host/informer-host/internal/testenv"
)

// writeCert writes a self-signed certificate for 127.0.0.1 named cn, and
// returns it for the client's trust pool.
func writeCert(t *testing.T, certFile, keyFile, cn string, mod time.Time) *x509.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()),
		Subject:      pkix.Name{CommonName: cn},
		IPAddresses:  []net.IP{net.ParseIP("127.0.0.1")},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	for file, block := range map[string]*pem.Block{certFile: {Type: "CERTIFICATE", Bytes: der}, keyFile: {Type: "EC PRIVATE KEY", Bytes: kder}} {
		if err := os.WriteFile(file, pem.EncodeToMemory(block), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(file, mod, mod); err != nil {
			t.Fatal(err)
		}
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return cert
}

// With a certificate, the endpoint is HTTPS (HTTP/2 offered), guards
// /metrics with Kubernetes auth over it, refuses plain HTTP, and picks up
// a rotated certificate for new connections.
func TestTLS(t *testing.T) {
	env.Require(t)
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	first := writeCert(t, certFile, keyFile, "first", time.Now().Add(-time.Minute))
	ns := env.Namespace(t)
	token := serviceAccountToken(t, ns, "scraper")
	allow(t, ns, "scraper", "/metrics")
	addr := startServer(t, server.Options{AuthClient: env.Client, TLSCertFile: certFile, TLSKeyFile: keyFile})

	client := func(trusted *x509.Certificate) *http.Client {
		pool := x509.NewCertPool()
		pool.AddCert(trusted)
		return &http.Client{Transport: &http.Transport{
			TLSClientConfig:   &tls.Config{RootCAs: pool},
			ForceAttemptHTTP2: true,
			DisableKeepAlives: true,
		}}
	}
	get := func(c *http.Client, path, token string) (*http.Response, error) {
		req, err := http.NewRequest(http.MethodGet, "https://"+addr+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := c.Do(req)
		if err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			_ = resp.Body.Close()
		}
		return resp, err
	}
	c := client(first)
	for _, tc := range []struct {
		path, token string
		want        int
	}{
		{"/healthz", "", http.StatusOK},
		{"/metrics", "", http.StatusUnauthorized},
		{"/metrics", token, http.StatusOK},
	} {
		resp, err := get(c, tc.path, tc.token)
		if err != nil {
			t.Fatalf("GET %s: %v", tc.path, err)
		}
		if resp.StatusCode != tc.want || resp.ProtoMajor != 2 {
			t.Errorf("GET %s: %s over %s, want %d over HTTP/2", tc.path, resp.Status, resp.Proto, tc.want)
		}
	}
	if code, body, err := plainGet("http://" + addr + "/healthz"); err == nil && code != http.StatusBadRequest {
		t.Errorf("plain HTTP to the HTTPS endpoint: %d %s", code, body)
	}

	second := writeCert(t, certFile, keyFile, "second", time.Now())
	testenv.Eventually(t, "the rotated certificate to be served", func() bool {
		resp, err := get(client(second), "/healthz", "")
		return err == nil && resp.TLS != nil && resp.TLS.PeerCertificates[0].Subject.CommonName == "second"
	})
	// A broken rotation (a key that does not match) keeps the last good pair.
	if err := os.WriteFile(keyFile, []byte("garbage"), 0o600); err != nil {
		t.Fatal(err)
	}
	if resp, err := get(client(second), "/healthz", ""); err != nil || resp.StatusCode != http.StatusOK {
		t.Errorf("after a broken rotation: %v %v", resp, err)
	}
}

func plainGet(url string) (int, string, error) {
	resp, err := http.Get(url)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, strings.TrimSpace(string(b)), nil
}
