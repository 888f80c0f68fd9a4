package host

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// looks counts the watcher's looks at each file.
type looks struct {
	mu sync.Mutex
	n  map[string]int
}

func (l *looks) looked(name string) {
	l.mu.Lock()
	if l.n == nil {
		l.n = map[string]int{}
	}
	l.n[name]++
	l.mu.Unlock()
}

func (l *looks) of(name string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.n[name]
}

// watchCounting is hs.watch with fastWatch, counting looks.
func (hs *harness) watchCounting() *looks {
	l := &looks{}
	opts := fastWatch
	opts.looked = l.looked
	hs.watch(opts)
	return l
}

// strange makes, in dir, each kind of thing named *.wasm that must not be
// read, and reports what its refusal must say.
func strange(t *testing.T, dir, prefix string) map[string]string {
	t.Helper()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.Symlink("/dev/zero", filepath.Join(dir, prefix+"zero.wasm")))
	must(syscall.Mkfifo(filepath.Join(dir, prefix+"fifo.wasm"), 0o644))
	must(os.Mkdir(filepath.Join(dir, prefix+"dir.wasm"), 0o755))
	// Over the 64Ki of the config below, starting like a module.
	must(os.WriteFile(filepath.Join(dir, prefix+"big.wasm"), append(append([]byte(nil), wasmMagic...), make([]byte, 100<<10)...), 0o644))
	return map[string]string{
		prefix + "zero.wasm": "a character device, not a regular file",
		prefix + "fifo.wasm": "a named pipe (FIFO), not a regular file",
		prefix + "dir.wasm":  "a directory, not a regular file",
		prefix + "big.wasm":  "is over the limit of 64Ki (65536 bytes); raise plugins.maxModuleSize",
	}
}

// strangeConfig is reloadConfig with a small module size limit.
var strangeConfig = strings.Replace(reloadConfig, "  directory: DIR\n", "  directory: DIR\n  maxModuleSize: 64Ki\n", 1)

// Only regular files within plugins.maxModuleSize are read, at start and
// at run time: a link to /dev/zero, a FIFO, a directory and an oversize
// file named *.wasm are each refused with its reason, once however often
// the directory is looked at; a file that stays shorter than a module's
// header is refused once it has settled. The good plugins load, and
// watching and stopping end.
func TestOnlyRegularFilesAreRead(t *testing.T) {
	healthy := fixture(t, "healthy")
	var want map[string]string
	hs, err := newHarness(t, strangeConfig, map[string][]byte{"healthy.wasm": healthy},
		func(hs *harness) { want = strange(t, hs.dir, "start-") })
	dir := hs.dir
	if err == nil {
		t.Error("LoadDir reported no error for the refused files")
	}
	for name, reason := range want {
		said := false
		for _, line := range strings.Split(fmt.Sprint(err), "\n") {
			said = said || strings.HasPrefix(line, `plugin "`+name+`": read: `) && strings.Contains(line, reason)
		}
		if !said {
			t.Errorf("LoadDir's error does not say why %s is refused (%q):\n%v", name, reason, err)
		}
	}
	if st := hs.status("healthy.wasm"); st.State != StateRunning {
		t.Errorf("healthy.wasm next to them: %+v", st)
	}
	l := hs.watchCounting()

	for name, reason := range strange(t, dir, "later-") {
		want[name] = reason
	}
	if err := os.WriteFile(filepath.Join(dir, "short.wasm"), []byte("\x00as"), 0o644); err != nil {
		t.Fatal(err)
	}
	want["short.wasm"] = "not a WebAssembly module (3 bytes"
	replace(t, dir, "healthy2.wasm", variant(healthy, 1))
	eventually(t, "healthy2.wasm to load", func() bool {
		for _, s := range hs.h.Status() {
			if s.File == "healthy2.wasm" {
				return s.State == StateRunning
			}
		}
		return false
	})
	// Three looks at every file: the first (which refuses) and two more,
	// which must stay quiet.
	eventually(t, "three looks at every refused file", func() bool {
		for name := range want {
			if l.of(name) < 3 {
				return false
			}
		}
		return true
	})
	for name, reason := range want {
		st := hs.status(name)
		if st.State != StateFailed || !strings.Contains(st.LastError, reason) {
			t.Errorf("%s: state %s, error %q; want failed, %q", name, st.State, st.LastError, reason)
		}
		if n := len(hs.logs.lines("plugin="+name, "plugin not loaded")); n != 1 {
			t.Errorf("%s refused %d times in the log, want once", name, n)
		}
	}
	// The cleanups stop the watch, then the host: neither may hang on a
	// FIFO.
}

