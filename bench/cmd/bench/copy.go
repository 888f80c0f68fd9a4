package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
	"sigs.k8s.io/yaml"
)

// Case 10: a controller plugin against the same controller written with
// controller-runtime, in the same run (bench/NOTES.md, "Case 10").
//
// The controller copies every ConfigMap labelled sync=true from namespace
// src to namespace dst, under the same name with the same data, and
// deletes a copy once its source is gone. The sides, one child process
// each, one at a time, alternating:
//
//   - "plugin": the daemon with plugins/examples/configmap-copy in
//     controller mode (for: the sources; owns: the copies, which the host
//     applies and prunes), configured by the example's own config.yaml;
//   - "controller-runtime": bench/crcopy, its own module at the
//     controller-runtime release its go.mod pins, built from the module
//     proxy: the builder's For and Watches with a map function back from a
//     copy's label, CreateOrPatch, no finalizer.
//
// The workload, on emptied namespaces: N sources made before the side
// starts ("initial": from the process's start), then every source's data
// changed ("update") and then every other source deleted ("delete"),
// each phase from the harness's first write of it. A phase has converged
// when dst holds exactly the copies wanted, each with its source's data:
// the harness's own informer on dst says when, and a List from the
// apiserver confirms it (a claim the List does not bear out is not
// convergence; the harness waits on).
//
// For each side: the time of each phase; the process's CPU (utime+stime
// from /proc/PID/stat) and peak RSS (VmHWM from /proc/PID/status) over
// the three and the work they still cause (until it has sent no request
// for 2 s), read before it is stopped; the HTTP requests it sent to the
// apiserver until then, counted by a proxy between it and the apiserver (apiproxy.go);
// and the lines of code of each controller (loc.go).

const (
	copySrc = "src"
	copyDst = "dst"
	// copyPluginName is the example plugin's folder under
	// plugins/examples and its file's name.
	copyPluginName = "configmap-copy"

	sidePlugin = "plugin"
	sideCR     = "controller-runtime"
)

type copyResults struct {
	Runs  []copyRun            `json:"runs"`
	Lines map[string]codeLines `json:"lines"` // by side
}

type copyRun struct {
	Side    string  `json:"side"`
	Sources int     `json:"sources"`
	Initial float64 `json:"initialSeconds"` // the process's start to every copy made
	Update  float64 `json:"updateSeconds"`  // the first update sent to every copy updated
	Delete  float64 `json:"deleteSeconds"`  // the first delete sent to every stale copy gone
	CPU     float64 `json:"cpuSeconds"`
	RSS     float64 `json:"peakRssMiB"`
	// Requests are the HTTP requests the process sent to the apiserver.
	Requests requestClasses `json:"requests"`
}

func (c copyRun) seconds() float64 { return c.Initial + c.Update + c.Delete }

// copyCase runs case 10. Without the plugin it still measures the
// controller-runtime side, and then fails, naming what is missing: a
// comparison with one side is no result.
func (h *e2e) copyCase(n, runs int, qps float64, burst int) (*copyResults, error) {
	res := &copyResults{Lines: map[string]codeLines{}}
	crDir := filepath.Join(h.root, "bench", "crcopy")
	lines, err := countDir(crDir, false)
	if err != nil {
		return nil, err
	}
	res.Lines[sideCR] = lines
	crBin, err := h.buildCRCopy(crDir)
	if err != nil {
		return nil, err
	}
	wasm, snippet, lines, pluginErr := h.copyPlugin()
	if pluginErr == nil {
		_, pluginErr = copyDaemonConfig(snippet, "", "", "", "", qps, burst)
	}
	if pluginErr == nil {
		res.Lines[sidePlugin] = lines
	}
	for _, ns := range []string{copySrc, copyDst} {
		_, err := h.client.CoreV1().Namespaces().Create(context.Background(),
			&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return nil, err
		}
	}
	proxy, err := newAPIProxy(h.config)
	if err != nil {
		return nil, err
	}
	defer proxy.close()
	kubeconfig := filepath.Join(h.work, "copy-kubeconfig")
	if err := proxy.writeKubeconfig(kubeconfig); err != nil {
		return nil, err
	}
	c := &copyBench{h: h, proxy: proxy, kubeconfig: kubeconfig, crBin: crBin, wasm: wasm, snippet: snippet, qps: qps, burst: burst}
	sides := []string{sideCR}
	if pluginErr == nil {
		// Compile the plugin once into the daemon's compilation cache,
		// as on a node where the daemon restarts: the side measures the
		// controller, not the first compile.
		if err := c.warm(); err != nil {
			pluginErr = fmt.Errorf("the %s plugin did not start in controller mode: %w", copyPluginName, err)
		} else {
			sides = []string{sidePlugin, sideCR}
		}
	}
	for r := range runs {
		order := append([]string(nil), sides...)
		if r%2 == 1 {
			order[0], order[len(order)-1] = order[len(order)-1], order[0]
		}
		for _, side := range order {
			h.logf("case 10: run %d/%d, %s, %d sources", r+1, runs, side, n)
			run, err := c.run(side, n, r)
			if err != nil {
				return res, errors.Join(fmt.Errorf("%s run %d: %w", side, r+1, err), pluginErr)
			}
			h.logf("case 10: %s: initial %.2f s, update %.2f s, delete %.2f s, CPU %.2f s, peak RSS %.0f MiB, requests %d (%+v)",
				side, run.Initial, run.Update, run.Delete, run.CPU, run.RSS, run.Requests.total(), run.Requests)
			res.Runs = append(res.Runs, run)
		}
	}
	return res, pluginErr
}

