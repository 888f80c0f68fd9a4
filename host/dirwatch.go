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
	"time"

	"github.com/fsnotify/fsnotify"
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
		fire: make(chan string, 64), sem: make(chan struct{}, runtime.NumCPU())}
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

// dirWatch is Watch's state. timers and the pending map are touched only
// by Watch's goroutine; looks at paths run on goroutines of their own,
// bounded by sem, and Host.Load serialises loads of one file.
type dirWatch struct {
	h    *Host
	dir  string
	opts WatchOptions
	// timers holds one debounce timer per path (allPaths for the whole
	// directory). A timer sends its key on fire when it expires.
	timers map[string]*time.Timer
	fire   chan string
	sem    chan struct{}
	wg     sync.WaitGroup
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
	names := []string{key}
	if key == allPaths {
		names = d.allNames()
	}
	for _, name := range names {
		d.wg.Add(1)
		go func() {
			defer d.wg.Done()
			select {
			case d.sem <- struct{}{}:
			case <-ctx.Done():
				return
			}
			defer func() { <-d.sem }()
			if retry := d.sync(ctx, name); retry {
				// Still being written: look again once it settles. Sent
				// from here, so Watch's goroutine re-arms the timer.
				time.AfterFunc(d.opts.Debounce, func() {
					select {
					case d.fire <- name:
					case <-ctx.Done():
					}
				})
			}
		}()
	}
}

// allNames lists the *.wasm names in the directory and the names of the
// plugins loaded now (which may have gone away).
func (d *dirWatch) allNames() []string {
	seen := map[string]bool{}
	if entries, err := os.ReadDir(d.dir); err == nil {
		for _, e := range entries {
			if strings.HasSuffix(e.Name(), ".wasm") {
				seen[e.Name()] = true
			}
		}
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
// file looks incomplete and should be looked at again.
func (d *dirWatch) sync(ctx context.Context, name string) (retry bool) {
	path := filepath.Join(d.dir, name)
	st, err := os.Stat(path) // follows links: a dangling link is a removed file
	if errors.Is(err, fs.ErrNotExist) || (err == nil && st.IsDir()) {
		d.h.Unload(name)
		return false
	}
	if err != nil {
		d.h.log.Warn("cannot stat plugin file", "file", path, "err", err)
		return false
	}
	if !bytes.HasPrefix(readPrefix(path, len(wasmMagic)), wasmMagic) {
		// Not (yet) a module: a copy in progress starts empty. A file that
		// stays like this is reported by the load after it settles.
		if st.Size() < int64(len(wasmMagic)) || time.Since(st.ModTime()) < 2*d.opts.Debounce {
			return true
		}
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
	// Load skips content it has seen (same sha256) and keeps the running
	// version when the new one fails; failures are logged there.
	_ = d.h.Load(ctx, path)
	return false
}

func readPrefix(path string, n int) []byte {
	f, err := os.Open(path)
	if err != nil {
		return nil
	}
	defer f.Close()
	b := make([]byte, n)
	k, _ := io.ReadFull(f, b)
	return b[:k]
}
