package host

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"sort"
	"time"

	"github.com/informer-host/informer-host/host/internal/engine"
	"github.com/informer-host/informer-host/internal/config"
)

// ModuleReport is the verdict on one module of the plugin directory.
type ModuleReport struct {
	File string
	Err  error // nil: compiles, instantiates, speaks the ABI and accepts its config
	// Requested are the capabilities the module imports functions of;
	// Granted those cfg grants it; Ungranted the requested ones not
	// granted (the module loads, their calls return ERR_DENIED).
	Requested, Granted, Ungranted []string
}

// ValidateModules loads every *.wasm module in cfg's plugin directory the
// way the host would (compile, ABI check, instantiate, init with its
// config from cfg) and closes it again. Instantiation runs under the
// engine's start deadline, so a module whose start function never returns
// is reported, not waited for.
// startTimeout bounds each module's start (0: the engine's default, 10s).
func ValidateModules(ctx context.Context, cfg *config.Config, startTimeout time.Duration, log *slog.Logger) ([]ModuleReport, error) {
	dir := cfg.PluginDir()
	names, err := wasmNames(dir)
	if err != nil {
		return nil, fmt.Errorf("plugin directory %s: %w", dir, err)
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	eng, _, err := newEngine(ctx, cfg, "", startTimeout, log)
	if err != nil {
		return nil, err
	}
	defer eng.Close(context.Background())
	var out []ModuleReport
	for _, name := range names {
		r := ModuleReport{File: name, Granted: cfg.SettingsFor(name).Grants.Granted()}
		r.Requested, r.Err = validateModule(ctx, eng, cfg, filepath.Join(dir, name))
		r.Ungranted = ungranted(r.Requested, cfg.SettingsFor(name).Grants)
		out = append(out, r)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].File < out[j].File })
	return out, nil
}

func validateModule(ctx context.Context, eng *engine.Engine, cfg *config.Config, path string) (requested []string, _ error) {
	name := filepath.Base(path)
	wasm, err := readModule(path, cfg.ModuleSizeLimit())
	if err != nil {
		return nil, fmt.Errorf("plugin %q: read: %w", name, err)
	}
	settings := cfg.SettingsFor(name)
	configJSON, err := cfg.ConfigJSON(name)
	if err != nil {
		return nil, fmt.Errorf("plugin %q: %w", name, err)
	}
	mod, err := eng.Load(ctx, name, wasm, engineLimits(settings.Limits))
	if err != nil {
		return nil, err
	}
	defer mod.Close(context.Background())
	requested = mod.Requested()
	// No capability is handed in: ih_init that calls one sees ERR_DENIED,
	// as validation must not read a cluster.
	inst, err := mod.Instantiate(ctx, engine.InstanceOptions{Config: configJSON})
	if err != nil {
		return requested, err
	}
	return requested, inst.Close(context.Background())
}

// engineLimits is the engine's view of a plugin's limits: those that
// confine its instances (the others are the host's: failures, restarts).
func engineLimits(l config.Limits) engine.Limits {
	return engine.Limits{
		MemoryPages:         l.MemoryPages,
		CallTimeout:         l.CallTimeout.Duration,
		MaxCallTime:         l.MaxCallTime.Duration,
		MaxHostCallsPerCall: l.MaxHostCallsPerCall,
	}
}
