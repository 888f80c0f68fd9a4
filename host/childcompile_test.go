package host

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/procfs"

	"github.com/informer-host/informer-host/host/internal/engine"
)

// compileChildEnv makes the test binary run CompileChild (TestMain).
const compileChildEnv = "INFORMER_HOST_TEST_COMPILE_CHILD"

// compileChild is a childCompiler running the test binary as the child.
func compileChild(t *testing.T, cacheDir string) *childCompiler {
	t.Helper()
	t.Setenv(compileChildEnv, "1")
	return &childCompiler{exe: os.Args[0], cacheDir: cacheDir}
}

// cacheFiles maps the files of wazero's compilation cache under dir to
// their inodes: wazero writes an entry to a temporary file renamed into
// place, so a compile that missed the cache changes the map and a load
// that hit it does not.
func cacheFiles(t *testing.T, dir string) map[string]uint64 {
	t.Helper()
	out := map[string]uint64{}
	matches, _ := filepath.Glob(filepath.Join(dir, "wazero-*", "*"))
	for _, m := range matches {
		fi, err := os.Stat(m)
		if err != nil {
			t.Fatal(err)
		}
		out[filepath.Base(m)] = fi.Sys().(*syscall.Stat_t).Ino
	}
	return out
}

// The child fills the compilation cache (and the validation record) so
// that the daemon's engine loads the module without compiling or
// validating it; without the child the same load compiles, which is what
// the check of the cache's files tells apart.
func TestCompileChildFillsTheCacheTheDaemonLoadsFrom(t *testing.T) {
	wasm := testPlugin(t, "counter")
	for _, tc := range []struct {
		name   string
		limits engine.Limits
		child  bool
	}{
		{"deadline, child", engine.Limits{MemoryPages: 64, CallTimeout: time.Second}, true},
		{"deadline, no child", engine.Limits{MemoryPages: 64, CallTimeout: time.Second}, false},
		{"no deadline, child", engine.Limits{MemoryPages: 64}, true},
		{"no deadline, no child", engine.Limits{MemoryPages: 64}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			dir := t.TempDir()
			if tc.child {
				use, err := compileChild(t, dir).compile(ctx, wasm, tc.limits)
				if err != nil {
					t.Fatalf("child: %v", err)
				}
				if use.maxRSS == 0 {
					t.Errorf("no peak RSS reported for the child")
				}
			}
			before := cacheFiles(t, dir)
			if tc.child && len(before) == 0 {
				t.Fatal("the child wrote nothing into the compilation cache")
			}
			eng, err := engine.New(ctx, engine.Options{CacheDir: dir})
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = eng.Close(ctx) }()
			mod, err := eng.Load(ctx, "counter.wasm", wasm, tc.limits)
			if err != nil {
				t.Fatal(err)
			}
			_ = mod.Close(ctx)
			after := cacheFiles(t, dir)
			changed := len(after) != len(before)
			for f, ino := range after {
				if before[f] != ino {
					changed = true
				}
			}
			if changed == tc.child {
				t.Errorf("cache entries before the load %v, after %v: want a compile only without the child", before, after)
			}
		})
	}
}

// A child that cannot run, or that fails, is reported with why.
func TestCompileChildFailureSaysWhy(t *testing.T) {
	ctx := context.Background()
	lim := engine.Limits{CallTimeout: time.Second}
	missing := &childCompiler{exe: filepath.Join(t.TempDir(), "no-informer-host"), cacheDir: t.TempDir()}
	if _, err := missing.compile(ctx, testPlugin(t, "counter"), lim); err == nil || !strings.Contains(err.Error(), "no-informer-host") {
		t.Errorf("missing binary: got %v, want an error naming it", err)
	}
	if _, err := compileChild(t, t.TempDir()).compile(ctx, []byte("not wasm"), lim); err == nil || !strings.Contains(err.Error(), "compile: ") {
		t.Errorf("invalid module: got %v, want the child's own error", err)
	}
}

