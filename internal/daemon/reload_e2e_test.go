package daemon

import (
	"os"
	"strings"
	"testing"

	"github.com/informer-host/informer-host/internal/testenv"
)

// A reload applies what it can and names what needs a restart: each row
// rewrites the running daemon's config file, and the reload that follows
// warns about exactly the settings it leaves as they run, or about none.
func TestReloadNamesWhatNeedsARestart(t *testing.T) {
	ns := env.Namespace(t)
	cfg := writeDaemonConfig(t, ns, "counter.wasm", "../../host/testdata/plugins/counter.wat", "")
	r := startReplica(t, cfg, Options{})
	const (
		restartServer   = "plugins.directory, kubeconfig and server take effect only after a restart"
		restartElection = "sharding and leaderElection take effect only after a restart"
	)
	base := testenv.DaemonConfig(ns, "", "{resource: cms}")
	off := strings.Replace(base, "address: 127.0.0.1:0", `address: "off"`, 1)
	for i, tc := range []struct {
		name string
		text string
		want []string // the restart warnings of this reload
	}{
		{name: "a new resource applies live",
			text: testenv.DaemonConfig(ns, "  - {name: secrets, version: v1, resource: secrets, namespaces: ["+ns+"]}", "{resource: cms}")},
		{name: "the server address needs a restart",
			text: off, want: []string{restartServer}},
		{name: "leader election needs a restart",
			text: off + "leaderElection:\n  enabled: true\n  namespace: " + ns + "\n  leaseName: informer-host\n", want: []string{restartElection}},
		{name: "back to the first file: both need a restart",
			text: base, want: []string{restartServer, restartElection}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := map[string]int{restartServer: len(r.logs.Lines(restartServer)), restartElection: len(r.logs.Lines(restartElection))}
			path := cfg.File
			if err := os.WriteFile(path+".tmp", []byte(tc.text), 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.Rename(path+".tmp", path); err != nil {
				t.Fatal(err)
			}
			testenv.Eventually(t, "the reload", func() bool { return len(r.logs.Lines("config reloaded", "reason=\"file changed\"")) == i+1 })
			for warning, n := range before {
				want := n
				for _, w := range tc.want {
					if w == warning {
						want++
					}
				}
				if got := len(r.logs.Lines(warning)); got != want {
					t.Errorf("%q logged %d times after this reload, want %d", warning, got-n, want-n)
				}
			}
		})
	}
	if got := len(r.logs.Lines("config reloaded", "resources=1")); got != 3 {
		t.Errorf("%d reloads with one resource, want 3 (the secrets were added once)", got)
	}
}
