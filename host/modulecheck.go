package host

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"sort"
	"strings"

	"github.com/informer-host/informer-host/internal/config"
)

// wasmNames lists the names in dir that end in .wasm, whatever kind of
// entry each is: Load refuses, with its reason, what is not a regular
// file, and a modules entry naming one of them does match it.
func wasmNames(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var names []string
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".wasm") {
			names = append(names, e.Name())
		}
	}
	return names, nil
}

// UnmatchedModules reports the plugins.modules entries of cfg that match
// no *.wasm file in its plugin directory (config.Config.UnmatchedModules).
// The error is the directory's when it cannot be read; a directory that
// does not exist holds no files.
func UnmatchedModules(cfg *config.Config) (config.Errors, error) {
	dir := cfg.PluginDir()
	names, err := wasmNames(dir)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("plugin directory %s: %w", dir, err)
	}
	return cfg.UnmatchedModules(dir, names), nil
}

// warnUnmatched logs the modules entries of the config in force that
// match no file in the plugin directory. It logs only when the
// directory's *.wasm names or the entries changed since its last look,
// so a mistake is said at start and again whenever the directory or the
// config changes and leaves it in place, but not on every rescan.
func (h *Host) warnUnmatched() {
	// Held across the look, so that the look recorded last is the latest.
	h.unmatchedMu.Lock()
	defer h.unmatchedMu.Unlock()
	cfg := h.config()
	names, err := wasmNames(h.dir)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return // the directory's own trouble is logged where it is read
	}
	sort.Strings(names)
	var entries []string
	for _, m := range cfg.Plugins.Modules {
		entries = append(entries, m.File+"<"+m.Source)
	}
	look := strings.Join(names, "/") + "//" + strings.Join(entries, "/")
	if look == h.unmatchedLook {
		return
	}
	h.unmatchedLook = look
	for _, p := range cfg.UnmatchedModules(h.dir, names) {
		h.log.Warn("plugins.modules entry matches no file in the plugin directory", "dir", h.dir, "problem", p.String())
	}
	for _, p := range cfg.ShadowedFiles(h.dir, names) {
		h.log.Warn("plugin file ignored: a plugin source of that name loads it", "dir", h.dir, "problem", p.String())
	}
}
