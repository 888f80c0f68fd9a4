package hack

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/informer-host/informer-host/internal/config"
	"github.com/informer-host/informer-host/internal/testenv"
)

// The commands README shows, run as a person runs them: built binaries,
// child processes, each far enough to prove it starts and does its job,
// then stopped as README says (Ctrl-C, SIGTERM) and checked to leave no
// process behind. `make test` itself is the rest of this suite.

var (
	buildOnce sync.Once
	binDir    string
	buildErr  error
)

// binary builds the repository's commands once per test binary, as
// `make build`, `make cluster` and `make demo` do, and returns the path of
// one.
func binary(t *testing.T, name string) string {
	t.Helper()
	if testing.Short() {
		t.Skip("builds the daemon and the hack commands, which -short leaves out")
	}
	buildOnce.Do(func() {
		binDir, buildErr = os.MkdirTemp("", "informer-host-commands-")
		if buildErr != nil {
			return
		}
		cmd := exec.Command("go", "build", "-o", binDir+"/", "./cmd/informer-host", "./hack/cluster", "./hack/demo")
		cmd.Dir = ".."
		out, err := cmd.CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return filepath.Join(binDir, name)
}

// Not testenv.Run: the commands under test start their own control
// plane (make cluster, make demo), and that is part of what they prove.
func TestMain(m *testing.M) {
	code := m.Run()
	if binDir != "" {
		_ = os.RemoveAll(binDir)
	}
	os.Exit(code)
}

// process is a command running in the background with its output collected.
type process struct {
	cmd  *exec.Cmd
	out  testenv.LogBuffer // stdout and stderr together
	done chan struct{}
	err  error // valid after done
}

// start runs bin in dir, with env added to the test's environment.
func start(t *testing.T, dir string, env []string, bin string, args ...string) *process {
	t.Helper()
	p := &process{cmd: exec.Command(bin, args...), done: make(chan struct{})}
	p.cmd.Dir = dir
	p.cmd.Env = append(os.Environ(), env...)
	p.cmd.Stdout, p.cmd.Stderr = &p.out, &p.out
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.err = p.cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			_ = p.cmd.Process.Kill()
			<-p.done
		}
	})
	return p
}

// waitFor waits until the output matches re and returns the submatches. A
// process that exits first fails the test with its output.
func (p *process) waitFor(t *testing.T, what string, re *regexp.Regexp) []string {
	t.Helper()
	var m []string
	testenv.Eventually(t, what, func() bool {
		if m = re.FindStringSubmatch(p.out.String()); m != nil {
			return true
		}
		select {
		case <-p.done:
			t.Fatalf("%s exited (%v) before %s:\n%s", filepath.Base(p.cmd.Path), p.err, what, p.out.String())
		default:
		}
		return false
	})
	return m
}

// stop sends sig, waits for the exit and fails unless it is a clean one.
func (p *process) stop(t *testing.T, sig os.Signal) {
	t.Helper()
	if err := p.cmd.Process.Signal(sig); err != nil {
		t.Fatal(err)
	}
	<-p.done
	if p.err != nil {
		t.Errorf("%s after %v: %v\n%s", filepath.Base(p.cmd.Path), sig, p.err, p.out.String())
	}
}

// descendants lists every process below pid. Each thread has its own
// children file, and Go starts processes from whichever thread runs.
func descendants(pid int) []int {
	files, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", pid))
	var out []int
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		for _, field := range strings.Fields(string(b)) {
			if c, err := strconv.Atoi(field); err == nil {
				out = append(out, c)
				out = append(out, descendants(c)...)
			}
		}
	}
	return out
}

// leavesNothingBehind waits until every process in pids has exited.
func leavesNothingBehind(t *testing.T, pids []int) {
	t.Helper()
	for _, pid := range pids {
		testenv.Eventually(t, fmt.Sprintf("process %d to exit", pid), func() bool {
			return syscall.Kill(pid, 0) != nil
		})
	}
}

func get(url string) (int, string, error) {
	resp, err := http.Get(url)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), nil
}

var servingRE = regexp.MustCompile(`msg="serving [^"]*" address=(\S+)`)

