package state

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"runtime/debug"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
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
	// OnCorrupt, if set, is called once the store found its file corrupt
	// and moved it aside (movedTo; "" if it could not be moved), with why
	// it is corrupt. The store has already logged it; this is for a
	// metric or an Event.
	OnCorrupt func(path, movedTo string, reason error)
}

// reserveAhead is how many versions past the last one handed out a
// bucket reserves in the file at a time. A reservation is fsync'd before
// any version in it is handed out, so a crash never hands one out again;
// a restart after a crash skips the unused rest (at most this many). The
// flusher renews reservations in its batches, so a Set waits for an
// fsync of its own only when a bucket hands out more than half of this
// within one flush interval.
const reserveAhead = 1 << 16

// Store holds every plugin's bucket. Its methods are safe for concurrent
// use.
type Store struct {
	log       *slog.Logger
	path      string
	interval  time.Duration
	onCorrupt func(path, movedTo string, reason error)

	// db is the open file, nil when memory only (no path, the file is
	// unusable, or closed). It is read without mu: a Set that reserves
	// versions holds its bucket's lock, and mu is always taken before a
	// bucket's, never after.
	db atomic.Pointer[bolt.DB]

	// mu guards buckets, floors, dropped and closed. The lock order is
	// always Store.mu, then Bucket.mu.
	mu      sync.Mutex
	buckets map[string]*Bucket
	// floors are the last versions of dropped buckets, which a bucket of
	// the same name starts above (versions of a name are never reused).
	floors map[string]int64
	// dropped lists buckets removed since the last flush, to delete from
	// the file.
	dropped map[string]bool
	closed  bool

	// corrupt counts the corrupt files found (at most one per Open).
	corrupt atomic.Int64

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
		log: o.Logger, path: o.Path, interval: o.FlushInterval, onCorrupt: o.OnCorrupt,
		buckets: map[string]*Bucket{}, floors: map[string]int64{}, dropped: map[string]bool{},
		stop: make(chan struct{}), done: make(chan struct{}),
	}
	if s.log == nil {
		s.log = slog.Default()
	}
	if s.interval <= 0 {
		s.interval = DefaultFlushInterval
	}
	if s.path != "" {
		s.openFile(ctx)
	}
	go s.flusher()
	return s, nil
}

// Persistent reports whether the store writes to a file.
func (s *Store) Persistent() bool { return s.db.Load() != nil }

// CorruptFiles reports how many corrupt files the store found and moved
// aside (0 or 1: it looks at its file once, at Open).
func (s *Store) CorruptFiles() int64 { return s.corrupt.Load() }

// unusable is the report of a file the store cannot use and leaves alone.
func (s *Store) unusable(err error) {
	s.log.Error("plugin state file cannot be opened; plugin state is kept in memory only and is lost when the host stops",
		"path", s.path, "err", err,
		"fix", "make the file and its directory readable and writable by the host (and not used by another process), or change plugins.state.path; then restart")
}

func (s *Store) openFile(ctx context.Context) {
	lf, err := s.inspect()
	if err == nil {
		var db *bolt.DB
		if db, err = openBolt(s.path); err == nil {
			s.db.Store(db)
			s.adopt(ctx, lf)
			return
		}
		if isCorrupt(err) { // bbolt found what inspect did not
			err = s.corrupted(err)
		}
	}
	if !errors.Is(err, errMovedAside) {
		s.unusable(err)
		return
	}
	db, err := openBolt(s.path)
	if err != nil {
		s.log.Error("plugin state file cannot be created; plugin state is kept in memory only", "path", s.path, "err", err)
		return
	}
	s.db.Store(db)
}

