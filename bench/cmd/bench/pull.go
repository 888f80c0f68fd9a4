package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	ggcrregistry "github.com/google/go-containerregistry/pkg/registry"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/informer-host/informer-host/internal/ociartifact"
)

// Case 4p: pull to first event. The daemon started with one plugin whose
// module comes from an OCI registry (modules[].source: oci://…), until
// the plugin's handler is entered for the first time (the initial list's
// add of the namespace's one ConfigMap), for a small Go module
// (twofields, about 3 MB) and a large one (k8sapi: k8s.io/api linked in,
// about 15 MB). The registry is go-containerregistry's, in this process,
// on loopback; the module is pushed with internal/ociartifact's client,
// as `informer-host push` does.
//
//	cold    empty source cache and empty compilation cache: resolve the
//	        tag, fetch the manifest and the layer, verify the digest,
//	        store it, compile
//	cached  the same source cache and compilation cache again, with the
//	        registry stopped: the daemon starts the plugin from the source
//	        cache's last good version (its log says so, which the case
//	        checks) and its refresh fails harmlessly
//
// The baseline is the same module bytes dropped in the plugin directory
// (no source, no registry): cold with an empty compilation cache, warm
// with the one it filled.

type pullRun struct {
	Plugin string  `json:"plugin"` // go-small, go-k8sapi
	Bytes  int     `json:"bytes"`
	From   string  `json:"from"`  // oci, directory
	Cache  string  `json:"cache"` // cold, cached (oci) / warm (directory)
	First  float64 `json:"firstMs"`
}

// pullRegistry is an in-memory OCI registry on 127.0.0.1.
type pullRegistry struct {
	host string
	srv  *http.Server
	done chan struct{}
}

func startPullRegistry() (*pullRegistry, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	r := &pullRegistry{host: l.Addr().String(), done: make(chan struct{}),
		srv: &http.Server{Handler: ggcrregistry.New(ggcrregistry.Logger(log.New(io.Discard, "", 0))), ReadHeaderTimeout: time.Minute}}
	go func() { defer close(r.done); _ = r.srv.Serve(l) }()
	return r, nil
}

// stop closes the listener and every connection: the registry is gone.
func (r *pullRegistry) stop() {
	_ = r.srv.Close()
	<-r.done
}

func (h *e2e) pull(runs int, withK8sAPI bool) ([]pullRun, error) {
	ns, err := h.namespace("pull")
	if err != nil {
		return nil, err
	}
	if _, err := h.client.CoreV1().ConfigMaps(ns).Create(context.Background(), configMap(ns, "one", "0", 0), metav1.CreateOptions{}); err != nil {
		return nil, err
	}
	type module struct {
		plugin string
		wasm   []byte
	}
	mods := []module{{"go-small", mustWasm("twofields")}}
	if withK8sAPI {
		mods = append(mods, module{"go-k8sapi", mustWasm("k8sapi")})
	}
	var out []pullRun
	for r := 0; r < runs; r++ {
		for _, m := range mods {
			sides := []string{"directory", "oci"}
			if r%2 == 1 {
				sides[0], sides[1] = sides[1], sides[0]
			}
			for _, side := range sides {
				var got []pullRun
				if side == "oci" {
					got, err = h.pullFromRegistry(ns, fmt.Sprintf("pull-%d-%s", r, m.plugin), m.plugin, m.wasm)
				} else {
					got, err = h.pullFromDirectory(ns, fmt.Sprintf("pull-%d-%s", r, m.plugin), m.plugin, m.wasm)
				}
				if err != nil {
					return out, fmt.Errorf("%s, %s: %w", m.plugin, side, err)
				}
				out = append(out, got...)
			}
		}
	}
	return out, nil
}

const pullModuleName = "p.wasm"

// pullFromRegistry pushes wasm to a new registry, starts the daemon on it
// with empty caches (cold), stops the registry and starts the daemon again
// (cached).
func (h *e2e) pullFromRegistry(ns, name, plugin string, wasm []byte) ([]pullRun, error) {
	reg, err := startPullRegistry()
	if err != nil {
		return nil, err
	}
	stopped := false
	defer func() {
		if !stopped {
			reg.stop()
		}
	}()
	ref := reg.host + "/bench/" + plugin + ":v1"
	client, err := ociartifact.New(ociartifact.Options{Registries: map[string]ociartifact.Registry{reg.host: {Insecure: true}}})
	if err != nil {
		return nil, err
	}
	if _, err := client.Push(context.Background(), wasm, ref, nil); err != nil {
		return nil, fmt.Errorf("push %s: %w", ref, err)
	}
	// The plugin directory stays empty: the module comes from the source.
	dir := filepath.Join(h.work, name+"-oci-plugins")
	compiled := filepath.Join(h.work, name+"-oci-wazero")
	sources := filepath.Join(h.work, name+"-oci-sources")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	modules := fmt.Sprintf("    - {file: %s, source: \"oci://%s\", config: {record: true}}\n", pullModuleName, ref)
	extra := fmt.Sprintf("  sourceCache: %s\n  registries:\n    %q: {insecure: true}\n", sources, reg.host)
	var out []pullRun
	for _, cache := range []string{"cold", "cached"} {
		if cache == "cached" {
			reg.stop()
			stopped = true
		}
		h.logf("case 4p: %s (%d bytes) from oci://%s, %s", plugin, len(wasm), ref, cache)
		first, d, err := h.firstEvent(ns, name+"-oci-"+cache, dir, compiled, extra, modules, sha12(wasm))
		if err != nil {
			return out, err
		}
		if cache == "cached" {
			if err := fromSourceCache(d); err != nil {
				return out, err
			}
		}
		h.logf("case 4p: first event after %s", fmtMs(first))
		out = append(out, pullRun{Plugin: plugin, Bytes: len(wasm), From: "oci", Cache: cache, First: first})
	}
	return out, nil
}