// buildCRCopy builds the controller-runtime side from its own module (out
// of go.work; its dependencies from the module cache, else the proxy).
func (h *e2e) buildCRCopy(dir string) (string, error) {
	out := filepath.Join(h.work, "crcopy")
	h.logf("building the controller-runtime baseline (bench/crcopy, its own module)")
	cmd := exec.Command(envOr("GO", "go"), "build", "-trimpath", "-o", out, ".")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOWORK=off")
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("build bench/crcopy: %v\n%s", err, b)
	}
	return out, nil
}

// copyPlugin builds the example plugin, reads its config snippet and
// counts its lines, or says why the plugin side cannot run.
func (h *e2e) copyPlugin() (wasm, snippet []byte, lines codeLines, err error) {
	rel := filepath.Join("plugins", "examples", copyPluginName)
	dir := filepath.Join(h.root, rel)
	if _, err := os.Stat(dir); err != nil {
		return nil, nil, lines, fmt.Errorf("case 10's plugin side is %s, the ConfigMap copy controller in controller mode, and this tree has no %s: add the example, or leave the case out with -skip 10", rel, rel)
	}
	if snippet, err = os.ReadFile(filepath.Join(dir, "config.yaml")); err != nil {
		return nil, nil, lines, fmt.Errorf("%s has no config.yaml, the config the harness runs it with (its resources, controller block and grants): %w", rel, err)
	}
	if lines, err = countDir(dir, true); err != nil {
		return nil, nil, lines, fmt.Errorf("count the lines of %s: %w", rel, err)
	}
	out := filepath.Join(h.root, "build", "bench", "plugins", copyPluginName+".wasm")
	cmd := exec.Command(envOr("GO", "go"), "build", "-buildmode=c-shared", "-trimpath", "-o", out, "./"+rel)
	cmd.Dir = h.root
	cmd.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm")
	if b, err := cmd.CombinedOutput(); err != nil {
		return nil, nil, lines, fmt.Errorf("build %s: %v\n%s", rel, err, b)
	}
	if wasm, err = os.ReadFile(out); err != nil {
		return nil, nil, lines, err
	}
	// The export's name stands in the module's export section as is.
	if !bytes.Contains(wasm, []byte("ih_reconcile")) {
		return nil, nil, lines, fmt.Errorf("%s does not export ih_reconcile: it is no controller-mode plugin (ABI.md §18)", rel)
	}
	return wasm, snippet, lines, nil
}

// copyBench is what every run of case 10 shares.
type copyBench struct {
	h          *e2e
	proxy      *apiProxy
	kubeconfig string // through the proxy
	crBin      string
	wasm       []byte
	snippet    []byte // the example's config.yaml
	qps        float64
	burst      int
}