// inspect reads the file, if there is one, and checks all of it (see
// verify.go) under an exclusive lock, so that it never reads a file
// another host is writing. A corrupt file is moved aside before the lock
// is released.
func (s *Store) inspect() (*loadedFile, error) {
	// Not a device or a FIFO: opening a FIFO waits for a writer, and
	// reading a device to its end may never end (or fill memory).
	fi, err := os.Stat(s.path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil // bbolt creates it
	}
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("not a regular file (%v)", fi.Mode().Type())
	}
	f, err := os.Open(s.path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if err := lockFile(f, lockTimeout); err != nil {
		return nil, err
	}
	data, err := io.ReadAll(f)
	if err != nil {
		return nil, fmt.Errorf("reading: %w", err)
	}
	root, err := parseBolt(data)
	if err == nil {
		var lf *loadedFile
		if lf, err = decodeFile(s, root); err == nil {
			return lf, nil
		}
	}
	return nil, s.corrupted(err)
}

// errMovedAside: the file was corrupt, is reported and moved aside; a
// fresh one may be started at the path.
var errMovedAside = errors.New("corrupt file moved aside")

// corrupted reports a corrupt file and moves it to <path>.corrupt-<time>,
// kept for whoever wants to look. It returns errMovedAside, or the
// reason the file could not be moved (then the store must leave the
// path alone).
func (s *Store) corrupted(reason error) error {
	s.corrupt.Add(1)
	aside := fmt.Sprintf("%s.corrupt-%s", s.path, time.Now().UTC().Format("20060102T150405.000Z"))
	if err := os.Rename(s.path, aside); err != nil {
		if s.onCorrupt != nil {
			s.onCorrupt(s.path, "", reason)
		}
		return fmt.Errorf("the file is corrupt (%v) and cannot be moved aside: %w", reason, err)
	}
	s.log.Error("plugin state file is corrupt; moved aside and started afresh: every plugin starts with empty state",
		"path", s.path, "movedTo", aside, "err", reason,
		"fix", "restore a backup to the path while the host is stopped, or delete the moved file once it is not needed")
	if s.onCorrupt != nil {
		s.onCorrupt(s.path, aside, reason)
	}
	return errMovedAside
}

// adopt takes the buckets of a checked file (nil: a new file) and makes
// one commit: it renews every bucket's version reservation, so the first
// writes after a start wait for no fsync of their own, and rewrites a
// file of format 0 in the current format, all of it at once (a file is
// never of both formats). If a format-0 file cannot be rewritten it is
// left as it was and the store runs in memory; a current file that
// cannot take the commit stays open (its writes are retried by the
// flusher, and a Set past its bucket's reservation fails meanwhile).
func (s *Store) adopt(ctx context.Context, lf *loadedFile) {
	legacy := lf != nil && lf.legacy
	if lf != nil {
		s.mu.Lock()
		s.buckets, s.floors = lf.buckets, lf.floors
		if legacy {
			for _, b := range s.buckets {
				for k := range b.entries {
					b.dirty[k] = struct{}{}
				}
			}
		}
		s.mu.Unlock()
	}
	err := s.Flush(ctx)
	switch {
	case err == nil:
	case legacy:
		s.unusable(fmt.Errorf("rewriting the file in the current format: %w", err))
		if db := s.db.Swap(nil); db != nil {
			_ = db.Close()
		}
	default:
		s.log.Error("plugin state file cannot be written; will retry", "path", s.path, "err", err)
	}
}

// lockTimeout is how long Open waits for another process's lock on the
// file (a host that is still stopping) before running in memory.
const lockTimeout = time.Second

// corruptError marks a file that is not a sound state file.
type corruptError struct{ err error }

func (e corruptError) Error() string { return e.err.Error() }
func (e corruptError) Unwrap() error { return e.err }

func isCorrupt(err error) bool {
	var c corruptError
	return errors.As(err, &c) || errors.Is(err, bolt.ErrInvalid) || errors.Is(err, bolt.ErrChecksum) || errors.Is(err, bolt.ErrVersionMismatch)
}

