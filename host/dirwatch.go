package host

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/fsnotify/fsnotify"

	"github.com/informer-host/informer-host/internal/config"
)

// WatchOptions tune how the plugin directory is watched.
type WatchOptions struct {
	// Debounce is how long a path must be quiet before it is looked at:
	// editors and copies write a file in several steps. Default 200ms.
	Debounce time.Duration
	// StableFor is how long a file's size and modification time must stay
	// the same before it is loaded, so a file still being written is not
	// taken half-done. Default 100ms.
	StableFor time.Duration
	// Rescan is the period of a full look at the directory, which catches
	// whatever the event stream missed (an overflow, a network file
	// system). Default 30s.
	Rescan time.Duration

	// looked, when set, is told each time a file has been looked at (and
	// loaded, refused or unloaded as need be). Tests wait on it.
	looked func(name string)
	// read, when set, is told each time a file is handed to Load, which
	// reads and hashes it. Tests count it.
	read func(name string)
}

func (o *WatchOptions) defaults() {
	if o.Debounce <= 0 {
		o.Debounce = 200 * time.Millisecond
	}
	if o.StableFor <= 0 {
		o.StableFor = 100 * time.Millisecond
	}
	if o.Rescan <= 0 {
		o.Rescan = 30 * time.Second
	}
}

// wasmMagic starts every WebAssembly binary: "\0asm" and version 1.
var wasmMagic = []byte{0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00}

// allPaths is the debounce key for "look at the whole directory".
const allPaths = ""

// Watch keeps the loaded plugins in step with the plugin directory until
// ctx ends: a module that appears is loaded, one that changes is reloaded
// (see Load), one that goes away is unloaded.
//
// It watches the directory, not the files: editors and cp save by writing
// a new file and renaming it over the old one, and a watch on a file is
// lost when the file is replaced. Names are resolved through symlinks on
// every look, which covers a Kubernetes volume: there the *.wasm names are
// links into "..data", itself a link that is swapped atomically to a new
// timestamped directory on every update. Any event on a name starting with
// ".." therefore means "look at everything".
func (h *Host) Watch(ctx context.Context, opts WatchOptions) error {
	opts.defaults()
	dir := h.dir
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return fmt.Errorf("watch plugin directory: %w", err)
	}
	defer w.Close()
	if err := w.Add(dir); err != nil {
		return fmt.Errorf("watch plugin directory %s: %w", dir, err)
	}
	dw := &dirWatch{h: h, dir: dir, opts: opts, timers: map[string]*time.Timer{},
		fire: make(chan string, 64), sem: make(chan struct{}, runtime.NumCPU()), busy: map[string]bool{},
		handed: map[string]fileIdentity{}}
	defer dw.wait()
	// Whatever changed between the initial load and the watch starting.
	dw.schedule(allPaths, 0)
	rescan := time.NewTicker(opts.Rescan)
	defer rescan.Stop()
	for {
		select {
		case <-ctx.Done():
			dw.stopTimers()
			return nil
		case ev, ok := <-w.Events:
			if !ok {
				return nil
			}
			name := filepath.Base(ev.Name)
			switch {
			case strings.HasPrefix(name, ".."):
				dw.schedule(allPaths, opts.Debounce)
			case strings.HasSuffix(name, ".wasm"):
				dw.schedule(name, opts.Debounce)
			}
		case err, ok := <-w.Errors:
			if !ok {
				return nil
			}
			// An overflow loses events; a full look recovers them.
			h.log.Warn("plugin directory watch error; rescanning", "dir", dir, "err", err)
			dw.schedule(allPaths, opts.Debounce)
		case <-rescan.C:
			dw.schedule(allPaths, 0)
		case name := <-dw.fire:
			dw.look(ctx, name)
		}
	}
}