// The file's own reasons, without a cluster: the size check reads no more
// than the limit even when the file grows past it after the check.
func TestReadModule(t *testing.T) {
	dir := t.TempDir()
	small := filepath.Join(dir, "small.wasm")
	if err := os.WriteFile(small, wasmMagic, 0o644); err != nil {
		t.Fatal(err)
	}
	if b, err := readModule(small, 8); err != nil || string(b) != string(wasmMagic) {
		t.Errorf("a file of exactly the limit: %q, %v", b, err)
	}
	if _, err := readModule(small, 7); err == nil || !strings.Contains(err.Error(), "the file (8 bytes) is over the limit of 7 (7 bytes)") {
		t.Errorf("a file over the limit: %v", err)
	}
	link := filepath.Join(dir, "link.wasm")
	if err := os.Symlink("small.wasm", link); err != nil {
		t.Fatal(err)
	}
	if b, err := readModule(link, 8); err != nil || len(b) != 8 {
		t.Errorf("a link to a regular file: %q, %v", b, err)
	}
	done := make(chan error, 1)
	fifo := filepath.Join(dir, "fifo.wasm")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	go func() { _, err := readModule(fifo, 8); done <- err }()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "named pipe") {
			t.Errorf("a FIFO: %v", err)
		}
	case <-time.After(time.Minute): // a hang detector
		t.Fatal("reading a FIFO blocked")
	}
}

// A version that cannot be stopped (its worker is inside a call that does
// not end, as a plugin with callTimeout: 0s in an endless loop is) does
// not wedge the watcher: replacing it again and again, with full rescans
// in between, loads every new version, other plugins still reload, and
// once the call ends every version stops and Stop returns.
//
// The stuck call is the recorder's gate (the worker is held after its
// call, before it can take the next), not loop.wasm: a wasm loop without a
// deadline could never be ended and would spin a core for the rest of the
// test binary; what the host waits on is the same.
func TestStuckRetirementDoesNotWedgeTheWatcher(t *testing.T) {
	healthy, counter := fixture(t, "healthy"), testPlugin(t, "counter")
	var held <-chan struct{}
	var open func()
	hs, err := newHarness(t, reloadConfig+`
  modules:
    - {file: stuck.wasm, limits: {callTimeout: 0s}}
`, map[string][]byte{"stuck.wasm": healthy, "counter.wasm": counter},
		func(hs *harness) { held, open = hs.rec.gate("stuck.wasm") })
	if err != nil {
		t.Fatal(err)
	}
	l := hs.watchCounting()
	hs.createCM("a", nil)
	<-held // stuck.wasm's worker will not come back until open
	running := func(name string, b []byte) func() bool {
		return func() bool {
			st := hs.status(name)
			return st.SHA256 == sha(b) && st.State == StateRunning
		}
	}
	versions := 1
	for i := range 2*runtime.NumCPU() + 2 {
		v := variant(healthy, i)
		replace(t, hs.dir, "stuck.wasm", v)
		eventually(t, fmt.Sprintf("stuck.wasm version %d to run", i), running("stuck.wasm", v))
		versions++
		<-held // the new version is stuck in its first call (the initial list) too
		// Two looks later, at least one full rescan has looked at it.
		n := l.of("stuck.wasm")
		eventually(t, "two more looks at stuck.wasm", func() bool { return l.of("stuck.wasm") >= n+2 })
	}
	c2 := variant(counter, 1)
	replace(t, hs.dir, "counter.wasm", c2)
	eventually(t, "counter.wasm to reload next to the stuck plugin", running("counter.wasm", c2))

	open()
	stopped := make(chan struct{})
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		hs.h.Stop(ctx)
		close(stopped)
	}()
	select {
	case <-stopped:
	case <-time.After(2 * time.Minute): // a hang detector
		t.Fatal("Stop did not return")
	}
	if n := len(hs.logs.lines("plugin=stuck.wasm", "msg=bye")); n != versions {
		t.Errorf("%d of stuck.wasm's %d versions ran their shutdown export", n, versions)
	}
	if lines := hs.logs.lines("did not stop before the shutdown deadline"); len(lines) != 0 {
		t.Errorf("Stop gave up on versions that had stopped: %q", lines)
	}
}

// A plugin that is removed leaves no state behind: its load lock and its
// filter error limits go with it.
func TestRemovedPluginLeavesNothingBehind(t *testing.T) {
	hs, err := newHarness(t, `
apiVersion: informer-host/v1
resources:
  - {name: cms, version: v1, resource: configmaps, namespaces: [NS]}
plugins:
  directory: DIR
  default:
    bindings: [{resource: cms, filter: 'object.data.missing == "x"'}]
`, map[string][]byte{"gone.wasm": fixture(t, "healthy")})
	if err != nil {
		t.Fatal(err)
	}
	hs.watchCounting()
	hs.createCM("a", nil)
	eventually(t, "the filter to fail", func() bool { return len(hs.logs.lines("plugin=gone.wasm", "filter evaluation failed")) > 0 })
	if n := hs.h.filterErrors.Len(); n != 1 {
		t.Fatalf("%d filter error limits while the plugin runs, want 1", n)
	}
	if err := os.Remove(filepath.Join(hs.dir, "gone.wasm")); err != nil {
		t.Fatal(err)
	}
	eventually(t, "gone.wasm to be unloaded", func() bool { return len(hs.h.Status()) == 0 })
	hs.h.mu.Lock()
	locks := len(hs.h.loadMu)
	hs.h.mu.Unlock()
	if n := hs.h.filterErrors.Len(); n != 0 || locks != 0 {
		t.Errorf("after the plugin is removed: %d filter error limits, %d load locks; want none", n, locks)
	}
}

