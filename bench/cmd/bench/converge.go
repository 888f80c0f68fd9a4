package main

import (
	"bufio"
	"bytes"
	"context"
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

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"

	"github.com/informer-host/informer-host/bench/benchenv"
)

// Case 9: time to converge, a controller plugin against the same
// controller written natively, in the same run.
//
// The workload, made by hand before a side starts (no controller-manager:
// deterministic, and nothing else writes the Pods): convergeTeams
// Deployments labelled team=team-I, one ReplicaSet each owned by its
// Deployment, and N Pods spread over the ReplicaSets, owned by them
// (ownerReferences with controller: true), unlabelled. A side has
// converged when every Pod carries its Deployment's team, as the
// harness's own Pod informer sees it (started and synced before the side,
// so its list is not the side's).
//
// The sides, one child process each, one at a time, alternating:
//
//   - "host": the daemon with plugins/examples/team-labeler bound to the
//     Pods, ReplicaSets and Deployments in its cache, granted apply on
//     Pods with qps/burst;
//   - "native": "bench native-labeler" (native_labeler.go), client-go's
//     workqueue, listers and apply, its writes' client limited to the
//     same qps/burst;
//   - "host-reload": "host", and once N/2 Pods are labelled the plugin's
//     file is replaced by new bytes (a custom section: compiled anew, as
//     a new release would be);
//   - "native-restart": "native", and once N/2 Pods are labelled the
//     process is stopped (as its Deployment's rollout would: the
//     reconcile in flight canceled, the queue left) and a new one started.
//
// For each: the time from the process's start to every Pod labelled, its
// CPU (utime+stime until then; a stopped native's own from its rusage),
// its peak RSS (VmHWM; the larger of the two natives'), and the requests
// the apiserver served on Pods, ReplicaSets and Deployments
// (apiserver_request_total, before the side started and once the side
// has stopped and its watches have ended on the apiserver too, as a watch
// is counted when it ends; client-go's informers list by a watch with
// initial events), of which writes (APPLY and PATCH).

// convergeTeams is the number of Deployments the Pods are spread over.
const convergeTeams = 10

// convergeSides are case 9's sides, in the order of even rounds.
var convergeSides = []string{"host", "native", "host-reload", "native-restart"}

type convergeRun struct {
	Side    string  `json:"side"`
	Pods    int     `json:"pods"`
	Seconds float64 `json:"seconds"` // start to every Pod labelled
	Half    float64 `json:"halfSeconds"`
	// Stall is the longest time between two Pods labelled after the
	// first half: a disruption's pause, whatever the bucket it starts.
	Stall float64 `json:"stallSeconds"`
	CPU   float64 `json:"cpuSeconds"`
	// ChildCPU is the CPU of the daemon's waited-for children (a reload
	// compiled in a child process), not in CPU.
	ChildCPU float64 `json:"childCpuSeconds,omitempty"`
	// ChildRSS is the largest peak RSS of those children, as the daemon
	// logs it: a container holds it beside the daemon's own while the
	// child runs.
	ChildRSS float64 `json:"childPeakRssMiB,omitempty"`
	RSS      float64 `json:"peakRssMiB"`
	Requests int     `json:"requests"`
	Writes   int     `json:"writes"`
	// host-reload: when the new version was loaded ("plugin reloaded"
	// in the daemon's log), after the start; 0 when it was not before
	// the Pods were all labelled.
	Reloaded float64 `json:"reloadedSeconds,omitempty"`
}

