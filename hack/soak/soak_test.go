package soak

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/informer-host/informer-host/internal/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) {
	// The test's proxies log every connection a fault breaks through the
	// standard logger, thousands of lines a pass: the faults are the
	// point, and the daemons' own logs say what they saw.
	log.SetOutput(io.Discard)
	os.Exit(testenv.Run(m, &env))
}

// duration 0 runs every fault once (make test); make soak sets it.
var (
	duration = flag.Duration("soak.duration", 0, "how long to go on injecting faults after the first pass (0: one pass)")
	only     = flag.String("soak.only", "", "inject only the faults whose name matches this regular expression")
)

// Timings of the sharding group: short, so that a fault's effects show
// within seconds; the test waits on conditions, these only make the waits
// short.
const (
	leaseDuration = 2 * time.Second
	soakObjects   = 300 // the churn keeps about this many ConfigMaps
	// reconvergeBound ends a wait for convergence that would never end:
	// what is still different then is counted lost.
	reconvergeBound = 2 * time.Minute
	// judgeAfter is how long a process must have lived for its memory
	// and goroutines to be judged (growth).
	judgeAfter = 3 * time.Minute
)

// report is one change a checker plugin was given.
type report struct {
	Member      string `json:"m"`
	Process     string `json:"p"`
	Incarnation string `json:"i"`
	Start       int64  `json:"s,string"`
	Type        string `json:"t"`
	Key         string `json:"k"`
	RV          string `json:"rv"`
}

// truth is the checker server: each member's current incarnation and its
// view (key → resourceVersion). An incarnation that started before the
// member's current one is retired: its late reports are ignored, since
// the newer instance was handed the whole cache.
type truth struct {
	mu      sync.Mutex
	members map[string]*memberView
	reports atomic.Int64
	// history keeps each object's last reports, for a failure to show
	// who said what of it, and when.
	history map[string][]string
}

// historyKeep is how many of an object's reports the history keeps.
const historyKeep = 8

type memberView struct {
	process     string // the daemon whose instance this is
	incarnation string
	start       int64
	view        map[string]string
}

func (tr *truth) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var rep report
	if err := json.NewDecoder(r.Body).Decode(&rep); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	tr.reports.Add(1)
	tr.mu.Lock()
	if tr.history == nil {
		tr.history = map[string][]string{}
	}
	h := append(tr.history[rep.Key], fmt.Sprintf("%s %s (process %s, incarnation %s) %s at %s",
		time.Now().Format("15:04:05.000"), rep.Member, rep.Process, rep.Incarnation, rep.Type, rep.RV))
	tr.history[rep.Key] = h[max(0, len(h)-historyKeep):]
	mv := tr.members[rep.Member]
	switch {
	case mv == nil || (rep.Incarnation != mv.incarnation && rep.Start > mv.start):
		mv = &memberView{process: rep.Process, incarnation: rep.Incarnation, start: rep.Start, view: map[string]string{}}
		tr.members[rep.Member] = mv
	case rep.Incarnation != mv.incarnation:
		mv = nil // retired
	}
	if mv != nil {
		if rep.Type == "delete" {
			delete(mv.view, rep.Key)
		} else {
			mv.view[rep.Key] = rep.RV
		}
	}
	tr.mu.Unlock()
	w.WriteHeader(http.StatusNoContent)
}

// reportsOf returns the last reports of key, oldest first.
func (tr *truth) reportsOf(key string) []string {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return slices.Clone(tr.history[key])
}

// process is the daemon whose instance holds member's current view.
func (tr *truth) process(member string) string {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	if mv := tr.members[member]; mv != nil {
		return mv.process
	}
	return ""
}