// copyDaemonConfig is the daemon's config for the plugin side: the
// example's own snippet (its config.yaml: the resources, the controller
// block, the grants), completed with what a deployment adds (the
// kubeconfig, the directories, the server's address) and the writes'
// limit of the controller-runtime side's client.
func copyDaemonConfig(snippet []byte, kubeconfig, dir, cacheDir, addr string, qps float64, burst int) (string, error) {
	var m map[string]any
	if err := yaml.Unmarshal(snippet, &m); err != nil {
		return "", fmt.Errorf("the example's config.yaml: %w", err)
	}
	plugins, _ := m["plugins"].(map[string]any)
	modules, _ := plugins["modules"].([]any)
	var module map[string]any
	for _, x := range modules {
		if mod, ok := x.(map[string]any); ok && mod["file"] == copyPluginName+".wasm" {
			module = mod
		}
	}
	if module == nil {
		return "", fmt.Errorf("the example's config.yaml has no plugins.modules entry with file: %s.wasm", copyPluginName)
	}
	if _, ok := module["controller"]; !ok {
		return "", fmt.Errorf("the example's config.yaml: the %s.wasm module has no controller: block", copyPluginName)
	}
	grants, _ := module["grants"].(map[string]any)
	writes, _ := grants["writes"].(map[string]any)
	if writes == nil {
		return "", fmt.Errorf("the example's config.yaml: the %s.wasm module has no grants.writes", copyPluginName)
	}
	writes["qps"], writes["burst"] = qps, burst
	m["apiVersion"], m["kubeconfig"] = "informer-host/v1", kubeconfig
	plugins["directory"], plugins["compilationCache"] = dir, cacheDir
	m["server"] = map[string]any{"address": addr}
	b, err := yaml.Marshal(m)
	return string(b), err
}

func (c *copyBench) startDaemon(name string) (*daemon, error) {
	dir := filepath.Join(c.h.work, name+"-plugins")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	if _, err := writeWasm(dir, copyPluginName+".wasm", c.wasm); err != nil {
		return nil, err
	}
	var cfgErr error
	d, err := c.h.startDaemon(name, dir, func(dir, addr string) string {
		var cfg string
		cfg, cfgErr = copyDaemonConfig(c.snippet, c.kubeconfig, dir, c.h.cacheDir, addr, c.qps, c.burst)
		return cfg
	})
	if cfgErr != nil {
		if err == nil {
			_ = d.stop()
		}
		return nil, cfgErr
	}
	return d, err
}

func (c *copyBench) warm() error {
	if err := c.clean(); err != nil {
		return err
	}
	d, err := c.startDaemon("copy-warm")
	if err != nil {
		return err
	}
	defer d.stop()
	_, err = d.waitReady(1, 5*time.Minute)
	return err
}

// side is one running side: its process and how to stop it.
type copySide struct {
	pid    int
	exited <-chan struct{}
	stop   func() error
	tail   func() string
}

func (c *copyBench) start(side, name string) (*copySide, error) {
	switch side {
	case sidePlugin:
		d, err := c.startDaemon(name)
		if err != nil {
			return nil, err
		}
		return &copySide{pid: d.cmd.Process.Pid, exited: d.exited, stop: d.stop, tail: d.tail}, nil
	case sideCR:
		logPath := filepath.Join(c.h.work, name+".log")
		f, err := os.Create(logPath)
		if err != nil {
			return nil, err
		}
		cmd := exec.Command(c.crBin, "--kubeconfig", c.kubeconfig,
			"--kube-api-qps", strconv.FormatFloat(c.qps, 'g', -1, 64), "--kube-api-burst", strconv.Itoa(c.burst))
		cmd.Stdout, cmd.Stderr = f, f
		if err := cmd.Start(); err != nil {
			f.Close()
			return nil, err
		}
		exited := make(chan struct{})
		go func() { _ = cmd.Wait(); f.Close(); close(exited) }()
		tail := func() string {
			b, _ := os.ReadFile(logPath)
			return string(b[max(0, len(b)-4000):])
		}
		stop := func() error {
			_ = cmd.Process.Signal(syscall.SIGTERM)
			select {
			case <-exited:
			case <-time.After(time.Minute):
				_ = cmd.Process.Kill()
				<-exited
				return fmt.Errorf("crcopy did not exit a minute after SIGTERM: %s", tail())
			}
			return nil
		}
		return &copySide{pid: cmd.Process.Pid, exited: exited, stop: stop, tail: tail}, nil
	}
	return nil, fmt.Errorf("no side %q", side)
}

