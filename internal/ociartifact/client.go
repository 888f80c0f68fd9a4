package ociartifact

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
)

// DefaultMaxModuleSize is MaxModuleSize when Options leave it zero: the
// config's default plugins.maxModuleSize.
const DefaultMaxModuleSize = 64 << 20

// Registry configures one registry host ("ghcr.io", "localhost:5000").
type Registry struct {
	// CAFile is a PEM bundle of CAs trusted for this host, besides the
	// system's.
	CAFile string
	// Mirrors are tried in order before the host itself, each
	// "host[:port][/path prefix]": a ref's repository is looked up under
	// the prefix on the mirror. A mirror's own TLS settings are its own
	// Registries entry.
	Mirrors []string
	// Insecure allows plain HTTP and skips TLS verification for this host.
	// New refuses it for a host that is not loopback unless
	// Options.AllowInsecureRemote.
	Insecure bool
}

// Options configure a Client.
type Options struct {
	// DockerConfig is a docker config.json, or a mounted
	// kubernetes.io/dockerconfigjson Secret's .dockerconfigjson, whose
	// "auths" give the registries' credentials. "" pulls anonymously:
	// the default keychain (~/.docker, credential helpers) is never read.
	DockerConfig string
	// Registries are per-host settings; a host not named has the
	// defaults (HTTPS, system CAs, no mirrors).
	Registries map[string]Registry
	// AllowInsecureRemote lets Registries[host].Insecure name a host that
	// is not loopback.
	AllowInsecureRemote bool
	// MaxModuleSize bounds a module and the blob holding it; zero is
	// DefaultMaxModuleSize.
	MaxModuleSize int64
	// Transport replaces the HTTP transport under every request. When it
	// is not an *http.Transport, CA bundles and Insecure's skipped TLS
	// verification cannot be applied to it and New refuses them.
	Transport http.RoundTripper
	// UserAgent is sent with every request; "" is "informer-host".
	UserAgent string
	// Timeout bounds every network step: connecting, the TLS handshake,
	// waiting for an answer, each download with its body, and each
	// attempt at one registry (a Resolve, a Pull) whole. A step that
	// does not finish is a *StallError. Zero is DefaultTimeout.
	Timeout time.Duration
}

// Client talks to OCI registries. It is safe for concurrent use.
type Client struct {
	opts      Options
	max       int64
	timeout   time.Duration
	keychain  authn.Keychain
	transport *hostTransport
	// rt is transport with each request bounded and manifests capped:
	// what every request goes through.
	rt http.RoundTripper
}

// New checks o and builds a Client: the docker config is read here, so a
// file that is missing or not JSON is an error now, not at the first pull.
func New(o Options) (*Client, error) {
	c := &Client{opts: o, max: o.MaxModuleSize, timeout: o.Timeout}
	if c.max <= 0 {
		c.max = DefaultMaxModuleSize
	}
	if c.timeout <= 0 {
		c.timeout = DefaultTimeout
	}
	c.keychain = authn.NewMultiKeychain() // anonymous
	if o.DockerConfig != "" {
		kc, err := loadDockerConfig(o.DockerConfig)
		if err != nil {
			return nil, err
		}
		c.keychain = kc
	}
	base := o.Transport
	if base == nil {
		base = boundedBase(c.timeout)
	}
	t := &hostTransport{base: base, hosts: map[string]http.RoundTripper{}, insecure: map[string]bool{}}
	for host, r := range o.Registries {
		if host == "" || strings.ContainsAny(host, "/ ") {
			return nil, fmt.Errorf("registry %q: a registry is named by its host[:port] alone, as in ghcr.io or localhost:5000", host)
		}
		if r.Insecure && !o.AllowInsecureRemote && !IsLoopback(host) {
			return nil, fmt.Errorf("registry %s: insecure (plain HTTP, no TLS verification) is allowed only for a loopback host (localhost, 127.0.0.1, ::1); "+
				"give the registry a certificate (and its CA as the CA bundle) or allow insecure remote registries explicitly", host)
		}
		for _, m := range r.Mirrors {
			if _, err := parseMirror(m); err != nil {
				return nil, fmt.Errorf("registry %s: mirror %q: %w", host, m, err)
			}
		}
		t.insecure[host] = r.Insecure
		if r.CAFile == "" && !r.Insecure {
			continue
		}
		ht, ok := base.(*http.Transport)
		if !ok {
			return nil, fmt.Errorf("registry %s: a CA bundle or insecure needs an *http.Transport, and Options.Transport is a %T", host, base)
		}
		ht = ht.Clone()
		tc := &tls.Config{MinVersion: tls.VersionTLS12}
		if ht.TLSClientConfig != nil {
			tc = ht.TLSClientConfig.Clone()
		}
		if r.CAFile != "" {
			pem, err := os.ReadFile(r.CAFile)
			if err != nil {
				return nil, fmt.Errorf("registry %s: CA bundle: %w", host, err)
			}
			pool, err := x509.SystemCertPool()
			if err != nil || pool == nil {
				pool = x509.NewCertPool()
			}
			if !pool.AppendCertsFromPEM(pem) {
				return nil, fmt.Errorf("registry %s: CA bundle %s holds no PEM certificate", host, r.CAFile)
			}
			tc.RootCAs = pool
		}
		tc.InsecureSkipVerify = r.Insecure //nolint:gosec // the operator's choice, loopback only unless allowed
		ht.TLSClientConfig = tc
		t.hosts[host] = ht
	}
	c.transport = t
	c.rt = &boundedTransport{next: t, timeout: c.timeout, capManifests: true}
	return c, nil
}

