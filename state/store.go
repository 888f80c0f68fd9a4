package state

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sort"
	"strings"
	"sync"
	"time"

	bolt "go.etcd.io/bbolt"
)

// Defaults and limits.
const (
	// DefaultMaxBytes is a bucket's byte quota when none is granted.
	DefaultMaxBytes int64 = 1 << 20
	// DefaultMaxKeys is a bucket's key quota when none is granted.
	DefaultMaxKeys = 10000
	// DefaultFlushInterval is how often writes reach the file.
	DefaultFlushInterval = time.Second
	// MaxKeyLen is the longest key accepted, in bytes.
	MaxKeyLen = 1024
)

// Errors a Bucket's methods return (wrapped with details). Callers test
// them with errors.Is.
var (
	// ErrConflict: a compare-and-swap found another version.
	ErrConflict = errors.New("version conflict")
	// ErrQuota: the write would take the bucket past its quota.
	ErrQuota = errors.New("state quota full")
	// ErrInvalid: an empty or too long key, or a bad expected version.
	ErrInvalid = errors.New("invalid argument")
	// ErrAbsent: Delete of a key that does not exist.
	ErrAbsent = errors.New("no such key")
)

// Any, as the expected version of Set or Delete, means "whatever the
// current version is": an unconditional write.
const Any int64 = -1

// Quota bounds one bucket.
type Quota struct {
	MaxBytes int64 // sum of len(key)+len(value); <= 0 selects DefaultMaxBytes
	MaxKeys  int   // <= 0 selects DefaultMaxKeys
}

func (q Quota) withDefaults() Quota {
	if q.MaxBytes <= 0 {
		q.MaxBytes = DefaultMaxBytes
	}
	if q.MaxKeys <= 0 {
		q.MaxKeys = DefaultMaxKeys
	}
	return q
}

// Options configure a Store.
type Options struct {
	// Path of the bbolt file; "" keeps state in memory only.
	Path string
	// FlushInterval is how often pending writes are written and fsync'd.
	// <= 0 selects DefaultFlushInterval.
	FlushInterval time.Duration
	// Logger receives the reports of an unusable file and of failed
	// flushes. Default: slog.Default().
	Logger *slog.Logger
}

// Store holds every plugin's bucket. Its methods are safe for concurrent
// use.
type Store struct {
	log      *slog.Logger
	path     string
	interval time.Duration

	// mu guards buckets, db and closed. It is never held while a
	// bucket's mu is taken by someone else's call path the other way
	// round: the order is always Store.mu, then Bucket.mu.
	mu      sync.Mutex
	buckets map[string]*Bucket
	db      *bolt.DB // nil: memory only (no path, or the file is unusable)
	// dropped lists buckets removed since the last flush, to delete from
	// the file.
	dropped map[string]bool
	closed  bool

	// flushMu serialises flushes (the ticker's and Close's).
	flushMu sync.Mutex
	stop    chan struct{}
	done    chan struct{}
}

// Open opens a store. With a path it reads every bucket the file holds. It
// fails only when ctx is done; an unusable file is reported in the log
// and the store runs in memory (see the package doc).
func Open(ctx context.Context, o Options) (*Store, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s := &Store{
		log: o.Logger, path: o.Path, interval: o.FlushInterval,
		buckets: map[string]*Bucket{}, dropped: map[string]bool{},
		stop: make(chan struct{}), done: make(chan struct{}),
	}
	if s.log == nil {
		s.log = slog.Default()
	}
	if s.interval <= 0 {
		s.interval = DefaultFlushInterval
	}
	if s.path != "" {
		s.openFile()
	}
	go s.flusher()
	return s, nil
}

// Persistent reports whether the store writes to a file.
func (s *Store) Persistent() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.db != nil
}

func (s *Store) openFile() {
	db, err := s.tryOpen()
	if err == nil {
		s.db = db
		return
	}
	if !isCorrupt(err) {
		s.log.Error("plugin state file cannot be opened; plugin state is kept in memory only and is lost when the host stops",
			"path", s.path, "err", err,
			"fix", "make the file and its directory readable and writable by the host (and not used by another process), or change plugins.state.path; then restart")
		return
	}
	aside := fmt.Sprintf("%s.corrupt-%s", s.path, time.Now().UTC().Format("20060102T150405Z"))
	if rerr := os.Rename(s.path, aside); rerr != nil {
		s.log.Error("plugin state file is corrupt and cannot be moved aside; plugin state is kept in memory only",
			"path", s.path, "err", err, "renameErr", rerr,
			"fix", "remove or replace the file, then restart; every plugin starts with empty state")
		return
	}
	s.log.Error("plugin state file is corrupt; moved aside and started afresh: every plugin starts with empty state",
		"path", s.path, "movedTo", aside, "err", err,
		"fix", "restore a backup to the path while the host is stopped, or delete the moved file once it is not needed")
	db, err = s.tryOpen()
	if err != nil {
		s.log.Error("plugin state file cannot be created; plugin state is kept in memory only", "path", s.path, "err", err)
		return
	}
	s.db = db
}

