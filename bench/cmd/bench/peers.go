package main

import (
	"bufio"
	"bytes"
	"context"
	_ "embed"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Case 8: the peers a user would pick instead of informer-host, on case
// 3's workload (drive), one side at a time, alternating, in the same run:
//
//   - "shell-operator": shell-operator (the release hack/shell-operator
//     builds) running one bash + jq hook (hooks/twofields.sh) that reads
//     the same two fields as the Go plugin and writes a latency record per
//     event; next to it "host-1", the daemon with one such Go plugin. And
//     "shell-operator-n", N copies of the hook in one shell-operator, next
//     to "host", the daemon with N Go plugins.
//   - "controllers": N separate native client-go processes, each its own
//     dynamic informer and one handler reading the two fields (as N teams
//     each running their own small controller); next to it "host", the
//     daemon with N Go plugins, as in case 3.
//
// For every side: events/s, latency, CPU per event of all its processes
// (shell-operator's hooks included, from its cutime/cstime), the peak
// resident set of all its processes (sampled every 100 ms), and the
// ConfigMap watches it holds open on the apiserver (the apiserver's
// apiserver_longrunning_requests gauge, before the side started and
// during the workload).

//go:embed hooks/twofields.sh
var shellHook []byte

// peerSides are the sides of case 8, in the order of even rounds: the
// default of the parameter peersSides ('+' between sides, as -set takes
// ',' between parameters).
const peerSides = "host-1+shell-operator+host+controllers+shell-operator-n"

// shell-operator-n runs only in the first slowRuns rounds: it takes about
// 8 minutes a run on the full workload (ten hooks, each a bash and a jq
// per run), as long as all the other sides of a round together.
func (h *e2e) peers(n, runs, plugins int, sideList string, slowRuns int) ([]throughputRun, error) {
	if _, err := shellOperatorBin(); err != nil {
		// The controllers still run; the report says why shell-operator
		// did not.
		h.logf("case 8: %v", err)
	}
	// The daemon's first start compiles the plugin, and the compiler's
	// garbage would stay in the first run's resident set: compile it once
	// before (case 3, when it runs first, has done it already).
	if err := h.warmCompilationCache(); err != nil {
		return nil, err
	}
	var out []throughputRun
	var errs []error
	for r := 0; r < runs; r++ {
		sides := strings.Split(sideList, "+")
		if r%2 == 1 {
			for i, j := 0, len(sides)-1; i < j; i, j = i+1, j-1 {
				sides[i], sides[j] = sides[j], sides[i]
			}
		}
		for _, side := range sides {
			if side == "shell-operator-n" && r >= slowRuns {
				continue
			}
			h.logf("case 8: run %d/%d, %s, %d ConfigMaps", r+1, runs, side, n)
			res, err := h.peerRun(side, n, plugins, r)
			if err != nil {
				errs = append(errs, fmt.Errorf("%s run %d: %w", side, r+1, err))
				if strings.HasPrefix(side, "shell-operator") {
					continue // the others still measure
				}
				return out, errors.Join(errs...)
			}
			h.logf("case 8: %s: %.0f/%.0f/%.0f events/s, p50 %.1f ms, p99 %.1f ms, %.3f ms CPU/event (children %.3f), peak RSS %.0f MiB, %d watches",
				side, res.Rate["create"], res.Rate["update"], res.Rate["delete"], res.P50, res.P99, res.CPU, res.CPUChild, res.RSS, res.Watches)
			out = append(out, res)
		}
	}
	return out, errors.Join(errs...)
}

func (h *e2e) warmCompilationCache() error {
	ns, err := h.namespace("peers-warm")
	if err != nil {
		return err
	}
	s, err := h.throughputSide("host", ns, 1, 1, 999)
	if err != nil {
		return err
	}
	s.stop()
	return nil
}

func (h *e2e) peerRun(side string, n, plugins, r int) (throughputRun, error) {
	ns, err := h.namespace("peers")
	if err != nil {
		return throughputRun{Side: side}, err
	}
	watches0, err := h.watches()
	if err != nil {
		return throughputRun{Side: side}, err
	}
	// Case 3's plugin directories are tput-plugins-RUN: keep ours apart,
	// one per side (the daemon loads every file in its directory).
	var s sideUnderTest
	switch side {
	case "host-1":
		s, err = h.throughputSide("host", ns, 1, 1, 1000+r)
	case "host":
		// Every plugin records, as every peer's hook or controller does.
		s, err = h.throughputSide("host", ns, plugins, plugins, 2000+r)
	default:
		s, err = h.peerSide(side, ns, plugins, r)
	}
	if err != nil {
		return throughputRun{Side: side}, err
	}
	defer s.stop()
	return h.drive(side, ns, n, s, watches0)
}

// peerSide starts a peer (case 8) watching ns.
func (h *e2e) peerSide(side, ns string, plugins, run int) (sideUnderTest, error) {
	switch side {
	case "shell-operator":
		return h.startShellOperator(ns, 1, run)
	case "shell-operator-n":
		return h.startShellOperator(ns, plugins, 100+run)
	case "controllers":
		return h.startControllers(ns, plugins, run)
	}
	return sideUnderTest{}, fmt.Errorf("no side %q", side)
}

// shellOperatorVersion is the release hack/shell-operator/go.mod pins
// (TestShellOperatorVersion keeps the two together).
const shellOperatorVersion = "v1.5.0"

// shellOperatorBin is the shell-operator binary: $SHELL_OPERATOR (mk/bench.mk
// sets it to what hack/shell-operator/build.sh built), else where that
// script puts it.
func shellOperatorBin() (string, error) {
	if p := os.Getenv("SHELL_OPERATOR"); p != "" {
		return p, nil
	}
	cache := os.Getenv("INFORMER_HOST_CACHE")
	if cache == "" {
		base := os.Getenv("XDG_CACHE_HOME")
		if base == "" {
			base = filepath.Join(os.Getenv("HOME"), ".cache")
		}
		cache = filepath.Join(base, "informer-host")
	}
	p := filepath.Join(cache, "shell-operator", shellOperatorVersion, "shell-operator")
	if _, err := os.Stat(p); err != nil {
		return "", fmt.Errorf("shell-operator %s is not built (%v): run hack/shell-operator/build.sh (make bench does)", shellOperatorVersion, err)
	}
	return p, nil
}

// startShellOperator runs shell-operator with n copies of the hook, bound
// to ns, and waits for every hook's Synchronization run. The hooks share
// one records file: shell-operator runs the hooks of a queue one at a
// time.
func (h *e2e) startShellOperator(ns string, n, run int) (sideUnderTest, error) {
	bin, err := shellOperatorBin()
	if err != nil {
		return sideUnderTest{}, err
	}
	if _, err := exec.LookPath("jq"); err != nil {
		return sideUnderTest{}, fmt.Errorf("the shell-operator hook needs jq: %w (hack/install-deps.sh installs it)", err)
	}
	dir := filepath.Join(h.work, fmt.Sprintf("shell-operator-%d", run))
	hooks := filepath.Join(dir, "hooks")
	if err := os.MkdirAll(hooks, 0o755); err != nil {
		return sideUnderTest{}, err
	}
	for i := range n {
		if err := os.WriteFile(filepath.Join(hooks, fmt.Sprintf("twofields-%d.sh", i)), shellHook, 0o755); err != nil {
			return sideUnderTest{}, err
		}
	}
	addr, err := freeAddr()
	if err != nil {
		return sideUnderTest{}, err
	}
	host, port, _ := strings.Cut(addr, ":")
	recPath := filepath.Join(dir, "records.txt")
	logPath := filepath.Join(dir, "shell-operator.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		return sideUnderTest{}, err
	}
	cmd := exec.Command(bin, "start",
		"--hooks-dir", hooks, "--tmp-dir", filepath.Join(dir, "tmp"),
		"--kube-config", h.kubeconfig,
		"--listen-address", host, "--listen-port", port,
		"--debug-unix-socket", filepath.Join(dir, "debug.socket"),
		"--log-type", "json")
	cmd.Env = append(os.Environ(), "BENCH_NAMESPACE="+ns, "BENCH_RECORDS="+recPath)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return sideUnderTest{}, err
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	stopped := false
	stop := func() {
		if stopped {
			return
		}
		stopped = true
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
		logFile.Close()
	}
	tail := func() string {
		b, _ := os.ReadFile(logPath)
		if len(b) > 3000 {
			b = b[len(b)-3000:]
		}
		return string(b)
	}
	recs := &lineCounter{path: recPath}
	deadline := time.Now().Add(2 * time.Minute)
	for recs.synced() < n {
		select {
		case <-exited:
			stop()
			return sideUnderTest{}, fmt.Errorf("shell-operator exited before its hook ran: %s", tail())
		default:
		}
		if time.Now().After(deadline) {
			stop()
			return sideUnderTest{}, fmt.Errorf("shell-operator's hook did not run its Synchronization in 2 minutes: %s", tail())
		}
		time.Sleep(20 * time.Millisecond)
	}
	pid := cmd.Process.Pid
	return sideUnderTest{pid: pid, handlers: n,
		wait: func(k uint64) error {
			deadline := time.Now().Add(10 * time.Minute)
			for {
				got, err := recs.count()
				if err == nil && got >= k*uint64(n) {
					return nil
				}
				select {
				case <-exited:
					return fmt.Errorf("shell-operator exited: %s", tail())
				default:
				}
				if time.Now().After(deadline) {
					return fmt.Errorf("shell-operator's %d hooks recorded %d events, want %d each (%v): %s", n, got, k, err, tail())
				}
				time.Sleep(20 * time.Millisecond)
			}
		},
		records: func() ([]record, error) { return readRecordFile(recPath) },
		stop:    stop,
		usage: func() (time.Duration, time.Duration, int64, error) {
			cpu, children, err := procCPUWithChildren(pid)
			rss, err2 := treeRSS(pid)
			return cpu + children, children, rss, errors.Join(err, err2)
		},
	}, nil
}

// readRecordFile reads the latency records in a file, one a line.
func readRecordFile(path string) ([]record, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []record
	err = readRecords(f, func(r record) { out = append(out, r) })
	return out, err
}

// lineCounter counts the records a hook has appended to a file, reading
// only what is new since the last call.
type lineCounter struct {
	path   string
	mu     sync.Mutex
	off    int64
	n      uint64
	syncs  int
	buffer []byte // an incomplete last line
}

func (c *lineCounter) read() error {
	f, err := os.Open(c.path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	defer f.Close()
	if _, err := f.Seek(c.off, 0); err != nil {
		return err
	}
	b, err := io.ReadAll(f)
	if err != nil {
		return err
	}
	c.off += int64(len(b))
	b = append(c.buffer, b...)
	i := bytes.LastIndexByte(b, '\n')
	if i < 0 {
		c.buffer = b
		return nil
	}
	c.buffer = append([]byte(nil), b[i+1:]...)
	for _, line := range bytes.Split(b[:i], []byte{'\n'}) {
		if string(line) == "sync" {
			c.syncs++
		} else if len(line) > 0 {
			c.n++
		}
	}
	return nil
}

func (c *lineCounter) count() (uint64, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	err := c.read()
	return c.n, err
}

// synced returns how many hooks have run their Synchronization.
func (c *lineCounter) synced() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	_ = c.read()
	return c.syncs
}

// startControllers runs n native children, each its own informer and one
// recording handler: n small controllers.
func (h *e2e) startControllers(ns string, n, run int) (sideUnderTest, error) {
	var cs []*native
	stopAll := func() {
		for _, c := range cs {
			c.stop()
		}
	}
	for i := 0; i < n; i++ {
		c, err := h.startNative(ns, "record", 1)
		if err != nil {
			stopAll()
			return sideUnderTest{}, fmt.Errorf("controller %d: %w", i, err)
		}
		cs = append(cs, c)
	}
	return sideUnderTest{pid: cs[0].cmd.Process.Pid, handlers: n,
		wait: func(k uint64) error {
			for _, c := range cs {
				if err := c.waitCount(k, 10*time.Minute); err != nil {
					return err
				}
			}
			return nil
		},
		records: func() ([]record, error) {
			var out []record
			for i, c := range cs {
				rs, err := c.records(filepath.Join(h.work, fmt.Sprintf("controllers-%d-%d.txt", run, i)))
				if err != nil {
					return out, err
				}
				out = append(out, rs...)
			}
			return out, nil
		},
		stop: stopAll,
		usage: func() (cpu, children time.Duration, rss int64, err error) {
			for _, c := range cs {
				t, e1 := procCPU(c.cmd.Process.Pid)
				m, _, e2 := procMemory(c.cmd.Process.Pid)
				cpu, rss, err = cpu+t, rss+m, errors.Join(err, e1, e2)
			}
			return cpu, 0, rss, err
		},
	}, nil
}

// controllersMemory runs n native children, each a plain informer with
// managedFields stripped (case 5's fair baseline), until each has seen
// objects objects; mem sums their resident sets and peaks.
func (h *e2e) controllersMemory(ns string, n, objects int) (mem func() (int64, int64, error), stop func(), err error) {
	var cs []*native
	stop = func() {
		for _, c := range cs {
			c.stop()
		}
	}
	// Started one after the other, as their lists would otherwise share
	// the two cores and take each other's time, not memory.
	for i := 0; i < n; i++ {
		c, err := h.startNative(ns, "noop", 1, "-strip-managed-fields")
		if err != nil {
			stop()
			return nil, nil, fmt.Errorf("controller %d: %w", i, err)
		}
		cs = append(cs, c)
		if err := c.waitCount(uint64(objects), 10*time.Minute); err != nil {
			stop()
			return nil, nil, fmt.Errorf("controller %d: %w", i, err)
		}
	}
	return func() (rss, peak int64, err error) {
		for _, c := range cs {
			r, p, e := procMemory(c.cmd.Process.Pid)
			rss, peak, err = rss+r, peak+p, errors.Join(err, e)
		}
		return rss, peak, err
	}, stop, nil
}

// watches returns the ConfigMap watches open on the apiserver, from its
// apiserver_longrunning_requests gauge.
func (h *e2e) watches() (int, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	b, err := h.client.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return 0, fmt.Errorf("apiserver /metrics: %w", err)
	}
	return countWatches(b, "configmaps")
}

