package seenkeys

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"sort"
	"sync"
	"time"
)

// Backend keeps the encoded sets of one daemon (or sharding member).
type Backend interface {
	// Name says where the sets go, for the log.
	Name() string
	// Load returns plugin's stored set, nil when there is none.
	Load(ctx context.Context, plugin string) ([]byte, error)
	// Save stores plugin's set; nil data deletes it.
	Save(ctx context.Context, plugin string, data []byte) error
	// Others returns the sets other members stored for plugin, by
	// member; nil from a backend no other member reads.
	Others(ctx context.Context, plugin string) (map[string][]byte, error)
}

// DefaultFlushInterval is how often changed sets are written at most.
const DefaultFlushInterval = 10 * time.Second

// Options configure a Store.
type Options struct {
	Backend       Backend       // nil: Memory()
	FlushInterval time.Duration // <= 0: DefaultFlushInterval
	Logger        *slog.Logger  // nil: slog.Default()
}

// Store holds the sets of one daemon, by plugin name, and writes the
// changed ones to its backend at most once per flush interval and on
// Close. Its methods are safe for concurrent use.
type Store struct {
	backend  Backend
	interval time.Duration
	log      *slog.Logger

	mu   sync.Mutex
	sets map[string]*Set // guarded by mu
	// forgotten are plugins whose stored set is to be deleted at the
	// next flush; guarded by mu.
	forgotten map[string]bool
	// adopted holds, per plugin, the keys of other members' sets this
	// daemon has handed the plugin a delete of (Adopted); memory only.
	adopted map[string]*Set

	flushMu   sync.Mutex
	stop      chan struct{}
	done      chan struct{}
	closeOnce sync.Once
}

// New returns a store and starts its flusher, which Close ends.
func New(o Options) *Store {
	if o.Backend == nil {
		o.Backend = Memory()
	}
	if o.FlushInterval <= 0 {
		o.FlushInterval = DefaultFlushInterval
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	s := &Store{backend: o.Backend, interval: o.FlushInterval, log: o.Logger,
		sets: map[string]*Set{}, forgotten: map[string]bool{}, adopted: map[string]*Set{}, stop: make(chan struct{}), done: make(chan struct{})}
	go s.flusher()
	return s
}

// Backend returns where the store writes.
func (s *Store) Backend() Backend { return s.backend }

// Set returns plugin's set, reading the stored one on first use. A stored
// set that cannot be read is logged and replaced by an empty one: the
// plugin then misses the deletes that happened while it was away, as it
// would without this package.
func (s *Store) Set(ctx context.Context, plugin string) *Set {
	s.mu.Lock()
	set := s.sets[plugin]
	if set != nil {
		s.mu.Unlock()
		return set
	}
	set = NewSet()
	s.sets[plugin] = set
	delete(s.forgotten, plugin)
	s.mu.Unlock()
	data, err := s.backend.Load(ctx, plugin)
	if err == nil && data != nil {
		var keys []Key
		if keys, err = Decode(data); err == nil {
			set.load(keys)
		}
	}
	if err != nil {
		s.log.Warn("could not read the keys a plugin was handed before; deletes that happened while it was away will not be delivered",
			"plugin", plugin, "backend", s.backend.Name(), "err", err)
	}
	return set
}

// Forget drops plugin's set, in memory at once and from the backend at
// the next flush.
func (s *Store) Forget(plugin string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if set := s.sets[plugin]; set != nil {
		set.Clear()
	}
	delete(s.sets, plugin)
	s.forgotten[plugin] = true
}

// Adopted returns the keys of other members' sets that this daemon has
// handed plugin a missed delete of: a departed member's ConfigMaps stay,
// and without this every change of the group would hand the same deletes
// again. Memory only: a restart hands them once more.
func (s *Store) Adopted(plugin string) *Set {
	s.mu.Lock()
	defer s.mu.Unlock()
	a := s.adopted[plugin]
	if a == nil {
		a = NewSet()
		s.adopted[plugin] = a
	}
	return a
}

// Others returns the keys that members other than this one and those in
// live stored for plugin, merged (ConfigMaps backend only; nil
// elsewhere): the sets of members that left. A set that cannot be read
// is skipped and logged.
func (s *Store) Others(ctx context.Context, plugin string, live []string) ([]Key, error) {
	sets, err := s.backend.Others(ctx, plugin)
	if err != nil && len(sets) == 0 {
		return nil, err
	}
	if err != nil {
		s.log.Warn("could not read some other members' seen keys", "plugin", plugin, "err", err)
	}
	members := make([]string, 0, len(sets))
	for m := range sets {
		if !slices.Contains(live, m) {
			members = append(members, m)
		}
	}
	sort.Strings(members)
	var out []Key
	for _, m := range members {
		keys, err := Decode(sets[m])
		if err != nil {
			s.log.Warn("could not read another member's seen keys", "plugin", plugin, "member", m, "err", err)
			continue
		}
		out = append(out, keys...)
	}
	return out, nil
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
				s.log.Warn("writing the keys plugins were handed failed; will retry", "backend", s.backend.Name(), "err", err)
			}
		}
	}
}

// Flush writes every set that changed since it was last written, and
// deletes the forgotten ones.
func (s *Store) Flush(ctx context.Context) error {
	s.flushMu.Lock()
	defer s.flushMu.Unlock()
	s.mu.Lock()
	sets := make(map[string]*Set, len(s.sets))
	for n, set := range s.sets {
		sets[n] = set
	}
	var gone []string
	for n := range s.forgotten {
		gone = append(gone, n)
	}
	s.mu.Unlock()
	var errs []error
	for _, n := range gone {
		if err := s.backend.Save(ctx, n, nil); err != nil {
			errs = append(errs, err)
			continue
		}
		s.mu.Lock()
		if s.sets[n] == nil {
			delete(s.forgotten, n)
		}
		s.mu.Unlock()
	}
	// The memory backend keeps nothing: encoding (gzip at its best
	// compression) every changed set each interval would be garbage and
	// CPU for nothing, 10 MB a flush for a plugin holding 50,000 keys.
	_, keepsNothing := s.backend.(memory)
	for n, set := range sets {
		if keepsNothing {
			set.written(set.generation())
			continue
		}
		data, gen, dirty := set.snapshot()
		if !dirty {
			continue
		}
		if err := s.backend.Save(ctx, n, data); err != nil {
			errs = append(errs, err)
			continue
		}
		set.written(gen)
	}
	return errors.Join(errs...)
}

// Close stops the flusher and writes what changed, within ctx.
func (s *Store) Close(ctx context.Context) error {
	s.closeOnce.Do(func() { close(s.stop) })
	<-s.done
	return s.Flush(ctx)
}

// memory is the backend of a daemon with nowhere to write: a restart
// forgets, so only reloads and quarantines are covered.
type memory struct{}

// Memory returns the backend that keeps nothing beyond the Store.
func Memory() Backend { return memory{} }

func (memory) Name() string                                              { return "memory" }
func (memory) Load(context.Context, string) ([]byte, error)              { return nil, nil }
func (memory) Save(context.Context, string, []byte) error                { return nil }
func (memory) Others(context.Context, string) (map[string][]byte, error) { return nil, nil }