// corruptError marks a failure to read a file that opened as a bbolt file.
type corruptError struct{ err error }

func (e corruptError) Error() string { return e.err.Error() }
func (e corruptError) Unwrap() error { return e.err }

func isCorrupt(err error) bool {
	var c corruptError
	return errors.As(err, &c) || errors.Is(err, bolt.ErrInvalid) || errors.Is(err, bolt.ErrChecksum) || errors.Is(err, bolt.ErrVersionMismatch)
}

// tryOpen opens the file and loads its buckets. bbolt panics on some
// corruptions it meets while reading pages; that is a corrupt file too.
func (s *Store) tryOpen() (db *bolt.DB, err error) {
	db, err = bolt.Open(s.path, 0o600, &bolt.Options{Timeout: time.Second})
	if err != nil {
		if errors.Is(err, bolt.ErrTimeout) {
			return nil, fmt.Errorf("locked by another process: %w", err)
		}
		if os.IsPermission(err) || os.IsNotExist(err) {
			return nil, err
		}
		// Anything else while reading the meta pages (a short or
		// garbage file) is corruption.
		return nil, corruptError{err}
	}
	defer func() {
		if r := recover(); r != nil {
			err = corruptError{fmt.Errorf("reading: %v", r)}
		}
		if err != nil {
			_ = db.Close()
			db = nil
		}
	}()
	loaded := map[string]*Bucket{}
	err = db.View(func(tx *bolt.Tx) error {
		return tx.ForEach(func(name []byte, bb *bolt.Bucket) error {
			b := newBucket(s, string(name))
			b.seq = int64(bb.Sequence())
			err := bb.ForEach(func(k, v []byte) error {
				if len(v) < 8 {
					return corruptError{fmt.Errorf("bucket %q key %q: short record", name, k)}
				}
				b.put(string(k), &entry{version: int64(binary.LittleEndian.Uint64(v)), value: append([]byte(nil), v[8:]...)})
				return nil
			})
			loaded[b.name] = b
			return err
		})
	})
	if err != nil {
		return nil, corruptError{err}
	}
	s.buckets = loaded
	return db, nil
}

// Bucket returns the bucket of plugin, creating it empty if there is none,
// and sets its quota to q.
func (s *Store) Bucket(plugin string, q Quota) *Bucket {
	s.mu.Lock()
	defer s.mu.Unlock()
	b := s.buckets[plugin]
	if b == nil {
		b = newBucket(s, plugin)
		// A drop not yet flushed stays pending: the flush deletes the
		// old bucket from the file before writing this one's keys.
		s.buckets[plugin] = b
	}
	b.mu.Lock()
	b.quota = q.withDefaults()
	b.mu.Unlock()
	return b
}

// Lookup returns plugin's bucket if it has one, without creating it.
func (s *Store) Lookup(plugin string) (*Bucket, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	b, ok := s.buckets[plugin]
	return b, ok
}

// Names returns the plugins that have a bucket, sorted.
func (s *Store) Names() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]string, 0, len(s.buckets))
	for n := range s.buckets {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// Drop deletes plugin's bucket, in memory at once and from the file at
// the next flush. A Bucket value still held keeps working, detached: its
// writes are no longer persisted.
func (s *Store) Drop(plugin string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if b := s.buckets[plugin]; b != nil {
		b.mu.Lock()
		b.detached = true
		b.mu.Unlock()
		delete(s.buckets, plugin)
	}
	s.dropped[plugin] = true
}

func (s *Store) flusher() {
	defer close(s.done)
	t := time.NewTicker(s.interval)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
			if err := s.Flush(context.Background()); err != nil {
				s.log.Error("writing plugin state to its file failed; will retry", "path", s.path, "err", err)
			}
		}
	}
}

type pending struct {
	name string
	seq  int64
	puts map[string]*entry // nil entry: deleted
}

