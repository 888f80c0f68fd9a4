package server

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/informer-host/informer-host/host"
	"github.com/informer-host/informer-host/internal/pluginsource"
)

// /debug/plugins gives a sourced plugin a source object, and lists a
// sourced plugin the host does not have yet as pending, with why.
func TestPluginsDocumentSources(t *testing.T) {
	st := []host.PluginStatus{{File: "a.wasm", State: host.StateRunning}, {File: "dir.wasm", State: host.StateRunning}}
	sources := map[string]pluginsource.Status{
		"a.wasm": {Plugin: "a.wasm", Source: "oci://localhost:5000/a:v1", RunningDigest: "sha256:aa", ResolvedDigest: "sha256:bb",
			Running:  &pluginsource.RunningStatus{Digest: "sha256:aa", Source: "oci://localhost:5000/a:v0", Verified: true, Signer: "k"},
			Degraded: true, LastError: "fetch: connection refused", PullPolicy: "Always", FailurePolicy: "fail-closed"},
		"b.wasm": {Plugin: "b.wasm", Source: "oci://localhost:5000/b:v1", LastError: "signature not verified", PullPolicy: "Always", FailurePolicy: "fail-closed"},
	}
	b, err := json.Marshal(pluginsDocument(st, nil, sources))
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Plugins []struct {
			File      string                      `json:"file"`
			State     string                      `json:"state"`
			LastError string                      `json:"lastError"`
			Source    *map[string]json.RawMessage `json:"source"`
		} `json:"plugins"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	if len(doc.Plugins) != 3 {
		t.Fatalf("plugins: %s", b)
	}
	a, dir, pending := doc.Plugins[0], doc.Plugins[1], doc.Plugins[2]
	if a.Source == nil || string((*a.Source)["runningDigest"]) != `"sha256:aa"` || string((*a.Source)["degraded"]) != "true" ||
		!strings.Contains(string((*a.Source)["running"]), `"source":"oci://localhost:5000/a:v0","verified":true`) {
		t.Errorf("a.wasm: %s", b)
	}
	if dir.Source != nil {
		t.Errorf("a directory plugin has a source: %s", b)
	}
	if pending.File != "b.wasm" || pending.State != "pending" || !strings.Contains(pending.LastError, "not verified") || pending.Source == nil {
		t.Errorf("b.wasm: %s", b)
	}
}
