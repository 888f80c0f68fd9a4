package pluginsource

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/informer-host/informer-host/internal/config"
	"github.com/informer-host/informer-host/internal/ociartifact"
	"github.com/informer-host/informer-host/internal/ociartifact/registrytest"
	"github.com/informer-host/informer-host/internal/testenv"
)

// secrets are what an https:// source URL may carry (user info, a
// pre-signed query) and no error may show.
var secrets = []string{"alice", "hunter2", "s3cr3t"}

// secretURL is base/path with user info and a pre-signed query.
func secretURL(t *testing.T, base, path string) string {
	t.Helper()
	u, err := url.Parse(base + path + "?X-Amz-Signature=s3cr3t")
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.UserPassword("alice", "hunter2")
	return u.String()
}

func httpsSource(u, sha string) Source {
	return Source{Ref: config.SourceRef{Scheme: config.SchemeHTTPS, URL: u}, SHA256: sha}
}

// The daemon's https:// fetcher: a pinned download succeeds; other
// bytes than the pin, a body over maxModuleSize, an answer other than
// 200 and a server that does not answer in time (hanging, silent,
// dripping) are errors that say what went wrong and never show the URL's
// user info or query.
func TestHTTPSFetcher(t *testing.T) {
	wasm := []byte("\x00asm\x01\x00\x00\x00https")
	done := make(chan struct{})
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/p.wasm":
			w.Write(wasm)
		case "/big.wasm":
			w.Write([]byte(strings.Repeat("x", 100)))
		case "/hang.wasm":
			registrytest.Hang(r, done)
		case "/drip.wasm":
			w.Header().Set("Content-Length", "60") // under MaxBytes, arriving over a second
			registrytest.Drip(w, r, done)
		case "/redirect.wasm":
			http.Redirect(w, r, "/nope.wasm?X-Amz-Signature=s3cr3t", http.StatusFound)
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	defer close(done) // before srv.Close, which waits for handlers
	silent := registrytest.SilentPort(t)

	f := &Fetchers{HTTP: srv.Client(), MaxBytes: 64, Timeout: 200 * time.Millisecond}
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second) // a safety net, not asserted on
	defer cancel()
	src := httpsSource(secretURL(t, srv.URL, "/p.wasm"), digestOf(wasm))
	d, err := f.Resolve(ctx, src)
	if err != nil || d != digestOf(wasm) {
		t.Fatalf("Resolve = %q, %v", d, err)
	}
	a, err := f.Fetch(ctx, src, d)
	if err != nil || a.Digest != d || string(a.Module) != string(wasm) {
		t.Fatalf("Fetch = %+v, %v", a, err)
	}

	for _, tc := range []struct {
		name, url, sha, want string
	}{
		{"other bytes than the pin", secretURL(t, srv.URL, "/p.wasm"), digestOf([]byte("other")), "not the sha256"},
		{"over maxModuleSize", secretURL(t, srv.URL, "/big.wasm"), digestOf([]byte(strings.Repeat("x", 100))), "plugins.maxModuleSize"},
		{"not found", secretURL(t, srv.URL, "/nope.wasm"), digestOf(wasm), "404"},
		{"redirected to not found", secretURL(t, srv.URL, "/redirect.wasm"), digestOf(wasm), "404"},
		{"hangs", secretURL(t, srv.URL, "/hang.wasm"), digestOf(wasm), "within 200ms (plugins.fetchTimeout)"},
		{"drips", secretURL(t, srv.URL, "/drip.wasm"), digestOf(wasm), "within 200ms (plugins.fetchTimeout)"},
		{"silent port", secretURL(t, "https://"+silent, "/p.wasm"), digestOf(wasm), "within 200ms (plugins.fetchTimeout)"},
		{"refused", secretURL(t, "https://127.0.0.1:1", "/p.wasm"), digestOf(wasm), "127.0.0.1:1"},
	} {
		_, err := f.Fetch(ctx, httpsSource(tc.url, tc.sha), tc.sha)
		t.Logf("%s: %v", tc.name, err)
		switch {
		case ctx.Err() != nil:
			t.Fatalf("%s: still waiting when the test's safety net ended it: %v", tc.name, err)
		case err == nil || !strings.Contains(err.Error(), tc.want):
			t.Errorf("%s: %v, want an error saying %q", tc.name, err, tc.want)
		}
		for _, s := range secrets {
			if err != nil && strings.Contains(err.Error(), s) {
				t.Errorf("%s: the error shows the URL's %q: %v", tc.name, s, err)
			}
		}
	}
}

// The config's default bound is the registry client's, so a Config
// built in code and one read from a file behave alike.
func TestFetchTimeoutDefaultsAgree(t *testing.T) {
	if config.DefaultFetchTimeout != ociartifact.DefaultTimeout {
		t.Errorf("config.DefaultFetchTimeout %s, ociartifact.DefaultTimeout %s", config.DefaultFetchTimeout, ociartifact.DefaultTimeout)
	}
}

// A registry that accepts and never answers makes the source degraded,
// with the bound in its reason and a next retry, instead of leaving it
// "not pulled yet" for as long as one waits.
func TestStalledRegistryDegradesTheSource(t *testing.T) {
	stop := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { registrytest.Hang(r, stop) }))
	defer srv.Close()
	defer close(stop)
	host := strings.TrimPrefix(srv.URL, "http://")
	in := "apiVersion: informer-host/v1\nresources: [{name: pods, version: v1, resource: pods}]\nplugins:\n" +
		"  fetchTimeout: 200ms\n  registries:\n    " + host + ": {insecure: true}\n" +
		"  modules:\n  - file: a.wasm\n    source: oci://" + host + "/org/a:v1\n"
	cfg, err := config.Parse(filepath.Join(t.TempDir(), "config.yaml"), []byte(in))
	if err != nil {
		t.Fatal(err)
	}
	oci, err := NewOCI(cfg)
	if err != nil {
		t.Fatal(err)
	}
	m := newManager(t, newFakeHost(), &Fetchers{OCI: oci, Timeout: cfg.FetchTimeoutOrDefault()}, store(t), nil)
	m.Apply(t.Context(), cfg)
	testenv.Eventually(t, "degraded, with the bound and a retry", func() bool {
		st := m.Status()["a.wasm"]
		return st.Degraded && strings.Contains(st.LastError, "no answer from "+host+" within 200ms (plugins.fetchTimeout)") && !st.NextRetry.IsZero()
	})
}