// countWatches sums apiserver_longrunning_requests{verb="WATCH"} over the
// series of one resource in a Prometheus text exposition.
func countWatches(metrics []byte, resource string) (int, error) {
	total := 0.0
	s := bufio.NewScanner(bytes.NewReader(metrics))
	s.Buffer(make([]byte, 1<<20), 1<<20)
	for s.Scan() {
		line := s.Text()
		labels, ok := strings.CutPrefix(line, "apiserver_longrunning_requests{")
		if !ok {
			continue
		}
		end := strings.LastIndexByte(labels, '}')
		if end < 0 || !strings.Contains(labels[:end], `verb="WATCH"`) ||
			!strings.Contains(labels[:end], `resource="`+resource+`"`) {
			continue
		}
		v, err := strconv.ParseFloat(strings.TrimSpace(labels[end+1:]), 64)
		if err != nil {
			return 0, fmt.Errorf("apiserver_longrunning_requests: %q: %w", line, err)
		}
		total += v
	}
	return int(total), s.Err()
}

// procCPUWithChildren returns the CPU time process pid has used itself
// (utime + stime) and the CPU time of its children that it has waited for
// (cutime + cstime: a hook's bash and the jq it ran).
func procCPUWithChildren(pid int) (self, children time.Duration, err error) {
	f, err := procStat(pid)
	if err != nil {
		return 0, 0, err
	}
	var v [4]int64
	for i := range v {
		if v[i], err = strconv.ParseInt(f[11+i], 10, 64); err != nil {
			return 0, 0, err
		}
	}
	tick := time.Second / clockTicks
	return time.Duration(v[0]+v[1]) * tick, time.Duration(v[2]+v[3]) * tick, nil
}