// bin/informer-host's commands as README's "Using it" shows them, with the
// shipped config.yaml and plugins; record, replay and new as far as their
// flags (their own tests run them: cmd/informer-host, scaffold).
func TestInformerHostCommands(t *testing.T) {
	ih := binary(t, "informer-host")
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"version"}, "informer-host "},
		{[]string{"validate", "--config", "config.yaml"}, "config.yaml: ok"},
		{[]string{"validate", "--config", "hack/demo/config.yaml"}, "hack/demo/config.yaml: ok"},
		{[]string{"run", "-h"}, "-drain-timeout"},
		{[]string{"rbac", "--config", "deploy/base/config.yaml", "--config-map-key", "config.yaml"}, "kind: ClusterRole"},
		{[]string{"inspect", "build/plugins/pod-logger.wasm"}, "ABI:        v1"},
		{[]string{"new", "-h"}, "-lang"},
		{[]string{"push", "-h"}, "-docker-config"},
		{[]string{"pull", "-h"}, "-insecure"},
		{[]string{"bundle", "save", "-h"}, "-o"},
		{[]string{"bundle", "load", "-h"}, "-cache"},
		{[]string{"record", "-h"}, "-out"},
		{[]string{"replay", "-h"}, "-events"},
	}
	for _, tc := range tests {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			cmd := exec.Command(ih, tc.args...)
			cmd.Dir = ".."
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("%v\n%s", err, out)
			}
			if !strings.Contains(string(out), tc.want) {
				t.Errorf("output lacks %q:\n%s", tc.want, out)
			}
		})
	}
}

// makeRuns checks that `make target` still runs want, the command the
// test runs in its stead (with paths of its own), so the two cannot drift.
func makeRuns(t *testing.T, target, want string) {
	t.Helper()
	cmd := exec.Command("make", "-n", target)
	cmd.Dir = ".."
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("make -n %s: %v\n%s", target, err, out)
	}
	if !strings.Contains("\n"+string(out), "\n"+want+"\n") {
		t.Fatalf("make %s no longer runs %q; update this test:\n%s", target, want, out)
	}
}

