package testenv

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"testing"
)

// DaemonDir makes a directory for a daemon's config file, removed when
// the test ends: "kubeconfig" for this control plane, and the plugin
// directory "plugins" holding the files of plugins (name to content).
func (e *Env) DaemonDir(t testing.TB, plugins map[string][]byte) string {
	t.Helper()
	dir := t.TempDir()
	if err := e.WriteKubeconfig(filepath.Join(dir, "kubeconfig")); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, "plugins"), 0o755); err != nil {
		t.Fatal(err)
	}
	for name, b := range plugins {
		if err := os.WriteFile(filepath.Join(dir, "plugins", name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// Get requests url and returns the status code and the body; a request
// that gets no response fails the test.
func Get(t testing.TB, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// DaemonConfig is the config file the daemon's end-to-end tests start
// from: the configmaps of namespace ns as resource "cms" (but the
// daemon's own, which keep the keys its plugins were handed when ns is
// also its Leases' namespace: SeenKeysSelector), the resources
// of extraResources (lines of the resources list) after them, every
// plugin of the directory "plugins" bound to bindings (a YAML flow list's
// items) with a short restart backoff, and the HTTP endpoint on a free
// port of the loopback.
func DaemonConfig(ns, extraResources, bindings string) string {
	return fmt.Sprintf(`apiVersion: informer-host/v1
kubeconfig: kubeconfig
resources:
  - {name: cms, version: v1, resource: configmaps, namespaces: [%s], labelSelector: "%s"}
%s
plugins:
  directory: plugins
  default:
    bindings: [%s]
    limits: {restartBackoff: 10ms}
server:
  address: 127.0.0.1:0
`, ns, SeenKeysSelector, extraResources, bindings)
}

// SeenKeysSelector selects every ConfigMap but those in which a daemon
// keeps the keys its plugins were handed (internal/seenkeys): a test that
// compares a plugin's count of ConfigMaps with the cluster's lists with
// it, as DaemonConfig watches with it.
const SeenKeysSelector = "!seenkeys.informer-host.io/plugin"