func (c *copyBench) run(side string, n, run int) (copyRun, error) {
	res := copyRun{Side: side, Sources: n}
	h := c.h
	if err := c.clean(); err != nil {
		return res, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	name := func(i int) string { return fmt.Sprintf("cm-%05d", i) }
	want := make(map[string]map[string]string, n)
	for i := range n {
		want[name(i)] = map[string]string{"seq": "0", "payload": payload(i)}
	}
	err := parallel(n, 20, func(i int) error {
		_, err := h.client.CoreV1().ConfigMaps(copySrc).Create(ctx, &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: name(i), Labels: map[string]string{"sync": "true"}},
			Data:       want[name(i)],
		}, metav1.CreateOptions{})
		return err
	})
	if err != nil {
		return res, fmt.Errorf("create the sources: %w", err)
	}
	st, err := watchCopies(ctx, h, want)
	if err != nil {
		return res, err
	}
	before := c.proxy.counts()
	started := time.Now()
	s, err := c.start(side, fmt.Sprintf("copy-%s-%d", side, run))
	if err != nil {
		return res, err
	}
	stopped := false
	defer func() {
		if !stopped {
			_ = s.stop()
		}
	}()
	const limit = 15 * time.Minute // ends a side that would never converge
	wait := func(phase string, from time.Time) (float64, error) {
		t, err := st.wait(from.Add(limit), s.exited, c.listCopies)
		if err != nil {
			return 0, fmt.Errorf("%s: %w\n%s", phase, err, s.tail())
		}
		return t.Sub(from).Seconds(), nil
	}
	if res.Initial, err = wait("initial", started); err != nil {
		return res, err
	}

	updated := make(map[string]map[string]string, n)
	for k, v := range want {
		updated[k] = map[string]string{"seq": "1", "payload": v["payload"]}
	}
	st.expect(updated)
	from := time.Now()
	err = parallel(n, 20, func(i int) error {
		_, err := h.client.CoreV1().ConfigMaps(copySrc).Patch(ctx, name(i), types.MergePatchType,
			[]byte(`{"data":{"seq":"1"}}`), metav1.PatchOptions{})
		return err
	})
	if err != nil {
		return res, fmt.Errorf("update the sources: %w", err)
	}
	if res.Update, err = wait("update", from); err != nil {
		return res, err
	}

	kept := make(map[string]map[string]string, n-n/2)
	for i := range n {
		if i%2 == 1 {
			kept[name(i)] = updated[name(i)]
		}
	}
	st.expect(kept)
	from = time.Now()
	err = parallel((n+1)/2, 20, func(i int) error {
		return h.client.CoreV1().ConfigMaps(copySrc).Delete(ctx, name(2*i), metav1.DeleteOptions{})
	})
	if err != nil {
		return res, fmt.Errorf("delete the sources: %w", err)
	}
	if res.Delete, err = wait("delete", from); err != nil {
		return res, err
	}

	// The work the last phase still causes (a copy's delete enqueues its
	// source again, whose reconcile finds nothing to do) is the side's
	// too: its CPU and requests are read once it has stopped asking.
	if err := c.proxy.quiet(2*time.Second, time.Minute); err != nil {
		return res, err
	}
	cpu, err := procCPU(s.pid)
	if err != nil {
		return res, err
	}
	_, peak, err := procMemory(s.pid)
	if err != nil {
		return res, err
	}
	res.CPU, res.RSS = cpu.Seconds(), float64(peak)/(1<<20)
	stopped = true
	if err := s.stop(); err != nil {
		return res, err
	}
	res.Requests = c.proxy.counts().minus(before)
	return res, nil
}