// Status carries when the running version was loaded and when it last
// handled an event (internal/server's TestDebugPluginsJSON checks how
// /debug/plugins spells them), and drops a refusal once the running
// version's bytes are put back; a reload is logged as one.
func TestStatusReport(t *testing.T) {
	counter := testPlugin(t, "counter")
	hs, err := newHarness(t, reloadConfig, map[string][]byte{"counter.wasm": counter})
	if err != nil {
		t.Fatal(err)
	}
	hs.watch(fastWatch)
	hs.createCM("a", nil)
	eventually(t, "the event to be handled", func() bool { return hs.status("counter.wasm").Counters.Delivered == 1 })

	st := hs.status("counter.wasm")
	if st.LoadedAt.IsZero() || st.LastEventAt.Before(st.LoadedAt) {
		t.Errorf("loaded at %v, last event at %v", st.LoadedAt, st.LastEventAt)
	}

	// A broken version is refused; the running one's bytes put back clear
	// the refusal.
	broken := append(append([]byte(nil), wasmMagic...), []byte("\x01\x05junk!")...)
	replace(t, hs.dir, "counter.wasm", broken)
	eventually(t, "the broken version to be refused", func() bool { return hs.status("counter.wasm").LastError != "" })
	replace(t, hs.dir, "counter.wasm", counter)
	eventually(t, "the refusal to be cleared", func() bool { return hs.status("counter.wasm").LastError == "" })
	if st := hs.status("counter.wasm"); st.State != StateRunning || st.SHA256 != sha(counter) || st.Counters.Reloads != 0 {
		t.Errorf("after the bytes were put back: %+v", st)
	}

	v2 := variant(counter, 2)
	replace(t, hs.dir, "counter.wasm", v2)
	eventually(t, "the reload", func() bool { return hs.status("counter.wasm").SHA256 == sha(v2) })
	if n := len(hs.logs.lines("plugin=counter.wasm", `msg="plugin loaded"`)); n != 1 {
		t.Errorf(`%d "plugin loaded" lines, want 1 (the first load)`, n)
	}
	if n := len(hs.logs.lines("plugin=counter.wasm", `msg="plugin reloaded"`, "previous="+sha(counter)[:12], "sha256="+sha(v2)[:12])); n != 1 {
		t.Errorf(`%d "plugin reloaded" lines naming both versions, want 1`, n)
	}
	if now := hs.status("counter.wasm"); !now.LoadedAt.After(st.LoadedAt) {
		t.Errorf("loaded at %v after the reload, %v before", now.LoadedAt, st.LoadedAt)
	}
}

// reads counts the files the watcher hands to Load.
type reads struct{ looks }

// A rescan of the whole directory does not read a module it loaded and
// that has not changed since (ten Go plugins were 37 MB read and hashed
// every 30 s); a file replaced by the same bytes, or a new config, is read
// again.
func TestRescanPassesOverUnchangedModules(t *testing.T) {
	counter := testPlugin(t, "counter")
	hs, err := newHarness(t, reloadConfig, map[string][]byte{"counter.wasm": counter})
	if err != nil {
		t.Fatal(err)
	}
	l, r := &looks{}, &reads{}
	opts := fastWatch
	opts.looked, opts.read = l.looked, r.looked
	hs.watch(opts)
	// The look the watch starts with reads it once: nothing told the
	// watcher what LoadDir loaded.
	eventually(t, "the first look at counter.wasm", func() bool { return l.of("counter.wasm") >= 1 })
	n, read := l.of("counter.wasm"), r.of("counter.wasm")
	eventually(t, "two rescans", func() bool { return l.of("counter.wasm") >= n+2 })
	if got := r.of("counter.wasm"); got != read {
		t.Errorf("rescans read the unchanged counter.wasm %d more times", got-read)
	}

	replace(t, hs.dir, "counter.wasm", counter) // same bytes, a new file
	eventually(t, "the replaced file to be read", func() bool { return r.of("counter.wasm") > read })

	read = r.of("counter.wasm")
	cfg := *hs.h.config()
	if err := hs.h.ApplyConfig(context.Background(), &cfg); err != nil {
		t.Fatal(err)
	}
	eventually(t, "a rescan under the new config to read it", func() bool { return r.of("counter.wasm") > read })
	if st := hs.status("counter.wasm"); st.State != StateRunning || st.SHA256 != sha(counter) {
		t.Errorf("counter.wasm after the rescans: %+v", st)
	}
}
