package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
)

// Case 5, relist: what a cluster does to an informer after etcd has
// compacted past the revision it watches from. With N ConfigMaps cached
// and settled, a side (the daemon with its plugins, or the fair native
// informer), whose apiserver traffic goes through an apiProxy, sees etcd
// compacted to its current revision and every watch cut; its reflector
// resumes from its last resourceVersion and, told that it is too old
// (410), lists everything again. The peak RSS (VmHWM, reset just before)
// is what the relist cost on top of the settled set.
//
// The apiserver's watch cache still holds the revision the reflector
// resumes from after etcd's compaction (it keeps its own window of
// events), so the 410 seldom comes from the apiserver (in this bench's
// control plane it did not, at 200 objects or 50,000: the resumed watch
// was served, and no list came within relistWait). The proxy
// ends a cut watch cleanly, as the apiserver ends one: a reset stream
// is an error to the reflector, which then lists again whatever the
// apiserver would answer, and the 410 would be tested by nothing. The
// harness waits
// relistWait for a list after the cut; when none came, it cuts again and
// the proxy answers the resumed watch with the very Status the apiserver
// sends for a compacted revision: the reflector cannot tell the two
// apart, and what follows (the list, or the watch that sends the initial
// events, through the real apiserver) is the same. memoryRun.Relist says
// which of the two caused the relist.

// relistWait is how long a side has to start a list after its watches
// were cut before the proxy answers the resumed watch with a 410.
const relistWait = 10 * time.Second

// relistSide starts side ("native-stripped", or "host" with plugins) on a
// kubeconfig through a proxy, lets it settle on the n ConfigMaps of ns,
// makes it relist and reads its peak over the relist.
func (h *e2e) relistSide(ns, side string, plugins, n, run int, settle time.Duration) (memoryRun, error) {
	proxy, err := newAPIProxy(h.config)
	if err != nil {
		return memoryRun{}, err
	}
	defer proxy.close()
	proxy.countLists("configmaps")
	kubeconfig := filepath.Join(h.work, fmt.Sprintf("relist-%s-%d-kubeconfig", side, run))
	if err := proxy.writeKubeconfig(kubeconfig); err != nil {
		return memoryRun{}, err
	}
	var pid int
	switch side {
	case "native-stripped":
		// The later -kubeconfig wins over startNative's.
		nc, err := h.startNative(ns, "noop", 1, "-strip-managed-fields", "-kubeconfig", kubeconfig)
		if err != nil {
			return memoryRun{}, err
		}
		defer nc.stop()
		if err := nc.waitCount(uint64(n), 10*time.Minute); err != nil {
			return memoryRun{}, err
		}
		pid = nc.cmd.Process.Pid
		time.Sleep(settle)
	case "host":
		name := fmt.Sprintf("relist-%d-%d", plugins, run)
		dir := filepath.Join(h.work, name+"-plugins")
		names, modules, err := twofieldsDir(dir, plugins, nil)
		if err != nil {
			return memoryRun{}, err
		}
		d, err := h.startDaemon(name, dir, func(dir, addr string) string {
			return strings.Replace(h.daemonConfig(ns, dir, addr, "", modules),
				"kubeconfig: "+h.kubeconfig+"\n", "kubeconfig: "+kubeconfig+"\n", 1)
		})
		if err != nil {
			return memoryRun{}, err
		}
		defer func() { _ = d.stop() }()
		if _, err := d.waitReady(plugins, 10*time.Minute); err != nil {
			return memoryRun{}, err
		}
		if err := d.waitDelivered(names, uint64(n), 10*time.Minute); err != nil {
			return memoryRun{}, err
		}
		if _, _, err := h.settled(d, name, uint64(n), settle); err != nil {
			return memoryRun{}, err
		}
		pid = d.cmd.Process.Pid
	default:
		return memoryRun{}, fmt.Errorf("relist: unknown side %q", side)
	}
	mem := func() (int64, int64, error) { return procMemory(pid) }
	if _, _, _, err := settledMemory(mem); err != nil {
		return memoryRun{}, err
	}
	before, since, err := mem()
	if err != nil {
		return memoryRun{}, err
	}
	// From here VmHWM is the peak over the relist alone.
	if err := os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", pid), []byte("5"), 0); err != nil {
		return memoryRun{}, fmt.Errorf("reset the peak RSS of %s: %w", side, err)
	}
	// With -profile, the split at the relist's largest RSS, as the
	// initial list's (memory.go): what the relist holds at its peak.
	// Deferred, so that the sampler stops on every return, before the
	// side's own deferred stop.
	if h.profileDir != "" {
		defer h.logPeak("case 5 relist: "+side, pid, time.Now())()
	}
	rev, err := h.compactEtcd()
	if err != nil {
		return memoryRun{}, err
	}
	lists := proxy.listed()
	relisted := func(limit time.Duration) bool {
		return wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, limit, true,
			func(context.Context) (bool, error) { return proxy.listed() > lists, nil }) == nil
	}
	cause := "apiserver"
	cut := proxy.cut(false)
	if !relisted(relistWait) {
		cause = "proxy"
		cut += proxy.cut(true)
		if !relisted(2 * time.Minute) {
			return memoryRun{}, fmt.Errorf("relist: %s did not list again within 2 minutes of its watches being cut (%d) and answered 410", side, cut)
		}
	}
	h.logf("case 5 relist: %s: etcd compacted at revision %d, %d watches cut, relist caused by the %s's 410", side, rev, cut, cause)
	if err := waitIdle(pid, 5*time.Minute); err != nil {
		return memoryRun{}, fmt.Errorf("relist: %s: %w", side, err)
	}
	time.Sleep(settle)
	rss, peak, waited, err := settledMemory(mem)
	if err != nil {
		return memoryRun{}, err
	}
	m := memoryRun{Side: side + "-relist", Plugins: plugins, RSS: float64(rss) / (1 << 20), Peak: float64(peak) / (1 << 20),
		Relist: cause, Lists: proxy.listed() - lists}
	h.logf("case 5 relist: %s/%d: peak over the relist %.0f MiB (RSS before it %.0f, peak since the start %.0f), RSS after %.0f MiB (settled after %d s more), %d lists",
		side, plugins, m.Peak, float64(before)/(1<<20), float64(since)/(1<<20), m.RSS, waited, m.Lists)
	return m, nil
}

