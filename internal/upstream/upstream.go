package upstream

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/informer-host/informer-host/internal/config"
)

// Options configure a Set.
type Options struct {
	// LookupEnv reads the daemon's environment for valueFromEnv headers.
	// Default os.LookupEnv (tests hand in their own).
	LookupEnv func(string) (string, bool)
	// Transport, when set, is the base of every upstream's transport
	// (cloned; TLS settings applied on top). Default: a clone of
	// http.DefaultTransport.
	Transport *http.Transport
}

// Set is the upstreams of one config, ready to call, and the metrics of
// every call made through it. Safe for concurrent use.
type Set struct {
	opts    Options
	metrics *metrics
	// current is the endpoints of the latest config (Update swaps it
	// whole), so a call in flight finishes against the config it started
	// with and the next one sees the new one.
	current atomic.Pointer[map[string]*endpoint]

	// mu guards clients: one per plugin, so its concurrency bound holds
	// across its instances (a reload runs two side by side).
	mu      sync.Mutex
	clients map[string]*Client
}

// endpoint is one upstream, resolved: headers read, transport built.
type endpoint struct {
	name    string
	base    *url.URL
	methods []string // nil: POST only
	// header holds the operator's headers, values included; never
	// printed.
	header      http.Header
	timeout     time.Duration
	maxRequest  int64
	maxResponse int64
	client      *http.Client
}

// New builds the upstreams of cfg. Its error names the upstream and header
// at fault, never a value.
func New(cfg *config.Config, o Options) (*Set, error) {
	if o.LookupEnv == nil {
		o.LookupEnv = os.LookupEnv
	}
	s := &Set{opts: o, metrics: newMetrics(), clients: map[string]*Client{}}
	if err := s.Update(cfg); err != nil {
		return nil, err
	}
	return s, nil
}

// Update switches to the upstreams of cfg; on error the Set keeps the ones
// it had. Idle connections of the previous endpoints are closed.
func (s *Set) Update(cfg *config.Config) error {
	eps := make(map[string]*endpoint, len(cfg.Upstreams))
	var errs []error
	for i := range cfg.Upstreams {
		ep, err := s.build(cfg, &cfg.Upstreams[i])
		if err != nil {
			errs = append(errs, err)
			continue
		}
		eps[ep.name] = ep
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	if old := s.current.Swap(&eps); old != nil {
		for _, ep := range *old {
			ep.client.CloseIdleConnections()
		}
	}
	return nil
}

func (s *Set) build(cfg *config.Config, u *config.Upstream) (*endpoint, error) {
	fail := func(format string, args ...any) error {
		return fmt.Errorf("upstream %q: "+format, append([]any{u.Name}, args...)...)
	}
	base, err := url.Parse(u.URL)
	if err != nil {
		return nil, fail("url: %v", err)
	}
	ep := &endpoint{name: u.Name, base: base, methods: u.Methods, header: http.Header{}, timeout: u.EffectiveTimeout()}
	ep.maxRequest, ep.maxResponse = u.Limits()
	for _, h := range u.Headers {
		v := h.Value
		switch {
		case h.ValueFromEnv != "":
			var ok bool
			if v, ok = s.opts.LookupEnv(h.ValueFromEnv); !ok {
				return nil, fail("header %s: environment variable %s is not set", h.Name, h.ValueFromEnv)
			}
		case h.ValueFromFile != "":
			b, err := os.ReadFile(cfg.ResolvePath(h.ValueFromFile))
			if err != nil {
				return nil, fail("header %s: %v", h.Name, err)
			}
			v = strings.TrimRight(string(b), "\r\n")
		}
		if strings.ContainsAny(v, "\r\n\x00") {
			return nil, fail("header %s: the value has characters a header cannot carry", h.Name)
		}
		ep.header.Set(h.Name, v)
	}
	var tr *http.Transport
	if s.opts.Transport != nil {
		tr = s.opts.Transport.Clone()
	} else {
		tr = http.DefaultTransport.(*http.Transport).Clone()
	}
	if base.Scheme == "https" {
		tc, err := tlsConfig(cfg, u.TLS)
		if err != nil {
			return nil, fail("tls: %v", err)
		}
		tr.TLSClientConfig = tc
	}
	ep.client = &http.Client{Transport: tr, CheckRedirect: ep.checkRedirect}
	return ep, nil
}

func tlsConfig(cfg *config.Config, t config.UpstreamTLS) (*tls.Config, error) {
	tc := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: t.ServerName, InsecureSkipVerify: t.InsecureSkipVerify} //nolint:gosec // the operator's explicit choice
	if t.CAFile != "" {
		pem, err := os.ReadFile(cfg.ResolvePath(t.CAFile))
		if err != nil {
			return nil, err
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("caFile %s holds no PEM certificate", t.CAFile)
		}
		tc.RootCAs = pool
	}
	if t.CertFile != "" {
		cert, err := tls.LoadX509KeyPair(cfg.ResolvePath(t.CertFile), cfg.ResolvePath(t.KeyFile))
		if err != nil {
			return nil, err
		}
		tc.Certificates = []tls.Certificate{cert}
	}
	return tc, nil
}

