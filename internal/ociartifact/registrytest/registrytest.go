package registrytest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"

	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/distribution/distribution/v3/configuration"
	"github.com/distribution/distribution/v3/registry/handlers"
	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	ggcrregistry "github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"github.com/sirupsen/logrus"
	"golang.org/x/crypto/bcrypt"

	// The storage driver and access controller the Distribution
	// registry's configuration names.
	_ "github.com/distribution/distribution/v3/registry/auth/htpasswd"
	_ "github.com/distribution/distribution/v3/registry/storage/driver/inmemory"
)

// quietOnce silences the Distribution registry's logging, once per
// process.
var quietOnce sync.Once

// Server is one registry on loopback.
type Server struct {
	// Host is "127.0.0.1:port", the registry part of a reference.
	Host string
	// Kind is "distribution" or "ggcr".
	Kind string
	srv  *httptest.Server
	user string
	pass string

	mu     sync.Mutex
	tamper func(w http.ResponseWriter, r *http.Request) bool
	log    []string
}

// Options configure a registry.
type Options struct {
	// User and Password, when set, make the Distribution registry ask for
	// basic auth (htpasswd).
	User, Password string
}

// Distribution starts the CNCF Distribution registry with in-memory
// storage; it stops when t ends.
func Distribution(t testing.TB, o Options) *Server {
	t.Helper()
	cfg := &configuration.Configuration{
		Storage: configuration.Storage{
			"inmemory":    configuration.Parameters{},
			"maintenance": configuration.Parameters{"uploadpurging": map[any]any{"enabled": false}},
			"delete":      configuration.Parameters{"enabled": true},
		},
	}
	cfg.HTTP.Secret = "registrytest"
	cfg.Log.AccessLog.Disabled = true
	cfg.Log.Level = "error"
	if o.User != "" {
		hash, err := bcrypt.GenerateFromPassword([]byte(o.Password), bcrypt.MinCost)
		if err != nil {
			t.Fatal(err)
		}
		file := filepath.Join(t.TempDir(), "htpasswd")
		if err := os.WriteFile(file, []byte(o.User+":"+string(hash)+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		cfg.Auth = configuration.Auth{"htpasswd": configuration.Parameters{"realm": "registrytest", "path": file}}
	}
	quietOnce.Do(func() {
		// The registry logs every request through logrus's standard
		// logger, which only its command configures; tests read the
		// requests from Requests instead.
		logrus.SetOutput(io.Discard)
	})
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	app := handlers.NewApp(ctx, cfg)
	return start(t, "distribution", app, o)
}

// GGCR starts go-containerregistry's registry with the referrers API; it
// stops when t ends.
func GGCR(t testing.TB) *Server {
	t.Helper()
	return start(t, "ggcr", ggcrregistry.New(ggcrregistry.WithReferrersSupport(true), ggcrregistry.Logger(nopLogger())), Options{})
}

func start(t testing.TB, kind string, h http.Handler, o Options) *Server {
	s := &Server{Kind: kind, user: o.User, pass: o.Password}
	s.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.log = append(s.log, r.Method+" "+r.URL.Path)
		tamper := s.tamper
		s.mu.Unlock()
		if tamper != nil && tamper(w, r) {
			return
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(s.srv.Close)
	s.Host = strings.TrimPrefix(s.srv.URL, "http://")
	return s
}

// Close stops the registry now, as a registry that goes down.
func (s *Server) Close() { s.srv.Close() }

// Tamper sets a hook that sees every request first; when it returns true
// it has answered the request and the registry does not see it.
func (s *Server) Tamper(f func(w http.ResponseWriter, r *http.Request) bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.tamper = f
}

// Requests are the requests that reached the server ("GET /v2/...").
func (s *Server) Requests() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.log...)
}

// Ref is host/repo plus tag (":v1") or digest ("@sha256:...").
func (s *Server) Ref(repoAndTag string) string { return s.Host + "/" + repoAndTag }

func (s *Server) remoteOptions() []remote.Option {
	opts := []remote.Option{}
	if s.user != "" {
		opts = append(opts, remote.WithAuth(&authn.Basic{Username: s.user, Password: s.pass}))
	}
	return opts
}

// PutBlob uploads data to repo, as a test's raw material.
func (s *Server) PutBlob(t testing.TB, repo string, data []byte) v1.Descriptor {
	t.Helper()
	r, err := name.NewRepository(s.Host+"/"+repo, name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	l := static.NewLayer(data, types.MediaType("application/octet-stream"))
	if err := remote.WriteLayer(r, l, s.remoteOptions()...); err != nil {
		t.Fatalf("upload blob to %s: %v", r, err)
	}
	d, _ := l.Digest()
	return v1.Descriptor{Digest: d, Size: int64(len(data))}
}

// PutManifest puts a manifest (any JSON value, or raw bytes) at
// repo:tagOrDigest and returns its digest.
func (s *Server) PutManifest(t testing.TB, repo, tag string, mediaType types.MediaType, manifest any) string {
	t.Helper()
	b, ok := manifest.([]byte)
	if !ok {
		var err error
		if b, err = json.Marshal(manifest); err != nil {
			t.Fatal(err)
		}
	}
	ref, err := name.ParseReference(s.Host+"/"+repo+":"+tag, name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Put(ref, raw{b, mediaType}, s.remoteOptions()...); err != nil {
		t.Fatalf("put manifest %s: %v", ref, err)
	}
	h, _, _ := v1.SHA256(bytes.NewReader(b))
	return h.String()
}

type raw struct {
	b  []byte
	mt types.MediaType
}

func (r raw) RawManifest() ([]byte, error)        { return r.b, nil }
func (r raw) MediaType() (types.MediaType, error) { return r.mt, nil }

// DockerConfig writes a docker config.json with this registry's
// credentials and returns its path.
func (s *Server) DockerConfig(t testing.TB, user, password string) string {
	t.Helper()
	auth := fmt.Sprintf(`{"auths":{%q:{"auth":%q}}}`, s.Host, b64(user+":"+password))
	p := filepath.Join(t.TempDir(), "config.json")
	if err := os.WriteFile(p, []byte(auth), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// Each runs f as a subtest against a fresh registry of each kind.
func Each(t *testing.T, f func(t *testing.T, s *Server)) {
	for _, kind := range []string{"distribution", "ggcr"} {
		t.Run(kind, func(t *testing.T) {
			if kind == "distribution" {
				f(t, Distribution(t, Options{}))
			} else {
				f(t, GGCR(t))
			}
		})
	}
}
