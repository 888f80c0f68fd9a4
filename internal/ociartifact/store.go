package ociartifact

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
)

// signatureDir is where, under a store's Dir, LoadBundle keeps the
// signatures bundles carry.
const signatureDir = "signatures"

// Store is a content-addressed directory of modules, each at
// Dir/blobs/sha256/<hex> (as in an OCI image layout), with one record per
// source (Dir/sources/*.json) of the last digest that source gave which
// was good. Writes are atomic (a temporary file, fsync, rename, fsync of
// the directory), so a crash leaves a module whole or absent, and
// processes sharing Dir see whole files only. The zero Store is not
// usable; Dir must be set.
type Store struct {
	Dir string
}

// Put stores b and returns its digest ("sha256:<hex>") and path. A module
// already there is not written again.
func (s Store) Put(b []byte) (digest, path string, err error) {
	digest = digestOf(b)
	path = s.Path(digest)
	if s.Has(digest) {
		return digest, path, nil
	}
	if err := writeAtomic(path, b, 0o444); err != nil {
		return "", "", fmt.Errorf("module store %s: %w", s.Dir, err)
	}
	return digest, path, nil
}

// SignatureDir is the OCI image layout in which LoadBundle keeps the
// signature artifacts bundles carry (cosign v3 bundle referrers and
// legacy .sig tags), for a verifier to read without a registry
// (sigverify.WithLocalLayout). It may not exist.
func (s Store) SignatureDir() string { return filepath.Join(s.Dir, signatureDir) }

// Path is where digest's module is (or would be). digest is
// "sha256:<hex>" or the bare hex.
func (s Store) Path(digest string) string {
	return filepath.Join(s.Dir, "blobs", "sha256", strings.TrimPrefix(digest, "sha256:"))
}

// Has reports whether digest's module is in the store; a file whose
// content does not match its name (a disk that lied) is not, and is
// removed so the next Put writes it again.
func (s Store) Has(digest string) bool {
	if !validDigest(digest) {
		return false
	}
	f, err := os.Open(s.Path(digest))
	if err != nil {
		return false
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return false
	}
	if hex.EncodeToString(h.Sum(nil)) != strings.TrimPrefix(digest, "sha256:") {
		_ = os.Remove(s.Path(digest))
		return false
	}
	return true
}

// Read returns digest's module, checked against its digest, refusing one
// over max bytes.
func (s Store) Read(digest string, max int64) ([]byte, error) {
	if !validDigest(digest) {
		return nil, fmt.Errorf("module store: %q is not a sha256 digest", digest)
	}
	b, err := readFileLimit(s.Path(digest), max)
	if err != nil {
		return nil, fmt.Errorf("module store: %w", err)
	}
	if got := digestOf(b); got != "sha256:"+strings.TrimPrefix(digest, "sha256:") {
		return nil, fmt.Errorf("module store: %s holds %s: the file changed on disk; remove it and fetch the module again", s.Path(digest), got)
	}
	return b, nil
}

// Record is what a source last gave that was good.
type Record struct {
	// Source is the source as the config names it (oci://..., https://...,
	// file://...); oci:// references are kept in full form
	// (index.docker.io/library/x:latest), see SourceKey.
	Source string `json:"source"`
	// ModuleDigest is the module's sha256 ("sha256:<hex>"), its name in
	// the store.
	ModuleDigest string `json:"moduleDigest"`
	// ManifestDigest, Format and Annotations are the OCI artifact's, if
	// the source is one. ManifestDigest is the digest the source
	// resolves to: an index's, when the module was chosen from one.
	ManifestDigest string            `json:"manifestDigest,omitempty"`
	Format         Format            `json:"format,omitempty"`
	Annotations    map[string]string `json:"annotations,omitempty"`
	// Verified and Signer are what signature verification found, for a
	// caller that verifies.
	Verified bool   `json:"verified,omitempty"`
	Signer   string `json:"signer,omitempty"`
	// Policy names the verify policy Verified and Signer hold under (a
	// fingerprint of its keys' and trusted root's content, see
	// pluginsource.PolicyFingerprint); under any other they say nothing.
	Policy string `json:"policy,omitempty"`
	// Time is when it was recorded.
	Time time.Time `json:"time"`
}

// SourceKey is the form records are kept under: an oci:// reference in
// full (registry, repository, tag or digest), so "oci://nginx" and
// "oci://index.docker.io/library/nginx:latest" are one source; any other
// source as it is.
func SourceKey(source string) string {
	if rest, ok := strings.CutPrefix(source, "oci://"); ok {
		if r, err := name.ParseReference(rest); err == nil {
			return "oci://" + r.Name()
		}
	}
	return source
}

// SaveRecord records r (its Source in SourceKey form), replacing the
// source's last.
func (s Store) SaveRecord(r Record) error {
	r.Source = SourceKey(r.Source)
	if !validDigest(r.ModuleDigest) {
		return fmt.Errorf("module store: record of %s: %q is not a sha256 digest", r.Source, r.ModuleDigest)
	}
	if r.Time.IsZero() {
		r.Time = time.Now().UTC()
	}
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	if err := writeAtomic(s.recordPath(r.Source), append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("module store %s: %w", s.Dir, err)
	}
	return nil
}

// LoadRecord returns source's last record; false when it has none. A
// record whose module is no longer in the store is none.
func (s Store) LoadRecord(source string) (Record, bool, error) {
	key := SourceKey(source)
	b, err := os.ReadFile(s.recordPath(key))
	if errors.Is(err, fs.ErrNotExist) {
		return Record{}, false, nil
	}
	if err != nil {
		return Record{}, false, fmt.Errorf("module store: %w", err)
	}
	var r Record
	if err := json.Unmarshal(b, &r); err != nil {
		return Record{}, false, fmt.Errorf("module store: record %s of %s is not JSON (%v): remove it; the source is fetched again", s.recordPath(key), key, err)
	}
	if r.Source != key || !s.Has(r.ModuleDigest) {
		return Record{}, false, nil
	}
	return r, true, nil
}

func (s Store) recordPath(key string) string {
	h := sha256.Sum256([]byte(key))
	return filepath.Join(s.Dir, "sources", hex.EncodeToString(h[:16])+".json")
}

func validDigest(d string) bool {
	h := strings.TrimPrefix(d, "sha256:")
	if len(h) != 64 {
		return false
	}
	_, err := hex.DecodeString(h)
	return err == nil && strings.ToLower(h) == h
}

// writeAtomic writes b to path by a temporary file in its directory,
// synced, renamed over path, and the directory synced.
func writeAtomic(path string, b []byte, perm os.FileMode) error {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	f, err := os.CreateTemp(dir, ".tmp-*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	defer os.Remove(tmp) // gone after the rename; removes a failed write
	if _, err := f.Write(b); err != nil {
		f.Close()
		return err
	}
	if err := f.Chmod(perm); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		return err
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// readFileLimit reads a regular file of at most max bytes, checked
// before reading (its size) and while reading (a file that grows).
func readFileLimit(path string, max int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file", path)
	}
	if st.Size() > max {
		return nil, fmt.Errorf("%s is %d bytes, over the limit of %d (plugins.maxModuleSize)", path, st.Size(), max)
	}
	b, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > max {
		return nil, fmt.Errorf("%s grew past the limit of %d bytes while read", path, max)
	}
	return b, nil
}
