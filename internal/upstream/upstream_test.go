package upstream

import (
	"context"
	"encoding/pem"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/informer-host/informer-host/abi"
	"github.com/informer-host/informer-host/internal/config"
)

// server is a loopback upstream that records the paths and headers it
// was sent.
type server struct {
	*httptest.Server
	mu    sync.Mutex
	paths []string
	hdrs  []http.Header
}

func newServer(t *testing.T, h http.HandlerFunc) *server {
	s := &server{}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.paths = append(s.paths, r.URL.RequestURI())
		s.hdrs = append(s.hdrs, r.Header.Clone())
		s.mu.Unlock()
		if h != nil {
			h(w, r)
			return
		}
		_, _ = io.WriteString(w, "ok:"+r.URL.Path)
	}))
	t.Cleanup(s.Close)
	return s
}

// parse parses a config whose upstreams section is ups, with the test
// directory as its directory.
func parse(t *testing.T, ups string) *config.Config {
	t.Helper()
	c, err := config.Parse(filepath.Join(t.TempDir(), "config.yaml"), []byte("apiVersion: informer-host/v1\nresources: [{name: pods, version: v1, resource: pods}]\nupstreams:\n"+ups))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func client(t *testing.T, cfg *config.Config, o Options, concurrency int, granted ...string) *Client {
	t.Helper()
	s, err := New(cfg, o)
	if err != nil {
		t.Fatal(err)
	}
	return s.Client("p.wasm", &config.HTTPGrant{Upstreams: granted, Concurrency: concurrency})
}

func TestPaths(t *testing.T) {
	srv := newServer(t, nil)
	c := client(t, parse(t, "- {name: u, url: '"+srv.URL+"/base/', methods: [GET, POST]}\n"), Options{}, 0, "u")
	for _, tc := range []struct {
		path string
		code int32
		sent string // the request URI the server saw
	}{
		{"", 200, "/base/"},
		{"/x", 200, "/base/x"},
		{"/a/b?q=1&r=%2F", 200, "/base/a/b?q=1&r=%2F"},
		{"?only=query", 200, "/base/?only=query"},
		{"/a%20b", 200, "/base/a%20b"},
		{"/../etc/passwd", abi.ErrInvalid, ""},
		{"/a/..", abi.ErrInvalid, ""},
		{"/%2e%2e/x", abi.ErrInvalid, ""},
		{"/%2E%2E/x", abi.ErrInvalid, ""},
		{"/./x", abi.ErrInvalid, ""},
		{"//evil.example/x", abi.ErrInvalid, ""},
		{"/a//b", abi.ErrInvalid, ""},
		{"http://evil.example/", abi.ErrInvalid, ""},
		{"evil.example/x", abi.ErrInvalid, ""},
		{"/a\\..\\b", abi.ErrInvalid, ""},
		{"/x#frag", abi.ErrInvalid, ""},
		{"/x y", abi.ErrInvalid, ""},
		{"/x\r\nHost: evil", abi.ErrInvalid, ""},
		{"/%zz", abi.ErrInvalid, ""},
		// What a server may read as a step up: "..;" (";parameters"
		// dropped), an escape decoded twice, an encoded backslash.
		{"/..;/x", abi.ErrInvalid, ""},
		{"/.;/x", abi.ErrInvalid, ""},
		{"/%2e%2e;/x", abi.ErrInvalid, ""},
		{"/%252e%252e/x", abi.ErrInvalid, ""},
		{"/%25252e%25252e/x", abi.ErrInvalid, ""},
		{"/..%252fx", abi.ErrInvalid, ""},
		{"/%5c..%5cx", abi.ErrInvalid, ""},
		// An encoded slash that stays under the base is a name part, as
		// some APIs (project IDs "group%2Fname") need; so is a ";" in a
		// name and a literal "%" decoded once.
		{"/projects/group%2Fname", 200, "/base/projects/group%2Fname"},
		{"/a;v=1", 200, "/base/a;v=1"},
		{"/100%25", 200, "/base/100%25"},
	} {
		t.Run(tc.path, func(t *testing.T) {
			srv.mu.Lock()
			srv.paths = nil
			srv.mu.Unlock()
			var resp Response
			code, msg := c.Do(context.Background(), &Request{Upstream: "u", Method: "GET", Path: tc.path}, &resp)
			if code != tc.code {
				t.Fatalf("code %d (%s), want %d", code, msg, tc.code)
			}
			srv.mu.Lock()
			defer srv.mu.Unlock()
			switch {
			case tc.sent == "" && len(srv.paths) != 0:
				t.Fatalf("refused path reached the server as %q", srv.paths)
			case tc.sent != "" && (len(srv.paths) != 1 || srv.paths[0] != tc.sent):
				t.Fatalf("server saw %q, want %q", srv.paths, tc.sent)
			}
		})
	}
}

func TestGrantsAndMethods(t *testing.T) {
	srv := newServer(t, nil)
	cfg := parse(t, "- {name: u, url: '"+srv.URL+"'}\n- {name: v, url: '"+srv.URL+"'}\n")
	c := client(t, cfg, Options{}, 0, "u")
	for _, tc := range []struct {
		upstream, method string
		code             int32
	}{
		{"u", "POST", 200},
		{"u", "GET", abi.ErrDenied}, // no methods: POST only
		{"v", "POST", abi.ErrDenied},
		{"nope", "POST", abi.ErrDenied},
	} {
		code, msg := c.Do(context.Background(), &Request{Upstream: tc.upstream, Method: tc.method, Path: "/"}, &Response{})
		if code != tc.code {
			t.Errorf("%s %s: %d (%s), want %d", tc.method, tc.upstream, code, msg, tc.code)
		}
	}
}

// Redirects are followed while they stay under the base; one that leaves
// it is the plugin's response, not followed.
func TestRedirects(t *testing.T) {
	other := newServer(t, nil)
	var srv *server
	srv = newServer(t, func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/base/in":
			http.Redirect(w, r, "/base/target", http.StatusFound)
		case "/base/up":
			http.Redirect(w, r, "/elsewhere", http.StatusFound)
		case "/base/off":
			http.Redirect(w, r, other.URL+"/stolen", http.StatusFound)
		default:
			_, _ = io.WriteString(w, "at "+r.URL.Path)
		}
	})
	c := client(t, parse(t, "- {name: u, url: '"+srv.URL+"/base', methods: [GET]}\n"), Options{}, 0, "u")
	for _, tc := range []struct {
		path string
		code int32
		body string
	}{{"/in", 200, "at /base/target"}, {"/up", 302, ""}, {"/off", 302, ""}} {
		var resp Response
		code, msg := c.Do(context.Background(), &Request{Upstream: "u", Method: "GET", Path: tc.path}, &resp)
		if code != tc.code || (tc.body != "" && string(resp.Body) != tc.body) {
			t.Errorf("%s: %d %q (%s), want %d %q", tc.path, code, resp.Body, msg, tc.code, tc.body)
		}
	}
	if len(other.paths) != 0 {
		t.Errorf("a redirect off the upstream was followed: %q", other.paths)
	}
}

