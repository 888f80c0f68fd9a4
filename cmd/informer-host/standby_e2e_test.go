package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/informer-host/informer-host/host"
	"github.com/informer-host/informer-host/internal/config"
	"github.com/informer-host/informer-host/internal/server"
)

// Warm standby: two replicas with leader election. Both sync
// their informers and compile their plugins; exactly one delivers. When
// the leader goes (releasing its lease on SIGTERM, or keeping it as a
// crash does), the standby takes over without compiling again, and its
// plugin's view (the counter's count) equals the cluster, including the
// changes made while nobody led.
func TestWarmStandby(t *testing.T) {
	env.Require(t)
	for _, tc := range []struct {
		name  string
		crash bool // stop the leader without releasing the lease
	}{
		{name: "lease released"},
		{name: "leader crashed", crash: true},
	} {
		t.Run(tc.name, func(t *testing.T) { testWarmStandby(t, tc.crash) })
	}
}

type replica struct {
	logs   *syncBuffer
	cancel context.CancelFunc
	done   chan error
	url    string
	daemon chan *daemon
	d      *daemon
}

func (r *replica) counts() []int {
	var out []int
	for _, l := range r.logs.lines("plugin=counter.wasm", "stream=log") {
		if m := countRE.FindStringSubmatch(l); m != nil {
			n, _ := strconv.Atoi(m[1])
			out = append(out, n)
		}
	}
	return out
}

// startReplica runs serve on cfg in the background with o (plus a drain
// timeout and the hooks the test needs) and returns once it runs.
func startReplica(t *testing.T, cfg *config.Config, o runOptions) *replica {
	t.Helper()
	r := &replica{logs: &syncBuffer{}, done: make(chan error, 1), daemon: make(chan *daemon, 1)}
	urls := make(chan string, 1)
	ctx, cancel := context.WithCancel(context.Background())
	r.cancel = cancel
	log := slog.New(slog.NewTextHandler(r.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	o.drainTimeout = 10 * time.Second
	o.serverStarted = func(s *server.Server) { urls <- "http://" + s.Addr().String() }
	o.started = func(d *daemon) { r.daemon <- d }
	go func() { r.done <- serve(ctx, cfg, log, o) }()
	r.url = <-urls
	select {
	case r.d = <-r.daemon:
	case err := <-r.done:
		t.Fatalf("serve: %v", err)
	}
	return r
}

func (r *replica) compiles() int { return len(r.logs.lines("compiled plugin", "plugin=counter.wasm")) }

func testWarmStandby(t *testing.T, crash bool) {
	ns := env.Namespace(t)
	cfg := leaderConfig(t, ns, "counter.wasm", "../../host/testdata/plugins/counter.wat")
	cms := env.Client.CoreV1().ConfigMaps(ns)
	create := func(name string) {
		t.Helper()
		if _, err := cms.Create(context.Background(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 5 {
		create(fmt.Sprintf("before%d", i))
	}

	a, b := startReplica(t, cfg, runOptions{abandonLease: crash}), startReplica(t, cfg, runOptions{abandonLease: crash})
	defer a.cancel()
	defer b.cancel()

	var leader, standby *replica
	eventually(t, "one replica to lead", func() bool {
		switch {
		case !a.d.host.Standby():
			leader, standby = a, b
		case !b.d.host.Standby():
			leader, standby = b, a
		}
		return leader != nil
	})
	count := func() int {
		t.Helper()
		list, err := cms.List(context.Background(), metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return len(list.Items)
	}
	before := count()
	eventually(t, "the leader's plugin to count the configmaps", func() bool {
		c := leader.counts()
		return len(c) > 0 && c[len(c)-1] == before
	})
	// The standby is warm: informers synced (ready), its plugin compiled
	// and held, and it delivers nothing.
	eventually(t, "the standby to be ready", func() bool {
		code, _ := get(t, standby.url+"/readyz")
		return code == http.StatusOK
	})
	var dbg struct{ Plugins []host.PluginStatus }
	_, body := get(t, standby.url+"/debug/plugins")
	if err := json.Unmarshal([]byte(body), &dbg); err != nil {
		t.Fatalf("/debug/plugins: %v: %s", err, body)
	}
	if st := dbg.Plugins; len(st) != 1 || st[0].State != host.StateStandby || st[0].SHA256 == "" || st[0].Counters.Delivered != 0 {
		t.Errorf("standby's /debug/plugins: %s, want counter.wasm in state standby, compiled, nothing delivered", body)
	}
	if !standby.d.host.Standby() {
		t.Error("both replicas lead")
	}
	compiled := standby.compiles()
	if compiled == 0 {
		t.Error("the standby has not compiled its plugin before taking over")
	}
	if c := standby.counts(); len(c) != 0 {
		t.Errorf("the standby's plugin handled events: counts %v", c)
	}

	// The leader goes; meanwhile the cluster changes.
	leader.cancel()
	if err := <-leader.done; err != nil {
		t.Errorf("leader's serve: %v", err)
	}
	for i := range 3 {
		create(fmt.Sprintf("during%d", i))
	}
	if err := cms.Delete(context.Background(), "before0", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the standby to take over", func() bool { return !standby.d.host.Standby() })
	create("after")
	want := count()
	eventually(t, "the new leader's plugin view to equal the cluster", func() bool {
		c := standby.counts()
		return len(c) > 0 && c[len(c)-1] == want
	})
	if n := standby.compiles(); n != compiled {
		t.Errorf("the standby compiled its plugin %d more times on takeover", n-compiled)
	}
	if crash && len(standby.logs.lines("another replica leads")) == 0 {
		t.Error("the standby never saw the crashed leader")
	}
	standby.cancel()
	if err := <-standby.done; err != nil && !errors.Is(err, context.Canceled) {
		t.Errorf("new leader's serve: %v", err)
	}
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

// daemonDir makes a directory for a daemon's config file: a kubeconfig
// for the test's control plane, and a plugin directory "plugins" holding
// plugin, made of wasm.
func daemonDir(t *testing.T, plugin string, wasm []byte) string {
	t.Helper()
	dir := t.TempDir()
	if err := env.WriteKubeconfig(filepath.Join(dir, "kubeconfig")); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, "plugins"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "plugins", plugin), wasm, 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// writeDaemonConfig writes daemonConfig on namespace ns with plugin (a
// file name) built from the WAT file src, and tail appended.
func writeDaemonConfig(t *testing.T, ns, plugin, src, tail string) *config.Config {
	t.Helper()
	dir := daemonDir(t, plugin, wat(t, src))
	text := strings.ReplaceAll(fmt.Sprintf(daemonConfig, "", "{resource: cms}"), "NS", ns) + tail
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
