package ociartifact

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// DefaultTimeout is Options.Timeout when left zero: the config's default
// plugins.fetchTimeout. A stalled registry is noticed within it, and a
// module of the default 64 MiB limit still arrives over a link of about
// 1 MiB/s.
const DefaultTimeout = time.Minute

// MaxManifestSize bounds a manifest, an index or a referrers list read
// from a registry: the CNCF Distribution registry refuses to store a
// manifest larger than this, so no real one is.
const MaxManifestSize = 4 << 20

// StallError is a network step that did not finish within the bound
// (Options.Timeout): no answer at all, or an answer that did not finish
// arriving. It is a context.DeadlineExceeded, which go-containerregistry
// does not retry.
type StallError struct {
	// Host is the registry or server, host[:port].
	Host    string
	Timeout time.Duration
	// Partial is an answer that began (headers came) but did not finish.
	Partial bool
}

func (e *StallError) Error() string {
	if e.Partial {
		return fmt.Sprintf("%s did not finish its answer within %s (plugins.fetchTimeout): the link or the server is stalled", e.Host, e.Timeout)
	}
	return fmt.Sprintf("no answer from %s within %s (plugins.fetchTimeout)", e.Host, e.Timeout)
}

func (e *StallError) Unwrap() error { return context.DeadlineExceeded }

// boundedBase is remote.DefaultTransport with each of its steps bounded:
// connecting, the TLS handshake, and waiting for the response headers.
func boundedBase(timeout time.Duration) *http.Transport {
	t := remote.DefaultTransport.(*http.Transport).Clone()
	t.DialContext = (&net.Dialer{Timeout: timeout, KeepAlive: 30 * time.Second}).DialContext
	t.TLSHandshakeTimeout = timeout
	t.ResponseHeaderTimeout = timeout
	return t
}

// NewHTTPClient is the client of https:// module sources, bounded as a
// Client's registry requests are: each step of a request, and the
// request whole with its body, within timeout (zero: DefaultTimeout); a
// stall is a *StallError naming the host.
func NewHTTPClient(timeout time.Duration) *http.Client {
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	return &http.Client{Transport: &boundedTransport{next: boundedBase(timeout), timeout: timeout}, Timeout: timeout}
}

// boundedTransport gives each download (GET, HEAD) a deadline that
// covers its body, so that a server that drips its answer is given up
// as one that never answers is; uploads keep the transport's own bounds
// (connect, handshake, headers), as their time grows with what is sent.
// With capManifests it also refuses a registry's manifest, index or
// referrers list past MaxManifestSize, which go-containerregistry would
// read up to 100 MiB of.
type boundedTransport struct {
	next         http.RoundTripper
	timeout      time.Duration
	capManifests bool
}

func (t *boundedTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	host := req.URL.Host
	ctx, cancel := req.Context(), context.CancelFunc(func() {})
	if req.Method == http.MethodGet || req.Method == http.MethodHead {
		ctx, cancel = context.WithTimeoutCause(ctx, t.timeout, &StallError{Host: host, Timeout: t.timeout})
		req = req.WithContext(ctx)
	}
	resp, err := t.next.RoundTrip(req)
	if err != nil {
		cancel()
		return nil, stalled(ctx, host, t.timeout, false, err)
	}
	body := &boundedBody{rc: resp.Body, ctx: ctx, cancel: cancel, host: host, timeout: t.timeout, limit: -1}
	if t.capManifests && req.Method == http.MethodGet && resp.StatusCode == http.StatusOK && isManifestPath(req.URL.Path) {
		if resp.ContentLength > MaxManifestSize {
			body.Close()
			return nil, fmt.Errorf("GET %s: the manifest is %d bytes (Content-Length), over the %dMiB a manifest may be: refused unread",
				req.URL.Redacted(), resp.ContentLength, MaxManifestSize>>20)
		}
		body.limit, body.url = MaxManifestSize, req.URL.Redacted()
	}
	resp.Body = body
	return resp, nil
}

// isManifestPath is a registry API path whose answer is a manifest or an
// index: /v2/<name>/manifests/<ref>, /v2/<name>/referrers/<digest>.
func isManifestPath(p string) bool {
	return strings.HasPrefix(p, "/v2/") && (strings.Contains(p, "/manifests/") || strings.Contains(p, "/referrers/"))
}

// boundedBody ends its request's deadline when closed, reports a stall
// while reading as a *StallError, and with a limit (>= 0) errors past it.
type boundedBody struct {
	rc      io.ReadCloser
	ctx     context.Context
	cancel  context.CancelFunc
	host    string
	timeout time.Duration
	limit   int64
	url     string
	n       int64
}

func (b *boundedBody) Read(p []byte) (int, error) {
	if b.limit >= 0 && int64(len(p)) > b.limit-b.n+1 {
		p = p[:b.limit-b.n+1]
	}
	n, err := b.rc.Read(p)
	b.n += int64(n)
	if b.limit >= 0 && b.n > b.limit {
		return n, fmt.Errorf("GET %s: the manifest is over the %dMiB a manifest may be: refused, read no further", b.url, b.limit>>20)
	}
	if err != nil && err != io.EOF {
		err = stalled(b.ctx, b.host, b.timeout, true, err)
	}
	return n, err
}

func (b *boundedBody) Close() error {
	b.cancel()
	return b.rc.Close()
}

// stalled is err, or the *StallError it stands for: the deadline of ctx
// (a request's, or an attempt's around it) or one of the transport's own
// timeouts (connect, TLS handshake, response headers).
func stalled(ctx context.Context, host string, timeout time.Duration, partial bool, err error) error {
	var se *StallError
	switch {
	case errors.As(err, &se): // the transport may hand back the context's cause itself
	case ctx.Err() != nil && errors.As(context.Cause(ctx), &se):
	default:
		var ne net.Error
		if !errors.As(err, &ne) || !ne.Timeout() {
			return err
		}
		se = &StallError{Host: host, Timeout: timeout}
	}
	if partial && !se.Partial {
		c := *se
		c.Partial = true
		return &c
	}
	return se
}

// attempt bounds one attempt at one registry (a resolve, a pull) as a
// whole, by the same timeout as each request in it: a registry that
// answers each request just in time cannot stretch an attempt without
// end.
func (c *Client) attempt(ctx context.Context, host string) (context.Context, context.CancelFunc) {
	return context.WithTimeoutCause(ctx, c.timeout, &StallError{Host: host, Timeout: c.timeout})
}

// attemptErr is err, with the attempt's stall named when its deadline
// is what ended it (a request that had not started yet sees only
// context.DeadlineExceeded).
func attemptErr(ctx context.Context, err error) error {
	var se *StallError
	if err == nil || errors.As(err, &se) {
		return err
	}
	if ctx.Err() != nil && errors.As(context.Cause(ctx), &se) {
		return fmt.Errorf("%w (%v)", se, err)
	}
	return err
}