// Timeout is the bound of each network step (Options.Timeout).
func (c *Client) Timeout() time.Duration { return c.timeout }

// MaxModuleSize is the bound the client enforces.
func (c *Client) MaxModuleSize() int64 { return c.max }

// RemoteOptions are the go-containerregistry options of this client's
// requests (credentials, per-host TLS, plain HTTP only where allowed,
// retries, each request bounded by Timeout and manifests by
// MaxManifestSize), for a package that talks to the same registries itself, such
// as signature verification. Parse references with ParseReference so
// that insecure hosts get their scheme.
func (c *Client) RemoteOptions(ctx context.Context) []remote.Option {
	return []remote.Option{
		remote.WithContext(ctx),
		remote.WithAuthFromKeychain(c.keychain),
		remote.WithTransport(c.rt),
		remote.WithUserAgent(cmpOr(c.opts.UserAgent, "informer-host")),
		// The daemon retries on its own schedule; a pull should fail
		// fast enough to report.
		remote.WithRetryBackoff(remote.Backoff{Duration: 200 * time.Millisecond, Factor: 2, Jitter: 0.1, Steps: 3}),
	}
}

// ParseReference parses ref, with or without its oci:// scheme, as
// go-containerregistry does ("ghcr.io/org/plugin:v1",
// "localhost:5000/p@sha256:..."), marking the registry insecure when
// Options say so.
func (c *Client) ParseReference(ref string) (name.Reference, error) {
	s := strings.TrimPrefix(ref, "oci://")
	r, err := name.ParseReference(s, name.WithDefaultRegistry(name.DefaultRegistry))
	if err != nil {
		return nil, fmt.Errorf("reference %q: %w (write registry/repository:tag or registry/repository@sha256:<hex>)", ref, err)
	}
	if c.transport.insecure[r.Context().RegistryStr()] {
		r, err = name.ParseReference(s, name.Insecure)
		if err != nil {
			return nil, fmt.Errorf("reference %q: %w", ref, err)
		}
	}
	return r, nil
}

// IsLoopback reports whether host ("localhost:5000", "127.0.0.1",
// "[::1]:5000") names this machine.
func IsLoopback(host string) bool {
	h := host
	if sh, _, err := net.SplitHostPort(host); err == nil {
		h = sh
	}
	h = strings.Trim(h, "[]")
	if h == "localhost" || strings.HasSuffix(h, ".localhost") {
		return true
	}
	ip := net.ParseIP(h)
	return ip != nil && ip.IsLoopback()
}

