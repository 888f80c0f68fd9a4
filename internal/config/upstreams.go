package config

import (
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"golang.org/x/net/http/httpguts"
)

// Defaults and bounds of upstreams (top-level upstreams) and of HTTP
// grants (grants.http), ABI.md §17.3.
const (
	DefaultUpstreamTimeout          = 10 * time.Second
	MaxUpstreamTimeout              = 5 * time.Minute
	DefaultUpstreamMaxRequestBytes  = Size(1 << 20)
	DefaultUpstreamMaxResponseBytes = Size(1 << 20)
	// MaxUpstreamBodyBytes bounds both limits: a body is held in memory
	// whole, in the host and in the plugin.
	MaxUpstreamBodyBytes = Size(64 << 20)
	// DefaultHTTPConcurrency is a plugin's requests in flight when its
	// grant names none.
	DefaultHTTPConcurrency = 4
	MaxHTTPConcurrency     = 1024
)

// upstreamMethods are the methods an upstream may allow.
var upstreamMethods = []string{http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete}

// Upstream returns the upstream named name, if the config has it.
func (c *Config) Upstream(name string) (*Upstream, bool) {
	for i := range c.Upstreams {
		if c.Upstreams[i].Name == name {
			return &c.Upstreams[i], true
		}
	}
	return nil, false
}

// Allows reports whether the upstream accepts method (POST only when
// Methods is empty).
func (u *Upstream) Allows(method string) bool {
	if len(u.Methods) == 0 {
		return method == http.MethodPost
	}
	return slices.Contains(u.Methods, method)
}

// EffectiveTimeout returns Timeout or its default.
func (u *Upstream) EffectiveTimeout() time.Duration {
	if u.Timeout.Duration > 0 {
		return u.Timeout.Duration
	}
	return DefaultUpstreamTimeout
}

// Limits returns the body limits with defaults filled in.
func (u *Upstream) Limits() (maxRequest, maxResponse int64) {
	maxRequest, maxResponse = int64(u.MaxRequestBytes), int64(u.MaxResponseBytes)
	if maxRequest <= 0 {
		maxRequest = int64(DefaultUpstreamMaxRequestBytes)
	}
	if maxResponse <= 0 {
		maxResponse = int64(DefaultUpstreamMaxResponseBytes)
	}
	return maxRequest, maxResponse
}

// EffectiveConcurrency returns Concurrency or its default.
func (g *HTTPGrant) EffectiveConcurrency() int {
	if g.Concurrency > 0 {
		return g.Concurrency
	}
	return DefaultHTTPConcurrency
}

// validateUpstreams checks the top-level upstreams and returns the line of
// every upstream name, for grants to be checked against.
func validateUpstreams(p *problems, us []Upstream) map[string]int {
	names := map[string]int{}
	for i := range us {
		u := &us[i]
		up := path{"upstreams", i}
		np := up.key("name")
		switch {
		case u.Name == "":
			p.add(np, "required: the name grants.http.upstreams and plugins call this upstream by")
		case strings.ContainsAny(u.Name, " \t\r\n/"):
			p.add(np, "%q: an upstream name has no spaces or slashes", u.Name)
		default:
			if first, dup := names[u.Name]; dup {
				p.add(np, "duplicate upstream %q (first at line %d)", u.Name, first)
			} else {
				names[u.Name] = p.line(np)
			}
		}
		validateUpstreamURL(p, up.key("url"), u.URL)
		for j, m := range u.Methods {
			mp := up.key("methods").index(j)
			switch {
			case !slices.Contains(upstreamMethods, m):
				p.add(mp, "unknown method %q; use one of %s (upper case)", m, strings.Join(upstreamMethods, ", "))
			case slices.Index(u.Methods, m) < j:
				p.add(mp, "duplicate method %q", m)
			}
		}
		seen := map[string]bool{}
		for j := range u.Headers {
			validateUpstreamHeader(p, up.key("headers").index(j), &u.Headers[j], seen)
		}
		if d := u.Timeout; p.present(up.key("timeout")) && (d.Duration <= 0 || d.Duration > MaxUpstreamTimeout) {
			p.add(up.key("timeout"), "%s is out of range; use a duration from 1ms to %s (default %s)", d.Duration, MaxUpstreamTimeout, DefaultUpstreamTimeout)
		}
		for _, s := range []struct {
			key string
			v   Size
			def Size
		}{{"maxRequestBytes", u.MaxRequestBytes, DefaultUpstreamMaxRequestBytes}, {"maxResponseBytes", u.MaxResponseBytes, DefaultUpstreamMaxResponseBytes}} {
			if p.present(up.key(s.key)) && (s.v < 1 || s.v > MaxUpstreamBodyBytes) {
				p.add(up.key(s.key), "%s is out of range; use a size from 1 to %s (default %s)", s.v, MaxUpstreamBodyBytes, s.def)
			}
		}
		validateUpstreamTLS(p, up.key("tls"), u)
	}
	return names
}