// Flush writes every pending change to the file in one transaction and
// fsyncs it. Without a file it does nothing.
func (s *Store) Flush(ctx context.Context) error {
	s.flushMu.Lock()
	defer s.flushMu.Unlock()
	s.mu.Lock()
	db := s.db
	if db == nil {
		s.mu.Unlock()
		return nil
	}
	dropped := s.dropped
	s.dropped = map[string]bool{}
	var work []pending
	for name, b := range s.buckets {
		b.mu.Lock()
		if len(b.dirty) > 0 {
			p := pending{name: name, seq: b.seq, puts: make(map[string]*entry, len(b.dirty))}
			for k := range b.dirty {
				p.puts[k] = b.entries[k] // entries are immutable once stored
			}
			b.dirty = map[string]struct{}{}
			work = append(work, p)
		}
		b.mu.Unlock()
	}
	s.mu.Unlock()
	if len(work) == 0 && len(dropped) == 0 {
		return nil
	}
	if err := ctx.Err(); err != nil {
		s.requeue(work, dropped)
		return err
	}
	err := db.Update(func(tx *bolt.Tx) error {
		for name := range dropped {
			if err := tx.DeleteBucket([]byte(name)); err != nil && !errors.Is(err, bolt.ErrBucketNotFound) {
				return err
			}
		}
		for _, p := range work {
			bb, err := tx.CreateBucketIfNotExists([]byte(p.name))
			if err != nil {
				return err
			}
			if err := bb.SetSequence(uint64(p.seq)); err != nil {
				return err
			}
			for k, e := range p.puts {
				if e == nil {
					if err := bb.Delete([]byte(k)); err != nil {
						return err
					}
					continue
				}
				// bbolt keeps the slice until the commit: one per record.
				rec := make([]byte, 0, 8+len(e.value))
				rec = binary.LittleEndian.AppendUint64(rec, uint64(e.version))
				rec = append(rec, e.value...)
				if err := bb.Put([]byte(k), rec); err != nil {
					return err
				}
			}
		}
		return nil
	})
	if err != nil {
		s.requeue(work, dropped)
		return fmt.Errorf("plugin state %s: %w", s.path, err)
	}
	return nil
}

// requeue marks a failed flush's changes pending again.
func (s *Store) requeue(work []pending, dropped map[string]bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for n := range dropped {
		s.dropped[n] = true
	}
	for _, p := range work {
		b := s.buckets[p.name]
		if b == nil {
			continue
		}
		b.mu.Lock()
		for k := range p.puts {
			b.dirty[k] = struct{}{}
		}
		b.mu.Unlock()
	}
}

// Close writes what is pending, fsyncs and closes the file. The buckets
// keep working in memory afterwards, unpersisted. Close is idempotent.
func (s *Store) Close(ctx context.Context) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	s.mu.Unlock()
	close(s.stop)
	<-s.done
	err := s.Flush(ctx)
	s.mu.Lock()
	db := s.db
	s.db = nil
	s.mu.Unlock()
	if db != nil {
		if cerr := db.Close(); cerr != nil && err == nil {
			err = fmt.Errorf("plugin state %s: %w", s.path, cerr)
		}
	}
	return err
}

// entry is one key's value and version. It is never changed once stored
// in a bucket (a write stores a new entry), so a flush or a Get may use it
// after the bucket's lock is released.
type entry struct {
	version int64
	value   []byte
}

// Bucket is one plugin's key-value state. Its methods are safe for
// concurrent use.
type Bucket struct {
	s    *Store
	name string

	// mu guards everything below.
	mu      sync.Mutex
	entries map[string]*entry
	// keys holds the keys of entries, sorted, for List.
	keys  []string
	bytes int64
	quota Quota
	// seq is the last version handed out; versions are seq+1, seq+2, ...
	seq int64
	// dirty holds the keys written or deleted since the last flush.
	dirty map[string]struct{}
	// detached is set when the bucket is dropped from its store.
	detached bool
}

func newBucket(s *Store, name string) *Bucket {
	return &Bucket{s: s, name: name, entries: map[string]*entry{}, dirty: map[string]struct{}{}, quota: Quota{}.withDefaults()}
}

// put adds or replaces k during loading (no quota, no dirty mark).
func (b *Bucket) put(k string, e *entry) {
	if old, ok := b.entries[k]; ok {
		b.bytes -= int64(len(old.value))
	} else {
		b.insertKey(k)
		b.bytes += int64(len(k))
	}
	b.entries[k] = e
	b.bytes += int64(len(e.value))
	if e.version > b.seq {
		b.seq = e.version
	}
}

func (b *Bucket) insertKey(k string) {
	i := sort.SearchStrings(b.keys, k)
	b.keys = append(b.keys, "")
	copy(b.keys[i+1:], b.keys[i:])
	b.keys[i] = k
}

func (b *Bucket) removeKey(k string) {
	i := sort.SearchStrings(b.keys, k)
	if i < len(b.keys) && b.keys[i] == k {
		b.keys = append(b.keys[:i], b.keys[i+1:]...)
	}
}