// dirWatch is Watch's state. timers is touched only by Watch's goroutine;
// looks at files run on goroutines of their own, one per file at a time.
type dirWatch struct {
	h    *Host
	dir  string
	opts WatchOptions
	// timers holds one debounce timer per path (allPaths for the whole
	// directory). A timer sends its key on fire when it expires.
	timers map[string]*time.Timer
	fire   chan string
	// sem bounds the loads (compilations) running at once. It is held
	// only around Host.Load, which never waits for a plugin's call to
	// end; never while waiting for a file to settle or a plugin to stop.
	sem chan struct{}
	wg  sync.WaitGroup

	mu sync.Mutex
	// busy holds the files a goroutine is looking at: true when another
	// look was asked for meanwhile. That goroutine looks again instead of
	// a second one starting, so however often a file is asked about
	// while its look is held up, it has one goroutine.
	busy map[string]bool
	// handed holds, per file name, the identity of the file last handed to
	// Load and the config it was loaded under. A look at the whole
	// directory passes over a file whose identity has not changed since:
	// Load would read and hash it only to find the same sha256, and with
	// ten Go plugins that was 37 MB read and 71 MB of garbage every 30 s
	// rescan, the largest allocation of a busy daemon beyond the
	// informers'. A look asked for by an event on the name always loads.
	handed map[string]fileIdentity
}

// fileIdentity is what changes whenever a file's content can have:
// replacing it (a rename over it, a new ..data link) changes the device or
// inode, and any write changes the size or the modification time, and
// always the change time, which no user can set back.
type fileIdentity struct {
	dev, ino             uint64
	size                 int64
	mtimeNsec, ctimeNsec int64
	cfg                  *config.Config
}

// identify returns st's identity under cfg, or false where the platform
// gives no inode and change time.
func identify(st fs.FileInfo, cfg *config.Config) (fileIdentity, bool) {
	sys, ok := st.Sys().(*syscall.Stat_t)
	if !ok {
		return fileIdentity{}, false
	}
	return fileIdentity{
		dev: uint64(sys.Dev), ino: uint64(sys.Ino), size: st.Size(),
		mtimeNsec: st.ModTime().UnixNano(), ctimeNsec: sys.Ctim.Sec*1e9 + sys.Ctim.Nsec,
		cfg: cfg,
	}, true
}

// schedule (re)arms the debounce timer of key.
func (d *dirWatch) schedule(key string, after time.Duration) {
	if t, ok := d.timers[key]; ok {
		t.Stop()
	}
	d.timers[key] = time.AfterFunc(after, func() { d.fire <- key })
}

func (d *dirWatch) stopTimers() {
	for _, t := range d.timers {
		t.Stop()
	}
	// A timer that already fired may be blocked sending; drain it.
	for {
		select {
		case <-d.fire:
		default:
			return
		}
	}
}

func (d *dirWatch) wait() {
	d.stopTimers()
	done := make(chan struct{})
	go func() { d.wg.Wait(); close(done) }()
	for {
		select {
		case <-done:
			return
		case <-d.fire: // keep late timers from blocking forever
		}
	}
}

// look examines key (a file name, or allPaths) on a goroutine of its own.
func (d *dirWatch) look(ctx context.Context, key string) {
	delete(d.timers, key)
	// A name came or went (or the rescan found that one did): a modules
	// entry may match nothing now, or still.
	d.h.warnUnmatched()
	names := []string{key}
	if key == allPaths {
		names = d.allNames()
	}
	for _, name := range names {
		d.mu.Lock()
		_, running := d.busy[name]
		d.busy[name] = running // a running look is told to look again
		d.mu.Unlock()
		if running {
			continue
		}
		d.wg.Add(1)
		go func() {
			defer d.wg.Done()
			full := key == allPaths
			for {
				retry := d.sync(ctx, name, full)
				full = false // a look asked for meanwhile names this file
				if d.opts.looked != nil {
					d.opts.looked(name)
				}
				d.mu.Lock()
				again := d.busy[name]
				if !again || ctx.Err() != nil {
					delete(d.busy, name)
				} else {
					d.busy[name] = false
				}
				d.mu.Unlock()
				switch {
				case ctx.Err() != nil:
					return
				case again:
					continue
				case retry:
					// Still being written: look again once it settles.
					// Sent from here, so Watch's goroutine re-arms the timer.
					time.AfterFunc(d.opts.Debounce, func() {
						select {
						case d.fire <- name:
						case <-ctx.Done():
						}
					})
				}
				return
			}
		}()
	}
}

