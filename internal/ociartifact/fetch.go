package ociartifact

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
)

// NormalizeSHA256 returns want as "sha256:<hex>", from that form or the
// bare hex, or an error saying what a sha256 looks like.
func NormalizeSHA256(want string) (string, error) {
	d := "sha256:" + strings.TrimPrefix(strings.TrimSpace(want), "sha256:")
	if !validDigest(d) {
		return "", fmt.Errorf("sha256 %q is not 64 lowercase hex digits (with or without sha256:); `sha256sum FILE` prints it", want)
	}
	return d, nil
}

// FetchHTTPS downloads an https:// module and checks it against
// wantSHA256 ("sha256:<hex>" or the hex), which is required: a URL alone
// says nothing about what it serves. client nil is NewHTTPClient(0);
// client.Timeout bounds the download whole, body included, and its end
// is a *StallError naming the host. max bounds the body, before reading
// (Content-Length) and while reading; zero is DefaultMaxModuleSize.
// Errors show the URL without its user info and query, which may hold
// credentials (a pre-signed URL's signature).
func FetchHTTPS(ctx context.Context, rawURL, wantSHA256 string, client *http.Client, max int64) ([]byte, error) {
	if max <= 0 {
		max = DefaultMaxModuleSize
	}
	u, err := url.Parse(rawURL)
	if err != nil || u.Scheme != "https" || u.Host == "" {
		return nil, fmt.Errorf("source %q: not an https:// URL", redactRaw(rawURL))
	}
	shown := redactURL(u)
	if wantSHA256 == "" {
		return nil, fmt.Errorf("source %s: an https:// source needs its sha256 (sha256: in config.yaml): `sha256sum plugin.wasm` prints it", shown)
	}
	want, err := NormalizeSHA256(wantSHA256)
	if err != nil {
		return nil, fmt.Errorf("source %s: %w", shown, err)
	}
	if client == nil {
		client = NewHTTPClient(0)
		defer client.CloseIdleConnections()
	}
	if client.Timeout > 0 {
		// The deadline is this function's, so that its end is named.
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeoutCause(ctx, client.Timeout, &StallError{Host: u.Host, Timeout: client.Timeout})
		defer cancel()
		c := *client
		c.Timeout = 0
		client = &c
	}
	fail := func(partial bool, err error) error {
		// http.Client's errors carry the URL (of a redirect too) with
		// its query: keep only what went wrong.
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return fmt.Errorf("source %s: %w", shown, attemptErr(ctx, stalled(ctx, u.Host, client.Timeout, partial, err)))
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, rawURL, nil)
	if err != nil {
		return nil, fail(false, err)
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, fail(false, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("source %s: HTTP %s", shown, resp.Status)
	}
	if resp.ContentLength > max {
		return nil, fmt.Errorf("source %s: %d bytes (Content-Length), over the limit of %d (plugins.maxModuleSize): refused before download",
			shown, resp.ContentLength, max)
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, max+1))
	if err != nil {
		return nil, fail(true, err)
	}
	if int64(len(b)) > max {
		return nil, fmt.Errorf("source %s: over the limit of %d bytes (plugins.maxModuleSize)", shown, max)
	}
	if got := digestOf(b); got != want {
		return nil, fmt.Errorf("source %s: served %s, not the sha256 %s the config pins: the file changed, or the pin is wrong", shown, got, want)
	}
	return b, nil
}

// ReadFile reads a file:// source (or a plain path) of at most max bytes
// (zero is DefaultMaxModuleSize), checked against wantSHA256 when one is
// given.
func ReadFile(source, wantSHA256 string, max int64) ([]byte, error) {
	if max <= 0 {
		max = DefaultMaxModuleSize
	}
	path := source
	if strings.HasPrefix(source, "file:") {
		u, err := url.Parse(source)
		if err != nil || (u.Host != "" && u.Host != "localhost") || u.Path == "" {
			return nil, fmt.Errorf("source %q: a file source is file:///absolute/path (or file:relative/path)", source)
		}
		path = u.Path
		if u.Opaque != "" {
			path = u.Opaque
		}
	}
	b, err := readFileLimit(path, max)
	if err != nil {
		return nil, fmt.Errorf("source %s: %w", source, err)
	}
	if wantSHA256 != "" {
		want, err := NormalizeSHA256(wantSHA256)
		if err != nil {
			return nil, fmt.Errorf("source %s: %w", source, err)
		}
		if got := digestOf(b); got != want {
			return nil, fmt.Errorf("source %s: holds %s, not the sha256 %s the config pins", source, got, want)
		}
	}
	return b, nil
}

func redactRaw(rawURL string) string {
	u, err := url.Parse(rawURL)
	if err != nil {
		return "(unparsable URL)"
	}
	return redactURL(u)
}

// redactURL is u without its user info and query, which may hold
// credentials.
func redactURL(u *url.URL) string {
	c := *u
	c.User = nil
	if c.RawQuery != "" {
		c.RawQuery = "REDACTED"
	}
	return c.String()
}