// openBolt opens the file with bbolt, once inspect found it sound (or
// there is none). The open runs on a goroutine of its own with faults
// turned into panics (runtime/debug.SetPanicOnFault applies to the
// goroutine that sets it), so that a file changed under the host since
// it was checked is a corrupt file, not a dead process.
func openBolt(path string) (db *bolt.DB, err error) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		debug.SetPanicOnFault(true)
		defer func() {
			if r := recover(); r != nil {
				db, err = nil, corruptError{fmt.Errorf("bbolt: %v", r)}
			}
		}()
		db, err = bolt.Open(path, 0o600, &bolt.Options{Timeout: lockTimeout})
	}()
	<-done
	if errors.Is(err, bolt.ErrTimeout) {
		return nil, fmt.Errorf("locked by another process: %w", err)
	}
	return db, err
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
		// Versions go on above the dropped bucket's.
		b.seq = s.floors[plugin]
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
		s.floors[plugin] = max(s.floors[plugin], b.seq, b.reserved)
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

// pending is one bucket's part of a flush: its changed keys, and its
// index entry as of the same moment (so the entry describes exactly what
// the file holds once the flush commits).
type pending struct {
	b    *Bucket
	name string
	puts map[string]*entry // nil entry: deleted
	x    index
}

// Flush writes every pending change to the file in one transaction and
// fsyncs it. Without a file it does nothing. It also renews the version
// reservation of every bucket that used up half of its own.
func (s *Store) Flush(ctx context.Context) error {
	s.flushMu.Lock()
	defer s.flushMu.Unlock()
	s.mu.Lock()
	db := s.db.Load()
	if db == nil {
		s.mu.Unlock()
		return nil
	}
	dropped := make(map[string]int64, len(s.dropped))
	for name := range s.dropped {
		dropped[name] = s.floors[name]
	}
	s.dropped = map[string]bool{}
	var work []pending
	for name, b := range s.buckets {
		b.mu.Lock()
		renew := b.reserved-b.seq < reserveAhead/2
		if len(b.dirty) > 0 || renew {
			p := pending{b: b, name: name, puts: make(map[string]*entry, len(b.dirty)),
				x: index{reserved: b.reserved, keys: uint64(len(b.entries)), sum: b.sum}}
			if renew {
				p.x.reserved = min(b.seq+reserveAhead, MaxVersion)
			}
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
		return updateIndex(tx, func(idx *bolt.Bucket) error {
			for name, floor := range dropped {
				if err := tx.DeleteBucket([]byte(name)); err != nil && !errors.Is(err, bolt.ErrBucketNotFound) {
					return err
				}
				// The entry stays, empty, keeping the reservation.
				old, err := getIndex(idx, name)
				if err != nil {
					return err
				}
				if err := idx.Put([]byte(name), index{reserved: max(old.reserved, floor)}.encode(name)); err != nil {
					return err
				}
			}
			for i := range work {
				p := &work[i]
				bb, err := tx.CreateBucketIfNotExists([]byte(p.name))
				if err != nil {
					return err
				}
				for k, e := range p.puts {
					if e == nil {
						err = bb.Delete([]byte(k))
					} else {
						err = bb.Put([]byte(k), encodeRecord(e))
					}
					if err != nil {
						return err
					}
				}
				// A Set may have reserved more meanwhile (reserve): keep
				// the higher.
				old, err := getIndex(idx, p.name)
				if err != nil {
					return err
				}
				p.x.reserved = max(p.x.reserved, old.reserved)
				if err := idx.Put([]byte(p.name), p.x.encode(p.name)); err != nil {
					return err
				}
			}
			return nil
		})
	})
	if err != nil {
		s.requeue(work, dropped)
		return fmt.Errorf("plugin state %s: %w", s.path, err)
	}
	for _, p := range work {
		p.b.mu.Lock()
		p.b.reserved = max(p.b.reserved, p.x.reserved)
		p.b.mu.Unlock()
	}
	return nil
}

