package upstream

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strings"
	"time"

	"go.opentelemetry.io/otel/trace"
	"golang.org/x/net/http/httpguts"

	"github.com/informer-host/informer-host/abi"
	"github.com/informer-host/informer-host/internal/config"
	"github.com/informer-host/informer-host/internal/tracing"
)

// Request is one call of a plugin: an upstream by name, a method, a path
// under its base, "Name: value" header lines separated by '\n', a body.
// Header and Body may alias memory the caller reuses after Do returns: Do
// copies what outlives it.
type Request struct {
	Upstream, Method, Path string
	Header, Body           []byte
}

// Response is what Do read: header lines ("Name: value\n", canonical
// names, sorted) and the body, appended to Header[:0] and Body[:0].
type Response struct {
	Header, Body []byte
}

// Client is one plugin's view of a Set: the upstreams it is granted and
// its bound on requests in flight. Safe for concurrent use.
type Client struct {
	set     *Set
	plugin  string
	granted []string
	// slots holds one token per request in flight; its capacity is the
	// grant's concurrency.
	slots chan struct{}
}

// Client returns plugin's client for grant, or nil when grant is nil. A
// plugin's instances share one client while the grant's concurrency stays
// the same, so the bound holds across them.
func (s *Set) Client(plugin string, grant *config.HTTPGrant) *Client {
	if grant == nil {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	n := grant.EffectiveConcurrency()
	c := s.clients[plugin]
	if c == nil || cap(c.slots) != n {
		c = &Client{set: s, plugin: plugin, slots: make(chan struct{}, n)}
		s.clients[plugin] = c
	}
	// The granted list may change without the bound changing: a copy per
	// call of Client, read-only afterwards.
	out := *c
	out.granted = slices.Clone(grant.Upstreams)
	return &out
}

// Forget drops plugin's client and metrics (its file was removed).
func (s *Set) Forget(plugin string) {
	s.mu.Lock()
	delete(s.clients, plugin)
	s.mu.Unlock()
	s.metrics.forget(plugin)
}

// Do sends req and reads the response into resp. It returns the HTTP
// status, or an abi error code with resp untouched: ErrDenied (upstream
// not granted, method not allowed), ErrInvalid (path, headers), ErrTooLarge
// (request or response body over the upstream's limit), ErrRateLimited (no
// slot free within the timeout), ErrTimeout, ErrUnavailable (no response),
// ErrCanceled (ctx ended). msg says why; it never holds a header value.
func (c *Client) Do(ctx context.Context, req *Request, resp *Response) (code int32, msg string) {
	if !slices.Contains(c.granted, req.Upstream) {
		return abi.ErrDenied, fmt.Sprintf("upstream %q is not granted to this plugin (granted: %s)", req.Upstream, strings.Join(c.granted, ", "))
	}
	ep := (*c.set.current.Load())[req.Upstream]
	if ep == nil {
		return abi.ErrDenied, fmt.Sprintf("upstream %q is not configured", req.Upstream)
	}
	if !ep.allows(req.Method) {
		return abi.ErrDenied, fmt.Sprintf("method %q is not allowed on upstream %q (allowed: %s)", req.Method, ep.name, ep.allowed())
	}
	u, err := ep.target(req.Path)
	if err != nil {
		return abi.ErrInvalid, err.Error()
	}
	if int64(len(req.Body)) > ep.maxRequest {
		return abi.ErrTooLarge, fmt.Sprintf("request body of %d bytes is over upstream %q's maxRequestBytes (%d)", len(req.Body), ep.name, ep.maxRequest)
	}
	hdr, err := parseHeader(req.Header)
	if err != nil {
		return abi.ErrInvalid, err.Error()
	}
	for k, v := range ep.header {
		hdr[k] = v // the operator's headers win
	}

	parent := ctx
	ctx, cancel := context.WithTimeout(parent, ep.timeout)
	defer cancel()
	select {
	case c.slots <- struct{}{}:
	default:
		select {
		case c.slots <- struct{}{}:
		case <-ctx.Done():
			if parent.Err() == nil {
				c.set.metrics.observe(c.plugin, ep.name, abi.ErrRateLimited, 0)
				return abi.ErrRateLimited, fmt.Sprintf("%d requests of this plugin already in flight (grants.http.concurrency); none ended within upstream %q's timeout", cap(c.slots), ep.name)
			}
			return abi.ErrCanceled, "the host stopped the call"
		}
	}
	defer func() { <-c.slots }()

	start := time.Now()
	ctx, sp, traced := tracing.Child(ctx, "http "+req.Method+" "+ep.name, trace.SpanKindClient)
	if traced {
		// The upstream joins the delivery's trace (W3C traceparent).
		tracing.Inject(ctx, hdr)
	}
	code, msg = c.roundTrip(parent, ctx, ep, u, req, hdr, resp)
	c.set.metrics.observe(c.plugin, ep.name, code, time.Since(start))
	if traced {
		sp.SetAttributes(tracing.AttrPlugin.String(c.plugin), tracing.AttrUpstream.String(ep.name), tracing.AttrMethod.String(req.Method))
		if code >= 100 {
			sp.SetAttributes(tracing.AttrStatusCode.Int(int(code)))
		}
		tracing.End(sp, code, msg)
	}
	return code, msg
}

// roundTrip sends the request under ctx (parent with the upstream's
// timeout).
func (c *Client) roundTrip(parent, ctx context.Context, ep *endpoint, u *url.URL, req *Request, hdr http.Header, resp *Response) (int32, string) {
	// A copy: the transport may read the body after Do returns, and
	// req.Body is the plugin's memory.
	var body io.Reader = http.NoBody
	if len(req.Body) > 0 {
		body = bytes.NewReader(bytes.Clone(req.Body))
	}
	hr, err := http.NewRequestWithContext(ctx, req.Method, u.String(), body)
	if err != nil {
		return abi.ErrInvalid, err.Error()
	}
	hr.Header = hdr
	hr.ContentLength = int64(len(req.Body))
	r, err := ep.client.Do(hr)
	if err != nil {
		return failure(parent, ctx, ep, err)
	}
	defer r.Body.Close()
	if r.ContentLength > ep.maxResponse {
		return abi.ErrTooLarge, fmt.Sprintf("response body of %d bytes is over upstream %q's maxResponseBytes (%d)", r.ContentLength, ep.name, ep.maxResponse)
	}
	b, err := readLimited(resp.Body[:0], r.Body, ep.maxResponse)
	switch {
	case errors.Is(err, errTooLarge):
		return abi.ErrTooLarge, fmt.Sprintf("response body is over upstream %q's maxResponseBytes (%d)", ep.name, ep.maxResponse)
	case err != nil:
		return failure(parent, ctx, ep, err)
	}
	resp.Body = b
	resp.Header = appendHeader(resp.Header[:0], r.Header)
	return int32(r.StatusCode), ""
}

// failure maps a transport error to its code. The message is the error
// without the URL's query (the URL is the operator's, the query the
// plugin's; neither holds a header value).
func failure(parent, ctx context.Context, ep *endpoint, err error) (int32, string) {
	switch {
	case parent.Err() != nil:
		return abi.ErrCanceled, "the host stopped the call"
	case ctx.Err() == context.DeadlineExceeded:
		return abi.ErrTimeout, fmt.Sprintf("upstream %q did not answer within its timeout (%s)", ep.name, ep.timeout)
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	return abi.ErrUnavailable, fmt.Sprintf("upstream %q: %v", ep.name, err)
}

var errTooLarge = errors.New("too large")

// readLimited appends r to dst, failing with errTooLarge past limit bytes.
func readLimited(dst []byte, r io.Reader, limit int64) ([]byte, error) {
	buf := bytes.NewBuffer(dst)
	n, err := buf.ReadFrom(io.LimitReader(r, limit+1))
	if err != nil {
		return nil, err
	}
	if n > limit {
		return nil, errTooLarge
	}
	return buf.Bytes(), nil
}

// parseHeader reads "Name: value" lines. The host sets Host,
// Content-Length and the hop-by-hop headers itself.
func parseHeader(b []byte) (http.Header, error) {
	h := http.Header{}
	for line := range strings.SplitSeq(string(b), "\n") {
		line = strings.TrimSuffix(line, "\r")
		if line == "" {
			continue
		}
		name, value, ok := strings.Cut(line, ":")
		value = strings.TrimSpace(value)
		switch {
		case !ok || !httpguts.ValidHeaderFieldName(name):
			return nil, fmt.Errorf("header line %q is not \"Name: value\"", truncate(line, 64))
		case !httpguts.ValidHeaderFieldValue(value):
			return nil, fmt.Errorf("header %s: the value has characters a header cannot carry", name)
		}
		switch http.CanonicalHeaderKey(name) {
		case "Host", "Content-Length", "Transfer-Encoding", "Connection", "Upgrade", "Te", "Trailer", "Keep-Alive", "Proxy-Connection":
			return nil, fmt.Errorf("header %s is set by the host", name)
		}
		h.Add(name, value)
	}
	return h, nil
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// appendHeader appends h as "Name: value\n" lines, names sorted, values
// of one name in their order.
func appendHeader(dst []byte, h http.Header) []byte {
	names := make([]string, 0, len(h))
	for k := range h {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		for _, v := range h[k] {
			dst = append(append(append(append(dst, k...), ": "...), v...), '\n')
		}
	}
	return dst
}
