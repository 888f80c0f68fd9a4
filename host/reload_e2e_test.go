package host

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/informer-host/informer-host/host/internal/engine"
)

// variant returns wasm with a custom section appended: a valid module
// that behaves the same, with different bytes (and sha256).
func variant(wasm []byte, n int) []byte {
	payload := append([]byte{1, 'v'}, []byte(strconv.Itoa(n))...)
	out := append([]byte(nil), wasm...)
	out = append(out, 0) // custom section id
	return append(append(out, byte(len(payload))), payload...)
}

func sha(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// replace writes b to dir/name the way editors and cp --atomic do: a
// temporary file renamed over the old one.
func replace(t *testing.T, dir, name string, b []byte) {
	t.Helper()
	tmp := filepath.Join(dir, "."+name+".tmp")
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, name)); err != nil {
		t.Fatal(err)
	}
}

func (hs *harness) watch(opts WatchOptions) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := hs.h.Watch(ctx, opts); err != nil {
			hs.t.Errorf("watch: %v", err)
		}
	}()
	hs.t.Cleanup(func() { cancel(); <-done })
}

var countRE = regexp.MustCompile(`msg="count=(-?\d+)"`)

// lastCount is the count the given version of counter.wasm logged last.
func (hs *harness) lastCount(plugin, version string) (int, bool) {
	lines := hs.logs.lines("plugin="+plugin, "version="+version[:12], `msg="count=`)
	if len(lines) == 0 {
		return 0, false
	}
	m := countRE.FindStringSubmatch(lines[len(lines)-1])
	n, _ := strconv.Atoi(m[1])
	return n, true
}

const reloadConfig = `
apiVersion: informer-host/v1
resources:
  - {name: cms, version: v1, resource: configmaps, namespaces: [NS]}
plugins:
  directory: DIR
  default:
    bindings: [{resource: cms}]
`

var fastWatch = WatchOptions{Debounce: 50 * time.Millisecond, StableFor: 20 * time.Millisecond, Rescan: time.Second}

// Under continuous churn, 20 reloads of a counting plugin (and a broken
// version in the middle, which is refused while the running one goes on)
// lose no event: the final version's count equals the cluster's.
func TestReloadsUnderChurnLoseNoEvent(t *testing.T) {
	counter := testPlugin(t, "counter")
	// The test reads each version's count from its log lines, one per
	// event: under the default log rate (bursts of 200 lines) a version
	// that replays more objects than that, as under load when churn runs
	// longer between reloads, loses its last lines and seems to count
	// wrong.
	hs, err := newHarness(t, reloadConfig, map[string][]byte{"counter.wasm": counter}, func(hs *harness) {
		hs.logRate = engine.LogRate{PerSecond: 1e6, Burst: 1e6}
	})
	if err != nil {
		t.Fatal(err)
	}
	// More objects than a log burst from the start, so every version's
	// replay is larger than one: the case load used to make.
	for i := range 250 {
		hs.createCM(fmt.Sprintf("pre%d", i), nil)
	}
	hs.watch(fastWatch)

	// Churn: creates, updates and deletes from two goroutines until told to stop.
	stopChurn := hs.churn(42)
	current := counter
	broken := append(append([]byte(nil), wasmMagic...), []byte("\x01\x05junk!")...)
	reloads := 0
	for r := 1; r <= 21; r++ {
		if r == 11 {
			before := hs.status("counter.wasm").Counters.ReloadFailures
			replace(t, hs.dir, "counter.wasm", broken)
			eventually(t, "the broken version to be refused", func() bool {
				return hs.status("counter.wasm").Counters.ReloadFailures > before
			})
			st := hs.status("counter.wasm")
			if st.State != StateRunning || st.SHA256 != sha(current) || !strings.Contains(st.LastError, `plugin "counter.wasm"`) {
				t.Errorf("after the broken version: state %s, sha %.12s (running %.12s), error %q; want the old version running and the error reported",
					st.State, st.SHA256, sha(current), st.LastError)
			}
			continue
		}
		current = variant(counter, r)
		replace(t, hs.dir, "counter.wasm", current)
		want := sha(current)
		eventually(t, fmt.Sprintf("reload %d", r), func() bool {
			st := hs.status("counter.wasm")
			return st.SHA256 == want && st.State == StateRunning
		})
		reloads++
		hs.handlesLive(t, fmt.Sprintf("version %d", r), want)
	}
	stopChurn()

	want := hs.countsTheCluster(t, sha(current))
	st := hs.status("counter.wasm")
	if st.Counters.Reloads != uint64(reloads) || st.Counters.ReloadFailures != 1 {
		t.Errorf("counters after %d reloads and one refusal: %+v", reloads, st.Counters)
	}
	t.Logf("%d reloads, %d objects at the end, %d events delivered", reloads, want, st.Counters.Delivered)
}