// A reload compiles the new version in the child and loads it; with a
// child that cannot run, the log says so and the daemon compiles it: the
// reload happens either way.
func TestReloadCompilesInAChildOrFallsBack(t *testing.T) {
	for _, tc := range []struct {
		name    string
		exe     func(t *testing.T) string
		wantLog string
	}{
		{"child", func(t *testing.T) string { return compileChild(t, "").exe }, "compiled the new version in a child process"},
		{"no child", func(t *testing.T) string { return filepath.Join(t.TempDir(), "no-informer-host") },
			"compiling the new version in a child process failed; compiling it in the daemon"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			counter := testPlugin(t, "counter")
			exe := tc.exe(t)
			hs, err := newHarness(t, reloadConfig, map[string][]byte{"counter.wasm": counter}, func(hs *harness) {
				hs.cacheDir, hs.compileChild = t.TempDir(), exe
			})
			if err != nil {
				t.Fatal(err)
			}
			if n := len(hs.logs.lines("child process")); n != 0 {
				t.Errorf("the first load ran the child (%d lines): only reloads should", n)
			}
			next := variant(counter, 1)
			replace(t, hs.dir, "counter.wasm", next)
			if err := hs.h.Load(context.Background(), filepath.Join(hs.dir, "counter.wasm")); err != nil {
				t.Fatal(err)
			}
			if got := hs.status("counter.wasm"); got.SHA256 != sha(next) || got.State != StateRunning {
				t.Fatalf("after the reload: %s %s, want the new version (%s) running", got.SHA256, got.State, sha(next))
			}
			if len(hs.logs.lines(tc.wantLog)) != 1 {
				t.Errorf("want one %q line", tc.wantLog)
			}
			// A rollback to bytes the cache has compiled loads warm in
			// the daemon: no child.
			replace(t, hs.dir, "counter.wasm", counter)
			if err := hs.h.Load(context.Background(), filepath.Join(hs.dir, "counter.wasm")); err != nil {
				t.Fatal(err)
			}
			if got := hs.status("counter.wasm"); got.SHA256 != sha(counter) {
				t.Fatalf("after the rollback: %s, want %s", got.SHA256, sha(counter))
			}
			if n := len(hs.logs.lines("child process")); n != 1 {
				t.Errorf("%d child lines after the rollback, want the reload's one only", n)
			}
		})
	}
}

// lowerPriorityEnv makes the test binary lower its priority as the
// compile child does and print its nice value (TestMain).
const lowerPriorityEnv = "INFORMER_HOST_TEST_LOWER_PRIORITY"

func reportLoweredPriority() int {
	if err := lowerPriority(childNice); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	// Every thread's: on Linux the nice value is per thread, and any of
	// the runtime's threads may run the compile.
	threads, err := procfs.AllThreads(os.Getpid())
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	nices := map[int]bool{}
	for _, t := range threads {
		raw, err := syscall.Getpriority(syscall.PRIO_PROCESS, t.PID)
		if err != nil {
			continue // exited
		}
		nices[20-raw] = true
	}
	for n := range nices {
		fmt.Println(n)
	}
	return 0
}

// The child's priority is lowered relative to the daemon's, so that a
// daemon already run under nice still outranks its compile, and on every
// thread of the child: it once lowered only the calling thread's, and the
// compile ran on the runtime's other threads at the daemon's priority.
func TestCompileChildRunsBelowTheDaemonsPriority(t *testing.T) {
	for _, parent := range []int{0, 5, 15} {
		t.Run(strconv.Itoa(parent), func(t *testing.T) {
			cmd := exec.Command("nice", "-n", strconv.Itoa(parent), os.Args[0])
			cmd.Env = append(os.Environ(), lowerPriorityEnv+"=1")
			out, err := cmd.Output()
			if err != nil {
				t.Fatalf("child: %v", err)
			}
			mine, err := syscall.Getpriority(syscall.PRIO_PROCESS, 0)
			if err != nil {
				t.Fatal(err)
			}
			want := min(20-mine+parent+childNice, 19)
			if got := strings.Fields(string(out)); len(got) != 1 || got[0] != strconv.Itoa(want) {
				t.Errorf("child's threads' nice values %q, want all %d", got, want)
			}
		})
	}
}

// The child's peak is its own: the rusage's maxrss of a child forked
// from a large process is at least that process's peak (Linux carries it
// across exec), which made a reload's child look as large as the daemon.
func TestCompileChildReportsItsOwnPeak(t *testing.T) {
	const balloon = 256 << 20
	b := make([]byte, balloon)
	for i := 0; i < len(b); i += 4096 {
		b[i] = 1 // touched: resident in the parent
	}
	use, err := compileChild(t, t.TempDir()).compile(context.Background(), testPlugin(t, "counter"), engine.Limits{MemoryPages: 64})
	runtime.KeepAlive(b)
	if err != nil {
		t.Fatal(err)
	}
	if use.maxRSS <= 0 || use.maxRSS >= balloon {
		t.Errorf("child's peak RSS %d bytes, want its own (above 0, below the parent's %d-byte balloon)", use.maxRSS, balloon)
	}
}