// clean deletes every ConfigMap in src and dst and waits until both are
// empty: each run starts from nothing.
func (c *copyBench) clean() error {
	ctx := context.Background()
	deadline := time.Now().Add(2 * time.Minute)
	for _, ns := range []string{copySrc, copyDst} {
		cms := c.h.client.CoreV1().ConfigMaps(ns)
		if err := cms.DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{}); err != nil {
			return fmt.Errorf("empty namespace %s: %w", ns, err)
		}
		for {
			l, err := cms.List(ctx, metav1.ListOptions{})
			if err != nil {
				return err
			}
			if len(l.Items) == 0 {
				break
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("namespace %s still holds %d ConfigMaps two minutes after they were deleted", ns, len(l.Items))
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	return nil
}

// listCopies reads dst from the apiserver.
func (c *copyBench) listCopies() (map[string]map[string]string, error) {
	l, err := c.h.client.CoreV1().ConfigMaps(copyDst).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", copyDst, err)
	}
	out := make(map[string]map[string]string, len(l.Items))
	for _, cm := range l.Items {
		out[cm.Name] = cm.Data
	}
	return out, nil
}

// copyDiff compares the copies there are with those wanted.
type copyDiff struct{ Missing, Wrong, Extra int }

func (d copyDiff) none() bool { return d == copyDiff{} }

func diffCopies(want, have map[string]map[string]string) copyDiff {
	var d copyDiff
	for k, w := range want {
		switch got, ok := have[k]; {
		case !ok:
			d.Missing++
		case !maps.Equal(w, got):
			d.Wrong++
		}
	}
	for k := range have {
		if _, ok := want[k]; !ok {
			d.Extra++
		}
	}
	return d
}

// copyState is dst as the harness's informer sees it, next to what is
// wanted, and when it first matched.
type copyState struct {
	mu      sync.Mutex
	want    map[string]map[string]string
	have    map[string]map[string]string
	bad     int       // names whose copy is missing, wrong or extra
	matched time.Time // when bad last became 0; zero while it is not
	changed chan struct{}
}

func newCopyState(want map[string]map[string]string) *copyState {
	s := &copyState{have: map[string]map[string]string{}, changed: make(chan struct{}, 1)}
	s.expect(want)
	return s
}

func (s *copyState) wrong(name string) bool {
	w, wok := s.want[name]
	h, hok := s.have[name]
	return wok != hok || (wok && !maps.Equal(w, h))
}

// expect sets what is wanted from now on.
func (s *copyState) expect(want map[string]map[string]string) {
	s.mu.Lock()
	s.want = want
	diff := diffCopies(want, s.have)
	s.bad = diff.Missing + diff.Wrong + diff.Extra
	s.matched = time.Time{}
	if s.bad == 0 {
		s.matched = time.Now()
	}
	s.mu.Unlock()
}

// see records a copy as the informer saw it (data nil: deleted).
func (s *copyState) see(name string, data map[string]string, present bool, now time.Time) {
	s.mu.Lock()
	was := s.wrong(name)
	if present {
		s.have[name] = data
	} else {
		delete(s.have, name)
	}
	is := s.wrong(name)
	switch {
	case was && !is:
		s.bad--
		if s.bad == 0 {
			s.matched = now
		}
	case !was && is:
		if s.bad == 0 {
			s.matched = time.Time{}
		}
		s.bad++
	}
	s.mu.Unlock()
	select {
	case s.changed <- struct{}{}:
	default:
	}
}

// wait returns when dst first matched what is wanted, once list (the
// apiserver) agrees; it gives up at deadline or when the side's process
// exits.
func (s *copyState) wait(deadline time.Time, exited <-chan struct{}, list func() (map[string]map[string]string, error)) (time.Time, error) {
	timer := time.NewTimer(time.Until(deadline))
	defer timer.Stop()
	// The informer may match a moment before the List does (or the List
	// show a change the informer has yet to see): poll the List too.
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	var last copyDiff
	for {
		s.mu.Lock()
		matched, want := s.matched, s.want
		s.mu.Unlock()
		if !matched.IsZero() {
			have, err := list()
			if err != nil {
				return time.Time{}, err
			}
			if last = diffCopies(want, have); last.none() {
				return matched, nil
			}
		}
		select {
		case <-s.changed:
		case <-tick.C:
		case <-exited:
			return time.Time{}, errors.New("the side's process exited before it converged")
		case <-timer.C:
			s.mu.Lock()
			bad := s.bad
			s.mu.Unlock()
			return time.Time{}, fmt.Errorf("not converged: %d copies missing, wrong or extra as the harness's informer sees it (last List: %+v)", bad, last)
		}
	}
}

// watchCopies starts the harness's informer on dst, which must be empty.
func watchCopies(ctx context.Context, h *e2e, want map[string]map[string]string) (*copyState, error) {
	s := newCopyState(want)
	factory := informers.NewSharedInformerFactoryWithOptions(h.client, 0, informers.WithNamespace(copyDst))
	inf := factory.Core().V1().ConfigMaps().Informer()
	see := func(obj any, present bool) {
		if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = d.Obj
		}
		if cm, ok := obj.(*corev1.ConfigMap); ok {
			s.see(cm.Name, cm.Data, present, time.Now())
		}
	}
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(o any) { see(o, true) },
		UpdateFunc: func(_, o any) { see(o, true) },
		DeleteFunc: func(o any) { see(o, false) },
	}); err != nil {
		return nil, err
	}
	factory.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		return nil, errors.New("the harness's informer on dst did not sync")
	}
	s.mu.Lock()
	k := len(s.have)
	s.mu.Unlock()
	if k != 0 {
		return nil, fmt.Errorf("%d ConfigMaps in %s before the side started", k, copyDst)
	}
	return s, nil
}