// Each way a file changes in a directory is seen and acted on.
func TestPluginDirectoryChanges(t *testing.T) {
	counter, healthy := testPlugin(t, "counter"), fixture(t, "healthy")
	hs, err := newHarness(t, reloadConfig, map[string][]byte{"counter.wasm": counter})
	if err != nil {
		t.Fatal(err)
	}
	l := hs.watchCounting()
	hs.createCM("x", nil)
	running := func(name string, b []byte) func() bool {
		return func() bool {
			for _, s := range hs.h.Status() {
				if s.File == name {
					return s.SHA256 == sha(b) && s.State == StateRunning
				}
			}
			return false
		}
	}

	t.Run("rename into the directory", func(t *testing.T) {
		replace(t, hs.dir, "renamed.wasm", healthy)
		eventually(t, "renamed.wasm to load", running("renamed.wasm", healthy))
	})

	t.Run("written in place in chunks", func(t *testing.T) {
		full := variant(counter, 100)
		f, err := os.Create(filepath.Join(hs.dir, "chunked.wasm"))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.Write(full[:len(full)/2]); err != nil {
			t.Fatal(err)
		}
		// The watcher takes the half file for complete once it holds
		// still, and refuses it.
		eventually(t, "the half-written file to be refused", func() bool {
			for _, s := range hs.h.Status() {
				if s.File == "chunked.wasm" {
					return s.State == StateFailed && strings.Contains(s.LastError, `plugin "chunked.wasm"`)
				}
			}
			return false
		})
		if _, err := f.Write(full[len(full)/2:]); err != nil {
			t.Fatal(err)
		}
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
		eventually(t, "the complete file to load", running("chunked.wasm", full))
	})

	t.Run("symlink swap", func(t *testing.T) {
		// A Kubernetes volume: sym.wasm -> ..data/sym.wasm, ..data -> ..v1,
		// and an update swaps ..data atomically.
		v1, v2 := variant(counter, 201), variant(counter, 202)
		for name, b := range map[string][]byte{"..v1": v1, "..v2": v2} {
			if err := os.Mkdir(filepath.Join(hs.dir, name), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(hs.dir, name, "sym.wasm"), b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		mustSymlink(t, "..v1", filepath.Join(hs.dir, "..data"))
		mustSymlink(t, "..data/sym.wasm", filepath.Join(hs.dir, "sym.wasm"))
		eventually(t, "sym.wasm v1 to load", running("sym.wasm", v1))
		mustSymlink(t, "..v2", filepath.Join(hs.dir, "..data_tmp"))
		if err := os.Rename(filepath.Join(hs.dir, "..data_tmp"), filepath.Join(hs.dir, "..data")); err != nil {
			t.Fatal(err)
		}
		eventually(t, "sym.wasm v2 to load", running("sym.wasm", v2))
	})

	t.Run("unchanged content", func(t *testing.T) {
		before := hs.status("counter.wasm").Counters
		swaps := func() int {
			return len(hs.logs.lines("plugin=counter.wasm", `msg="plugin loaded"`)) + len(hs.logs.lines("plugin=counter.wasm", `msg="plugin reloaded"`))
		}
		loads := swaps()
		replace(t, hs.dir, "counter.wasm", counter)
		// Two more looks: one file has one look at a time, so the second
		// began after the rewrite, whatever the first had seen.
		looks := l.of("counter.wasm")
		eventually(t, "two looks at the rewritten counter.wasm", func() bool { return l.of("counter.wasm") >= looks+2 })
		after := hs.status("counter.wasm").Counters
		if after.Reloads != before.Reloads || swaps() != loads {
			t.Errorf("rewriting counter.wasm with the same bytes reloaded it: %+v -> %+v", before, after)
		}
	})

	t.Run("remove", func(t *testing.T) {
		if err := os.Remove(filepath.Join(hs.dir, "renamed.wasm")); err != nil {
			t.Fatal(err)
		}
		eventually(t, "renamed.wasm to be unloaded", func() bool {
			for _, s := range hs.h.Status() {
				if s.File == "renamed.wasm" {
					return false
				}
			}
			return true
		})
		// healthy.wasm logs "bye" from its shutdown export.
		if lines := hs.logs.lines("plugin=renamed.wasm", "msg=bye"); len(lines) != 1 {
			t.Errorf("shutdown export of the removed plugin: %d bye lines", len(lines))
		}
		hs.createCM("after-remove", nil)
		eventually(t, "counter to see after-remove", func() bool {
			for _, d := range hs.rec.of("counter.wasm") {
				if strings.HasSuffix(d.Key, "/after-remove") {
					return true
				}
			}
			return false
		})
		for _, d := range hs.rec.of("renamed.wasm") {
			if strings.HasSuffix(d.Key, "/after-remove") {
				t.Errorf("removed plugin still got %v", d)
			}
		}
	})
}

func mustSymlink(t *testing.T, target, link string) {
	t.Helper()
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
}

// Stop lets a plugin handle everything in its buffer before its shutdown
// export runs.
func TestStopDrainsBuffers(t *testing.T) {
	var held <-chan struct{}
	var open func()
	hs, err := newHarness(t, reloadConfig, map[string][]byte{"counter.wasm": testPlugin(t, "counter")},
		func(hs *harness) { held, open = hs.rec.gate("counter.wasm") })
	if err != nil {
		t.Fatal(err)
	}
	hs.createCM("first", nil)
	<-held
	for i := range 20 {
		hs.createCM(fmt.Sprintf("cm-%d", i), nil)
	}
	eventually(t, "20 events buffered", func() bool { return hs.status("counter.wasm").Queue.Depth == 20 })
	stopped := make(chan struct{})
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		hs.h.Stop(ctx)
		close(stopped)
	}()
	open()
	<-stopped
	if n := len(hs.rec.of("counter.wasm")); n != 21 {
		t.Errorf("%d events handled before stop returned; want all 21", n)
	}
	if lines := hs.logs.lines("plugin=counter.wasm", "shutdown events=21"); len(lines) != 1 {
		t.Errorf("shutdown export did not see all 21 events: %q", hs.logs.lines("plugin=counter.wasm", "shutdown"))
	}
}

// A quarantined plugin stays off until its file changes; a new version
// then runs and gets the cache.
func TestQuarantinedPluginComesBackWithANewFile(t *testing.T) {
	hs, err := newHarness(t, `
apiVersion: informer-host/v1
resources:
  - {name: cms, version: v1, resource: configmaps, namespaces: [NS]}
plugins:
  directory: DIR
  default:
    bindings: [{resource: cms}]
    limits: {maxConsecutiveFailures: 2, restartBackoff: 10ms}
`, map[string][]byte{"flaky.wasm": fixture(t, "trap")})
	if err != nil {
		t.Fatal(err)
	}
	l := hs.watchCounting()
	hs.createCM("a", nil)
	eventually(t, "quarantine", func() bool { return hs.status("flaky.wasm").State == StateQuarantined })
	hs.createCM("b", nil)
	// Rewriting the same bytes is no change: still quarantined, two looks
	// later (the second began after the rewrite; see TestPluginDirectoryChanges).
	replace(t, hs.dir, "flaky.wasm", fixture(t, "trap"))
	looks := l.of("flaky.wasm")
	eventually(t, "two looks at the rewritten flaky.wasm", func() bool { return l.of("flaky.wasm") >= looks+2 })
	if st := hs.status("flaky.wasm"); st.State != StateQuarantined {
		t.Fatalf("same bytes brought the plugin out of quarantine: %+v", st)
	}
	fixed := fixture(t, "healthy")
	replace(t, hs.dir, "flaky.wasm", fixed)
	eventually(t, "the new version to run", func() bool {
		st := hs.status("flaky.wasm")
		return st.State == StateRunning && st.SHA256 == sha(fixed)
	})
	eventually(t, "the new version to get the cache", func() bool {
		n := 0
		for _, d := range hs.rec.of("flaky.wasm") {
			if d.Initial && d.Code == 0 && d.Failure == 0 {
				n++
			}
		}
		return n == 2
	})
}

// Stop returns at its deadline even when a plugin is stuck inside a call
// that will not end before it.
func TestStopAbandonsAStuckPlugin(t *testing.T) {
	hs, err := newHarness(t, `
apiVersion: informer-host/v1
resources:
  - {name: cms, version: v1, resource: configmaps, namespaces: [NS]}
plugins:
  directory: DIR
  default:
    bindings: [{resource: cms}]
    # Longer than Stop's deadline below, short enough not to burn a core
    # for the rest of the test binary once abandoned.
    limits: {callTimeout: 10s}
`, map[string][]byte{"loop.wasm": fixture(t, "loop"), "healthy.wasm": fixture(t, "healthy")})
	if err != nil {
		t.Fatal(err)
	}
	hs.createCM("a", nil)
	eventually(t, "healthy to handle the event", func() bool { return len(hs.rec.of("healthy.wasm")) == 1 })
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	stopped := make(chan struct{})
	go func() { hs.h.Stop(ctx); close(stopped) }()
	select {
	case <-stopped:
	case <-time.After(time.Minute): // a hang detector
		t.Fatal("Stop did not return")
	}
	if lines := hs.logs.lines("plugin=loop.wasm", "abandoning it"); len(lines) != 1 {
		t.Errorf("the stuck plugin is not reported: %d lines", len(lines))
	}
	if lines := hs.logs.lines("plugin=healthy.wasm", "msg=bye"); len(lines) != 1 {
		t.Errorf("the healthy plugin's shutdown export did not run")
	}
}

// churn creates, updates and deletes ConfigMaps in the harness's
// namespace from two goroutines (seeded by seed) until the returned stop
// is called, which waits for them.
func (hs *harness) churn(seed uint64) (stop func()) {
	t := hs.t
	done := make(chan struct{})
	var wg sync.WaitGroup
	for w := range 2 {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), seed))
			var live []string
			for i := 0; ; i++ {
				select {
				case <-done:
					return
				default:
				}
				cms := env.Client.CoreV1().ConfigMaps(hs.ns)
				switch {
				case len(live) > 0 && rng.IntN(4) == 0:
					k := rng.IntN(len(live))
					if err := cms.Delete(context.Background(), live[k], metav1.DeleteOptions{}); err != nil {
						t.Errorf("delete: %v", err)
						return
					}
					live = append(live[:k], live[k+1:]...)
				case len(live) > 0 && rng.IntN(3) == 0:
					cm, err := cms.Get(context.Background(), live[rng.IntN(len(live))], metav1.GetOptions{})
					if err == nil {
						cm.Data = map[string]string{"i": fmt.Sprint(i)}
						_, err = cms.Update(context.Background(), cm, metav1.UpdateOptions{})
					}
					if err != nil {
						t.Errorf("update: %v", err)
						return
					}
				default:
					name := fmt.Sprintf("w%d-%d", w, i)
					hs.createCM(name, nil)
					live = append(live, name)
				}
			}
		})
	}
	return func() { close(done); wg.Wait() }
}

// handlesLive waits until the plugin's version sum handles a live event
// (a count line of that version newer than the ones there now), not only
// the replay it got when it was registered.
func (hs *harness) handlesLive(t *testing.T, label, sum string) {
	t.Helper()
	counted := func() int {
		return len(hs.logs.lines("plugin=counter.wasm", "version="+sum[:12], `msg="count=`))
	}
	seen := counted()
	eventually(t, label+" to handle a live event", func() bool { return counted() > seen })
}

// countsTheCluster waits until counter.wasm's version sum counts every
// ConfigMap in the namespace, and returns that number.
func (hs *harness) countsTheCluster(t *testing.T, sum string) int {
	t.Helper()
	list, err := env.Client.CoreV1().ConfigMaps(hs.ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want := len(list.Items)
	eventually(t, fmt.Sprintf("the final version to count %d objects", want), func() bool {
		n, ok := hs.lastCount("counter.wasm", sum)
		return ok && n == want
	})
	return want
}