// make cluster: bin/cluster starts a control plane, writes a kubeconfig
// that reaches it, and bin/informer-host run with that kubeconfig becomes
// ready against it (README's "use it with" lines). Ctrl-C stops the host
// and then the control plane, leaving no process behind.
func TestMakeCluster(t *testing.T) {
	if _, err := testenv.AssetsDir(); err != nil {
		t.Fatal(err)
	}
	makeRuns(t, "cluster", "bin/cluster --kubeconfig build/kubeconfig")
	dir := t.TempDir()
	kubeconfig := filepath.Join(dir, "build", "kubeconfig")
	cluster := start(t, dir, nil, binary(t, "cluster"), "--kubeconfig", kubeconfig)
	cluster.waitFor(t, "the kubeconfig to be written", regexp.MustCompile(`kubeconfig written to `+regexp.QuoteMeta(kubeconfig)))
	controlPlane := descendants(cluster.cmd.Process.Pid)
	if len(controlPlane) < 3 {
		t.Errorf("the cluster command runs %d processes (%v), want etcd, kube-apiserver and kube-controller-manager", len(controlPlane), controlPlane)
	}

	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cs.Discovery().ServerVersion(); err != nil {
		t.Fatalf("the apiserver through the written kubeconfig: %v", err)
	}
	// The controllers run: a Deployment gets its ReplicaSet and its Pod
	// (internal/testenv's TestControllers checks the rest).
	if _, err := cs.AppsV1().Deployments("default").Create(context.Background(), testenv.Deployment("web", 1), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, "the Deployment's Pod", func() bool {
		pods, err := cs.CoreV1().Pods("default").List(context.Background(), metav1.ListOptions{LabelSelector: "app=web"})
		return err == nil && len(pods.Items) == 1
	})

	plugins := filepath.Join(dir, "plugins")
	if err := os.Mkdir(plugins, 0o755); err != nil {
		t.Fatal(err)
	}
	config := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(config, []byte(`apiVersion: informer-host/v1
resources:
  - {name: configmaps, version: v1, resource: configmaps, namespaces: [default]}
plugins: {directory: plugins}
server: {address: "127.0.0.1:0"}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	host := start(t, dir, []string{"KUBECONFIG=" + kubeconfig}, binary(t, "informer-host"), "run", "--config", config)
	addr := host.waitFor(t, "the host to serve", servingRE)[1]
	testenv.Eventually(t, "/readyz to answer 200", func() bool {
		code, _, err := get("http://" + addr + "/readyz")
		return err == nil && code == http.StatusOK
	})
	host.stop(t, syscall.SIGTERM)

	cluster.stop(t, os.Interrupt)
	if !strings.Contains(cluster.out.String(), "stopping the control plane") {
		t.Errorf("cluster output:\n%s", cluster.out.String())
	}
	leavesNothingBehind(t, controlPlane)
}

// make demo: bin/demo starts a control plane with controllers, its
// webhook and the host with hack/demo/config.yaml, every example plugin
// granted what it uses. Each capability is seen working (a label written,
// an Event, a webhook message, a metric, a cache read) and the host never
// warns: a WARN in a healthy demo is a grant missing or a plugin failing.
// The two plugin objects it applies (a ClusterPlugin from file://, team-a's
// Plugin from a ConfigMap) run and show Ready True with a digest in the
// tables it prints, and README's kubectl lines run against its cluster
// as written. Ctrl-C stops everything. The config differs from the demo's only where
// a test must: the server and the webhook on free loopback ports, the
// plugin directory absolute.
func TestMakeDemo(t *testing.T) {
	if _, err := testenv.AssetsDir(); err != nil {
		t.Fatal(err)
	}
	makeRuns(t, "demo", "bin/demo --host bin/informer-host --config hack/demo/config.yaml")
	repo, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	built := filepath.Join(repo, "build", "plugins")
	demoConfig, err := config.Load(filepath.Join(repo, "hack", "demo", "config.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range demoConfig.Plugins.Modules {
		if _, err := os.Stat(filepath.Join(built, m.File)); err != nil {
			t.Fatalf("the example plugins are not built (run `make plugins`): %v", err)
		}
	}
	shipped, err := os.ReadFile(filepath.Join(repo, "hack", "demo", "config.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	cfg := string(shipped)
	for old, repl := range map[string]string{
		`address: "127.0.0.1:9090"`:      `address: "127.0.0.1:` + freePort(t) + `"`,
		`url: http://127.0.0.1:9091/`:    `url: http://127.0.0.1:` + freePort(t) + `/`,
		`directory: ../../build/plugins`: `directory: ` + built,
	} {
		if !strings.Contains(cfg, old) {
			t.Fatalf("hack/demo/config.yaml no longer has %q; update this test", old)
		}
		cfg = strings.Replace(cfg, old, repl, 1)
	}
	dir := t.TempDir()
	cfgFile := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(cfgFile, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}

	// 400ms: a Pod every step is label-enforcer's apply every step, and
	// its writes grant's default budget is 5/s. At 200ms, the budget
	// itself, its queue backed up now and then until it applied to Pods
	// already deleted (a create the apiserver refuses: WARN lines in two
	// runs of eight); at half the budget it keeps up.
	demo := start(t, dir, nil, binary(t, "demo"), "--host", binary(t, "informer-host"), "--config", cfgFile, "--period", "400ms",
		"--crds", filepath.Join(repo, "deploy", "crds"), "--team-plugin", filepath.Join(repo, "plugins", "examples", "minimal-wat", "plugin.yaml"))
	demo.waitFor(t, "the demo to create a pod", regexp.MustCompile(`demo \| created pod demo/demo-1`))
	for _, plugin := range []string{"pod-logger.wasm", "pod-phases.wasm", "counter-c.wasm"} {
		demo.waitFor(t, plugin+" to report", regexp.MustCompile(`plugin=`+regexp.QuoteMeta(plugin)))
	}
	effects := []struct {
		capability string
		printed    string // a regular expression
	}{
		{"label-enforcer's writes", `demo \| pod demo/demo-\d+ labelled environment=demo by informer-host/label-enforcer\.wasm`},
		{"team-labeler's cache reads and writes", `demo \| pod demo/web-\S+ labelled team=storefront by informer-host/team-labeler\.wasm`},
		{"owner-lookup's cache reads", `msg="deployment demo/web pods=[23] [^"]*" plugin=owner-lookup\.wasm`},
		{"event-recorder's Events", `demo \| event Warning ConfigMapTooLarge on ConfigMap demo/large by informer-host/event-recorder `},
		{"crashloop-notifier's webhook", `demo \| upstream webhook received POST /crashloop: \{"namespace":"demo","pod":"demo-\d+","container":"main","reason":"CrashLoopBackOff"`},
		{"ns-counter's metrics", `demo \| metric informer_host_plugin_metric_pods\{[^}]*plugin="ns-counter\.wasm"[^}]*\} [1-9]`},
	}
	for _, e := range effects {
		demo.waitFor(t, e.capability+" to be seen", regexp.MustCompile(e.printed))
	}
	// The plugin objects: both run, and the demo prints their tables with
	// READY True and the digest of what runs.
	for _, plugin := range []string{"phases.wasm", "team-a.minimal-wat.wasm"} {
		demo.waitFor(t, plugin+" (a plugin object) to report", regexp.MustCompile(`plugin=`+regexp.QuoteMeta(plugin)))
	}
	demo.waitFor(t, "team-a's Plugin to be handed team-a's ConfigMaps",
		regexp.MustCompile(`msg="delete note-5" plugin=team-a\.minimal-wat\.wasm`))
	demo.waitFor(t, "team-a's Plugin to be Ready with a digest",
		regexp.MustCompile(`demo \| team-a\s+minimal-wat\s+True\s+configmap://team-a/minimal-wat/minimal-wat\.wasm\s+sha256:[0-9a-f]{64}\s`))
	demo.waitFor(t, "the ClusterPlugin to be Ready with a digest",
		regexp.MustCompile(`demo \| phases\s+True\s+file://\S+/pod-phases\.wasm\s+sha256:[0-9a-f]{64}\s`))
	readmePluginCommands(t, repo, filepath.Join(dir, "build", "demo", "kubeconfig"), demo)

	addr := demo.waitFor(t, "the host to serve", servingRE)[1]
	code, body, err := get("http://" + addr + "/debug/plugins")
	if err != nil || code != http.StatusOK || !strings.Contains(body, "minimal-wat.wasm") {
		t.Errorf("/debug/plugins: %d %q %v", code, body, err)
	}
	all := descendants(demo.cmd.Process.Pid)
	if len(all) < 4 {
		t.Errorf("the demo runs %d processes (%v), want etcd, kube-apiserver, kube-controller-manager and informer-host", len(all), all)
	}
	demo.stop(t, os.Interrupt)
	leavesNothingBehind(t, all)
	var ee *exec.ExitError
	if errors.As(demo.err, &ee) {
		t.Errorf("demo exit: %v", ee)
	}
	for _, level := range []string{"level=WARN", "level=ERROR"} {
		if lines := demo.out.Lines(level); len(lines) > 0 {
			t.Errorf("a healthy demo logged %d %s lines:\n%s", len(lines), level, strings.Join(lines, "\n"))
		}
	}
}

// freePort is a loopback TCP port nothing listens on at the moment.
func freePort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
}