func validateUpstreamURL(p *problems, at path, raw string) {
	if raw == "" {
		p.add(at, "required: the base URL, e.g. https://hooks.example.com/services; plugins call paths under it")
		return
	}
	u, err := url.Parse(raw)
	switch {
	case err != nil:
		p.add(at, "%q is not a URL: %v", raw, err)
	case u.Scheme != "http" && u.Scheme != "https":
		p.add(at, "%q: the scheme must be http or https", raw)
	case u.Host == "":
		p.add(at, "%q has no host", raw)
	case u.User != nil:
		p.add(at, "%q carries credentials; put them in a header with valueFromEnv or valueFromFile, which are never shown", redactURL(u))
	case u.RawQuery != "" || u.Fragment != "":
		p.add(at, "%q: a base URL has no query or fragment; the plugin's path may carry a query", raw)
	}
}

// redactURL is u without its password, for messages.
func redactURL(u *url.URL) string { return u.Redacted() }

func validateUpstreamHeader(p *problems, hp path, h *UpstreamHeader, seen map[string]bool) {
	switch {
	case h.Name == "":
		p.add(hp.key("name"), "required: the header's name, e.g. Authorization")
	case !httpguts.ValidHeaderFieldName(h.Name):
		p.add(hp.key("name"), "%q is not a valid HTTP header name", h.Name)
	case seen[http.CanonicalHeaderKey(h.Name)]:
		p.add(hp.key("name"), "duplicate header %q", h.Name)
	case strings.EqualFold(h.Name, "Host") || strings.EqualFold(h.Name, "Content-Length"):
		p.add(hp.key("name"), "header %q is set by the host", h.Name)
	}
	seen[http.CanonicalHeaderKey(h.Name)] = true
	n := 0
	for _, k := range []string{"value", "valueFromEnv", "valueFromFile"} {
		if p.present(hp.key(k)) {
			n++
		}
	}
	if n != 1 {
		// The message never repeats a value: it may be a token.
		p.add(hp, "header %q needs exactly one of value, valueFromEnv and valueFromFile (it has %d)", h.Name, n)
		return
	}
	switch {
	case h.Value != "" && !httpguts.ValidHeaderFieldValue(h.Value):
		p.add(hp.key("value"), "header %q: the value has characters a header cannot carry", h.Name)
	case h.ValueFromEnv != "" && strings.ContainsAny(h.ValueFromEnv, "= \t"):
		p.add(hp.key("valueFromEnv"), "%q is not an environment variable name", h.ValueFromEnv)
	}
}

func validateUpstreamTLS(p *problems, tp path, u *Upstream) {
	t := u.TLS
	if t == (UpstreamTLS{}) {
		return
	}
	if strings.HasPrefix(u.URL, "http://") {
		p.add(tp, "TLS settings on an http:// upstream; use an https:// URL or drop tls")
	}
	if (t.CertFile == "") != (t.KeyFile == "") {
		p.add(tp, "certFile and keyFile go together (a client certificate and its key)")
	}
	dir := ""
	if p.file != "" {
		dir = filepath.Dir(p.file)
	}
	for _, f := range []struct{ key, v string }{{"caFile", t.CAFile}, {"certFile", t.CertFile}, {"keyFile", t.KeyFile}} {
		if f.v == "" {
			continue
		}
		fp := f.v
		if !filepath.IsAbs(fp) {
			fp = filepath.Join(dir, fp)
		}
		if _, err := os.Stat(fp); err != nil {
			p.add(tp.key(f.key), "cannot read %s: %v (relative paths are relative to the config file)", f.v, err)
		}
	}
}

// validateHTTPGrant checks a grants.http against the upstreams' names.
func validateHTTPGrant(p *problems, sp path, g *HTTPGrant, upstreams map[string]int) {
	if g == nil {
		return
	}
	gp := sp.key("grants").key("http")
	if len(g.Upstreams) == 0 {
		p.add(gp.key("upstreams"), "required: the names of the upstreams the plugin may call (%s)", knownUpstreams(upstreams))
	}
	for i, n := range g.Upstreams {
		at := gp.key("upstreams").index(i)
		_, known := upstreams[n]
		switch {
		case !known:
			p.add(at, "unknown upstream %q (%s)", n, knownUpstreams(upstreams))
		case slices.Index(g.Upstreams, n) < i:
			p.add(at, "duplicate upstream %q", n)
		}
	}
	inRange(p, gp.key("concurrency"), g.Concurrency, 1, MaxHTTPConcurrency)
}

func knownUpstreams(names map[string]int) string {
	if len(names) == 0 {
		return "no upstreams are configured; define them under the top-level upstreams"
	}
	return knownNames(names) // "configured: a, b"
}

// validateOutbound checks the upstreams and every HTTP grant against them.
func validateOutbound(p *problems, c *Config) {
	upstreams := validateUpstreams(p, c.Upstreams)
	validateHTTPGrant(p, path{"plugins", "default"}, c.Plugins.Default.Grants.HTTP, upstreams)
	for i := range c.Plugins.Modules {
		validateHTTPGrant(p, path{"plugins", "modules", i}, c.Plugins.Modules[i].Grants.HTTP, upstreams)
	}
}