// procStat returns the fields of /proc/PID/stat after the command name
// (f[0] is field 3, the state).
func procStat(pid int) ([]string, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return nil, err
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return nil, errors.New("malformed /proc/PID/stat")
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 15 {
		return nil, errors.New("malformed /proc/PID/stat")
	}
	return f, nil
}

// treeRSS returns the resident set of pid and every live descendant of
// it (a hook and what it runs).
func treeRSS(pid int) (int64, error) {
	total, _, err := procMemory(pid)
	if err != nil {
		return 0, err
	}
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return total, err
	}
	parent := map[int]int{}
	for _, e := range ents {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		f, err := procStat(p)
		if err != nil {
			continue // gone
		}
		if pp, err := strconv.Atoi(f[1]); err == nil {
			parent[p] = pp
		}
	}
	for p := range parent {
		for q := parent[p]; q > 1; q = parent[q] {
			if q == pid {
				if m, _, err := procMemory(p); err == nil {
					total += m
				}
				break
			}
		}
	}
	return total, nil
}

// sampleRSS samples usage's resident set every 100 ms until the returned
// function is called, which returns the highest seen.
func sampleRSS(usage func() (time.Duration, time.Duration, int64, error)) func() int64 {
	var peak int64
	done := make(chan struct{})
	stopped := make(chan struct{})
	take := func() {
		if _, _, rss, err := usage(); err == nil && rss > peak {
			peak = rss
		}
	}
	go func() {
		defer close(stopped)
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		for {
			take()
			select {
			case <-done:
				take()
				return
			case <-t.C:
			}
		}
	}()
	return func() int64 {
		close(done)
		<-stopped
		return peak
	}
}