// A redirect the server sends back is followed only when its path stays
// under the base however a server reads it: the operator's secret header
// must never reach a path outside it. Each malicious Location below
// names the upstream's own host, so only the path check stands between
// the header and the path it escapes to.
func TestRedirectsStayUnderTheBase(t *testing.T) {
	for _, tc := range []struct {
		name, location string
		followed       bool // the redirect is followed (else the plugin gets the 302)
	}{
		{"under the base", "/base/target", true},
		{"dot segments resolving under the base", "/base/a/%2e%2e/target", true},
		{"encoded slash under the base", "/base/group%2Fname", true},
		{"literal dot-dot", "/base/../secret", false},
		{"encoded dot-dot", "/base/%2e%2e/secret", false},
		{"encoded dot-dot, upper case", "/base/%2E%2E/secret", false},
		{"mixed encoded dot-dot", "/base/.%2e/secret", false},
		{"dot-dot with parameters", "/base/..;/secret", false},
		{"encoded dot-dot with parameters", "/base/%2e%2e;x=1/secret", false},
		{"encoded slash after dot-dot", "/base/..%2fsecret", false},
		{"encoded slashes climbing", "/base/a%2f..%2f..%2fsecret", false},
		{"encoded slash, upper case", "/base/..%2Fsecret", false},
		{"backslash", "/base/..\\secret", false},
		{"encoded backslash", "/base/..%5csecret", false},
		{"double-encoded dot-dot", "/base/%252e%252e/secret", false},
		{"double-encoded slash", "/base/..%252fsecret", false},
		{"triple-encoded dot-dot", "/base/%25252e%25252e/secret", false},
		{"prefix without a segment boundary", "/base-evil/secret", false},
		{"the base's parent", "/", false},
		{"another host", "//evil.example/base/x", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path == "/base/redirect" {
					w.Header().Set("Location", tc.location) // as is: http.Redirect would clean it
					w.WriteHeader(http.StatusFound)
					return
				}
				_, _ = io.WriteString(w, "followed")
			})
			cfg := parse(t, "- name: u\n  url: '"+srv.URL+"/base'\n  methods: [GET]\n  headers: [{name: X-Secret, value: s3cret}]\n")
			c := client(t, cfg, Options{}, 0, "u")
			var resp Response
			code, msg := c.Do(context.Background(), &Request{Upstream: "u", Method: "GET", Path: "/redirect"}, &resp)
			srv.mu.Lock()
			defer srv.mu.Unlock()
			if !tc.followed {
				if code != http.StatusFound {
					t.Errorf("code %d (%s), want the 302 itself", code, msg)
				}
				if len(srv.paths) != 1 {
					t.Errorf("the redirect to %q was followed with the secret header: the server saw %q", tc.location, srv.paths)
				}
				return
			}
			if code != 200 || string(resp.Body) != "followed" || len(srv.paths) != 2 {
				t.Fatalf("code %d %q (%s), server saw %q: want the redirect followed", code, resp.Body, msg, srv.paths)
			}
			if got := srv.hdrs[1].Get("X-Secret"); got != "s3cret" {
				t.Errorf("the followed redirect lost the operator's header: %q", got)
			}
		})
	}
}

