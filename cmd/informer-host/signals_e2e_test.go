package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/informer-host/informer-host/internal/state"
	"github.com/informer-host/informer-host/internal/testenv"
)

// The real binary: SIGTERM drains and exits 0; SIGHUP reloads the config;
// a second signal during a drain that cannot finish exits at once.
func TestSignals(t *testing.T) {
	env.Require(t)
	bin := filepath.Join(t.TempDir(), "informer-host")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	// start runs the binary; serve keeps its HTTP server (on a free port,
	// see serverURL).
	start := func(t *testing.T, plugins map[string][]byte, moduleYAML string, serve ...bool) (*exec.Cmd, *testenv.LogBuffer, string) {
		ns := env.Namespace(t)
		dir := env.DaemonDir(t, plugins)
		cfg := testenv.DaemonConfig(ns, "", "{resource: cms}")
		cfg = strings.Replace(cfg, "server:", moduleYAML+"server:", 1) // moduleYAML continues plugins:
		if len(serve) == 0 || !serve[0] {
			cfg = strings.Replace(cfg, "address: 127.0.0.1:0", "address: \"off\"", 1)
		}
		if err := os.WriteFile(filepath.Join(dir, "config.yaml"), []byte(cfg), 0o644); err != nil {
			t.Fatal(err)
		}
		logs := &testenv.LogBuffer{}
		cmd := exec.Command(bin, "run", "--config", filepath.Join(dir, "config.yaml"), "--drain-timeout", "2m")
		cmd.Stderr = logs
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if cmd.ProcessState == nil {
				_ = cmd.Process.Kill()
				_ = cmd.Wait()
			}
			if t.Failed() {
				t.Logf("informer-host log:\n%s", strings.Join(logs.Lines(), "\n"))
			}
		})
		testenv.Eventually(t, "the plugins to load", func() bool { return len(logs.Lines("plugin loaded")) == len(plugins) })
		return cmd, logs, ns
	}
	createCM := func(t *testing.T, ns, name string) {
		if _, err := env.Client.CoreV1().ConfigMaps(ns).Create(context.Background(),
			&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}

	t.Run("SIGTERM drains and exits 0", func(t *testing.T) {
		cmd, logs, ns := start(t, map[string][]byte{"counter.wasm": testenv.WAT(t, "../../host/testdata/plugins/counter.wat")}, "")
		createCM(t, ns, "a")
		testenv.Eventually(t, "the event to be handled", func() bool { return len(logs.Lines(`msg="count=1"`)) == 1 })
		if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		if err := cmd.Wait(); err != nil {
			t.Fatalf("exit after SIGTERM: %v", err)
		}
		for _, want := range []string{"informer-host stopping", `msg="shutdown events=1"`, "informer-host stopped"} {
			if len(logs.Lines(want)) != 1 {
				t.Errorf("log lacks %s", want)
			}
		}
	})

	t.Run("SIGTERM keeps plugin state", func(t *testing.T) {
		// A flush interval longer than the test: only the shutdown writes the file.
		path := filepath.Join(t.TempDir(), "state.db")
		cmd, logs, ns := start(t, map[string][]byte{"state.wasm": testenv.WAT(t, "../../host/testdata/fixtures/state.wat")},
			"  state: {path: "+path+", flushInterval: 1m}\n  modules:\n    - file: state.wasm\n      grants: {state: {}}\n")
		createCM(t, ns, "a")
		testenv.Eventually(t, "a stored", func() bool { return len(logs.Lines("msg=obj/a")) == 1 })
		if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		if err := cmd.Wait(); err != nil {
			t.Fatalf("exit after SIGTERM: %v", err)
		}
		s, err := state.Open(context.Background(), state.Options{Path: path})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close(context.Background())
		b, ok := s.Lookup("state.wasm")
		if !ok || !s.Persistent() {
			t.Fatalf("no state for state.wasm in %s (persistent=%v)", path, s.Persistent())
		}
		if v, _, ok := b.Get([]byte("obj/a")); !ok || string(v) != "a" {
			t.Fatalf("obj/a = %q, %v after SIGTERM", v, ok)
		}
	})

	t.Run("SIGHUP reloads the config", func(t *testing.T) {
		cmd, logs, _ := start(t, map[string][]byte{"counter.wasm": testenv.WAT(t, "../../host/testdata/plugins/counter.wat")}, "")
		if err := cmd.Process.Signal(syscall.SIGHUP); err != nil {
			t.Fatal(err)
		}
		testenv.Eventually(t, "a reload for SIGHUP", func() bool { return len(logs.Lines("config reloaded", "reason=SIGHUP")) == 1 })
		if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		if err := cmd.Wait(); err != nil {
			t.Fatalf("exit after SIGTERM: %v", err)
		}
	})

	t.Run("a FIFO or a link to /dev/zero added at run time is refused and SIGTERM still exits", func(t *testing.T) {
		cmd, logs, _ := start(t, map[string][]byte{"counter.wasm": testenv.WAT(t, "../../host/testdata/plugins/counter.wat")}, "")
		dir := filepath.Join(filepath.Dir(cmd.Args[3]), "plugins")
		if err := syscall.Mkfifo(filepath.Join(dir, "fifo.wasm"), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink("/dev/zero", filepath.Join(dir, "zero.wasm")); err != nil {
			t.Fatal(err)
		}
		for file, why := range map[string]string{"fifo.wasm": "a named pipe (FIFO), not a regular file", "zero.wasm": "a character device, not a regular file"} {
			testenv.Eventually(t, file+" to be refused", func() bool { return len(logs.Lines("plugin="+file, "plugin not loaded", why)) == 1 })
		}
		if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		if err := cmd.Wait(); err != nil {
			t.Fatalf("exit after SIGTERM: %v", err)
		}
	})

	t.Run("a second signal exits at once", func(t *testing.T) {
		// loop.wasm spins in every call; with a 10 minute deadline the
		// drain cannot finish.
		cmd, logs, ns := start(t, map[string][]byte{"loop.wasm": testenv.WAT(t, "../../host/testdata/fixtures/loop.wat")},
			"  modules:\n    - {file: loop.wasm, limits: {callTimeout: 10m}}\n", true)
		createCM(t, ns, "a")
		createCM(t, ns, "b")
		// The drain must find the plugin inside its first call: the queue
		// wait is observed as the worker enters it.
		metrics := serverURL(t, logs) + "/metrics"
		testenv.Eventually(t, "loop.wasm's first call to begin", func() bool {
			_, body := testenv.Get(t, metrics)
			return strings.Contains(body, `informer_host_plugin_queue_wait_seconds_count{plugin="loop.wasm"} 1`)
		})
		if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		testenv.Eventually(t, "the drain to begin", func() bool { return len(logs.Lines("informer-host stopping")) == 1 })
		if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		err := cmd.Wait()
		ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus)
		if err == nil || !ok || !ws.Signaled() || ws.Signal() != syscall.SIGTERM {
			t.Errorf("after a second SIGTERM: %v; want the process ended by the signal", err)
		}
	})
}

var servingRE = regexp.MustCompile(`msg="serving [^"]*" address=(\S+)`)

// serverURL is the base URL of the daemon whose log is logs.
func serverURL(t *testing.T, logs *testenv.LogBuffer) string {
	t.Helper()
	var addr string
	testenv.Eventually(t, "the server to listen", func() bool {
		for _, l := range logs.Lines("msg=\"serving ") {
			if m := servingRE.FindStringSubmatch(l); m != nil {
				addr = m[1]
				return true
			}
		}
		return false
	})
	return "http://" + addr
}
