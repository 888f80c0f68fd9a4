package host

import (
	"context"
	"sort"
	"time"

	"github.com/informer-host/informer-host/host/internal/engine"
	"github.com/informer-host/informer-host/internal/config"
)

// StateStandby: the plugin is compiled and validated, and starts when the
// host is activated (a leader-election standby); it receives nothing.
const StateStandby PluginState = "standby"

// heldModule is a version a standby host compiled and keeps ready: what
// start needs to instantiate and register it.
type heldModule struct {
	mod        *engine.Module
	settings   config.PluginSettings
	configJSON []byte
	sha        string
}

// holds reports whether the host holds the compiled version sha of file
// name for Activate.
func (h *Host) holds(name, sha string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	m := h.held[name]
	return m != nil && m.sha == sha
}

// holdBack keeps m for Activate and reports true while the host is a
// standby: the version is compiled, validated and ready, and nothing of
// it runs. Once active it reports false, and drops what it held for the
// file (the caller starts m instead). The caller holds the file's lock.
func (h *Host) holdBack(slot *PluginSlot, m *heldModule) bool {
	h.mu.Lock()
	prev := h.held[slot.name]
	if h.standby {
		h.held[slot.name] = m
	} else {
		delete(h.held, slot.name)
	}
	standby := h.standby
	h.mu.Unlock()
	if prev != nil && prev.mod != m.mod {
		_ = prev.mod.Close(context.Background())
	}
	if !standby {
		return false
	}
	slot.mu.Lock()
	slot.state, slot.sha256, slot.lastErr, slot.refusedSHA = StateStandby, m.sha, "", ""
	slot.mu.Unlock()
	slot.log.Info("plugin compiled; it starts when this replica leads", "sha256", m.sha[:12], "bindings", bindingNames(m.settings))
	return true
}

// Standby reports whether the host is still a standby (Activate not
// called).
func (h *Host) Standby() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.standby
}

// Activate ends the standby of a host made with Options.Standby: every
// held plugin is instantiated and registered, which replays the informer
// cache to it as initial-list adds, so it misses no object's current
// state; from then on loads start plugins at once. Compiling is done
// already, so this costs one instantiation per plugin, up to one per CPU
// at once. A plugin that fails to start is reported like a failed load;
// the others start. Activate on an active host does nothing.
func (h *Host) Activate(ctx context.Context) error {
	h.mu.Lock()
	if !h.standby {
		h.mu.Unlock()
		return nil
	}
	h.standby = false
	names := make([]string, 0, len(h.held))
	for name := range h.held {
		names = append(names, name)
	}
	h.mu.Unlock()
	sort.Strings(names)
	return perCPU(names, func(name string) error { return h.activate(ctx, name) })
}

// activate starts the version held for file name, unless a load or an
// unload since Activate began took care of it.
func (h *Host) activate(ctx context.Context, name string) error {
	defer h.lockFile(name)()
	h.mu.Lock()
	m := h.held[name]
	delete(h.held, name)
	slot := h.slots[name]
	h.mu.Unlock()
	if m == nil {
		return nil
	}
	if slot == nil {
		_ = m.mod.Close(context.Background())
		return nil
	}
	return h.start(ctx, slot, m.mod, m.settings, m.configJSON, m.sha, time.Now())
}
