package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime"
	"runtime/pprof"
	"time"

	"k8s.io/klog/v2"

	"github.com/informer-host/informer-host/internal/config"
	"github.com/informer-host/informer-host/internal/daemon"
)

// logOptions are the flags every long-running command shares.
type logOptions struct {
	format string
	level  string
}

func (o *logOptions) register(fs *flag.FlagSet) {
	fs.StringVar(&o.format, "log-format", "text", "log format: text or json")
	fs.StringVar(&o.level, "log-level", "info", "log level: debug, info, warn or error")
}

func (o *logOptions) logger(w io.Writer) (*slog.Logger, error) {
	var level slog.Level
	if err := level.UnmarshalText([]byte(o.level)); err != nil {
		return nil, fmt.Errorf("--log-level: %w", err)
	}
	opts := &slog.HandlerOptions{Level: level}
	switch o.format {
	case "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return nil, fmt.Errorf("--log-format: %q is neither text nor json", o.format)
}

// runCommand is `informer-host run`: its flags make the daemon's Options;
// stopping restores the default signal handling once the daemon begins to
// stop, and reload receives a value for every SIGHUP.
func runCommand(ctx context.Context, args []string, stderr io.Writer, stopping func(), reload <-chan os.Signal) int {
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	path := fs.String("config", "config.yaml", "config file")
	o := daemon.Options{Version: versionString(), Stopping: stopping, Reload: reload}
	fs.BoolVar(&o.LogEvents, "log-events", false, "log every informer event (resource, type, namespace/name)")
	fs.DurationVar(&o.DrainTimeout, "drain-timeout", 10*time.Second, "on SIGTERM, how long plugins may take to handle what is queued")
	fs.DurationVar(&o.StartTimeout, "start-timeout", 10*time.Second, "how long a plugin may take to start (start function, _initialize, ih_init)")
	compileReloads := fs.Bool("compile-reloads-in-child", true, "compile a reloaded plugin's new version in a child process at a lower CPU priority, into the on-disk compilation cache, then load it warm (without the cache, reloads compile in the daemon)")
	fs.DurationVar(&o.WatchFailureGrace, "watch-failure-grace", 30*time.Second, "how long a resource's list/watch may keep failing before /readyz reports it")
	fs.IntVar(&o.ServerMaxConnections, "server-max-connections", 256, "connections the HTTP endpoint holds open; past it the longest-waiting idle one is closed")
	serverAuth := fs.String("server-auth", "none", "guard /metrics and /debug/plugins: none, or kubernetes (TokenReview and SubjectAccessReview; /healthz and /readyz stay open)")
	fs.StringVar(&o.ServerTLSCert, "server-tls-cert", "", "serve HTTPS with this certificate (PEM; read again when it changes); needs --server-tls-key")
	fs.StringVar(&o.ServerTLSKey, "server-tls-key", "", "the key of --server-tls-cert (PEM)")
	cpuProfile := fs.String("cpu-profile", "", "write a CPU profile of the daemon's whole run to this file (pprof format; for benchmarks and bug reports)")
	allocProfile := fs.String("alloc-profile", "", "write the heap allocations of the daemon's whole run (sampled, pprof format) to this file when it stops")
	ml := memoryLimit{}
	fs.Float64Var(&ml.ratio, "memory-limit-ratio", defaultMemoryLimitRatio, "set the Go runtime's soft memory limit (GOMEMLIMIT) to this fraction of the container's (cgroup) memory limit, less the memory outside the Go runtime (plugins' memory and code, the binary), kept current every 5s; 0 turns it off; a GOMEMLIMIT in the environment wins")
	memProfile := fs.String("mem-profile", "", "when the daemon begins to stop, before it drains, write a heap profile to this file (pprof format; for benchmarks and bug reports)")
	var apiClient apiClientOptions
	apiClient.register(fs)
	var lo logOptions
	lo.register(fs)
	if code, ok := parseFlags(fs, args, stderr); !ok {
		return code
	}
	if err := apiClient.check(); err != nil {
		fmt.Fprintf(stderr, "informer-host run: %v\n", err)
		return 2
	}
	o.APIClient = apiClient.limit
	if *compileReloads {
		exe, err := os.Executable()
		if err != nil {
			// The daemon runs; its reloads compile in process.
			fmt.Fprintf(stderr, "informer-host run: cannot find the daemon's own binary to compile reloads in a child process (compiling them in the daemon): %v\n", err)
		}
		o.CompileChild = exe
	}
	if err := ml.check(); err != nil {
		fmt.Fprintf(stderr, "informer-host run: %v\n", err)
		return 2
	}
	if *serverAuth != "none" && *serverAuth != "kubernetes" {
		fmt.Fprintf(stderr, "informer-host run: --server-auth: %q is neither none nor kubernetes\n", *serverAuth)
		return 2
	}
	o.ServerAuthKubernetes = *serverAuth == "kubernetes"
	log, err := lo.logger(stderr)
	if err != nil {
		fmt.Fprintln(stderr, "informer-host run:", err)
		return 2
	}
	// client-go logs through klog; send it to the same handler. klog is
	// process-wide, so the command sets it, once, before any client-go
	// goroutine runs: the daemon may run several times in one process
	// (tests run replicas side by side), and setting it there raced the
	// klog reads of the daemons already running.
	klog.SetSlogLogger(log)
	o.Logger = log
	ml.apply(ctx, log)
	if o.Config, err = config.Load(*path); err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	if *cpuProfile != "" {
		stop, err := startCPUProfile(*cpuProfile)
		if err != nil {
			fmt.Fprintln(stderr, "informer-host run: --cpu-profile:", err)
			return 1
		}
		defer func() {
			if err := stop(); err != nil {
				log.Error("writing the CPU profile", "file", *cpuProfile, "err", err)
			}
		}()
	}
	if *allocProfile != "" {
		defer func() {
			if err := writeAllocProfile(*allocProfile); err != nil {
				log.Error("writing the allocation profile", "file", *allocProfile, "err", err)
			}
		}()
	}
	if *memProfile != "" {
		stopping := o.Stopping
		o.Stopping = func() {
			if err := writeHeapProfile(*memProfile); err != nil {
				log.Error("writing the heap profile", "file", *memProfile, "err", err)
			}
			if stopping != nil {
				stopping()
			}
		}
	}
	if err := daemon.Run(ctx, o); err != nil {
		log.Error("informer-host stopped", "err", err)
		return 1
	}
	return 0
}

// writeAllocProfile writes the allocations since the process started
// (runtime.MemProfileRate's sampling): with the CPU profile, where a
// benchmark's garbage comes from.
func writeAllocProfile(file string) error {
	return writeProfile(file, "allocs")
}

// startCPUProfile profiles the process into file until stop is called.
// It is a flag of run rather than an endpoint so that a profile covers a
// benchmark's whole workload, start included, without the harness timing
// a fetch against it.
func startCPUProfile(file string) (stop func() error, err error) {
	f, err := os.Create(file)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, err
	}
	return func() error {
		pprof.StopCPUProfile()
		return f.Close()
	}, nil
}

// writeHeapProfile writes the heap as it is now to file. It runs when
// the daemon begins to stop, before the plugins are drained and closed:
// at exit every plugin's memory is already gone. The collection before it
// makes the profile's in-use figures current rather than those of the last
// cycle the runtime happened to run.
func writeHeapProfile(file string) error {
	runtime.GC()
	return writeProfile(file, "heap")
}

// writeProfile writes the runtime's profile name (pprof.Lookup) to file.
func writeProfile(file, name string) error {
	f, err := os.Create(file)
	if err != nil {
		return err
	}
	if err := pprof.Lookup(name).WriteTo(f, 0); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