// diff compares the views of members (one group: the members of a
// sharding group, or the one view of a leader-elected pair) with the
// cluster (key → rv) and returns what differs.
func (tr *truth) diff(cluster map[string]string, members ...string) []string {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	owners := map[string][]string{}
	var out []string
	for m, mv := range tr.members {
		if !slices.Contains(members, m) {
			continue
		}
		for k, rv := range mv.view {
			owners[k] = append(owners[k], m)
			if want, ok := cluster[k]; !ok {
				out = append(out, fmt.Sprintf("%s: %s has it at %s, the cluster does not", k, m, rv))
			} else if rv != want {
				out = append(out, fmt.Sprintf("%s: %s has it at %s, the cluster at %s", k, m, rv, want))
			}
		}
	}
	for k, rv := range cluster {
		switch len(owners[k]) {
		case 0:
			out = append(out, fmt.Sprintf("%s at %s: in no member's view", k, rv))
		case 1:
		default:
			slices.Sort(owners[k]) // the members were visited in map order
			out = append(out, fmt.Sprintf("%s: in the views of %v", k, owners[k]))
		}
	}
	slices.Sort(out)
	return out
}

// The two ways replicas share the work: a sharding group, and a
// leader-elected pair with a warm standby.
const (
	shardingMode = `sharding:
  enabled: true
  namespace: NS
  leasePrefix: soak
  leaseDuration: 2s
  renewDeadline: 1s
  retryPeriod: 200ms`
	leaderMode = `leaderElection:
  enabled: true
  namespace: NS
  leaseName: soak-leader
  leaseDuration: 2s
  renewDeadline: 1s
  retryPeriod: 200ms`
)

// daemon is one informer-host process, a member of the sharding group,
// reaching the apiserver through its own two proxies: an outage proxy
// (connections reset and refused) in front of a watch proxy (watches cut,
// then answered 410 Gone).
type daemon struct {
	name    string
	bin     string
	dir     string
	metrics string // the /metrics URL
	outage  *testenv.OutageProxy
	watches *testenv.WatchProxy

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{} // closed once cmd has exited and been reaped
	logs *lineBuffer
	// samples are RSS and goroutines over time, per process: a restart
	// starts a new series.
	samples [][]sample
	// exits counts the processes that ended by themselves (a leader that
	// lost its lease exits): started again, as the kubelet restarts a
	// pod. stopping is set when the test ends or replaces the process.
	selfExits int
	stopping  bool
}

type sample struct {
	at         time.Duration
	rss        float64
	goroutines float64
}

const daemonConfig = `apiVersion: informer-host/v1
kubeconfig: kubeconfig
resources:
  - {name: cms, version: v1, resource: configmaps, namespaces: [NS], labelSelector: soak=1}
MODE
upstreams:
  - {name: checker, url: "CHECKER", methods: [POST], timeout: 5s}
plugins:
  directory: plugins
  state: {path: state.db, flushInterval: 200ms}
  modules:
  - file: checker.wasm
    bindings: [{resource: cms}]
    config: {member: VIEW, process: NAME}
    grants:
      http: {upstreams: [checker]}
      state: {maxKeys: 200}
    limits: {restartBackoff: 10ms}
server:
  address: ADDR
`

