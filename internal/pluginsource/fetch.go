package pluginsource

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"time"

	"github.com/informer-host/informer-host/internal/config"
	"github.com/informer-host/informer-host/internal/ociartifact"
	"k8s.io/client-go/rest"
)

// Source is one plugin's source, as the config gives it.
type Source struct {
	Ref config.SourceRef
	// SHA256 pins the module's bytes ("sha256:<hex>"; https, file,
	// configmap).
	SHA256 string
	// Impersonate is the user a configmap:// source is read as: the
	// module's grants.impersonate ServiceAccount, so a tenant's plugin
	// reads only what its own identity may; "" reads as the daemon.
	Impersonate string
}

// Pinned returns the digest the source fixes, if it fixes one.
func (s Source) Pinned() string {
	if s.Ref.Digest != "" {
		return s.Ref.Digest
	}
	return s.SHA256
}

// Artifact is a fetched module.
type Artifact struct {
	// Digest names the version: the manifest digest of an OCI artifact,
	// the sha256 of the bytes otherwise ("sha256:<hex>").
	Digest string
	Module []byte
}

// Fetcher gets sources' bytes. It must be safe for concurrent use.
type Fetcher interface {
	// Resolve returns the digest src names now (a tag's manifest digest,
	// the sha256 of a file's bytes, a pinned digest as it is).
	Resolve(ctx context.Context, src Source) (string, error)
	// Fetch returns the module src names at digest (as Resolve gave it).
	Fetch(ctx context.Context, src Source, digest string) (Artifact, error)
}

// ErrNoOCIClient is Fetch's and Resolve's error for an oci:// source when
// no OCI client was given (Fetchers.OCI).
var ErrNoOCIClient = errors.New("oci:// sources need the OCI registry client, which this build does not wire in")

// Fetchers is the Fetcher of every scheme: file://, https:// and
// configmap:// (configmap.go) here, and
// oci:// through OCI (internal/ociartifact's client, adapted).
type Fetchers struct {
	// OCI fetches oci:// sources; nil refuses them (ErrNoOCIClient).
	OCI Fetcher
	// HTTP is the client of https:// sources; nil: one bounded by
	// Timeout (ociartifact.NewHTTPClient).
	HTTP *http.Client
	// MaxBytes bounds a module (plugins.maxModuleSize); 0: no bound for
	// a file, ociartifact.DefaultMaxModuleSize for a download.
	MaxBytes int64
	// Timeout bounds each https:// download whole, body included
	// (plugins.fetchTimeout); 0: HTTP's own Timeout, or
	// ociartifact.DefaultTimeout when HTTP is nil.
	Timeout time.Duration
	// RESTConfig reaches the apiserver for configmap:// sources; nil
	// refuses them (ErrNoRESTConfig).
	RESTConfig *rest.Config

	// cm caches the ConfigMap readers by identity (configmap.go).
	cm configMapClients
}

// Resolve implements Fetcher.
func (f *Fetchers) Resolve(ctx context.Context, src Source) (string, error) {
	switch src.Ref.Scheme {
	case config.SchemeOCI:
		if f.OCI == nil {
			return "", ErrNoOCIClient
		}
		return f.OCI.Resolve(ctx, src)
	case config.SchemeHTTPS:
		return src.SHA256, nil // validation requires it
	case config.SchemeFile:
		b, err := f.readFile(src.Ref.Path)
		if err != nil {
			return "", err
		}
		d := digestOf(b)
		if src.SHA256 != "" && d != src.SHA256 {
			return "", fmt.Errorf("%s has %s, but the config pins %s", src.Ref.Path, d, src.SHA256)
		}
		return d, nil
	case config.SchemeConfigMap:
		a, err := f.readConfigMap(ctx, src)
		return a.Digest, err
	}
	return "", fmt.Errorf("unknown source scheme %q", src.Ref.Scheme)
}

// Fetch implements Fetcher.
func (f *Fetchers) Fetch(ctx context.Context, src Source, digest string) (Artifact, error) {
	switch src.Ref.Scheme {
	case config.SchemeOCI:
		if f.OCI == nil {
			return Artifact{}, ErrNoOCIClient
		}
		return f.OCI.Fetch(ctx, src, digest)
	case config.SchemeHTTPS:
		b, err := f.get(ctx, src.Ref.URL, digest)
		if err != nil {
			return Artifact{}, err
		}
		return Artifact{Digest: digest, Module: b}, nil
	case config.SchemeFile:
		b, err := f.readFile(src.Ref.Path)
		if err != nil {
			return Artifact{}, err
		}
		// The file may have moved on since Resolve: what is loaded is what
		// was read, under its own digest.
		d := digestOf(b)
		if src.SHA256 != "" && d != src.SHA256 {
			return Artifact{}, fmt.Errorf("%s has %s, but the config pins %s", src.Ref.Path, d, src.SHA256)
		}
		return Artifact{Digest: d, Module: b}, nil
	case config.SchemeConfigMap:
		// Like a file, what is loaded is what was read now.
		return f.readConfigMap(ctx, src)
	}
	return Artifact{}, fmt.Errorf("unknown source scheme %q", src.Ref.Scheme)
}

func (f *Fetchers) readFile(path string) ([]byte, error) {
	fh, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer fh.Close()
	return f.readAll(fh, path)
}

func (f *Fetchers) readAll(r io.Reader, what string) ([]byte, error) {
	if f.MaxBytes <= 0 {
		return io.ReadAll(r)
	}
	b, err := io.ReadAll(io.LimitReader(r, f.MaxBytes+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > f.MaxBytes {
		return nil, fmt.Errorf("%s is over plugins.maxModuleSize (%s)", what, config.Size(f.MaxBytes))
	}
	return b, nil
}

// get downloads an https:// module pinned to digest through
// internal/ociartifact's fetcher, which bounds it in time and size,
// checks the pin, and keeps the URL's user info and query (a pre-signed
// URL's signature) out of its errors.
func (f *Fetchers) get(ctx context.Context, url, digest string) ([]byte, error) {
	c := f.HTTP
	if c == nil {
		c = ociartifact.NewHTTPClient(f.Timeout)
		defer c.CloseIdleConnections()
	} else if f.Timeout > 0 {
		cc := *c
		cc.Timeout = f.Timeout
		c = &cc
	}
	return ociartifact.FetchHTTPS(ctx, url, digest, c, f.MaxBytes)
}

func digestOf(b []byte) string {
	s := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(s[:])
}
