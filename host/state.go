package host

import (
	"context"

	"github.com/informer-host/informer-host/config"
	"github.com/informer-host/informer-host/host/internal/engine"
	"github.com/informer-host/informer-host/state"
)

// openState opens the plugins' key-value state as plugins.state says. A
// file it cannot use is reported by the store, which then runs in memory:
// state is never a reason for the host not to start.
func openState(ctx context.Context, cfg *config.Config, h *Host) (*state.Store, error) {
	return state.Open(ctx, state.Options{Path: cfg.StatePath(), FlushInterval: cfg.StateFlushInterval(), Logger: h.log})
}

// stateFor returns the bucket of plugin name for an instance with the
// given settings, or nil (an untyped nil: the engine tests for nil) when
// the settings do not grant state. The bucket is the same for every
// instance and version of the file, so state survives traps, restarts
// and reloads; the grant's quota is applied on each call.
func (h *Host) stateFor(name string, s config.PluginSettings) engine.StateBucket {
	g := s.Grants.State
	if g == nil {
		return nil
	}
	maxBytes, maxKeys := g.Limits()
	return h.state.Bucket(name, state.Quota{MaxBytes: maxBytes, MaxKeys: maxKeys})
}

// removed unloads the plugin of a file that is gone and drops its state,
// unless plugins.state.keepOnRemove says to keep it. The drop happens
// under the file's load lock, so a file of the same name that reappears
// meanwhile is either loaded after it (and starts empty) or already loaded
// (and keeps the state).
func (h *Host) removed(ctx context.Context, name string) {
	h.unload(ctx, name)
	if h.config().Plugins.State.KeepOnRemove {
		return
	}
	unlock := h.lockFile(name)
	defer unlock()
	h.mu.Lock()
	_, back := h.slots[name]
	h.mu.Unlock()
	if !back {
		h.state.Drop(name)
	}
}

// closeState writes the plugins' state to its file and closes it. Stop
// calls it after every plugin stopped, so nothing a plugin stored is lost
// on a graceful stop.
func (h *Host) closeState(ctx context.Context) {
	if err := h.state.Close(ctx); err != nil {
		h.log.Error("plugin state not fully written to its file", "path", h.config().StatePath(), "err", err)
	}
}
