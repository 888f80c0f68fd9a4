package pluginsource

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"
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
	Digest   string    `json:"digest"`
	Verified bool      `json:"verified,omitempty"`
	Signer   string    `json:"signer,omitempty"`
	At       time.Time `json:"at"`
}

// DirStore is a Store in a directory: blobs/sha256/<hex> holds each
// module, lastgood.json the records. Writes go to a temporary file renamed
// into place, so a crash leaves either the old file or the new one.
type DirStore struct {
	dir string
	mu  sync.Mutex // serialises lastgood.json's read-modify-write
}

// NewDirStore opens (creating) a store in dir.
func NewDirStore(dir string) (*DirStore, error) {
	if err := os.MkdirAll(filepath.Join(dir, "blobs", "sha256"), 0o755); err != nil {
		return nil, fmt.Errorf("plugin source cache %s: %w", dir, err)
	}
	return &DirStore{dir: dir}, nil
}

func (s *DirStore) blob(digest string) (string, error) {
	hex, ok := strings.CutPrefix(digest, "sha256:")
	if !ok || len(hex) != 64 || strings.ContainsAny(hex, "/.") {
		return "", fmt.Errorf("not a sha256 digest: %q", digest)
	}
	return filepath.Join(s.dir, "blobs", "sha256", hex), nil
}

// Put implements Store.
func (s *DirStore) Put(digest string, module []byte) (string, error) {
	p, err := s.blob(digest)
	if err != nil {
		return "", err
	}
	if err := writeAtomic(p, module); err != nil {
		return "", fmt.Errorf("plugin source cache: %w", err)
	}
	return p, nil
}

// Path implements Store.
func (s *DirStore) Path(digest string) (string, bool) {
	p, err := s.blob(digest)
	if err != nil {
		return "", false
	}
	st, err := os.Stat(p)
	return p, err == nil && st.Mode().IsRegular()
}

func (s *DirStore) records() (map[string]Record, error) {
	b, err := os.ReadFile(filepath.Join(s.dir, "lastgood.json"))
	if errors.Is(err, fs.ErrNotExist) {
		return map[string]Record{}, nil
	}
	if err != nil {
		return nil, err
	}
	m := map[string]Record{}
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("%s: %w (delete it to start the sources afresh)", filepath.Join(s.dir, "lastgood.json"), err)
	}
	return m, nil
}

// LastGood implements Store.
func (s *DirStore) LastGood(source string) (Record, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	m, err := s.records()
	if err != nil {
		return Record{}, false
	}
	r, ok := m[source]
	return r, ok
}

// SetLastGood implements Store.
func (s *DirStore) SetLastGood(source string, r Record) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	m, err := s.records()
	if err != nil {
		m = map[string]Record{} // a broken record file is replaced
	}
	m[source] = r
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return err
	}
	return writeAtomic(filepath.Join(s.dir, "lastgood.json"), b)
}

func writeAtomic(path string, b []byte) error {
	f, err := os.CreateTemp(filepath.Dir(path), ".tmp-*")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	if _, err := f.Write(b); err != nil {
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
	return os.Rename(f.Name(), path)
}