func (h *e2e) converge(n, runs int, qps float64, burst int) ([]convergeRun, error) {
	wasm, err := os.ReadFile(filepath.Join(h.root, "build", "plugins", "team-labeler.wasm"))
	if err != nil {
		return nil, fmt.Errorf("the team-labeler plugin (make plugins builds it): %w", err)
	}
	// Compile the plugin once into the daemon's compilation cache, as a
	// daemon restarting on a node has it: "host" then measures the
	// controller, not the first compile (a reload still compiles its new
	// bytes).
	if err := h.warmConverge(wasm, qps, burst); err != nil {
		return nil, fmt.Errorf("warm the compilation cache: %w", err)
	}
	var out []convergeRun
	for r := 0; r < runs; r++ {
		sides := append([]string(nil), convergeSides...)
		if r%2 == 1 {
			for i, j := 0, len(sides)-1; i < j; i, j = i+1, j-1 {
				sides[i], sides[j] = sides[j], sides[i]
			}
		}
		for _, side := range sides {
			h.logf("case 9: run %d/%d, %s, %d Pods, writes %g/s burst %d", r+1, runs, side, n, qps, burst)
			res, err := h.convergeRun(side, n, r, wasm, qps, burst)
			if err != nil {
				return out, fmt.Errorf("%s run %d: %w", side, r+1, err)
			}
			h.logf("case 9: %s: converged in %.2f s (half %.2f s, reloaded %.2f s, longest pause after half %.2f s), CPU %.2f s (children %.2f s), peak RSS %.0f MiB (a child's %.0f MiB), %d requests (%d writes)",
				side, res.Seconds, res.Half, res.Reloaded, res.Stall, res.CPU, res.ChildCPU, res.RSS, res.ChildRSS, res.Requests, res.Writes)
			out = append(out, res)
		}
	}
	return out, nil
}

func (h *e2e) warmConverge(wasm []byte, qps float64, burst int) error {
	ns, err := h.namespace("converge-warm")
	if err != nil {
		return err
	}
	d, err := h.startLabelerDaemon(ns, "converge-warm", wasm, qps, burst)
	if err != nil {
		return err
	}
	defer d.stop()
	_, err = d.waitReady(1, 5*time.Minute)
	return err
}

