package sigverify

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"time"
)

// cacheVersion is the on-disk format; a file of another version is
// ignored (started afresh), not misread.
const cacheVersion = 1

// Cache holds verified results by digest and policy fingerprint. One
// Cache may serve many Verifiers (one per plugin policy); it is safe for
// concurrent use.
type Cache struct {
	path string

	mu      sync.Mutex
	entries map[string]cacheEntry
}

type cacheEntry struct {
	Digest     string    `json:"digest"`
	Policy     string    `json:"policy"`
	Signer     string    `json:"signer"`
	Reason     string    `json:"reason,omitempty"`
	VerifiedAt time.Time `json:"verifiedAt"`
}

type cacheFile struct {
	Version int                   `json:"version"`
	Entries map[string]cacheEntry `json:"entries"`
}

// NewCache returns a cache kept in memory only.
func NewCache() *Cache {
	return &Cache{entries: map[string]cacheEntry{}}
}

// OpenCache returns a cache persisted as JSON in path (for example
// signatures.json next to the module store). A missing file is an empty
// cache; the file is rewritten (to a temporary file, then renamed) on
// every new verified result.
func OpenCache(path string) (*Cache, error) {
	c := &Cache{path: path, entries: map[string]cacheEntry{}}
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return c, nil
	}
	if err != nil {
		return nil, fmt.Errorf("signature cache %s: %w", path, err)
	}
	var f cacheFile
	if err := json.Unmarshal(b, &f); err != nil {
		return nil, fmt.Errorf("signature cache %s: not valid JSON (%v): delete the file; it only saves re-verifying and is rebuilt from the registry", path, err)
	}
	if f.Version == cacheVersion {
		for k, e := range f.Entries {
			c.entries[k] = e
		}
	}
	return c, nil
}

func cacheKey(digest, policy string) string { return digest + " " + policy }

func (c *Cache) get(digest, policy string) (cacheEntry, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.entries[cacheKey(digest, policy)]
	return e, ok
}

func (c *Cache) put(e cacheEntry) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.entries[cacheKey(e.Digest, e.Policy)] = e
	if c.path == "" {
		return nil
	}
	b, err := json.MarshalIndent(cacheFile{Version: cacheVersion, Entries: c.entries}, "", "  ")
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(c.path), filepath.Base(c.path)+".*")
	if err != nil {
		return fmt.Errorf("signature cache %s: %w", c.path, err)
	}
	_, werr := tmp.Write(append(b, '\n'))
	cerr := tmp.Close()
	if err := errors.Join(werr, cerr); err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("signature cache %s: %w", c.path, err)
	}
	if err := os.Rename(tmp.Name(), c.path); err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("signature cache %s: %w", c.path, err)
	}
	return nil
}
