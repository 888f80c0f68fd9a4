package host

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/prometheus/procfs"

	"github.com/informer-host/informer-host/host/internal/engine"
)

// childNice is how much the compile child lowers its scheduling priority
// below the daemon's: a reload's compile then takes the CPU the running
// version's deliveries leave, instead of competing with them.
const childNice = 10

// childCompiler compiles a plugin's new version in a separate process
// (exe's `compile` command) into the on-disk compilation cache the
// daemon's engine reads, so that the daemon then loads it warm: the
// compile's CPU runs at a lower priority than the running version's
// deliveries, and its heap (the validator's and the compiler's working
// sets, most of a reload's peak) is the child's, not the daemon's.
type childCompiler struct {
	exe      string // an informer-host binary
	cacheDir string // the engine's Options.CacheDir
}

// compile runs the child for wasm with the limits that select the
// engine's compilation (memory pages, call deadline on or off). An error
// says why the child could not compile; the caller then compiles in
// process, where a module that is really invalid gets its own error.
func (c *childCompiler) compile(ctx context.Context, wasm []byte, limits engine.Limits) (childUsage, error) {
	cmd := exec.CommandContext(ctx, c.exe, "compile", "--cache", c.cacheDir,
		"--memory-pages", strconv.FormatUint(uint64(limits.MemoryPages), 10),
		"--call-timeout", limits.CallTimeout.String())
	cmd.Stdin = bytes.NewReader(wasm)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var use childUsage
	if cmd.ProcessState != nil { // nil when the child did not start
		if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
			use.cpu = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
		}
	}
	// Not the rusage's maxrss: Linux carries a process's peak across
	// exec, and the child is forked from the daemon's address space, so
	// that figure is at least the daemon's own peak. The child reports
	// the peak of its own (VmHWM, which starts afresh at exec).
	if v, ok := strings.CutPrefix(strings.TrimSpace(stdout.String()), peakLinePrefix); ok {
		use.maxRSS, _ = strconv.ParseInt(v, 10, 64)
	}
	if err != nil {
		msg := strings.TrimSpace(stderr.String())
		if len(msg) > 500 {
			msg = "..." + msg[len(msg)-500:]
		}
		if msg != "" {
			return use, fmt.Errorf("%s compile: %w: %s", c.exe, err, msg)
		}
		return use, fmt.Errorf("%s compile: %w", c.exe, err)
	}
	return use, nil
}

// childUsage is what a compile child cost, for the log: its CPU is not
// the daemon's, and its peak memory not in the daemon's VmHWM.
type childUsage struct {
	cpu    time.Duration
	maxRSS int64 // bytes; 0 when the child did not say (peakLinePrefix)
}

// peakLinePrefix starts the line a compile child writes to stdout on
// success: its peak resident set (VmHWM) in bytes.
const peakLinePrefix = "peak-rss-bytes "

// CompileChild is the body of the hidden `informer-host compile` command
// (args after "compile"), which the daemon runs to compile a reloaded
// plugin's new version: it lowers its own CPU priority, reads the module
// from stdin, and validates and compiles it into the compilation cache
// --cache as the daemon's engine would, with the same limits.
func CompileChild(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("compile", flag.ContinueOnError)
	fs.SetOutput(stderr)
	cacheDir := fs.String("cache", "", "compilation cache directory to fill (required)")
	pages := fs.Uint("memory-pages", 0, "the plugin's memory limit in 64 KiB pages (0: the wasm32 maximum)")
	timeout := fs.Duration("call-timeout", 0, "the plugin's call timeout (0: compiled without deadlines)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *cacheDir == "" || fs.NArg() != 0 {
		fmt.Fprintln(stderr, "usage: informer-host compile --cache DIR [--memory-pages N] [--call-timeout D] < module.wasm")
		return 2
	}
	// Best effort: at the normal priority the compile still fills the
	// cache, it only competes with the daemon for the CPU.
	if err := lowerPriority(childNice); err != nil {
		fmt.Fprintf(stderr, "compile: cannot lower the CPU priority (compiling at the normal one): %v\n", err)
	}
	wasm, err := io.ReadAll(stdin)
	if err != nil {
		fmt.Fprintf(stderr, "compile: read the module from stdin: %v\n", err)
		return 1
	}
	eng, err := engine.New(ctx, engine.Options{CacheDir: *cacheDir, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		fmt.Fprintf(stderr, "compile: %v\n", err)
		return 1
	}
	defer func() { _ = eng.Close(context.Background()) }()
	mod, err := eng.Load(ctx, "module", wasm, engine.Limits{MemoryPages: uint32(*pages), CallTimeout: *timeout})
	if err != nil {
		fmt.Fprintf(stderr, "compile: %v\n", err)
		return 1
	}
	_ = mod.Close(ctx)
	if peak, err := ownPeakRSS(); err == nil {
		fmt.Fprintf(stdout, "%s%d\n", peakLinePrefix, peak)
	}
	return 0
}

// ownPeakRSS reads this process's peak resident set (VmHWM) in bytes.
func ownPeakRSS() (int64, error) {
	self, err := procfs.Self()
	if err != nil {
		return 0, err
	}
	st, err := self.NewStatus()
	if err != nil {
		return 0, err
	}
	return int64(st.VmHWM), nil
}

// compileInChild runs c for a reload's new bytes, logging the outcome; a
// child that fails leaves the compile to the daemon's Load.
func compileInChild(ctx context.Context, c *childCompiler, log *slog.Logger, wasm []byte, limits engine.Limits) {
	start := time.Now()
	use, err := c.compile(ctx, wasm, limits)
	if err != nil {
		if errors.Is(ctx.Err(), context.Canceled) {
			return
		}
		log.Warn("compiling the new version in a child process failed; compiling it in the daemon", "err", err)
		return
	}
	log.Info("compiled the new version in a child process", "took", time.Since(start),
		"cpu", use.cpu, "peakRSSMiB", use.maxRSS>>20)
}

// lowerPriority adds by to the process's nice value (at most 19), relative
// to the one it inherited: a daemon already run under nice keeps its
// child below it. On Linux the nice value is each thread's own (setpriority
// with who 0 sets the calling thread's only), and the Go runtime already
// runs several threads, any of which may run the compile: so every thread
// is set, until a pass finds none left over (a thread started meanwhile by
// one not yet set inherits the old value; threads started after all are
// set inherit the new one).
func lowerPriority(by int) error {
	// Linux's getpriority system call returns 20 - nice.
	raw, err := syscall.Getpriority(syscall.PRIO_PROCESS, 0)
	if err != nil {
		return err
	}
	nice := min(20-raw+by, 19)
	for pass := 0; pass < 10; pass++ {
		threads, err := procfs.AllThreads(os.Getpid())
		if err != nil {
			return err
		}
		changed := false
		for _, t := range threads {
			tid := t.PID
			cur, err := syscall.Getpriority(syscall.PRIO_PROCESS, tid)
			if err != nil {
				continue // the thread exited
			}
			if 20-cur == nice {
				continue
			}
			if err := syscall.Setpriority(syscall.PRIO_PROCESS, tid, nice); err != nil && !errors.Is(err, syscall.ESRCH) {
				return fmt.Errorf("thread %d: %w", tid, err)
			}
			changed = true
		}
		if !changed {
			return nil
		}
	}
	return errors.New("threads kept starting at the old priority")
}