func TestLimits(t *testing.T) {
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		if r.URL.Path == "/chunked" {
			w.(http.Flusher).Flush() // no Content-Length
		}
		_, _ = w.Write([]byte(strings.Repeat("x", len(b))))
	})
	c := client(t, parse(t, "- {name: u, url: '"+srv.URL+"', maxRequestBytes: 10, maxResponseBytes: 5}\n"), Options{}, 0, "u")
	for _, tc := range []struct {
		path string
		body string
		code int32
	}{
		{"/", "12345", 200},
		{"/", "12345678901", abi.ErrTooLarge}, // request over 10: not sent
		{"/", "123456", abi.ErrTooLarge},      // response over 5, by Content-Length
		{"/chunked", "123456", abi.ErrTooLarge},
		{"/chunked", "1234", 200},
	} {
		var resp Response
		code, msg := c.Do(context.Background(), &Request{Upstream: "u", Method: "POST", Path: tc.path, Body: []byte(tc.body)}, &resp)
		if code != tc.code {
			t.Errorf("%s %q: %d (%s), want %d", tc.path, tc.body, code, msg, tc.code)
		}
	}
	if len(srv.paths) != 4 {
		t.Errorf("server got %d requests, want 4 (the too-large request is not sent)", len(srv.paths))
	}
}

