package pluginsource

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/informer-host/informer-host/internal/ociartifact"
)

// Store keeps fetched modules by digest and each source's last good
// digest. It must be safe for concurrent use.
type Store interface {
	// Put stores the module bytes of digest and returns the path of the
	// stored file.
	Put(digest string, module []byte) (path string, err error)
	// Path returns the stored file of digest, if the store has it.
	Path(digest string) (path string, ok bool)
	// LastGood returns the record of the version of source last loaded.
	LastGood(source string) (Record, bool)
	// SetLastGood records a version of source that loaded.
	SetLastGood(source string, r Record) error
}

// Record is a source's last good version.
type Record struct {
	Digest   string `json:"digest"`
	Verified bool   `json:"verified,omitempty"`
	Signer   string `json:"signer,omitempty"`
	// Policy is the fingerprint (PolicyFingerprint) of the verify policy
	// Verified and Signer were found under; "" none. They hold only
	// under that policy.
	Policy string    `json:"policy,omitempty"`
	At     time.Time `json:"at"`
}

// DirStore is a Store over the registry client's content-addressed
// module store (ociartifact.Store) in one directory, so that what
// `informer-host bundle load --cache DIR` puts there is what a daemon
// with plugins.sourceCache: DIR starts from, with no registry.
//
// The manager names a version by its Digest: an OCI artifact's manifest
// digest, a file's sha256 otherwise. The module store names files by the
// module's own sha256 only (a file whose content does not match its name
// is removed as damaged). So a version that is not its module's sha256
// (a manifest digest) is mapped to it: by versions/<hex> for what this
// store put, and by the sources' records (which hold both digests) for
// what a bundle loaded.
type DirStore struct {
	s ociartifact.Store
}

// NewDirStore opens (creating) a store in dir.
func NewDirStore(dir string) (*DirStore, error) {
	if err := os.MkdirAll(filepath.Join(dir, "versions"), 0o755); err != nil {
		return nil, fmt.Errorf("plugin source cache %s: %w", dir, err)
	}
	return &DirStore{s: ociartifact.Store{Dir: dir}}, nil
}

func hexOf(digest string) (string, error) {
	h, ok := strings.CutPrefix(digest, "sha256:")
	if !ok || len(h) != 64 || strings.ContainsAny(h, "/.") {
		return "", fmt.Errorf("not a sha256 digest: %q", digest)
	}
	return h, nil
}

func (d *DirStore) versionFile(h string) string { return filepath.Join(d.s.Dir, "versions", h) }

// module returns the module digest of the version digest, "" when the
// store cannot tell.
func (d *DirStore) module(version string) string {
	h, err := hexOf(version)
	if err != nil {
		return ""
	}
	if b, err := os.ReadFile(d.versionFile(h)); err == nil {
		return strings.TrimSpace(string(b))
	}
	if _, err := os.Stat(d.s.Path(version)); err == nil {
		return version // a module digest; Path's Has checks the content
	}
	// Loaded from a bundle: the record of some source holds the pair.
	entries, _ := filepath.Glob(filepath.Join(d.s.Dir, "sources", "*.json"))
	for _, e := range entries {
		if r, ok := readRecordFile(e); ok && r.ManifestDigest == version {
			return r.ModuleDigest
		}
	}
	return ""
}

// Put implements Store.
func (d *DirStore) Put(version string, module []byte) (string, error) {
	h, err := hexOf(version)
	if err != nil {
		return "", err
	}
	mod, path, err := d.s.Put(module)
	if err != nil {
		return "", fmt.Errorf("plugin source cache: %w", err)
	}
	if mod != version {
		if err := os.WriteFile(d.versionFile(h), []byte(mod+"\n"), 0o644); err != nil {
			return "", fmt.Errorf("plugin source cache: %w", err)
		}
	}
	return path, nil
}

// Path implements Store.
func (d *DirStore) Path(version string) (string, bool) {
	mod := d.module(version)
	if mod == "" || !d.s.Has(mod) {
		return "", false
	}
	return d.s.Path(mod), true
}

// LastGood implements Store.
func (d *DirStore) LastGood(source string) (Record, bool) {
	r, ok, err := d.s.LoadRecord(source)
	if err != nil || !ok {
		return Record{}, false
	}
	v := r.ManifestDigest
	if v == "" {
		v = r.ModuleDigest
	}
	return Record{Digest: v, Verified: r.Verified, Signer: r.Signer, Policy: r.Policy, At: r.Time}, true
}

// SetLastGood implements Store.
func (d *DirStore) SetLastGood(source string, r Record) error {
	mod := d.module(r.Digest)
	if mod == "" {
		return fmt.Errorf("plugin source cache: no module stored for %s", r.Digest)
	}
	rec := ociartifact.Record{Source: source, ModuleDigest: mod, Verified: r.Verified, Signer: r.Signer, Policy: r.Policy, Time: r.At}
	if old, ok, _ := d.s.LoadRecord(source); ok && old.ModuleDigest == mod {
		rec.Format, rec.Annotations = old.Format, old.Annotations
	}
	if mod != r.Digest {
		rec.ManifestDigest = r.Digest
	}
	return d.s.SaveRecord(rec)
}

// readRecordFile reads one of the module store's source records.
func readRecordFile(path string) (ociartifact.Record, bool) {
	b, err := os.ReadFile(path)
	if err != nil {
		return ociartifact.Record{}, false
	}
	var r ociartifact.Record
	return r, json.Unmarshal(b, &r) == nil
}