// allNames lists the *.wasm names in the directory and the names of the
// plugins loaded now (which may have gone away).
func (d *dirWatch) allNames() []string {
	seen := map[string]bool{}
	names, _ := wasmNames(d.dir)
	for _, n := range names {
		seen[n] = true
	}
	d.h.mu.Lock()
	for name := range d.h.slots {
		seen[name] = true
	}
	d.h.mu.Unlock()
	out := make([]string, 0, len(seen))
	for n := range seen {
		out = append(out, n)
	}
	return out
}

// sync brings one plugin in step with its file. It reports true when the
// file looks incomplete and should be looked at again. full is a look at
// the whole directory, which passes over a file handed to Load before and
// not changed since.
func (d *dirWatch) sync(ctx context.Context, name string, full bool) (retry bool) {
	if d.h.config().IsSourced(name) {
		// Its source loads and unloads it (LoadModule); a file of that
		// name here is ignored, and warnUnmatched says so.
		return false
	}
	path := filepath.Join(d.dir, name)
	st, err := os.Stat(path) // follows links: a dangling link is a removed file
	if errors.Is(err, fs.ErrNotExist) {
		d.forget(name)
		d.h.removed(ctx, name)
		return false
	}
	if full && err == nil && d.unchanged(name, st) {
		return false
	}
	if err != nil || !st.Mode().IsRegular() || st.Size() > d.h.config().ModuleSizeLimit() {
		// Never to be read (a FIFO, a device, a directory, too big) or not
		// readable: Load refuses it with the reason, once.
		return d.load(ctx, path)
	}
	if age := time.Since(st.ModTime()); !bytes.HasPrefix(readPrefix(path, len(wasmMagic)), wasmMagic) &&
		age >= 0 && age < 2*d.opts.Debounce {
		// Not (yet) a module: a copy in progress starts empty or short.
		// One that stays like this is refused by the load once it has
		// settled, and not looked at again until it changes.
		return true
	}
	// Size and mtime must hold still for StableFor.
	t := time.NewTimer(d.opts.StableFor)
	select {
	case <-t.C:
	case <-ctx.Done():
		t.Stop()
		return false
	}
	st2, err := os.Stat(path)
	if err != nil || st2.Size() != st.Size() || !st2.ModTime().Equal(st.ModTime()) {
		return true
	}
	// The identity is taken before the read, so a write racing the load
	// leaves a newer identity that the next look does not pass over.
	cfg := d.h.config()
	retry = d.load(ctx, path)
	if id, ok := identify(st2, cfg); ok && ctx.Err() == nil {
		d.mu.Lock()
		d.handed[name] = id
		d.mu.Unlock()
	}
	return retry
}

// unchanged reports whether name's file is the one last handed to Load,
// under the config in force now.
func (d *dirWatch) unchanged(name string, st fs.FileInfo) bool {
	id, ok := identify(st, d.h.config())
	if !ok {
		return false
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	last, seen := d.handed[name]
	return seen && last == id
}

func (d *dirWatch) forget(name string) {
	d.mu.Lock()
	delete(d.handed, name)
	d.mu.Unlock()
}

// load loads path under sem. Load skips content it has seen (same sha256)
// and keeps the running version when the new one fails; failures are
// logged there.
func (d *dirWatch) load(ctx context.Context, path string) (retry bool) {
	select {
	case d.sem <- struct{}{}:
	case <-ctx.Done():
		return false
	}
	defer func() { <-d.sem }()
	if d.opts.read != nil {
		d.opts.read(filepath.Base(path))
	}
	_ = d.h.Load(ctx, path)
	return false
}

// readPrefix reads the first n bytes of a regular file. O_NONBLOCK: the
// name may have become a FIFO since it was checked.
func readPrefix(path string, n int) []byte {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil
	}
	defer f.Close()
	b := make([]byte, n)
	k, _ := io.ReadFull(f, b)
	return b[:k]
}
