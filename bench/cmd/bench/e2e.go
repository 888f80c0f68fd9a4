package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/informer-host/informer-host/bench/benchenv"
	"github.com/informer-host/informer-host/internal/testenv"
)

// e2e is the end-to-end harness: a real kube-apiserver and etcd (envtest,
// the binaries `make controlplane` builds), the informer-host daemon
// (bin built from ./cmd/informer-host) and the native baseline (this
// program's "native" command), each run as a child process so that its CPU
// time and memory are its own.
type e2e struct {
	root, work string
	smoke      bool
	env        *testenv.Env
	kubeconfig string
	etcdURL    string       // etcd's client URL, for the relist's compaction
	config     *rest.Config // the harness's own credentials
	client     kubernetes.Interface
	daemonBin  string
	self       string   // this program, for the native child
	cacheDir   string   // the daemon's compilation cache, kept for the whole run
	profileDir string   // if set, each daemon writes its CPU profile here (-profile)
	daemonEnv  []string // more environment of each daemon, K=V (-set daemonEnv=)
	nsSeq      int
	logf       func(format string, args ...any)
}

// newE2E builds the daemon (unless daemonBin names one) and starts the
// control plane, which close stops; with env (a test's) it uses that one
// and close leaves it running.
func newE2E(root, work string, smoke bool, daemonBin string, env *testenv.Env, logf func(string, ...any)) (*e2e, error) {
	h := &e2e{root: root, work: work, smoke: smoke, logf: logf}
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	h.self = self
	if daemonBin != "" {
		h.daemonBin = daemonBin
	} else {
		h.daemonBin = filepath.Join(work, "informer-host")
		logf("building the daemon (./cmd/informer-host)")
		cmd := exec.Command(envOr("GO", "go"), "build", "-o", h.daemonBin, "./cmd/informer-host")
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			return nil, fmt.Errorf("build informer-host: %v\n%s", err, out)
		}
	}
	if env != nil {
		return h, h.attach(env)
	}
	logf("starting kube-apiserver and etcd")
	// envtest logs through controller-runtime's logger; nothing to say here.
	ctrllog.SetLogger(ctrllog.Log.WithSink(ctrllog.NullLogSink{}))
	env, err = testenv.Start()
	if err != nil {
		return nil, err
	}
	if err := h.attach(env); err != nil {
		_ = env.Stop()
		return nil, err
	}
	h.env = env
	return h, nil
}

// attach points the harness at env's apiserver; the harness does not own
// env (a test's TestMain does) until the caller sets h.env.
func (h *e2e) attach(env *testenv.Env) error {
	h.kubeconfig = filepath.Join(h.work, "kubeconfig")
	if e := env.Environment.ControlPlane.Etcd; e != nil && e.URL != nil {
		h.etcdURL = strings.TrimSuffix(e.URL.String(), "/")
	}
	if err := env.WriteKubeconfig(h.kubeconfig); err != nil {
		return err
	}
	// The harness's own client must not be what limits the writes.
	cfg := rest.CopyConfig(env.Config)
	cfg.QPS, cfg.Burst = 1e6, 1e6
	h.config = cfg
	var err error
	if h.client, err = kubernetes.NewForConfig(cfg); err != nil {
		return err
	}
	h.cacheDir = filepath.Join(h.work, "wazero")
	return nil
}

func (h *e2e) close() {
	if h.env != nil {
		_ = h.env.Stop()
	}
}

func (h *e2e) namespace(prefix string) (string, error) {
	h.nsSeq++
	name := fmt.Sprintf("%s-%d", prefix, h.nsSeq)
	_, err := h.client.CoreV1().Namespaces().Create(context.Background(),
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	return name, err
}

// payload is 1 KiB of data, different for every object.
func payload(i int) string {
	var b strings.Builder
	b.Grow(1024)
	x := uint32(i)*2654435761 + 1
	for b.Len() < 1024 {
		x ^= x << 13
		x ^= x >> 17
		x ^= x << 5
		b.WriteByte("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"[x%62])
	}
	return b.String()
}

func configMap(ns, name, seq string, i int) *corev1.ConfigMap {
	return &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{"app": "bench"}},
		Data:       map[string]string{"seq": seq, "payload": payload(i)},
	}
}