// updateIndex runs fn on the file's index bucket in tx, creating it (and
// the meta bucket) in the first commit of a new file, then seals the
// index: the format record holds the number of entries and the sum of
// their checksums, so an entry lost (the reservation of a dropped
// plugin, which nothing else refers to) fails too.
func updateIndex(tx *bolt.Tx, fn func(idx *bolt.Bucket) error) error {
	m, err := tx.CreateBucketIfNotExists([]byte(metaBucket))
	if err != nil {
		return err
	}
	idx, err := m.CreateBucketIfNotExists([]byte(metaIndex))
	if err != nil {
		return err
	}
	if err := fn(idx); err != nil {
		return err
	}
	var n, sum uint64
	err = idx.ForEach(func(_, v []byte) error {
		if len(v) != indexRecLen {
			return fmt.Errorf("index entry of %d bytes", len(v))
		}
		n++
		sum += uint64(binary.LittleEndian.Uint32(v[indexRecLen-4:]))
		return nil
	})
	if err != nil {
		return err
	}
	return m.Put([]byte(metaFormat), formatRecord(n, sum))
}

// getIndex returns plugin's entry in the index, zero if it has none.
func getIndex(idx *bolt.Bucket, plugin string) (index, error) {
	v := idx.Get([]byte(plugin))
	if v == nil {
		return index{}, nil
	}
	return decodeIndex(plugin, v)
}

// reserve makes versions up to want safe to hand out to bucket plugin:
// it records want (or a higher reservation already there) in the file
// and fsyncs before returning it. The index entry's keys and sum stay as
// they are, as does the bucket in the file. It is called with the
// bucket's lock held, and takes no other lock of the store.
func (s *Store) reserve(db *bolt.DB, plugin string, want int64) (int64, error) {
	err := db.Update(func(tx *bolt.Tx) error {
		return updateIndex(tx, func(idx *bolt.Bucket) error {
			x, err := getIndex(idx, plugin)
			if err != nil {
				return err
			}
			x.reserved = max(x.reserved, want)
			want = x.reserved
			return idx.Put([]byte(plugin), x.encode(plugin))
		})
	})
	return want, err
}

// requeue marks a failed flush's changes pending again.
func (s *Store) requeue(work []pending, dropped map[string]int64) {
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
	if db := s.db.Swap(nil); db != nil {
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
	crc     uint32 // of the entry's record (recordCRC)
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
	// reserved is the highest version the file says may be handed out.
	// While the store has a file and the bucket is attached, seq <=
	// reserved: a version above it is handed out only once reserve has
	// fsync'd a higher reservation, so no crash can make one come again.
	reserved int64
	// sum is the sum of the entries' checksums, for the file's index.
	sum uint64
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
		b.sum -= uint64(old.crc)
	} else {
		b.insertKey(k)
		b.bytes += int64(len(k))
	}
	b.entries[k] = e
	b.bytes += int64(len(e.value))
	b.sum += uint64(e.crc)
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
	version, err := b.nextVersion()
	if err != nil {
		return 0, err
	}
	k := string(key)
	if old == nil {
		b.insertKey(k)
	} else {
		b.sum -= uint64(old.crc)
	}
	e := &entry{version: version, value: append([]byte(nil), value...)}
	e.crc = recordCRC(b.name, k, e.version, e.value)
	b.entries[k] = e
	b.bytes += grow
	b.sum += uint64(e.crc)
	b.markDirty(k)
	return version, nil
}

// nextVersion hands out the bucket's next version, first reserving more
// in the file if it is past the reservation. b.mu is held.
func (b *Bucket) nextVersion() (int64, error) {
	v := b.seq + 1
	if v > MaxVersion {
		return 0, fmt.Errorf("plugin %q: every version up to %d is used", b.name, MaxVersion)
	}
	if v > b.reserved && !b.detached && b.s != nil {
		if db := b.s.db.Load(); db != nil {
			r, err := b.s.reserve(db, b.name, min(b.seq+reserveAhead, MaxVersion))
			switch {
			case err == nil:
				b.reserved = r
			case errors.Is(err, bolt.ErrDatabaseNotOpen):
				// Closed meanwhile (Close): the bucket goes on in
				// memory, unpersisted, as after Close.
			default:
				return 0, fmt.Errorf("plugin %q: no version handed out: reserving versions in the state file %s failed, and one not reserved could be handed out again after a crash: %w",
					b.name, b.s.path, err)
			}
		}
	}
	b.seq = v
	return v, nil
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
	b.sum -= uint64(old.crc)
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
