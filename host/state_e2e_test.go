package host

import (
	"context"
	"encoding/binary"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/informer-host/informer-host/host/internal/engine"
)

const stateConfig = `
apiVersion: informer-host/v1
resources:
  - {name: cms, version: v1, resource: configmaps, namespaces: [NS]}
plugins:
  directory: DIR
  state: {path: STATEPATH, flushInterval: 50ms}
  default:
    bindings: [{resource: cms}]
    limits: {restartBackoff: 10ms, maxRestartBackoff: 50ms}
  modules:
    - file: state.wasm
      grants:
        state: {maxBytes: 64Ki}
`

// stateOf reads plugin's bucket without creating it: the counter n and
// whether key is there.
func (hs *harness) stateOf(h *Host, plugin, key string) (n int64, has, exists bool) {
	b, ok := h.state.Lookup(plugin)
	if !ok {
		return 0, false, false
	}
	if v, _, ok := b.Get([]byte("n")); ok && len(v) == 8 {
		n = int64(binary.LittleEndian.Uint64(v))
	}
	_, _, has = b.Get([]byte(key))
	return n, has, true
}

func (hs *harness) traps(plugin string) int {
	n := 0
	for _, d := range hs.rec.of(plugin) {
		if d.Failure == engine.KindTrap {
			n++
		}
	}
	return n
}

// The state fixture counts events in state and traps once on "trap-*"
// objects, remembering in state that it did. Its state survives the trap
// (the restarted instance does not trap again), a hot reload (the new
// version continues the count and knows of the trap too), and is dropped
// when the file is removed. A plugin without the grant gets ERR_DENIED.
func TestStateSurvivesTrapsAndReloads(t *testing.T) {
	wasm := fixture(t, "state")
	cfg := strings.ReplaceAll(stateConfig, "STATEPATH", `""`)
	hs, err := newHarness(t, cfg, map[string][]byte{"state.wasm": wasm, "denied.wasm": wasm})
	if err != nil {
		t.Fatal(err)
	}
	hs.watch(fastWatch)
	has := func(key string) bool { _, ok, _ := hs.stateOf(hs.h, "state.wasm", key); return ok }

	hs.createCM("a", nil)
	hs.createCM("b", nil)
	eventually(t, "a and b in state", func() bool { return has("obj/a") && has("obj/b") })

	hs.createCM("trap-1", nil)
	eventually(t, "trap-1 handled after the trap", func() bool { return has("obj/trap-1") })
	if n := hs.traps("state.wasm"); n != 1 {
		t.Fatalf("%d traps, want 1: the restarted instance must find what the trapped one stored; calls: %v", n, hs.rec.strings("state.wasm"))
	}

	before, _, _ := hs.stateOf(hs.h, "state.wasm", "")
	v1 := variant(wasm, 1)
	replace(t, hs.dir, "state.wasm", v1)
	eventually(t, "the reload", func() bool {
		st := hs.status("state.wasm")
		return st.SHA256 == sha(v1) && st.State == StateRunning
	})
	hs.createCM("c", nil)
	eventually(t, "c in state", func() bool { return has("obj/c") })
	if n, _, _ := hs.stateOf(hs.h, "state.wasm", ""); n <= before {
		t.Fatalf("count %d after the reload, was %d before: the new version did not continue the old one's state", n, before)
	}
	if n := hs.traps("state.wasm"); n != 1 {
		t.Fatalf("%d traps after the reload, want 1: the new version replayed trap-1 without seeing the old one's record", n)
	}

	// Not granted: every call is refused with ERR_DENIED and nothing is stored for it.
	eventually(t, "denied.wasm refused", func() bool {
		return len(hs.logs.lines("plugin=denied.wasm", "state: ERR_DENIED")) > 0
	})
	if _, _, exists := hs.stateOf(hs.h, "denied.wasm", ""); exists {
		t.Fatal("a bucket exists for a plugin without the grant")
	}

	if err := os.Remove(filepath.Join(hs.dir, "state.wasm")); err != nil {
		t.Fatal(err)
	}
	eventually(t, "state dropped with the file", func() bool {
		_, _, exists := hs.stateOf(hs.h, "state.wasm", "")
		return !exists
	})
}

// With plugins.state.path, a host stopped gracefully and a new one started
// on the same file give the plugin back what it stored.
func TestStatePersistsAcrossHostRestart(t *testing.T) {
	wasm := fixture(t, "state")
	path := filepath.Join(t.TempDir(), "state.db")
	hs, err := newHarness(t, strings.ReplaceAll(stateConfig, "STATEPATH", path), map[string][]byte{"state.wasm": wasm})
	if err != nil {
		t.Fatal(err)
	}
	hs.createCM("a", nil)
	eventually(t, "a in state", func() bool { _, ok, _ := hs.stateOf(hs.h, "state.wasm", "obj/a"); return ok })
	n1, _, _ := hs.stateOf(hs.h, "state.wasm", "")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	hs.h.Stop(ctx)

	log := slog.New(slog.NewTextHandler(hs.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	h2, err := New(context.Background(), Options{Pipeline: hs.p, Config: hs.cfg, Logger: log, observe: hs.rec.observe, StartTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h2.Stop(ctx) })
	// Before any plugin runs: read back from the file.
	if n, ok, _ := hs.stateOf(h2, "state.wasm", "obj/a"); !ok || n != n1 {
		t.Fatalf("after the restart: n=%d obj/a=%v, want n=%d and obj/a", n, ok, n1)
	}
	if err := h2.LoadDir(context.Background()); err != nil {
		t.Fatal(err)
	}
	hs.createCM("b", nil)
	eventually(t, "the plugin to continue its count", func() bool {
		n, ok, _ := hs.stateOf(h2, "state.wasm", "obj/b")
		return ok && n > n1
	})
}

// A corrupt state file does not stop the host: it is reported with its
// path and moved aside, and the plugin starts with empty state, kept in a
// fresh file.
func TestStateCorruptFileStartsEmpty(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	if err := os.WriteFile(path, []byte(strings.Repeat("not a bbolt file ", 500)), 0o600); err != nil {
		t.Fatal(err)
	}
	hs, err := newHarness(t, strings.ReplaceAll(stateConfig, "STATEPATH", path), map[string][]byte{"state.wasm": fixture(t, "state")})
	if err != nil {
		t.Fatal(err)
	}
	if lines := hs.logs.lines("level=ERROR", "corrupt", path); len(lines) != 1 {
		t.Fatalf("corrupt file reported %d times, want once with its path:\n%s", len(lines), hs.logs.String())
	}
	if n := hs.metric("informer_host_state_file_corrupt_total", ""); n != 1 {
		t.Fatalf("informer_host_state_file_corrupt_total = %v, want 1", n)
	}
	if moved, _ := filepath.Glob(path + ".corrupt-*"); len(moved) != 1 {
		t.Fatalf("corrupt file not moved aside: %v", moved)
	}
	hs.createCM("a", nil)
	eventually(t, "a in state", func() bool { n, ok, _ := hs.stateOf(hs.h, "state.wasm", "obj/a"); return ok && n == 1 })
	if !hs.h.state.Persistent() {
		t.Fatal("no fresh file after the corrupt one")
	}
}