// sentTimes records when each write was sent, by record key.
type sentTimes struct {
	mu sync.Mutex
	m  map[string]int64
}

func (s *sentTimes) note(key string, t time.Time) {
	s.mu.Lock()
	if s.m == nil {
		s.m = map[string]int64{}
	}
	s.m[key] = t.UnixNano()
	s.mu.Unlock()
}

// parallel runs f(i) for i in [0, n) on workers goroutines, and returns
// the first error.
func parallel(n, workers int, f func(i int) error) error {
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	next := make(chan int)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				if err := f(i); err != nil {
					select {
					case errs <- err:
					default:
					}
				}
			}
		}()
	}
	for i := 0; i < n; i++ {
		next <- i
	}
	close(next)
	wg.Wait()
	select {
	case err := <-errs:
		return err
	default:
		return nil
	}
}

// ---- the daemon ----

type daemon struct {
	h       *e2e
	cmd     *exec.Cmd
	dir     string // its plugin directory
	addr    string
	logPath string
	logFile *os.File
	started time.Time
	exited  chan struct{}
}

// daemonConfig is the YAML of a daemon watching configmaps in ns, with
// plugins from dir; modules is the YAML list under plugins.modules.
func (h *e2e) daemonConfig(ns, dir, addr, defaults, modules string) string {
	return fmt.Sprintf(`apiVersion: informer-host/v1
kubeconfig: %s
resources:
  - {name: cms, version: v1, resource: configmaps, namespaces: [%s]}
plugins:
  directory: %s
  compilationCache: %s
  default:
    bindings: [{resource: cms}]
    delivery: {bufferSize: 100000}
%s
  modules:
%s
server:
  address: %s
`, h.kubeconfig, ns, dir, h.cacheDir, defaults, modules, addr)
}

func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// startDaemon writes the config and runs the daemon on it. cfg is given
// the plugin directory and the server address.
func (h *e2e) startDaemon(name, dir string, cfg func(dir, addr string) string) (*daemon, error) {
	addr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	path := filepath.Join(h.work, name+".yaml")
	if err := os.WriteFile(path, []byte(cfg(dir, addr)), 0o644); err != nil {
		return nil, err
	}
	d := &daemon{h: h, dir: dir, addr: addr, logPath: filepath.Join(h.work, name+".log"), exited: make(chan struct{})}
	if d.logFile, err = os.Create(d.logPath); err != nil {
		return nil, err
	}
	args := []string{"run", "--config", path, "--log-format", "json"}
	if h.profileDir != "" {
		// A name is reused across a case's runs; the last run's profile
		// is the one kept.
		args = append(args, "--cpu-profile", filepath.Join(h.profileDir, name+".pprof"),
			"--alloc-profile", filepath.Join(h.profileDir, name+".allocs.pprof"),
			"--mem-profile", filepath.Join(h.profileDir, name+".heap.pprof"))
	}
	d.cmd = exec.Command(h.daemonBin, args...)
	if len(h.daemonEnv) > 0 {
		d.cmd.Env = append(os.Environ(), h.daemonEnv...)
	}
	d.cmd.Stdout, d.cmd.Stderr = d.logFile, d.logFile
	d.started = time.Now()
	if err := d.cmd.Start(); err != nil {
		d.logFile.Close()
		return nil, err
	}
	go func() { _ = d.cmd.Wait(); close(d.exited) }()
	return d, nil
}

type pluginStatus struct {
	File     string `json:"file"`
	SHA256   string `json:"sha256"`
	State    string `json:"state"`
	Synced   bool   `json:"synced"`
	Counters struct {
		Delivered uint64 `json:"Delivered"`
		Traps     uint64 `json:"Traps"`
		Timeouts  uint64 `json:"Timeouts"`
		Restarts  uint64 `json:"Restarts"`
	} `json:"counters"`
	LastError string `json:"lastError"`
}

var httpClient = &http.Client{Timeout: 5 * time.Second}