func (h *e2e) convergeRun(side string, n, run int, wasm []byte, qps float64, burst int) (convergeRun, error) {
	res := convergeRun{Side: side, Pods: n}
	ns, err := h.namespace("converge")
	if err != nil {
		return res, err
	}
	want, err := h.teamWorkload(ns, n)
	if err != nil {
		return res, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	seen, err := watchLabels(ctx, h, ns, want)
	if err != nil {
		return res, err
	}
	before, err := h.requests()
	if err != nil {
		return res, err
	}

	var (
		pid  int
		stop func() error
		// disrupt runs once N/2 Pods are labelled; it may replace pid.
		disrupt   func() error
		extraCPU  time.Duration // a stopped native's
		extraPeak int64
		logs      func() ([]logLine, error)
	)
	started := time.Now()
	switch side {
	case "host", "host-reload":
		d, err := h.startLabelerDaemon(ns, fmt.Sprintf("converge-%s-%d", side, run), wasm, qps, burst)
		if err != nil {
			return res, err
		}
		pid, stop = d.cmd.Process.Pid, d.stop
		defer func() { _ = stop() }()
		logs = d.logs
		if side == "host-reload" {
			disrupt = func() error {
				_, err := writeWasm(d.dir, "team-labeler.wasm", benchenv.WithNonce(wasm, fmt.Sprintf("converge-reload-%d-%d", run, time.Now().UnixNano())))
				return err
			}
		}
	case "native", "native-restart":
		c, err := h.startNativeLabeler(ns, fmt.Sprintf("converge-%s-%d", side, run), qps, burst)
		if err != nil {
			return res, err
		}
		pid, stop = c.cmd.Process.Pid, c.stop
		defer func() { _ = stop() }()
		if side == "native-restart" {
			disrupt = func() error {
				// Its peak read while it runs, not the rusage's maxrss
				// after: Linux carries a process's peak across exec, so
				// a child forked from the harness reports at least the
				// harness's own.
				_, peak, err := procMemory(c.cmd.Process.Pid)
				if err != nil {
					return err
				}
				extraPeak = peak
				if err := c.stop(); err != nil {
					return err
				}
				ru, ok := c.cmd.ProcessState.SysUsage().(*syscall.Rusage)
				if !ok {
					return errors.New("no rusage for the stopped native-labeler")
				}
				extraCPU = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
				c2, err := h.startNativeLabeler(ns, fmt.Sprintf("converge-%s-%d-second", side, run), qps, burst)
				if err != nil {
					return err
				}
				pid, stop = c2.cmd.Process.Pid, c2.stop
				return nil
			}
		}
	default:
		return res, fmt.Errorf("no side %q", side)
	}

	const limit = 15 * time.Minute // ends a side that would never converge
	half, err := seen.wait(len(want)/2, started.Add(limit))
	if err != nil {
		return res, err
	}
	res.Half = half.Sub(started).Seconds()
	if disrupt != nil {
		if err := disrupt(); err != nil {
			return res, fmt.Errorf("at %d Pods labelled: %w", len(want)/2, err)
		}
	}
	all, err := seen.wait(len(want), started.Add(limit))
	if err != nil {
		return res, err
	}
	res.Seconds = all.Sub(started).Seconds()
	res.Stall = seen.longestGap(len(want) / 2).Seconds()
	cpu, children, err := procCPUWithChildren(pid)
	if err != nil {
		return res, err
	}
	res.ChildCPU = children.Seconds()
	_, peak, err := procMemory(pid)
	if err != nil {
		return res, err
	}
	res.CPU = (cpu + extraCPU).Seconds()
	res.RSS = float64(max(peak, extraPeak)) / (1 << 20)
	if err := stop(); err != nil {
		return res, err
	}
	stop = func() error { return nil }
	after, err := h.requestsOnceClosed(before.watching)
	if err != nil {
		return res, err
	}
	res.Requests = after.total - before.total
	res.Writes = after.writes - before.writes
	if side == "host-reload" {
		lines, err := logs()
		if err != nil {
			return res, err
		}
		for _, l := range lines {
			if l.Msg == "plugin reloaded" && !l.Time.After(all) {
				res.Reloaded = l.Time.Sub(started).Seconds()
			}
			if l.Msg == "compiled the new version in a child process" {
				res.ChildRSS = max(res.ChildRSS, l.PeakRSS)
			}
		}
	}
	return res, nil
}

// startLabelerDaemon runs the daemon with team-labeler on the Pods of ns.
func (h *e2e) startLabelerDaemon(ns, name string, wasm []byte, qps float64, burst int) (*daemon, error) {
	dir := filepath.Join(h.work, name+"-plugins")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	if _, err := writeWasm(dir, "team-labeler.wasm", wasm); err != nil {
		return nil, err
	}
	return h.startDaemon(name, dir, func(dir, addr string) string {
		return fmt.Sprintf(`apiVersion: informer-host/v1
kubeconfig: %s
resources:
  - {name: pods, version: v1, resource: pods, namespaces: [%[2]s]}
  - {name: replicasets, group: apps, version: v1, resource: replicasets, namespaces: [%[2]s]}
  - {name: deployments, group: apps, version: v1, resource: deployments, namespaces: [%[2]s]}
plugins:
  directory: %s
  compilationCache: %s
  modules:
  - file: team-labeler.wasm
    bindings: [{resource: pods, events: [add, update]}]
    grants:
      cache: [{resource: replicasets}, {resource: deployments}]
      writes:
        qps: %g
        burst: %d
        resources: [{resource: pods, verbs: [apply]}]
server:
  address: %s
`, h.kubeconfig, ns, dir, h.cacheDir, qps, burst, addr)
	})
}

// labeller is the native-labeler child.
type labeller struct {
	cmd    *exec.Cmd
	in     io.WriteCloser
	stderr bytes.Buffer
	exited chan struct{}
}

// With -profile, it writes its CPU profile to the directory as
// NAME.pprof, as the daemons do.
func (h *e2e) startNativeLabeler(ns, name string, qps float64, burst int) (*labeller, error) {
	c := &labeller{exited: make(chan struct{})}
	args := []string{"native-labeler", "-kubeconfig", h.kubeconfig, "-namespace", ns,
		"-qps", strconv.FormatFloat(qps, 'g', -1, 64), "-burst", strconv.Itoa(burst)}
	if h.profileDir != "" {
		args = append(args, "-cpuprofile", filepath.Join(h.profileDir, name+".pprof"))
	}
	c.cmd = exec.Command(h.self, args...)
	c.cmd.Stderr = &c.stderr
	var err error
	if c.in, err = c.cmd.StdinPipe(); err != nil {
		return nil, err
	}
	if err := c.cmd.Start(); err != nil {
		return nil, err
	}
	go func() { _ = c.cmd.Wait(); close(c.exited) }()
	return c, nil
}

// stop asks the child to exit (it cancels its reconcile in flight and
// leaves its queue) and waits.
func (c *labeller) stop() error {
	_, _ = fmt.Fprintln(c.in, "exit")
	_ = c.in.Close()
	select {
	case <-c.exited:
	case <-time.After(30 * time.Second):
		_ = c.cmd.Process.Kill()
		<-c.exited
		return fmt.Errorf("native-labeler did not exit in 30 s: %s", c.stderr.String())
	}
	if !c.cmd.ProcessState.Success() {
		return fmt.Errorf("native-labeler: %v: %s", c.cmd.ProcessState, c.stderr.String())
	}
	return nil
}

// teamWorkload creates convergeTeams Deployments with their ReplicaSets
// and n Pods among them, and returns each Pod's desired team.
func (h *e2e) teamWorkload(ns string, n int) (map[string]string, error) {
	ctx := context.Background()
	yes := true
	owner := func(apiVersion, kind, name string, uid types.UID) []metav1.OwnerReference {
		return []metav1.OwnerReference{{APIVersion: apiVersion, Kind: kind, Name: name, UID: uid, Controller: &yes}}
	}
	spec := corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "x"}}}
	var rss []*appsv1.ReplicaSet
	for i := range convergeTeams {
		team := fmt.Sprintf("team-%d", i)
		sel := map[string]string{"app": team}
		tmpl := corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: sel}, Spec: spec}
		dep, err := h.client.AppsV1().Deployments(ns).Create(ctx, &appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{Name: team, Labels: map[string]string{"team": team}},
			Spec:       appsv1.DeploymentSpec{Selector: &metav1.LabelSelector{MatchLabels: sel}, Template: tmpl},
		}, metav1.CreateOptions{})
		if err != nil {
			return nil, fmt.Errorf("create deployment %s/%s: %w", ns, team, err)
		}
		rs, err := h.client.AppsV1().ReplicaSets(ns).Create(ctx, &appsv1.ReplicaSet{
			ObjectMeta: metav1.ObjectMeta{Name: team + "-rs", Labels: sel, OwnerReferences: owner("apps/v1", "Deployment", dep.Name, dep.UID)},
			Spec:       appsv1.ReplicaSetSpec{Selector: &metav1.LabelSelector{MatchLabels: sel}, Template: tmpl},
		}, metav1.CreateOptions{})
		if err != nil {
			return nil, fmt.Errorf("create replicaset %s/%s-rs: %w", ns, team, err)
		}
		rss = append(rss, rs)
	}
	want := make(map[string]string, n)
	for i := range n {
		want[fmt.Sprintf("pod-%05d", i)] = fmt.Sprintf("team-%d", i%convergeTeams)
	}
	err := parallel(n, 20, func(i int) error {
		rs := rss[i%convergeTeams]
		_, err := h.client.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("pod-%05d", i), Labels: rs.Spec.Selector.MatchLabels,
				OwnerReferences: owner("apps/v1", "ReplicaSet", rs.Name, rs.UID)},
			Spec: spec,
		}, metav1.CreateOptions{})
		if err != nil {
			return fmt.Errorf("create pod %s/pod-%05d: %w", ns, i, err)
		}
		return nil
	})
	return want, err
}