// Locations are where ref is pulled from, in the order pulls try them:
// each mirror, then the registry itself, insecure hosts marked as
// ParseReference does. Signature verification looks there too, so that
// a signature copied to a mirror with the module counts.
func (c *Client) Locations(ref string) ([]name.Reference, error) {
	r, err := c.ParseReference(ref)
	if err != nil {
		return nil, err
	}
	eps := c.endpoints(r)
	refs := make([]name.Reference, 0, len(eps))
	for _, ep := range eps {
		refs = append(refs, ep.ref)
	}
	return refs, nil
}

// endpoint is one place a ref can be fetched from: a mirror or the
// registry itself.
type endpoint struct {
	ref    name.Reference
	mirror bool
}

// endpoints are ref's mirrors, in order, then ref itself.
func (c *Client) endpoints(ref name.Reference) []endpoint {
	var eps []endpoint
	for _, m := range c.opts.Registries[ref.Context().RegistryStr()].Mirrors {
		mm, _ := parseMirror(m) // checked by New
		repo := strings.TrimPrefix(mm.prefix+"/"+ref.Context().RepositoryStr(), "/")
		s := mm.host + "/" + repo
		if d, ok := ref.(name.Digest); ok {
			s += "@" + d.DigestStr()
		} else {
			s += ":" + ref.Identifier()
		}
		var opts []name.Option
		if c.transport.insecure[mm.host] {
			opts = append(opts, name.Insecure)
		}
		if r, err := name.ParseReference(s, opts...); err == nil {
			eps = append(eps, endpoint{ref: r, mirror: true})
		}
	}
	return append(eps, endpoint{ref: ref})
}

type mirror struct{ host, prefix string }

func parseMirror(m string) (mirror, error) {
	m = strings.TrimPrefix(strings.TrimPrefix(m, "https://"), "http://")
	host, prefix, _ := strings.Cut(strings.TrimSuffix(m, "/"), "/")
	if host == "" {
		return mirror{}, errors.New("a mirror is host[:port] or host[:port]/path")
	}
	if _, err := name.NewRegistry(host); err != nil {
		return mirror{}, err
	}
	return mirror{host: host, prefix: prefix}, nil
}

// hostTransport routes each request to its host's transport and refuses
// plain HTTP to a host not marked insecure: go-containerregistry itself
// falls back to HTTP for localhost and private (RFC 1918) addresses,
// which would let a network attacker downgrade a pull.
type hostTransport struct {
	base     http.RoundTripper
	hosts    map[string]http.RoundTripper
	insecure map[string]bool
}

func (t *hostTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	host := req.URL.Host
	if req.URL.Scheme == "http" && !t.insecure[host] {
		if req.Body != nil {
			_ = req.Body.Close()
		}
		return nil, fmt.Errorf("plain HTTP to %s refused: the registry is not marked insecure "+
			"(for a loopback registry, mark it insecure: --insecure, or registries.%s.insecure in config.yaml)", host, host)
	}
	if rt, ok := t.hosts[host]; ok {
		return rt.RoundTrip(req)
	}
	return t.base.RoundTrip(req)
}

// explain adds to a registry error what a person does about it.
func (c *Client) explain(ref name.Reference, err error) error {
	var te *transport.Error
	if errors.As(err, &te) {
		switch te.StatusCode {
		case http.StatusUnauthorized, http.StatusForbidden:
			host := ref.Context().RegistryStr()
			what := "no docker config is given"
			if c.opts.DockerConfig != "" {
				what = "the docker config " + c.opts.DockerConfig
				if dk, ok := c.keychain.(*dockerKeychain); ok && !dk.has(host) {
					what += " has no auths entry for " + host
				} else {
					what += " has credentials for " + host + " that the registry refused"
				}
			}
			return fmt.Errorf("%s: registry %s wants credentials (HTTP %d) and %s: give a docker config.json with an auths entry for %s "+
				"(--docker-config, or plugins.dockerConfig in config.yaml): %w", ref, host, te.StatusCode, what, host, err)
		case http.StatusNotFound:
			return fmt.Errorf("%s: not found in the registry (check the repository and tag): %w", ref, err)
		}
	}
	return fmt.Errorf("%s: %w", ref, err)
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}