func (d *daemon) plugins() ([]pluginStatus, error) {
	resp, err := httpClient.Get("http://" + d.addr + "/debug/plugins")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var out struct {
		Plugins []pluginStatus `json:"plugins"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		return nil, err
	}
	return out.Plugins, nil
}

// ready reports whether /readyz answers 200 and n plugins run, synced.
func (d *daemon) ready(n int) bool {
	resp, err := httpClient.Get("http://" + d.addr + "/readyz")
	if err != nil {
		return false
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return false
	}
	ps, err := d.plugins()
	if err != nil || len(ps) != n {
		return false
	}
	for _, p := range ps {
		if p.State != "running" || !p.Synced {
			return false
		}
	}
	return true
}

// waitReady polls until ready(n), and returns the time it was first seen.
func (d *daemon) waitReady(n int, limit time.Duration) (time.Time, error) {
	deadline := time.Now().Add(limit)
	for {
		if d.ready(n) {
			return time.Now(), nil
		}
		select {
		case <-d.exited:
			return time.Time{}, fmt.Errorf("informer-host exited: %s", d.tail())
		default:
		}
		if time.Now().After(deadline) {
			ps, _ := d.plugins()
			return time.Time{}, fmt.Errorf("informer-host not ready after %v: %+v\n%s", limit, ps, d.tail())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// delivered returns, per plugin file, the ih_handle calls completed.
func (d *daemon) delivered() (map[string]uint64, error) {
	ps, err := d.plugins()
	if err != nil {
		return nil, err
	}
	out := map[string]uint64{}
	for _, p := range ps {
		out[p.File] = p.Counters.Delivered
	}
	return out, nil
}

// waitDelivered polls until every plugin in names has completed at least
// want calls.
func (d *daemon) waitDelivered(names []string, want uint64, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for {
		got, err := d.delivered()
		if err == nil {
			ok := true
			for _, n := range names {
				if got[n] < want {
					ok = false
				}
			}
			if ok {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("plugins delivered %v, want %d each (%v)", got, want, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// stop sends SIGTERM and waits: the daemon drains the plugins' queues and
// calls their shutdown exports, which flush their records to the log.
func (d *daemon) stop() error {
	_ = d.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-d.exited:
	case <-time.After(2 * time.Minute):
		_ = d.cmd.Process.Kill()
		<-d.exited
	}
	return d.logFile.Close()
}

func (d *daemon) tail() string {
	b, _ := os.ReadFile(d.logPath)
	if len(b) > 4000 {
		b = b[len(b)-4000:]
	}
	return string(b)
}

// logLine is one JSON log record of the daemon.
type logLine struct {
	Time    time.Time `json:"time"`
	Msg     string    `json:"msg"`
	Plugin  string    `json:"plugin"`
	Version string    `json:"version"`
	SHA256  string    `json:"sha256"`
	Compile int64     `json:"compile"` // ns (slog encodes durations as ns)
	Total   int64     `json:"total"`
	// PeakRSS is a compile child's peak (rusage maxrss), logged by the
	// daemon with "compiled the new version in a child process".
	PeakRSS float64 `json:"peakRSSMiB"`
}

// logs parses the daemon's log.
func (d *daemon) logs() ([]logLine, error) {
	f, err := os.Open(d.logPath)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []logLine
	s := bufio.NewScanner(f)
	s.Buffer(make([]byte, 1<<20), 1<<20)
	for s.Scan() {
		var l logLine
		if json.Unmarshal(s.Bytes(), &l) == nil {
			out = append(out, l)
		}
	}
	return out, s.Err()
}

// pluginRecord is a latency record with the plugin and version it came
// from.
type pluginRecord struct {
	record
	plugin, version string
}

// records returns every benchrec record in the daemon's log.
func (d *daemon) records() ([]pluginRecord, error) {
	lines, err := d.logs()
	if err != nil {
		return nil, err
	}
	var out []pluginRecord
	for _, l := range lines {
		body, ok := strings.CutPrefix(l.Msg, "benchrec ")
		if !ok {
			continue
		}
		for _, r := range strings.Split(body, ",") {
			if rec, ok := parseRecord(r); ok {
				out = append(out, pluginRecord{rec, l.Plugin, l.Version})
			}
		}
	}
	return out, nil
}

// ---- the native child ----

type native struct {
	cmd    *exec.Cmd
	in     io.WriteCloser
	out    *bufio.Scanner
	stderr bytes.Buffer
}

// startNative runs the native child; flags are more of its flags.
func (h *e2e) startNative(ns, mode string, handlers int, flags ...string) (*native, error) {
	n := &native{}
	n.cmd = exec.Command(h.self, append([]string{"native", "-kubeconfig", h.kubeconfig, "-namespace", ns, "-mode", mode,
		"-handlers", strconv.Itoa(handlers)}, flags...)...)
	n.cmd.Stderr = &n.stderr
	var err error
	if n.in, err = n.cmd.StdinPipe(); err != nil {
		return nil, err
	}
	stdout, err := n.cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	n.out = bufio.NewScanner(stdout)
	if err := n.cmd.Start(); err != nil {
		return nil, err
	}
	if line, err := n.read(); err != nil || line != "ready" {
		_ = n.cmd.Process.Kill()
		_ = n.cmd.Wait()
		return nil, fmt.Errorf("native child: %q %v: %s", line, err, n.stderr.String())
	}
	return n, nil
}

func (n *native) read() (string, error) {
	if !n.out.Scan() {
		if err := n.out.Err(); err != nil {
			return "", err
		}
		return "", io.EOF
	}
	return n.out.Text(), nil
}

func (n *native) count() (uint64, error) {
	if _, err := fmt.Fprintln(n.in, "count"); err != nil {
		return 0, err
	}
	line, err := n.read()
	if err != nil {
		return 0, err
	}
	v, ok := strings.CutPrefix(line, "count ")
	if !ok {
		return 0, fmt.Errorf("native child said %q", line)
	}
	return strconv.ParseUint(v, 10, 64)
}

func (n *native) waitCount(want uint64, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for {
		got, err := n.count()
		if err != nil {
			return err
		}
		if got >= want {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("native handler saw %d events, want %d", got, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (n *native) records(path string) ([]record, error) {
	if _, err := fmt.Fprintln(n.in, "dump", path); err != nil {
		return nil, err
	}
	if line, err := n.read(); err != nil || line != "dumped" {
		return nil, fmt.Errorf("native child: dump: %q %v", line, err)
	}
	return readRecordFile(path)
}

func (n *native) stop() {
	_, _ = fmt.Fprintln(n.in, "exit")
	_ = n.in.Close()
	done := make(chan struct{})
	go func() { _ = n.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		_ = n.cmd.Process.Kill()
		<-done
	}
}

// ---- process accounting ----

// clockTicks is USER_HZ, the unit of utime and stime in /proc/PID/stat:
// 100 on every Linux architecture Go supports.
const clockTicks = 100

// procCPU returns the CPU time (user + system, every thread) process pid
// has used.
func procCPU(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// Fields after the command name, which is in parentheses and may
	// hold spaces: state is field 3, utime 14, stime 15.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, errors.New("malformed /proc/PID/stat")
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 13 {
		return 0, errors.New("malformed /proc/PID/stat")
	}
	u, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return 0, err
	}
	return time.Duration(u+st) * time.Second / clockTicks, nil
}

// procMemory returns a process's resident set size and its peak (VmRSS
// and VmHWM), in bytes.
func procMemory(pid int) (rss, peak int64, err error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		f := strings.Fields(v)
		if len(f) < 1 {
			continue
		}
		kb, _ := strconv.ParseInt(f[0], 10, 64)
		switch k {
		case "VmRSS":
			rss = kb * 1024
		case "VmHWM":
			peak = kb * 1024
		}
	}
	return rss, peak, nil
}

// ---- statistics ----

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// percentile returns the p-th percentile (0-100) of xs, nearest rank.
func percentile(xs []float64, p float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	k := int(p/100*float64(len(s))+0.5) - 1
	if k < 0 {
		k = 0
	}
	if k >= len(s) {
		k = len(s) - 1
	}
	return s[k]
}

// writeWasm writes a plugin into dir atomically (a new file renamed over
// the old), as a deployment would.
func writeWasm(dir, name string, wasm []byte) (time.Time, error) {
	tmp := filepath.Join(dir, "."+name+".tmp")
	if err := os.WriteFile(tmp, wasm, 0o644); err != nil {
		return time.Time{}, err
	}
	if err := os.Rename(tmp, filepath.Join(dir, name)); err != nil {
		return time.Time{}, err
	}
	return time.Now(), nil
}

func mustWasm(name string) []byte {
	b, err := benchenv.Wasm(name)
	if err != nil {
		panic(err)
	}
	return b
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}