func checkKey(key []byte) error {
	if len(key) == 0 {
		return fmt.Errorf("%w: empty key", ErrInvalid)
	}
	if len(key) > MaxKeyLen {
		return fmt.Errorf("%w: key of %d bytes; at most %d", ErrInvalid, len(key), MaxKeyLen)
	}
	return nil
}

// Get returns key's value and version. The value must not be modified; it
// stays valid (unchanged) after later writes of the key.
func (b *Bucket) Get(key []byte) (value []byte, version int64, ok bool) {
	b.mu.Lock()
	e := b.entries[string(key)]
	b.mu.Unlock()
	if e == nil {
		return nil, 0, false
	}
	return e.value, e.version, true
}

// Set stores value under key and returns the key's new version. With
// ifVersion Any it writes unconditionally; with 0 only if the key does
// not exist; with v > 0 only if the key's version is v (else ErrConflict).
// The value is copied.
func (b *Bucket) Set(key, value []byte, ifVersion int64) (int64, error) {
	if err := checkKey(key); err != nil {
		return 0, err
	}
	if ifVersion < Any {
		return 0, fmt.Errorf("%w: expected version %d", ErrInvalid, ifVersion)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	old := b.entries[string(key)]
	if err := checkVersion(key, old, ifVersion); err != nil {
		return 0, err
	}
	grow := int64(len(value))
	keys := len(b.entries)
	if old != nil {
		grow -= int64(len(old.value))
	} else {
		grow += int64(len(key))
		keys++
	}
	if grow > 0 && b.bytes+grow > b.quota.MaxBytes {
		return 0, fmt.Errorf("plugin %q: %w: %d of %d bytes used, this write needs %d more; delete keys or raise grants.state.maxBytes",
			b.name, ErrQuota, b.bytes, b.quota.MaxBytes, grow)
	}
	if old == nil && keys > b.quota.MaxKeys {
		return 0, fmt.Errorf("plugin %q: %w: %d of %d keys used; delete keys or raise grants.state.maxKeys",
			b.name, ErrQuota, len(b.entries), b.quota.MaxKeys)
	}
	k := string(key)
	if old == nil {
		b.insertKey(k)
	}
	b.seq++
	b.entries[k] = &entry{version: b.seq, value: append([]byte(nil), value...)}
	b.bytes += grow
	b.markDirty(k)
	return b.seq, nil
}

// checkVersion is the compare of compare-and-swap; a missing key is at
// version 0.
func checkVersion(key []byte, old *entry, ifVersion int64) error {
	if ifVersion == Any {
		return nil
	}
	var cur int64
	if old != nil {
		cur = old.version
	}
	if cur != ifVersion {
		return fmt.Errorf("%w: key %q is at version %d, not %d", ErrConflict, key, cur, ifVersion)
	}
	return nil
}

func (b *Bucket) markDirty(k string) {
	if !b.detached && b.s != nil {
		b.dirty[k] = struct{}{}
	}
}

// Delete removes key. With ifVersion Any it removes whatever is there
// (ErrAbsent if nothing); with v > 0 only if the key's version is v (else
// ErrConflict, also when the key does not exist).
func (b *Bucket) Delete(key []byte, ifVersion int64) error {
	if err := checkKey(key); err != nil {
		return err
	}
	if ifVersion != Any && ifVersion <= 0 {
		return fmt.Errorf("%w: expected version %d; use -1 (any) or a version from get or set", ErrInvalid, ifVersion)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	k := string(key)
	old := b.entries[k]
	if err := checkVersion(key, old, ifVersion); err != nil {
		return err
	}
	if old == nil {
		return fmt.Errorf("%w: %q", ErrAbsent, key)
	}
	delete(b.entries, k)
	b.removeKey(k)
	b.bytes -= int64(len(k) + len(old.value))
	// The sequence is not rewound: a key written again gets a new version.
	b.markDirty(k)
	return nil
}

// List calls fn with the keys that start with prefix and sort after
// after ("" = from the first), in byte order, at most limit of them (<= 0:
// no limit) or until fn returns false. It returns how many it passed.
// fn runs with the bucket locked and must not call the bucket.
func (b *Bucket) List(prefix, after []byte, limit int, fn func(key string) bool) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	start := string(prefix)
	i := sort.SearchStrings(b.keys, start)
	if len(after) > 0 && string(after) >= start {
		a := string(after)
		i = sort.Search(len(b.keys), func(j int) bool { return b.keys[j] > a })
	}
	n := 0
	for ; i < len(b.keys) && (limit <= 0 || n < limit); i++ {
		k := b.keys[i]
		if !strings.HasPrefix(k, start) {
			break
		}
		n++
		if !fn(k) {
			break
		}
	}
	return n
}

// Usage returns the bytes and keys the bucket holds.
func (b *Bucket) Usage() (bytes int64, keys int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.bytes, len(b.entries)
}