// labelWatch counts the Pods that carry their desired team, from an
// informer of the harness's own.
type labelWatch struct {
	mu       sync.Mutex
	want     map[string]string
	labelled map[string]bool
	k        int         // Pods labelled now
	times    []time.Time // times[k-1]: when k Pods were first labelled at once
	changed  chan struct{}
}

func watchLabels(ctx context.Context, h *e2e, ns string, want map[string]string) (*labelWatch, error) {
	w := &labelWatch{want: want, labelled: map[string]bool{}, changed: make(chan struct{}, 1)}
	factory := informers.NewSharedInformerFactoryWithOptions(h.client, 0, informers.WithNamespace(ns))
	inf := factory.Core().V1().Pods().Informer()
	see := func(obj any) {
		if p, ok := obj.(*corev1.Pod); ok {
			w.see(p)
		}
	}
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: see, UpdateFunc: func(_, o any) { see(o) },
	}); err != nil {
		return nil, err
	}
	factory.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		return nil, errors.New("the harness's Pod informer did not sync")
	}
	w.mu.Lock()
	k := w.k
	w.mu.Unlock()
	if k != 0 {
		return nil, fmt.Errorf("%d Pods labelled before the side started", k)
	}
	return w, nil
}

func (w *labelWatch) see(p *corev1.Pod) {
	team, ok := w.want[p.Name]
	if !ok {
		return
	}
	now := time.Now()
	w.mu.Lock()
	if is := p.Labels["team"] == team; is != w.labelled[p.Name] {
		w.labelled[p.Name] = is
		if is {
			w.k++
		} else {
			w.k--
		}
		// Only the first time each count is reached: a side that
		// unlabels and labels again is not faster for it.
		if w.k > len(w.times) {
			w.times = append(w.times, now)
		}
	}
	w.mu.Unlock()
	select {
	case w.changed <- struct{}{}:
	default:
	}
}

