package host

import (
	"fmt"
	"os"
	"path/filepath"
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
