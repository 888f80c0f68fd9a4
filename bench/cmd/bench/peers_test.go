package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestCountWatches(t *testing.T) {
	metrics := `# HELP apiserver_longrunning_requests [STABLE] Gauge of all active long-running apiserver requests
# TYPE apiserver_longrunning_requests gauge
apiserver_longrunning_requests{component="apiserver",group="",resource="configmaps",scope="namespace",subresource="",verb="WATCH",version="v1"} 10
apiserver_longrunning_requests{component="apiserver",group="",resource="configmaps",scope="cluster",subresource="",verb="WATCH",version="v1"} 2
apiserver_longrunning_requests{component="apiserver",group="",resource="secrets",scope="namespace",subresource="",verb="WATCH",version="v1"} 7
apiserver_longrunning_requests{component="apiserver",group="",resource="configmaps",scope="namespace",subresource="",verb="CONNECT",version="v1"} 5
apiserver_request_total{resource="configmaps",verb="WATCH"} 99
`
	for _, tc := range []struct {
		resource string
		want     int
	}{{"configmaps", 12}, {"secrets", 7}, {"pods", 0}} {
		got, err := countWatches([]byte(metrics), tc.resource)
		if err != nil || got != tc.want {
			t.Errorf("countWatches(%s) = %d, %v; want %d", tc.resource, got, err, tc.want)
		}
	}
	if _, err := countWatches([]byte(`apiserver_longrunning_requests{resource="configmaps",verb="WATCH"} x`), "configmaps"); err == nil {
		t.Error("a value that is no number: no error")
	}
}

// The hook appends lines in pieces; the counter must count whole records
// only, and notice the Synchronization marker.
func TestLineCounter(t *testing.T) {
	path := filepath.Join(t.TempDir(), "records.txt")
	c := &lineCounter{path: path}
	if n, err := c.count(); n != 0 || err != nil || c.synced() != 0 {
		t.Fatalf("no file yet: %d, %v, synced %d", n, err, c.synced())
	}
	appendFile := func(s string) {
		f, err := os.OpenFile(path, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.WriteString(s); err != nil {
			t.Fatal(err)
		}
		f.Close()
	}
	appendFile("sync\na:cm-1:c:1")
	if n, _ := c.count(); n != 0 || c.synced() != 1 {
		t.Fatalf("after sync and half a record: %d, synced %d", n, c.synced())
	}
	appendFile("00\nsync\nu:cm-1:u:200\n")
	if n, _ := c.count(); n != 2 || c.synced() != 2 {
		t.Fatalf("after two records: %d", n)
	}
	recs, err := readRecordFile(path)
	if err != nil || len(recs) != 2 || recs[0].key() != "a:cm-1:c" || recs[0].entered != 100 {
		t.Fatalf("records: %+v, %v", recs, err)
	}
}

// The version the bench looks for is the one hack/shell-operator builds.
func TestShellOperatorVersion(t *testing.T) {
	b, err := os.ReadFile("../../../hack/shell-operator/go.mod")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), "\nrequire github.com/flant/shell-operator "+shellOperatorVersion+"\n") {
		t.Errorf("hack/shell-operator/go.mod does not require shell-operator %s", shellOperatorVersion)
	}
}
