package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"

	"k8s.io/klog/v2"

	"github.com/informer-host/informer-host/host"
	"github.com/informer-host/informer-host/informer"
	"github.com/informer-host/informer-host/internal/config"
	"github.com/informer-host/informer-host/internal/daemon"
)

// recordCommand runs the informers and the plugins of a config as run
// does (the plugins act: what they write is written), for --duration or
// until SIGINT/SIGTERM, and writes each plugin's event stream as an
// events file for informer-host replay, and, for a plugin that wrote,
// recorded Events or called HTTP, what those calls got as the stub file
// that replay answers them from.
func recordCommand(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("record", flag.ContinueOnError)
	path := fs.String("config", "config.yaml", "config file")
	out := fs.String("out", "events.jsonl", "the events `file`; with several plugins, one file each: NAME.<plugin>.jsonl")
	resource := fs.String("resource", "", "record the events of this resource only")
	plugin := fs.String("plugin", "", "record this plugin file only (e.g. pod-logger.wasm)")
	duration := fs.Duration("duration", 0, "stop after this long (0: at SIGINT or SIGTERM)")
	keepSecrets := fs.Bool("keep-secret-data", false, "write Secrets' data and stringData values as they are (by default they are blanked, keys kept)")
	var lo logOptions
	lo.register(fs)
	if code, ok := parseFlags(fs, args, stderr); !ok {
		return code
	}
	log, err := lo.logger(stderr)
	if err != nil {
		fmt.Fprintln(stderr, "informer-host record:", err)
		return 2
	}
	klog.SetSlogLogger(log) // process-wide: the command's, not record's (runCommand)
	cfg, err := config.Load(*path)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	if *duration > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, *duration)
		defer cancel()
	}
	files, err := record(ctx, cfg, log, &host.Recorder{Resource: *resource, KeepSecretData: *keepSecrets}, *plugin, *out)
	if err != nil {
		fmt.Fprintln(stderr, "informer-host record:", err)
		return 1
	}
	for _, f := range files {
		fmt.Fprintln(stdout, "recorded", f)
	}
	return 0
}

// record runs the pipeline and the plugins until ctx ends and writes the
// recordings; it returns the files written.
func record(ctx context.Context, cfg *config.Config, log *slog.Logger, rec *host.Recorder, only, out string) ([]string, error) {
	restCfg, _, err := daemon.RESTConfig(cfg)
	if err != nil {
		return nil, err
	}
	p, err := informer.New(informer.Options{RESTConfig: restCfg, Logger: log})
	if err != nil {
		return nil, err
	}
	defer p.Stop()
	if err := p.Apply(ctx, cfg.Resources); err != nil {
		return nil, err
	}
	// The plugins act as under run: their writes, Events and HTTP calls
	// are real (a recording is of a live run).
	writes, err := host.NewWritesClient(restCfg, p, log)
	if err != nil {
		return nil, err
	}
	h, err := host.NewRecording(ctx, host.Options{Pipeline: p, Config: cfg, Logger: log, CacheDir: "-", RESTConfig: restCfg, Writes: writes}, rec)
	if err != nil {
		return nil, err
	}
	entries, err := os.ReadDir(cfg.PluginDir())
	if err != nil {
		return nil, err
	}
	var plugins []string
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".wasm") && (only == "" || e.Name() == only) {
			plugins = append(plugins, e.Name())
		}
	}
	if len(plugins) == 0 {
		return nil, fmt.Errorf("no plugin to record in %s", cfg.PluginDir())
	}
	for _, name := range plugins {
		if err := rec.Watch(h, name); err != nil {
			return nil, err
		}
		if err := h.Load(ctx, filepath.Join(cfg.PluginDir(), name)); err != nil {
			log.Error("plugin not loaded; its recording stays empty", "plugin", name, "err", err)
		}
	}
	<-ctx.Done()
	stopCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	h.Stop(stopCtx)
	rec.Stop()
	sort.Strings(plugins)
	var written []string
	for _, name := range plugins {
		file := out
		if len(plugins) > 1 {
			file = strings.TrimSuffix(out, ".jsonl") + "." + strings.TrimSuffix(name, ".wasm") + ".jsonl"
		}
		if err := writePrivate(file, func(w io.Writer) error { return rec.Write(name, w) }); err != nil {
			return written, err
		}
		written = append(written, file)
		if rec.CapabilityCalls(name) == 0 {
			continue
		}
		// What its writes, Events and HTTP calls got, for replay --stubs:
		// the replay of a plugin that acts needs the answers, exactly.
		stubs := stubsFile(file)
		if err := writePrivate(stubs, func(w io.Writer) error { return rec.WriteStubs(name, w) }); err != nil {
			return written, err
		}
		written = append(written, stubs)
	}
	return written, nil
}

// stubsFile is the stub file recorded with the events file events:
// events.jsonl's is events.stubs.json.
func stubsFile(events string) string {
	return strings.TrimSuffix(events, ".jsonl") + ".stubs.json"
}

// writePrivate writes file (createPrivate) with write.
func writePrivate(file string, write func(io.Writer) error) error {
	f, err := createPrivate(file)
	if err != nil {
		return err
	}
	err = write(f)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("%s: %w", file, err)
	}
	return nil
}

// createPrivate creates or truncates file, readable and writable by its
// owner only: a recording holds whole objects (Secrets' keys and, with
// --keep-secret-data, their values). OpenFile's mode applies to a new
// file only, so one that existed (an earlier recording, 0644) is changed.
func createPrivate(file string) (*os.File, error) {
	f, err := os.OpenFile(file, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return nil, err
	}
	if err := f.Chmod(0o600); err != nil {
		f.Close()
		return nil, fmt.Errorf("%s: making it private: %w", file, err)
	}
	return f, nil
}