// make soak runs hack/soak's TestSoak for SOAK_DURATION; make test runs
// that same test for one pass over the faults (hack/soak), so here it is
// enough that the target still runs it.
func TestMakeSoak(t *testing.T) {
	makeRuns(t, "soak", "go test -count=1 -timeout 0 -v -run TestSoak ./hack/soak -args -soak.duration=10m")
}

// readmePluginCommands runs README's kubectl lines (its sh blocks in the
// demo's paragraphs and "Plugins as resources") as written, with the real
// kubectl, against the demo's cluster, from the repository's root: the
// demo applied the same objects, so they apply unchanged. The tables
// README shows must match, row by row, what `kubectl get` prints there
// and what the demo printed (`demo | ` lines), but for a digest and an
// age.
func readmePluginCommands(t *testing.T, repo, kubeconfig string, demo *process) {
	t.Helper()
	readme, err := os.ReadFile(filepath.Join(repo, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	blocks := readmeBlocks(string(readme), "## Using it", "### Plugins as resources")
	env := append(os.Environ(), "KUBECONFIG="+kubeconfig, "KUBECACHEDIR="+filepath.Join(t.TempDir(), "kube-cache"))
	ran := map[string]bool{}
	for _, b := range blocks {
		if b.lang == "sh" {
			for _, line := range b.lines {
				if !strings.HasPrefix(line, "kubectl ") {
					continue
				}
				cmd := exec.Command("sh", "-c", line)
				cmd.Dir, cmd.Env = repo, env
				out, err := cmd.CombinedOutput()
				if err != nil {
					t.Fatalf("README: %s: %v\n%s", line, err, out)
				}
				ran[strings.Fields(line)[1]] = true
				if strings.HasPrefix(line, "kubectl get ") {
					matchTable(t, "README's output of "+line, b.next, string(out))
				}
			}
			continue
		}
		if len(b.lines) > 0 && strings.HasPrefix(b.lines[0], "demo | ") {
			var rows []string
			for _, l := range b.lines {
				if strings.HasPrefix(l, "demo | ") && tableRow(l) {
					rows = append(rows, l)
				}
			}
			if len(rows) > 0 {
				matchTable(t, "README's demo output", rows, demo.out.String())
				ran["demo"] = true
			}
		}
	}
	for _, verb := range []string{"create", "apply", "get", "demo"} {
		if !ran[verb] {
			t.Errorf("README shows no %s line (kubectl's, or a demo table) in its demo and Plugins as resources sections; this test looks for them there", verb)
		}
	}
}

type readmeBlock struct {
	lang  string
	lines []string
	next  []string // the lines of the fenced block that follows, if any
}

// readmeBlocks returns the fenced blocks of the README's text before
// `upto` (the demo's paragraphs) and of the section `section`.
func readmeBlocks(readme, upto, section string) []readmeBlock {
	var text string
	if i := strings.Index(readme, "\n"+upto+"\n"); i >= 0 {
		text = readme[:i]
	}
	if i := strings.Index(readme, "\n"+section+"\n"); i >= 0 {
		rest := readme[i+len(section)+2:]
		if loc := regexp.MustCompile(`\n#{1,3} `).FindStringIndex(rest); loc != nil {
			rest = rest[:loc[0]]
		}
		text += "\n" + rest
	}
	var out []readmeBlock
	var cur *readmeBlock
	for _, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(line, "```") {
			if cur == nil {
				cur = &readmeBlock{lang: strings.TrimPrefix(line, "```")}
			} else {
				out = append(out, *cur)
				cur = nil
			}
			continue
		}
		if cur != nil {
			cur.lines = append(cur.lines, line)
		}
	}
	for i := 0; i+1 < len(out); i++ {
		out[i].next = out[i+1].lines
	}
	return out
}

// tableRow is whether a demo line is a row of a `kubectl get` table
// (several columns two or more spaces apart), not one of its sentences.
func tableRow(line string) bool {
	return len(regexp.MustCompile(`\S {2,}\S`).FindAllString(line, -1)) >= 2
}

// matchTable checks that each of README's rows matches a line of out:
// the same words in the same order, with any sha256 digest standing for
// any digest, an age (12s, 3m4s, 2d) for any age and a file:// path for
// the same file name in any directory.
func matchTable(t *testing.T, what string, rows []string, out string) {
	t.Helper()
	if len(rows) == 0 {
		t.Errorf("%s: README shows no rows", what)
	}
	digest := regexp.MustCompile(`^sha256:[0-9a-f]+…?$`)
	age := regexp.MustCompile(`^\d+[smhd](\d+[smh])?$`)
	for _, row := range rows {
		var parts []string
		for _, f := range strings.Fields(row) {
			switch {
			case digest.MatchString(f):
				parts = append(parts, `sha256:[0-9a-f]{64}`)
			case strings.HasPrefix(f, "file://"):
				// A file:// source names a checkout's own path.
				parts = append(parts, `file://\S*/`+regexp.QuoteMeta(filepath.Base(f)))
			case age.MatchString(f):
				parts = append(parts, `\d+[smhd](\d+[smh])?`)
			default:
				parts = append(parts, regexp.QuoteMeta(f))
			}
		}
		re := regexp.MustCompile(`(?m)^` + strings.Join(parts, `\s+`) + `\s*$`)
		if !re.MatchString(out) {
			t.Errorf("%s: no line matches README's\n%s\nin:\n%s", what, row, out)
		}
	}
}