func startDaemon(t *testing.T, name, view, mode, bin, ns, checker string, plugin []byte) *daemon {
	t.Helper()
	d := &daemon{name: name, bin: bin, dir: t.TempDir()}
	var rc = env.Config
	d.watches, rc = testenv.NewWatchProxy(t, rc)
	var out = rc
	d.outage, out = testenv.NewOutageProxy(t, rc)
	// The outage proxy forwards bytes; the watch proxy behind it speaks
	// plain HTTP and holds the credentials.
	server := "http://" + strings.TrimPrefix(out.Host, "https://")
	kubeconfig := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters: [{name: soak, cluster: {server: %q}}]
contexts: [{name: soak, context: {cluster: soak, user: soak}}]
current-context: soak
users: [{name: soak, user: {}}]
`, server)
	addr := freeAddr(t)
	d.metrics = "http://" + addr + "/metrics"
	cfg := strings.NewReplacer("MODE", mode).Replace(daemonConfig)
	cfg = strings.NewReplacer("NS", ns, "CHECKER", checker, "VIEW", view, "NAME", name, "ADDR", addr).Replace(cfg)
	for file, b := range map[string][]byte{"kubeconfig": []byte(kubeconfig), "config.yaml": []byte(cfg), "plugins/checker.wasm": plugin} {
		p := filepath.Join(d.dir, file)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	d.start(t)
	t.Cleanup(func() {
		d.stop()
		if t.Failed() {
			t.Logf("member %s, last log lines:\n%s", name, d.logs.tail(60))
		}
	})
	return d
}

// start runs the binary (again, after a kill). A process that ends by
// itself is started again after a second, as the kubelet restarts a
// container: a leader that lost its lease exits on purpose.
func (d *daemon) start(t *testing.T) {
	t.Helper()
	if err := d.spawn(t); err != nil {
		t.Fatal(err)
	}
}

func (d *daemon) spawn(t *testing.T) error {
	logs := &lineBuffer{}
	cmd := exec.Command(d.bin, "run", "--config", filepath.Join(d.dir, "config.yaml"), "--drain-timeout", "5s")
	cmd.Stderr = logs
	if err := cmd.Start(); err != nil {
		return err
	}
	done := make(chan struct{})
	d.mu.Lock()
	d.cmd, d.done, d.logs, d.stopping = cmd, done, logs, false
	d.samples = append(d.samples, nil)
	d.mu.Unlock()
	go func() {
		err := cmd.Wait()
		close(done)
		d.mu.Lock()
		restart := !d.stopping && d.cmd == cmd
		if restart {
			d.selfExits++
		}
		d.mu.Unlock()
		if restart {
			t.Logf("member %s exited by itself (%v); starting it again", d.name, err)
			time.Sleep(time.Second)
			d.mu.Lock()
			again := !d.stopping && d.cmd == cmd
			d.mu.Unlock()
			if again {
				if err := d.spawn(t); err != nil {
					t.Errorf("start member %s again: %v", d.name, err)
				}
			}
		}
	}()
	return nil
}

// stop kills the process and waits for it; it is not started again.
func (d *daemon) stop() {
	d.mu.Lock()
	d.stopping = true
	cmd, done := d.cmd, d.done
	d.mu.Unlock()
	_ = cmd.Process.Signal(syscall.SIGCONT)
	_ = cmd.Process.Kill()
	<-done
}

// kill SIGKILLs the process and starts it again.
func (d *daemon) kill(t *testing.T) {
	d.stop()
	d.start(t)
}

// exits reports whether the process ends by itself within d (then it is
// started again as any process that ends is); else it is killed and
// started again.
func (d *daemon) exits(t *testing.T, within time.Duration) bool {
	d.mu.Lock()
	done := d.done
	d.mu.Unlock()
	select {
	case <-done:
		return true
	case <-time.After(within):
		d.kill(t)
		return false
	}
}

func (d *daemon) signal(sig syscall.Signal) {
	d.mu.Lock()
	defer d.mu.Unlock()
	_ = d.cmd.Process.Signal(sig)
}

// reload puts a variant of the plugin in place (a custom section more:
// other bytes, the same behaviour), as a person copying a new build does.
func (d *daemon) reload(t *testing.T, n int) {
	t.Helper()
	p := filepath.Join(d.dir, "plugins", "checker.wasm")
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	payload := append([]byte{4, 's', 'o', 'a', 'k'}, []byte(strconv.Itoa(n))...)
	b = append(append(b, 0, byte(len(payload))), payload...)
	tmp := p + ".tmp"
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, p); err != nil {
		t.Fatal(err)
	}
}

var metricRE = regexp.MustCompile(`(?m)^(process_resident_memory_bytes|go_goroutines) (\S+)$`)

// sample scrapes the member's RSS and goroutines; false if it does not
// answer (it is restarting).
func (d *daemon) sample(since time.Time) bool {
	c := http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get(d.metrics)
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	s := sample{at: time.Since(since).Round(time.Second)}
	for _, m := range metricRE.FindAllStringSubmatch(string(b), -1) {
		v, _ := strconv.ParseFloat(m[2], 64)
		if m[1] == "go_goroutines" {
			s.goroutines = v
		} else {
			s.rss = v
		}
	}
	d.mu.Lock()
	d.samples[len(d.samples)-1] = append(d.samples[len(d.samples)-1], s)
	d.mu.Unlock()
	return true
}

// growth says how a process's RSS and goroutines moved over its life, and
// whether that is growth: the peak of the last third of its samples above
// the peak of the first third by more than half again plus 64 MiB, or by
// more than 200 goroutines. Peaks, because a reload compiles the plugin
// anew and the Go runtime gives memory back slowly: a leak keeps rising
// from one third to the next, a working set plateaus. A process with
// fewer than six samples says nothing, and one that lived less than
// judgeAfter is reported but not judged: it was still filling its cache
// and compiling its plugin (member a is SIGKILLed once a pass; member b
// lives through the whole run).
func growth(series []sample) (string, bool) {
	n := len(series)
	if n < 6 {
		return "", false
	}
	peak := func(ss []sample) (rss, goroutines float64) {
		for _, s := range ss {
			rss, goroutines = max(rss, s.rss), max(goroutines, s.goroutines)
		}
		return rss, goroutines
	}
	firstRSS, firstG := peak(series[:n/3])
	lastRSS, lastG := peak(series[n-n/3:])
	lived := series[n-1].at - series[0].at
	grew := lived >= judgeAfter && (lastRSS > firstRSS*1.5+64<<20 || lastG > firstG+200)
	return fmt.Sprintf("peak RSS %.0f MiB in the first third of its %d samples, %.0f MiB in the last; peak goroutines %.0f, then %.0f; over %s",
		firstRSS/(1<<20), n, lastRSS/(1<<20), firstG, lastG, lived), grew
}

// controlPlaneProcess is kube-apiserver or etcd, a child of this test
// binary started by envtest: its command line, to start it again after a
// SIGKILL, and the restarted process, killed when the test ends.
type controlPlaneProcess struct {
	name string
	pid  int
	args []string
	// exited receives the restarted process's end; out is its output.
	exited chan error
	out    *lineBuffer
}

func findChild(t *testing.T, name string) *controlPlaneProcess {
	t.Helper()
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		i := strings.LastIndexByte(string(stat), ')')
		f := strings.Fields(string(stat[i+1:]))
		if len(f) < 2 || f[1] != strconv.Itoa(os.Getpid()) {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		args := strings.Split(strings.TrimRight(string(cmdline), "\x00"), "\x00")
		if filepath.Base(args[0]) == name {
			return &controlPlaneProcess{name: name, pid: pid, args: args}
		}
	}
	t.Fatalf("no %s child of this test process", name)
	return nil
}

// restart SIGKILLs the process and starts the same command line again:
// the same ports, certificates and data directory, as a supervisor would.
func (p *controlPlaneProcess) restart(t *testing.T) {
	t.Helper()
	if err := syscall.Kill(p.pid, syscall.SIGKILL); err != nil {
		t.Fatalf("kill %s: %v", p.name, err)
	}
	// The old process is envtest's child, which reaps it. Start again
	// once its ports can be bound: a listening socket outlives the
	// process by a moment.
	deadline := time.Now().Add(time.Minute)
	for _, port := range p.ports() {
		for {
			ln, err := net.Listen("tcp", "127.0.0.1:"+port)
			if err == nil {
				ln.Close()
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s's port %s still taken a minute after its SIGKILL: %v", p.name, port, err)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	cmd := exec.Command(p.args[0], p.args[1:]...)
	out := &lineBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s again: %v", p.name, err)
	}
	p.pid = cmd.Process.Pid
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		select {
		case err := <-exited:
			if t.Failed() {
				t.Logf("%s (started again) ended: %v; its last lines:\n%s", p.name, err, out.tail(30))
			}
		case <-time.After(time.Minute):
		}
	})
	p.exited = exited
	p.out = out
}

var portRE = regexp.MustCompile(`(?:^--secure-port=|:)(\d+)\b`)

// ports are the ports the command line listens on: kube-apiserver's
// --secure-port, etcd's --listen-*-urls (not the ports it only names,
// such as the apiserver's etcd).
func (p *controlPlaneProcess) ports() []string {
	var out []string
	for _, a := range p.args {
		if !strings.HasPrefix(a, "--secure-port=") && !strings.HasPrefix(a, "--listen-") {
			continue
		}
		for _, m := range portRE.FindAllStringSubmatch(a, -1) {
			if !slices.Contains(out, m[1]) {
				out = append(out, m[1])
			}
		}
	}
	return out
}

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// lineBuffer keeps a process's log.
type lineBuffer struct {
	mu    sync.Mutex
	lines []string
	part  []byte
}

func (b *lineBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.part = append(b.part, p...)
	sc := bufio.NewScanner(strings.NewReader(string(b.part)))
	b.part = b.part[:0]
	for sc.Scan() {
		b.lines = append(b.lines, sc.Text())
	}
	if len(b.lines) > 5000 {
		b.lines = b.lines[len(b.lines)-5000:]
	}
	return len(p), nil
}

func (b *lineBuffer) tail(n int) string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return strings.Join(b.lines[max(0, len(b.lines)-n):], "\n")
}

// churn creates, updates and deletes the soak's ConfigMaps while running
// is set, keeping about soakObjects of them.
type churn struct {
	ns      string
	running atomic.Bool
	ops     atomic.Int64
	seq     int
	live    []string
}

func (c *churn) run(ctx context.Context) {
	cms := env.Client.CoreV1().ConfigMaps(c.ns)
	tick := time.NewTicker(25 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		if !c.running.Load() {
			continue
		}
		var err error
		switch r := rand.IntN(10); {
		case len(c.live) < soakObjects/2 || (r < 4 && len(c.live) < soakObjects):
			err = c.create(ctx, nil)
		case r < 8:
			name := c.live[rand.IntN(len(c.live))]
			_, err = cms.Patch(ctx, name, "application/merge-patch+json",
				[]byte(fmt.Sprintf(`{"data":{"v":%q}}`, strconv.Itoa(rand.Int()))), metav1.PatchOptions{})
		default:
			i := rand.IntN(len(c.live))
			err = cms.Delete(ctx, c.live[i], metav1.DeleteOptions{})
			if err == nil || apierrors.IsNotFound(err) {
				c.live = slices.Delete(c.live, i, i+1)
			}
		}
		if err == nil {
			c.ops.Add(1)
		}
		// Errors are the faults at work (the apiserver down, etcd
		// stopped): the churn goes on with the next change.
	}
}

// create adds one ConfigMap; with t, a failure fails the test.
func (c *churn) create(ctx context.Context, t *testing.T) error {
	name := fmt.Sprintf("cm-%06d", c.seq)
	c.seq++
	_, err := env.Client.CoreV1().ConfigMaps(c.ns).Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"soak": "1"}},
		Data:       map[string]string{"v": "0"}}, metav1.CreateOptions{})
	if err == nil {
		c.live = append(c.live, name)
	} else if t != nil {
		t.Fatal(err)
	}
	return err
}

// clusterState lists the soak's ConfigMaps: key → resourceVersion.
func clusterState(ctx context.Context, ns string) (map[string]string, error) {
	l, err := env.Client.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{LabelSelector: "soak=1"})
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, cm := range l.Items {
		out[ns+"/"+cm.Name] = cm.ResourceVersion
	}
	return out, nil
}

// explain logs, for the first objects of a failed convergence, what
// each member of the sharding group makes of it (its owner in the
// member's view, whether the member owns it now, and what each plugin's
// worker counts the plugin as having: /debug/plugins?object=) and the
// checker's last reports of it, so that a doubled or lost object says
// which member is wrong, and why.
func explain(t *testing.T, ctx context.Context, tr *truth, ns string, differences []string, members ...*daemon) {
	t.Helper()
	seen := map[string]bool{}
	for _, d := range differences {
		// A difference starts with the object's key ("ns/name: ..." or
		// "ns/name at rv: ...").
		key := strings.FieldsFunc(d, func(r rune) bool { return r == ':' || r == ' ' })[0]
		if seen[key] || !strings.HasPrefix(key, ns+"/") {
			continue
		}
		seen[key] = true
		if len(seen) > 5 {
			break
		}
		var b strings.Builder
		fmt.Fprintf(&b, "%s:", key)
		for _, m := range members {
			fmt.Fprintf(&b, "\n  member %s: %s", m.name, m.object(ctx, "cms/"+key))
		}
		fmt.Fprintf(&b, "\n  the checker's last reports of it:")
		for _, r := range tr.reportsOf(key) {
			fmt.Fprintf(&b, "\n    %s", r)
		}
		t.Log(b.String())
	}
}

// objectDoc is the part of /debug/plugins?object= the soak reads.
type objectDoc struct {
	Shard *struct {
		Member     string    `json:"member"`
		Active     bool      `json:"active"`
		Members    []string  `json:"members"`
		ValidUntil time.Time `json:"validUntil"`
	} `json:"shard"`
	Object *struct {
		Owner   string `json:"owner"`
		Owned   bool   `json:"owned"`
		CacheRV string `json:"cacheResourceVersion"`
		Plugins []struct {
			File         string `json:"file"`
			Answered     bool   `json:"answered"`
			Has          bool   `json:"has"`
			Unsettled    bool   `json:"unsettled"`
			RV           string `json:"resourceVersion"`
			AppliedOwner string `json:"appliedOwner"`
			AppliedOwned bool   `json:"appliedOwned"`
		} `json:"plugins"`
	} `json:"object"`
}

// objectView asks the member what it makes of the object (resource/
// namespace/name): its /debug/plugins?object=.
func (d *daemon) objectView(ctx context.Context, object string) (*objectDoc, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	u := strings.TrimSuffix(d.metrics, "/metrics") + "/debug/plugins?object=" + object
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("no answer: %w", err)
	}
	defer resp.Body.Close()
	var doc objectDoc
	if err := json.NewDecoder(resp.Body).Decode(&doc); err != nil || doc.Object == nil || doc.Shard == nil {
		return nil, fmt.Errorf("answered %s, not a document with the object and the shard: %v", resp.Status, err)
	}
	return &doc, nil
}

// object is objectView in a line.
func (d *daemon) object(ctx context.Context, object string) string {
	doc, err := d.objectView(ctx, object)
	if err != nil {
		return err.Error()
	}
	o, sh := doc.Object, doc.Shard
	var b strings.Builder
	fmt.Fprintf(&b, "id %s, active %t, members %v, valid until %s; owner %q, owned now %t, cache at %q",
		sh.Member, sh.Active, sh.Members, sh.ValidUntil.Format("15:04:05.000"), o.Owner, o.Owned, o.CacheRV)
	for _, p := range o.Plugins {
		if !p.Answered {
			fmt.Fprintf(&b, "; %s: its worker did not answer", p.File)
			continue
		}
		fmt.Fprintf(&b, "; %s: has it %t (at %q, unsettled %t), under the applied view owner %q, owned %t",
			p.File, p.Has, p.RV, p.Unsettled, p.AppliedOwner, p.AppliedOwned)
	}
	return b.String()
}

// explainsOne checks, once the group has converged, what explain would
// print: each member answers for an object, and exactly one of them owns
// it and counts its plugin as having it, as the checker found.
func explainsOne(t *testing.T, ctx context.Context, cluster map[string]string, members ...*daemon) {
	t.Helper()
	var key string
	for k := range cluster {
		key = k
		break
	}
	owners, holders := 0, 0
	var lines []string
	for _, m := range members {
		doc, err := m.objectView(ctx, "cms/"+key)
		if err != nil {
			t.Errorf("member %s on %s: %v", m.name, key, err)
			return
		}
		if doc.Object.Owned {
			owners++
		}
		for _, p := range doc.Object.Plugins {
			if p.Answered && p.Has && !p.Unsettled {
				holders++
			}
		}
		lines = append(lines, "member "+m.name+": "+m.object(ctx, "cms/"+key))
	}
	if owners != 1 || holders != 1 {
		t.Errorf("converged, yet %s is owned by %d members and held by %d plugins:\n  %s", key, owners, holders, strings.Join(lines, "\n  "))
	}
}

// fault is one disruption: do starts it and returns once it is over
// (a fault with a length lasts that long: it is the fault, not a wait
// for a condition).
type fault struct {
	name string
	do   func(t *testing.T)
}

// TestSoak runs two sharded daemons under the checker plugin while
// objects churn and faults follow one another; after each fault it waits
// for the members' views to equal the cluster and counts what never
// does as lost.
func TestSoak(t *testing.T) {
	ns := env.Namespace(t)
	root, _ := filepath.Abs("../..")
	bin := filepath.Join(t.TempDir(), "informer-host")
	if out, err := exec.Command("go", "build", "-C", root, "-o", bin, "./cmd/informer-host").CombinedOutput(); err != nil {
		t.Fatalf("build the daemon: %v\n%s", err, out)
	}
	pluginPath := filepath.Join(t.TempDir(), "checker.wasm")
	build := exec.Command("go", "build", "-C", root, "-buildmode=c-shared", "-trimpath", "-o", pluginPath, "./hack/soak/checker")
	build.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build the checker plugin: %v\n%s", err, out)
	}
	plugin, err := os.ReadFile(pluginPath)
	if err != nil {
		t.Fatal(err)
	}
	tr := &truth{members: map[string]*memberView{}}
	srv := httptest.NewServer(tr)
	t.Cleanup(srv.Close)
	apiserver, etcd := findChild(t, "kube-apiserver"), findChild(t, "etcd")

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ch := &churn{ns: ns}
	for range soakObjects / 2 {
		ch.create(ctx, t)
	}
	ch.running.Store(true)
	go ch.run(ctx)

	a := startDaemon(t, "a", "a", shardingMode, bin, ns, srv.URL, plugin)
	b := startDaemon(t, "b", "b", shardingMode, bin, ns, srv.URL, plugin)
	l1 := startDaemon(t, "l1", "leader", leaderMode, bin, ns, srv.URL, plugin)
	l2 := startDaemon(t, "l2", "leader", leaderMode, bin, ns, srv.URL, plugin)
	members := []*daemon{a, b, l1, l2}
	leader := func(t *testing.T) *daemon {
		switch tr.process("leader") {
		case "l1":
			return l1
		case "l2":
			return l2
		}
		t.Fatal("no replica of the leader-elected pair has reported")
		return nil
	}
	begin := time.Now()

	reloads := 0
	faults := []fault{
		{"reload of a's plugin", func(t *testing.T) { reloads++; a.reload(t, reloads) }},
		{"b's watches cut, then resumed with 410 Gone (relist)", func(t *testing.T) {
			b.watches.Cut()
			time.Sleep(2 * time.Second)
			b.watches.Resume(true)
		}},
		{"the apiserver unreachable from a for 3s (connections reset, port closed)", func(t *testing.T) {
			a.outage.Down()
			time.Sleep(3 * time.Second)
			a.outage.Up(t)
		}},
		{"kube-apiserver SIGKILLed and started again", func(t *testing.T) { apiserver.restart(t) }},
		{"etcd SIGKILLed and started again", func(t *testing.T) { etcd.restart(t) }},
		{"member a SIGKILLed and started again", func(t *testing.T) { a.kill(t) }},
		{"member b SIGSTOPped past its Lease (2× leaseDuration), then continued", func(t *testing.T) {
			b.signal(syscall.SIGSTOP)
			time.Sleep(2 * leaseDuration)
			b.signal(syscall.SIGCONT)
		}},
		{"etcd SIGSTOPped for 3s, then continued", func(t *testing.T) {
			_ = syscall.Kill(etcd.pid, syscall.SIGSTOP)
			time.Sleep(3 * time.Second)
			_ = syscall.Kill(etcd.pid, syscall.SIGCONT)
		}},
		{"reload of b's plugin", func(t *testing.T) { reloads++; b.reload(t, reloads) }},
		{"the leader SIGKILLed and started again (the standby takes over)", func(t *testing.T) { leader(t).kill(t) }},
		{"the leader SIGSTOPped past its lease, then continued: it exits and starts again as the standby", func(t *testing.T) {
			l := leader(t)
			l.signal(syscall.SIGSTOP)
			time.Sleep(2 * leaseDuration)
			l.signal(syscall.SIGCONT)
			if !l.exits(t, time.Minute) {
				t.Errorf("leader %s went on for a minute after it lost its lease", l.name)
			}
		}},
	}

	if *only != "" {
		re := regexp.MustCompile(*only)
		faults = slices.DeleteFunc(faults, func(f fault) bool { return !re.MatchString(f.name) })
	}
	lost, explained := 0, false
	converge := func(what string) {
		t.Helper()
		ch.running.Store(false)
		start := time.Now()
		last := []string{"the apiserver did not answer"}
		for time.Since(start) < reconvergeBound {
			cluster, err := clusterState(ctx, ns)
			if err != nil {
				last = []string{"the apiserver did not answer: " + err.Error()}
			} else if last = append(tr.diff(cluster, "a", "b"), tr.diff(cluster, "leader")...); len(last) == 0 {
				break
			}
			time.Sleep(200 * time.Millisecond)
		}
		took := time.Since(start)
		if len(last) > 0 {
			lost += len(last)
			t.Errorf("after %s: %d objects still differ after %s:\n  %s", what, len(last), reconvergeBound,
				strings.Join(last[:min(len(last), 20)], "\n  "))
			explain(t, ctx, tr, ns, last, a, b)
		} else {
			t.Logf("%-75s reconverged in %s", what, took.Round(10*time.Millisecond))
			if !explained {
				// What a failure would print works: checked once, on
				// the converged group.
				explained = true
				if cluster, err := clusterState(ctx, ns); err == nil && len(cluster) > 0 {
					explainsOne(t, ctx, cluster, a, b)
				}
			}
		}
		for _, m := range members {
			m.sample(begin)
		}
		ch.running.Store(true)
	}

	converge("the start (initial lists, the group forming)")
	for i := 0; i == 0 || time.Since(begin) < *duration; i++ {
		for _, f := range faults {
			time.Sleep(time.Second) // churn before the fault: changes in flight when it strikes
			f.do(t)
			time.Sleep(time.Second) // and during its aftermath
			converge(f.name)
			if lost > 0 {
				break
			}
		}
		if lost > 0 {
			break
		}
	}
	ch.running.Store(false)

	t.Logf("objects lost: %d; %d changes made, %d reports from the plugins, %s", lost, ch.ops.Load(), tr.reports.Load(),
		time.Since(begin).Round(time.Second))
	for _, m := range members {
		m.mu.Lock()
		series, exits := m.samples, m.selfExits
		m.mu.Unlock()
		if exits > 0 {
			t.Logf("member %s exited by itself %d times (a leader that lost its lease) and was started again", m.name, exits)
		}
		for i, s := range series {
			msg, grew := growth(s)
			if msg == "" {
				continue
			}
			t.Logf("member %s, process %d: %s", m.name, i+1, msg)
			if grew {
				t.Errorf("member %s, process %d grew: %s", m.name, i+1, msg)
			}
		}
	}
}