// longestGap returns the longest time between two counts first reached,
// from count k on.
func (w *labelWatch) longestGap(k int) time.Duration {
	w.mu.Lock()
	defer w.mu.Unlock()
	var gap time.Duration
	for i := max(k, 1); i < len(w.times); i++ {
		gap = max(gap, w.times[i].Sub(w.times[i-1]))
	}
	return gap
}

// wait returns when k Pods were first labelled, waiting for it until
// deadline.
func (w *labelWatch) wait(k int, deadline time.Time) (time.Time, error) {
	timer := time.NewTimer(time.Until(deadline))
	defer timer.Stop()
	for {
		w.mu.Lock()
		if len(w.times) >= k {
			t := w.times[k-1]
			w.mu.Unlock()
			return t, nil
		}
		got := len(w.times)
		w.mu.Unlock()
		select {
		case <-w.changed:
		case <-timer.C:
			return time.Time{}, fmt.Errorf("%d of %d Pods labelled, waiting for %d", got, len(w.want), k)
		}
	}
}

// requestCounts are sums of apiserver_request_total over the resources of
// case 9.
// watching is the apiserver_longrunning_requests gauge of their WATCH
// requests: the watches open now.
type requestCounts struct{ total, writes, watching int }

// requestsOnceClosed returns the counts once no more than watching
// watches are open: those a side opened are then counted.
func (h *e2e) requestsOnceClosed(watching int) (requestCounts, error) {
	deadline := time.Now().Add(time.Minute)
	for {
		c, err := h.requests()
		if err != nil || c.watching <= watching {
			return c, err
		}
		if time.Now().After(deadline) {
			return c, fmt.Errorf("the apiserver still serves %d watches on case 9's resources a minute after the side stopped, %d before it started", c.watching, watching)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (h *e2e) requests() (requestCounts, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	b, err := h.client.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return requestCounts{}, fmt.Errorf("apiserver /metrics: %w", err)
	}
	resources := []string{"pods", "replicasets", "deployments"}
	c, err := countRequests(b, resources)
	for _, r := range resources {
		w, werr := countWatches(b, r)
		c.watching += w
		err = errors.Join(err, werr)
	}
	return c, err
}

// countRequests sums apiserver_request_total over the series of the given
// resources (subresources included) in a Prometheus text exposition,
// and separately its writes (APPLY and PATCH).
func countRequests(metrics []byte, resources []string) (requestCounts, error) {
	var total, writes float64
	s := bufio.NewScanner(bytes.NewReader(metrics))
	s.Buffer(make([]byte, 1<<20), 1<<20)
	for s.Scan() {
		line := s.Text()
		labels, ok := strings.CutPrefix(line, "apiserver_request_total{")
		if !ok {
			continue
		}
		end := strings.LastIndexByte(labels, '}')
		if end < 0 {
			continue
		}
		match := false
		for _, r := range resources {
			if strings.Contains(labels[:end], `resource="`+r+`"`) {
				match = true
			}
		}
		if !match {
			continue
		}
		v, err := strconv.ParseFloat(strings.TrimSpace(labels[end+1:]), 64)
		if err != nil {
			return requestCounts{}, fmt.Errorf("apiserver_request_total: %q: %w", line, err)
		}
		total += v
		if strings.Contains(labels[:end], `verb="APPLY"`) || strings.Contains(labels[:end], `verb="PATCH"`) {
			writes += v
		}
	}
	return requestCounts{total: int(total), writes: int(writes)}, s.Err()
}