// errOffUpstream stops a redirect that leaves the upstream.
var errOffUpstream = errors.New("redirect off the upstream")

// checkRedirect follows a redirect only while it stays under the base URL;
// otherwise the 3xx is what the plugin gets (http.ErrUseLastResponse).
func (ep *endpoint) checkRedirect(req *http.Request, via []*http.Request) error {
	if len(via) >= 10 || !ep.under(req.URL) {
		return http.ErrUseLastResponse
	}
	return nil
}

// under reports whether u is on the upstream: same scheme and host, and a
// path that stays under the base path however the server reads it
// (pathUnder).
func (ep *endpoint) under(u *url.URL) bool {
	if u.Scheme != ep.base.Scheme || !strings.EqualFold(u.Host, ep.base.Host) || u.User != nil {
		return false
	}
	return pathUnder(ep.base, u.EscapedPath())
}

// maxDecodings bounds how many times pathUnder decodes a path: a server
// (or a proxy in front of it) may decode once more than the standard
// says, and an escape nested deeper than this is refused rather than
// chased.
const maxDecodings = 4

// pathUnder reports whether escaped, a URL's path as sent on the wire,
// stays under base's path as a server may read it. The path is
// read as sent and as decoded once, twice, ...: at every reading it must
// have no backslash and no "..;" or ".;" segment (servers that treat a
// backslash as a separator, or drop ";parameters" from a segment, would
// read them as a step up), and, dot segments resolved (path.Clean), it
// must be the base or below it on a segment boundary ("/base-evil" is not
// under "/base"). An encoded slash is a separator at the readings that
// decode it, so "..%2f" is a step up there.
func pathUnder(base *url.URL, escaped string) bool {
	// As sent, the path is compared with the base as sent; decoded, with
	// the base decoded.
	within := func(bp, p string) bool {
		bp, c := path.Clean("/"+bp), path.Clean("/"+p)
		return bp == "/" || c == bp || strings.HasPrefix(c, bp+"/")
	}
	s, bp := escaped, base.EscapedPath()
	for i := 0; ; i++ {
		if strings.ContainsAny(s, "\\\x00") || !within(bp, s) {
			return false
		}
		for seg := range strings.SplitSeq(s, "/") {
			if name, _, params := strings.Cut(seg, ";"); params && (name == "." || name == "..") {
				return false
			}
		}
		dec, err := url.PathUnescape(s)
		switch {
		case err != nil && i == 0:
			return false // not validly escaped as sent
		case err != nil || dec == s:
			return true // no reading decodes further
		case i == maxDecodings:
			return false
		}
		s, bp = dec, base.Path
	}
}

// target is the URL of a plugin's path under the base. The path is empty
// or starts with "/" or "?"; it must not leave the base: no "." or ".."
// segment (escaped or not), no "//host", no scheme, no backslash, no
// fragment, and nothing a server decoding more than once or reading
// "..;" as ".." would take out of the base (under).
func (ep *endpoint) target(p string) (*url.URL, error) {
	rawPath, query, _ := strings.Cut(p, "?")
	switch {
	case p != "" && p[0] != '/' && p[0] != '?':
		return nil, errors.New("the path must start with / (it is joined under the upstream's URL; a plugin cannot pass a URL)")
	case strings.HasPrefix(p, "//"):
		return nil, errors.New("the path must not start with // (a plugin cannot name a host)")
	case strings.ContainsAny(p, "#\\") || strings.IndexFunc(p, func(r rune) bool { return r <= ' ' || r == 0x7f }) >= 0:
		return nil, errors.New("the path has a fragment, a backslash, a space or a control character")
	}
	dec, err := url.PathUnescape(rawPath)
	if err != nil {
		return nil, fmt.Errorf("the path is not validly escaped: %v", err)
	}
	for _, seg := range strings.Split(dec, "/") {
		if seg == ".." || seg == "." || strings.Contains(seg, "\\") {
			return nil, errors.New("the path has a . or .. segment; it must stay under the upstream's URL")
		}
	}
	if strings.Contains(dec, "//") {
		return nil, errors.New("the path has an empty segment (//)")
	}
	joined := strings.TrimSuffix(ep.base.EscapedPath(), "/") + rawPath
	if rawPath == "" {
		joined = ep.base.EscapedPath()
	}
	s := ep.base.Scheme + "://" + ep.base.Host + joined
	if query != "" {
		s += "?" + query
	}
	u, err := url.Parse(s)
	if err != nil {
		return nil, fmt.Errorf("the path does not make a URL: %v", err)
	}
	if !ep.under(u) {
		return nil, errors.New("the path leaves the upstream's URL as a server may read it (decoded once or more, dot segments resolved, a \"..;\" segment read as \"..\")")
	}
	return u, nil
}

func (ep *endpoint) allows(method string) bool {
	if len(ep.methods) == 0 {
		return method == http.MethodPost
	}
	for _, m := range ep.methods {
		if m == method {
			return true
		}
	}
	return false
}

func (ep *endpoint) allowed() string {
	if len(ep.methods) == 0 {
		return http.MethodPost
	}
	return strings.Join(ep.methods, ", ")
}