// Header values from the file, env or config reach the upstream and appear
// in no message; the operator's header wins over the plugin's.
func TestSecretHeaders(t *testing.T) {
	srv := newServer(t, nil)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "token"), []byte("file-s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := parse(t, "- name: u\n  url: '"+srv.URL+"'\n  headers:\n  - {name: X-File, valueFromFile: '"+filepath.Join(dir, "token")+"'}\n  - {name: X-Env, valueFromEnv: TOKEN}\n  - {name: X-Lit, value: lit-s3cret}\n")
	env := func(k string) (string, bool) { return map[string]string{"TOKEN": "env-s3cret"}[k], k == "TOKEN" }
	c := client(t, cfg, Options{LookupEnv: env}, 0, "u")
	code, msg := c.Do(context.Background(), &Request{Upstream: "u", Method: "POST", Header: []byte("X-Lit: mine\nX-Plugin: p\n")}, &Response{})
	if code != 200 {
		t.Fatalf("%d %s", code, msg)
	}
	h := srv.hdrs[0]
	if h.Get("X-File") != "file-s3cret" || h.Get("X-Env") != "env-s3cret" || h.Get("X-Lit") != "lit-s3cret" || h.Get("X-Plugin") != "p" {
		t.Errorf("headers sent: %v", h)
	}
	// Every failure message the client can produce for this upstream.
	var msgs []string
	for _, r := range []Request{
		{Upstream: "u", Method: "GET"},
		{Upstream: "u", Method: "POST", Path: "/.."},
		{Upstream: "u", Method: "POST", Header: []byte("bad header")},
		{Upstream: "u", Method: "POST", Header: []byte("Host: x")},
	} {
		_, m := c.Do(context.Background(), &r, &Response{})
		msgs = append(msgs, m)
	}
	if _, err := New(parse(t, "- name: u\n  url: '"+srv.URL+"'\n  headers:\n  - {name: X-Env, valueFromEnv: MISSING_s3cret_VAR}\n"), Options{LookupEnv: env}); err != nil {
		msgs = append(msgs, err.Error())
	}
	for _, m := range msgs {
		if strings.Contains(m, "s3cret\n") || strings.Contains(m, "env-s3cret") || strings.Contains(m, "file-s3cret") || strings.Contains(m, "lit-s3cret") {
			t.Errorf("message shows a header value: %s", m)
		}
	}
}

// The plugin's concurrency bound: with one request in flight and a bound
// of 1, a second waits, and gets ERR_RATE_LIMITED when no slot frees within
// its upstream's timeout. A request the server does not answer ends with
// ERR_TIMEOUT; one the host stops, with ERR_CANCELED.
func TestConcurrencyAndTimeout(t *testing.T) {
	entered, release := make(chan struct{}, 3), make(chan struct{})
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		entered <- struct{}{}
		if r.URL.Path != "/held" {
			<-r.Context().Done() // never answered: the client gives up
			return
		}
		select {
		case <-release:
		case <-r.Context().Done():
		}
	})
	c := client(t, parse(t, "- {name: slow, url: '"+srv.URL+"', timeout: 1m}\n- {name: fast, url: '"+srv.URL+"', timeout: 50ms}\n"), Options{}, 1, "slow", "fast")
	first := make(chan int32)
	go func() {
		code, _ := c.Do(context.Background(), &Request{Upstream: "slow", Method: "POST", Path: "/held"}, &Response{})
		first <- code
	}()
	<-entered
	if code, msg := c.Do(context.Background(), &Request{Upstream: "fast", Method: "POST"}, &Response{}); code != abi.ErrRateLimited {
		t.Errorf("second request: %d (%s), want ERR_RATE_LIMITED", code, msg)
	}
	close(release)
	if code := <-first; code != 200 {
		t.Errorf("first request: %d, want 200", code)
	}
	if code, msg := c.Do(context.Background(), &Request{Upstream: "fast", Method: "POST"}, &Response{}); code != abi.ErrTimeout {
		t.Errorf("unanswered request: %d (%s), want ERR_TIMEOUT", code, msg)
	}
	<-entered
	ctx, cancel := context.WithCancel(context.Background())
	go func() { <-entered; cancel() }()
	if code, _ := c.Do(ctx, &Request{Upstream: "slow", Method: "POST"}, &Response{}); code != abi.ErrCanceled {
		t.Errorf("canceled request: %d, want ERR_CANCELED", code)
	}
}