// waitIdle waits until process pid has used less than 2% of a core over
// two seconds in a row: a relist's decode, store replacement and
// handlers are then done.
func waitIdle(pid int, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	prev, err := procCPU(pid)
	if err != nil {
		return err
	}
	quiet := 0
	for quiet < 2 {
		if time.Now().After(deadline) {
			return fmt.Errorf("still busy %v after the relist began", limit)
		}
		time.Sleep(time.Second)
		cpu, err := procCPU(pid)
		if err != nil {
			return err
		}
		if cpu-prev < 20*time.Millisecond {
			quiet++
		} else {
			quiet = 0
		}
		prev = cpu
	}
	return nil
}

// compactEtcd compacts etcd to its current revision through its client
// URL's JSON gateway, and returns that revision.
func (h *e2e) compactEtcd() (int64, error) {
	if h.etcdURL == "" {
		return 0, fmt.Errorf("compact etcd: the harness knows no etcd client URL (its control plane is not envtest's)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	body, err := etcdPost(ctx, h.etcdURL+"/v3/kv/range", `{"key":"AA=="}`)
	if err != nil {
		return 0, err
	}
	rev, err := etcdRevision(body)
	if err != nil {
		return 0, err
	}
	// Nothing written since an earlier compaction (the other side's)
	// leaves etcd compacted at this revision already.
	if _, err := etcdPost(ctx, h.etcdURL+"/v3/kv/compaction", fmt.Sprintf(`{"revision":"%d","physical":true}`, rev)); err != nil &&
		!strings.Contains(err.Error(), "required revision has been compacted") {
		return 0, err
	}
	return rev, nil
}

func etcdPost(ctx context.Context, url, body string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("etcd %s: %w", url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("etcd %s: %w", url, err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("etcd %s: %s: %s", url, resp.Status, bytes.TrimSpace(b))
	}
	return b, nil
}

// etcdRevision reads header.revision from an answer of etcd's JSON
// gateway, where 64-bit integers are strings.
func etcdRevision(body []byte) (int64, error) {
	var a struct {
		Header *struct {
			Revision string `json:"revision"`
		} `json:"header"`
	}
	if err := json.Unmarshal(body, &a); err != nil {
		return 0, fmt.Errorf("etcd's answer is not JSON (%w): %.200s", err, body)
	}
	if a.Header == nil || a.Header.Revision == "" {
		return 0, fmt.Errorf("etcd's answer has no header.revision: %.200s", body)
	}
	rev, err := strconv.ParseInt(a.Header.Revision, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("etcd's header.revision %q: %w", a.Header.Revision, err)
	}
	return rev, nil
}

// startsList tells whether r lists resource: a LIST of its collection, or
// a watch that sends the initial events (the watch-list client-go uses
// when the apiserver offers it).
func startsList(r *http.Request, resource string) bool {
	if r.Method != http.MethodGet {
		return false
	}
	path := strings.TrimSuffix(r.URL.Path, "/")
	if path[strings.LastIndexByte(path, '/')+1:] != resource {
		return false
	}
	return !isWatch(r) || r.URL.Query().Get("sendInitialEvents") == "true"
}

// writeExpired answers a watch from resourceVersion rv as the apiserver
// does when etcd has compacted past it: a watch stream whose one event is
// an ERROR carrying a 410 Expired Status.
func writeExpired(w http.ResponseWriter, rv string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	_ = json.NewEncoder(w).Encode(map[string]any{"type": "ERROR", "object": map[string]any{
		"kind": "Status", "apiVersion": "v1", "metadata": map[string]any{}, "status": "Failure",
		"message": fmt.Sprintf("too old resource version: %s (compacted)", rv), "reason": "Expired", "code": http.StatusGone,
	}})
}