// pullFromDirectory is the baseline: the same bytes in the plugin
// directory, an empty compilation cache (cold), then the same again
// (warm).
func (h *e2e) pullFromDirectory(ns, name, plugin string, wasm []byte) ([]pullRun, error) {
	dir := filepath.Join(h.work, name+"-dir-plugins")
	compiled := filepath.Join(h.work, name+"-dir-wazero")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	if _, err := writeWasm(dir, pullModuleName, wasm); err != nil {
		return nil, err
	}
	modules := fmt.Sprintf("    - {file: %s, config: {record: true}}\n", pullModuleName)
	var out []pullRun
	for _, cache := range []string{"cold", "warm"} {
		h.logf("case 4p: %s (%d bytes) from the plugin directory, %s", plugin, len(wasm), cache)
		first, _, err := h.firstEvent(ns, name+"-dir-"+cache, dir, compiled, "", modules, sha12(wasm))
		if err != nil {
			return out, err
		}
		h.logf("case 4p: first event after %s", fmtMs(first))
		out = append(out, pullRun{Plugin: plugin, Bytes: len(wasm), From: "directory", Cache: cache, First: first})
	}
	return out, nil
}

// firstEvent starts the daemon with compilation cache compiled, extra
// lines under plugins: and modules, waits for the plugin to complete one
// call, stops the daemon (which flushes the plugin's records to its log)
// and returns the time from the daemon's start to the handler's first
// entry by version sha.
func (h *e2e) firstEvent(ns, name, dir, compiled, extra, modules, sha string) (float64, *daemon, error) {
	d, err := h.startDaemon(name, dir, func(dir, addr string) string {
		cfg := h.daemonConfig(ns, dir, addr, extra, modules)
		return strings.Replace(cfg, "compilationCache: "+h.cacheDir, "compilationCache: "+compiled, 1)
	})
	if err != nil {
		return 0, nil, err
	}
	waitErr := d.waitDelivered([]string{pullModuleName}, 1, 5*time.Minute)
	stopErr := d.stop()
	if err := errors.Join(waitErr, stopErr); err != nil {
		return 0, d, fmt.Errorf("%w\n%s", err, d.tail())
	}
	recs, err := d.records()
	if err != nil {
		return 0, d, err
	}
	first := int64(-1)
	for _, r := range recs {
		if r.version == sha && (first < 0 || r.entered < first) {
			first = r.entered
		}
	}
	if first < 0 {
		return 0, d, fmt.Errorf("version %s recorded no event:\n%s", sha, d.tail())
	}
	return float64(first-d.started.UnixNano()) / 1e6, d, nil
}

// fromSourceCache checks that d started its plugin from the source cache.
func fromSourceCache(d *daemon) error {
	lines, err := d.logs()
	if err != nil {
		return err
	}
	for _, l := range lines {
		if strings.HasPrefix(l.Msg, "plugin started from the source cache") {
			return nil
		}
	}
	return fmt.Errorf("the daemon did not start the plugin from the source cache:\n%s", d.tail())
}

// pullRows: per module, cold and cached from the registry, each next to
// the directory's cold and warm start of the same bytes.
func (r *results) pullRows() {
	for _, plugin := range []string{"go-small", "go-k8sapi"} {
		for _, c := range [][2]string{{"cold", "cold"}, {"cached", "warm"}} {
			var oci, dir []float64
			size := 0
			for _, p := range r.Pull {
				if p.Plugin != plugin {
					continue
				}
				size = p.Bytes
				if p.From == "oci" && p.Cache == c[0] {
					oci = append(oci, p.First)
				}
				if p.From == "directory" && p.Cache == c[1] {
					dir = append(dir, p.First)
				}
			}
			if len(oci) == 0 || len(dir) == 0 {
				continue
			}
			what := fmt.Sprintf("daemon start → first event, %s (%.1f MB) from oci:// (in-process registry, loopback), cold: empty source and compilation caches", plugin, float64(size)/1e6)
			base := fmt.Sprintf("same module in the plugin directory, empty compilation cache: %s", fmtMs(median(dir)))
			if c[0] == "cached" {
				what = fmt.Sprintf("daemon start → first event, %s (%.1f MB) from oci://, cached: registry stopped, started from the source cache (compiled code cached)", plugin, float64(size)/1e6)
				base = fmt.Sprintf("same module in the plugin directory, compiled code cached: %s", fmtMs(median(dir)))
			}
			r.add(row{"4p pull", what, fmtMs(median(oci)), base, ratio(median(oci), median(dir)), "", "—"})
		}
	}
}