func TestUnavailable(t *testing.T) {
	srv := newServer(t, nil)
	url := srv.URL
	srv.Close()
	c := client(t, parse(t, "- {name: u, url: '"+url+"'}\n"), Options{}, 0, "u")
	if code, msg := c.Do(context.Background(), &Request{Upstream: "u", Method: "POST"}, &Response{}); code != abi.ErrUnavailable {
		t.Errorf("closed server: %d (%s), want ERR_UNAVAILABLE", code, msg)
	}
}

func TestResponseHeader(t *testing.T) {
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Add("X-B", "2")
		w.Header().Add("X-A", "1")
		w.Header().Add("X-A", "0")
		w.WriteHeader(503)
	})
	c := client(t, parse(t, "- {name: u, url: '"+srv.URL+"'}\n"), Options{}, 0, "u")
	var resp Response
	code, _ := c.Do(context.Background(), &Request{Upstream: "u", Method: "POST"}, &resp)
	if code != 503 {
		t.Fatalf("code %d, want the upstream's 503", code)
	}
	if !strings.HasPrefix(string(resp.Header), "Content-Length: 0\nDate: ") || !strings.HasSuffix(string(resp.Header), "X-A: 1\nX-A: 0\nX-B: 2\n") {
		t.Errorf("header lines:\n%s", resp.Header)
	}
}

// An https upstream trusts the CA in its caFile, and only it.
func TestTLS(t *testing.T) {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "secure") }))
	defer srv.Close()
	dir := t.TempDir()
	ca := filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	c := client(t, parse(t, "- {name: u, url: '"+srv.URL+"', tls: {caFile: '"+ca+"'}}\n- {name: v, url: '"+srv.URL+"'}\n"), Options{}, 0, "u", "v")
	var resp Response
	if code, msg := c.Do(context.Background(), &Request{Upstream: "u", Method: "POST"}, &resp); code != 200 || string(resp.Body) != "secure" {
		t.Errorf("with the CA: %d %q (%s)", code, resp.Body, msg)
	}
	if code, msg := c.Do(context.Background(), &Request{Upstream: "v", Method: "POST"}, &resp); code != abi.ErrUnavailable || !strings.Contains(msg, "certificate") {
		t.Errorf("without the CA: %d (%s), want ERR_UNAVAILABLE for the unknown certificate", code, msg)
	}
}

// Update switches a Set's upstreams for the next call; an update that
// fails (a header's variable gone) keeps the ones it had.
func TestUpdate(t *testing.T) {
	a := newServer(t, func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "a") })
	b := newServer(t, func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "b") })
	env := map[string]string{"T": "x"}
	o := Options{LookupEnv: func(k string) (string, bool) { v, ok := env[k]; return v, ok }}
	s, err := New(parse(t, "- {name: u, url: '"+a.URL+"'}\n"), o)
	if err != nil {
		t.Fatal(err)
	}
	c := s.Client("p.wasm", &config.HTTPGrant{Upstreams: []string{"u"}})
	body := func() string {
		var resp Response
		if code, msg := c.Do(context.Background(), &Request{Upstream: "u", Method: "POST"}, &resp); code != 200 {
			t.Fatalf("%d %s", code, msg)
		}
		return string(resp.Body)
	}
	if got := body(); got != "a" {
		t.Fatalf("before the update: %q", got)
	}
	if err := s.Update(parse(t, "- {name: u, url: '"+b.URL+"'}\n")); err != nil {
		t.Fatal(err)
	}
	if got := body(); got != "b" {
		t.Errorf("after the update: %q, want the new URL's", got)
	}
	delete(env, "T")
	if err := s.Update(parse(t, "- name: u\n  url: '"+a.URL+"'\n  headers: [{name: X, valueFromEnv: T}]\n")); err == nil || !strings.Contains(err.Error(), `upstream "u": header X: environment variable T is not set`) {
		t.Errorf("update with a missing variable: %v", err)
	}
	if got := body(); got != "b" {
		t.Errorf("after a failed update: %q, want the old upstream kept", got)
	}
}
