package daemon

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/informer-host/informer-host/internal/config"
	"github.com/informer-host/informer-host/internal/server"
	"github.com/informer-host/informer-host/internal/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) { os.Exit(testenv.Run(m, &env)) }

var countRE = regexp.MustCompile(`msg="count=(\d+)"`)

// replica is a daemon run in the background by startReplica.
type replica struct {
	logs   *testenv.LogBuffer
	cancel context.CancelFunc
	done   chan error
	url    string
	d      *Daemon
	// stopped is set once wait has received what Run returned.
	stopped bool
}

// counts are the counts the counter plugin logged, in order.
func (r *replica) counts() []int {
	var out []int
	for _, l := range r.logs.Lines("plugin=counter.wasm", "stream=log") {
		if m := countRE.FindStringSubmatch(l); m != nil {
			n, _ := strconv.Atoi(m[1])
			out = append(out, n)
		}
	}
	return out
}

// last is the counter plugin's last count, 0 before its first.
func (r *replica) last() int {
	c := r.counts()
	if len(c) == 0 {
		return 0
	}
	return c[len(c)-1]
}

func (r *replica) compiles() int { return len(r.logs.Lines("compiled plugin", "plugin=counter.wasm")) }

// startReplica runs the daemon on cfg in the background with o (a drain
// timeout of 10s unless o has one, a debug log, and the hooks the test
// needs) and returns once everything runs. The test ending stops it; its
// log is printed if the test failed.
func startReplica(t *testing.T, cfg *config.Config, o Options) *replica {
	t.Helper()
	r := &replica{logs: &testenv.LogBuffer{}, done: make(chan error, 1)}
	urls := make(chan string, 1)
	daemons := make(chan *Daemon, 1)
	ctx, cancel := context.WithCancel(context.Background())
	r.cancel = cancel
	t.Cleanup(func() {
		if !r.stopped {
			cancel()
			<-r.done
		}
		if t.Failed() {
			t.Logf("daemon log:\n%s", strings.Join(r.logs.Lines(), "\n"))
		}
	})
	o.Config = cfg
	o.Logger = slog.New(slog.NewTextHandler(r.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	if o.DrainTimeout == 0 {
		o.DrainTimeout = 10 * time.Second
	}
	o.serverStarted = func(s *server.Server) { urls <- "http://" + s.Addr().String() }
	o.Started = func(d *Daemon) { daemons <- d }
	go func() { r.done <- Run(ctx, o) }()
	select {
	case r.url = <-urls:
	case err := <-r.done:
		t.Fatalf("Run returned before its server listened: %v", err)
	}
	select {
	case r.d = <-daemons:
	case err := <-r.done:
		t.Fatalf("Run returned early: %v", err)
	}
	return r
}

// stop ends the replica's context and returns what Run returned.
func (r *replica) stop() error {
	r.cancel()
	return r.wait()
}

// wait waits for Run to return of its own accord, and returns what it
// returned.
func (r *replica) wait() error {
	r.stopped = true
	return <-r.done
}

// leaderConfig writes a daemon config with leader election on short
// timings, and plugin (a file name) built from the WAT file src.
func leaderConfig(t *testing.T, ns, plugin, src string) *config.Config {
	t.Helper()
	return writeDaemonConfig(t, ns, plugin, src, `leaderElection:
  enabled: true
  namespace: `+ns+`
  leaseName: informer-host
  leaseDuration: 2s
  renewDeadline: 1500ms
  retryPeriod: 250ms
`)
}

// shardConfig writes a daemon config with sharding on short timings and
// the counter plugin.
func shardConfig(t *testing.T, ns string) *config.Config {
	return writeDaemonConfig(t, ns, "counter.wasm", "../../host/testdata/plugins/counter.wat", shardingTail(ns))
}

// shardingTail is the sharding section of shardConfig, on short timings.
func shardingTail(ns string) string { return shardingTailTimed(ns, "2s", "1s") }

// shardingTailTimed is shardingTail with the given leaseDuration and
// renewDeadline.
func shardingTailTimed(ns, leaseDuration, renewDeadline string) string {
	return `sharding:
  enabled: true
  namespace: ` + ns + `
  leasePrefix: hooks
  leaseDuration: ` + leaseDuration + `
  renewDeadline: ` + renewDeadline + `
  retryPeriod: 200ms
`
}

// writeDaemonConfig writes testenv.DaemonConfig on namespace ns with plugin (a
// file name) built from the WAT file src, and tail appended.
func writeDaemonConfig(t *testing.T, ns, plugin, src, tail string) *config.Config {
	t.Helper()
	dir := env.DaemonDir(t, map[string][]byte{plugin: testenv.WAT(t, src)})
	return writeDaemonConfigText(t, dir, testenv.DaemonConfig(ns, "", "{resource: cms}")+tail)
}

// writeDaemonConfigText writes text as dir's config.yaml and loads it.
func writeDaemonConfigText(t *testing.T, dir, text string) *config.Config {
	t.Helper()
	cfgPath := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(cfgPath, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}
