package host

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/informer-host/informer-host/host/internal/engine"
	"github.com/informer-host/informer-host/internal/config"
	"github.com/informer-host/informer-host/internal/pluginsource"
)

const sourceConfig = `
apiVersion: informer-host/v1
resources:
  - {name: cms, version: v1, resource: configmaps, namespaces: [NS]}
plugins:
  directory: DIR
  default:
    bindings: [{resource: cms}]
  modules:
    - file: counter.wasm
      source: file://SOURCE
      refreshInterval: 1s
`

// A plugin from a source whose version moves (a file:// source replaced,
// standing for a tag that moves in a registry) is hot-swapped through the
// host's reload path under continuous churn, and loses no event: the
// final version's count equals the cluster's. A version that does not
// load leaves the running one running and the source degraded. The
// plugin directory's file of the same name is ignored throughout, by
// LoadDir and by the watch.
func TestSourceMovesUnderChurnLoseNoEvent(t *testing.T) {
	counter := testPlugin(t, "counter")
	srcDir := t.TempDir()
	replace(t, srcDir, "counter.wasm", variant(counter, 0))
	shadow := variant(counter, 999)
	cfgText := strings.ReplaceAll(sourceConfig, "SOURCE", filepath.Join(srcDir, "counter.wasm"))
	hs, err := newHarness(t, cfgText, map[string][]byte{"counter.wasm": shadow}, func(hs *harness) {
		hs.logRate = engine.LogRate{PerSecond: 1e6, Burst: 1e6}
		// Faster than the config's minimum: the test polls for the swap.
		hs.cfg.Plugins.Modules[0].RefreshInterval = config.NewDuration(20 * time.Millisecond)
	})
	if err != nil {
		t.Fatal(err)
	}
	if st := hs.h.Status(); len(st) != 0 {
		t.Fatalf("LoadDir loaded the sourced plugin's name from the directory: %+v", st)
	}
	for i := range 100 {
		hs.createCM(fmt.Sprintf("pre%d", i), nil)
	}
	store, err := pluginsource.NewDirStore(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	m, err := pluginsource.New(pluginsource.Options{Host: hs.h, Store: store, Fetcher: &pluginsource.Fetchers{MaxBytes: hs.cfg.ModuleSizeLimit()},
		Logger: slog.New(slog.NewTextHandler(hs.logs, nil)), RetryBase: 10 * time.Millisecond, RetryMax: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(func() { cancel(); m.Stop() })
	m.Apply(ctx, hs.cfg)
	hs.watch(fastWatch)
	current := variant(counter, 0)
	eventually(t, "the source's first version to run", func() bool {
		st := hs.h.Status()
		return len(st) == 1 && st[0].SHA256 == sha(current) && st[0].State == StateRunning
	})

	stopChurn := hs.churn(7)

	broken := append(append([]byte(nil), wasmMagic...), []byte("\x01\x05junk!")...)
	swaps := 0
	for r := 1; r <= 6; r++ {
		if r == 4 {
			replace(t, srcDir, "counter.wasm", broken)
			eventually(t, "the broken version to be refused", func() bool {
				return strings.Contains(m.Status()["counter.wasm"].LastError, "load sha256:")
			})
			st, src := hs.status("counter.wasm"), m.Status()["counter.wasm"]
			if st.State != StateRunning || st.SHA256 != sha(current) || !src.Degraded || src.RunningDigest != "sha256:"+sha(current) {
				t.Errorf("after the broken version: host %s %.12s (want %.12s running), source %+v", st.State, st.SHA256, sha(current), src)
			}
			continue
		}
		current = variant(counter, r)
		replace(t, srcDir, "counter.wasm", current)
		want := sha(current)
		eventually(t, fmt.Sprintf("swap %d", r), func() bool {
			st := hs.status("counter.wasm")
			src := m.Status()["counter.wasm"]
			return st.SHA256 == want && st.State == StateRunning && src.RunningDigest == "sha256:"+want && !src.Degraded
		})
		swaps++
		hs.handlesLive(t, fmt.Sprintf("version %d", r), want)
	}
	stopChurn()

	want := hs.countsTheCluster(t, sha(current))
	if lines := hs.logs.lines("plugin=counter.wasm", "version="+sha(shadow)[:12]); len(lines) > 0 {
		t.Errorf("the directory's shadowed file ran: %q", lines[0])
	}
	if lines := hs.logs.lines("plugin file ignored: a plugin source of that name loads it"); len(lines) == 0 {
		t.Error("no warning that the directory's counter.wasm is ignored")
	}
	st := hs.status("counter.wasm")
	// Swaps after the first load, plus the first version's refusal-free
	// run: every swap is a reload; the broken one a reload failure.
	if st.Counters.Reloads != uint64(swaps) || st.Counters.ReloadFailures != 1 {
		t.Errorf("counters after %d swaps and one refusal: %+v", swaps, st.Counters)
	}
	t.Logf("%d swaps, %d objects at the end, %d events delivered", swaps, want, st.Counters.Delivered)

	// New settings reload the plugin from its cached module, not from the
	// directory's same-named file.
	next, err := config.Parse(hs.cfg.File, []byte(strings.NewReplacer("NS", hs.ns, "DIR", hs.dir).Replace(cfgText)+
		"      config: {note: reloaded}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if err := hs.h.ApplyConfig(context.Background(), next); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the reload with new settings", func() bool {
		st := hs.status("counter.wasm")
		return st.Counters.Reloads == uint64(swaps)+1 && st.State == StateRunning
	})
	if got := hs.status("counter.wasm").SHA256; got != sha(current) {
		t.Errorf("after new settings the plugin runs %.12s, want the source's %.12s", got, sha(current))
	}
}
