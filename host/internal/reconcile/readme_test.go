package reconcile

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

const readmeSection = "### Controller metrics"

// readmeMetrics returns the metrics README's controller metrics table
// lists, each with its labels (sorted), and the section's text.
func readmeMetrics(t *testing.T) (map[string][]string, string) {
	t.Helper()
	b, err := os.ReadFile("../../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	var sec []string
	in := false
	for _, l := range strings.Split(string(b), "\n") {
		switch {
		case strings.HasPrefix(l, readmeSection):
			in = true
			continue
		case in && strings.HasPrefix(l, "#"):
			in = false
		}
		if in {
			sec = append(sec, l)
		}
	}
	if len(sec) == 0 {
		t.Fatalf("README.md has no section %q", readmeSection)
	}
	code := regexp.MustCompile("`([^`]+)`")
	rows := map[string][]string{}
	for _, l := range sec {
		if !strings.HasPrefix(l, "| `") {
			continue
		}
		cells := strings.Split(l, "|")
		if len(cells) < 4 {
			t.Fatalf("README.md, %s: row %q has fewer than 3 cells", readmeSection, l)
		}
		name := strings.Trim(strings.TrimSpace(cells[1]), "`")
		var labels []string
		for _, m := range code.FindAllStringSubmatch(cells[2], -1) {
			labels = append(labels, m[1])
		}
		slices.Sort(labels)
		rows[name] = labels
	}
	return rows, strings.Join(sec, "\n")
}

// README's controller metrics table is what Metrics exposes: every
// metric it describes, with the labels its series carry once every
// method has been used, and nothing else; and the section names every
// value of the result label. So the mapping a platform team's
// dashboards rely on cannot drift from the code.
func TestREADMEListsTheControllerMetrics(t *testing.T) {
	rows, text := readmeMetrics(t)

	m := NewMetrics()
	descs := make(chan *prometheus.Desc, 64)
	m.Describe(descs)
	close(descs)
	fqName := regexp.MustCompile(`fqName: "([^"]+)"`)
	described := map[string]bool{}
	for d := range descs {
		match := fqName.FindStringSubmatch(d.String())
		if match == nil {
			t.Fatalf("no fqName in %s", d)
		}
		described[match[1]] = true
	}
	for name := range described {
		if _, ok := rows[name]; !ok {
			t.Errorf("Metrics describes %s, which README.md's %q table does not list", name, readmeSection)
		}
	}
	for name := range rows {
		if !described[name] {
			t.Errorf("README.md's %q table lists %s, which Metrics does not describe", readmeSection, name)
		}
	}

	// Every series, to read its labels.
	reg := prometheus.NewPedanticRegistry()
	if err := reg.Register(m); err != nil {
		t.Fatal(err)
	}
	q := NewQueue("cron", nil, m)
	t.Cleanup(q.ShutDown)
	m.SetMaxConcurrentReconciles("cron", 1)
	q.Add(Request{Namespace: "ns", Name: "a"})
	r := mustGet(t, q)
	idle := m.WorkerActive("cron")
	m.ObserveReconcile("cron", ResultError, time.Millisecond)
	m.ObserveTerminalError("cron")
	m.ObservePanic("cron")
	m.ObserveTimeout("cron")
	idle()
	q.Done(r)
	q.AddAfter(r, time.Hour)
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	gathered := map[string]bool{}
	for _, f := range families {
		gathered[f.GetName()] = true
		for _, mt := range f.GetMetric() {
			var labels []string
			for _, l := range mt.GetLabel() {
				labels = append(labels, l.GetName())
			}
			slices.Sort(labels)
			if want, ok := rows[f.GetName()]; ok && !slices.Equal(labels, want) {
				t.Errorf("%s has labels %v; README.md lists %v", f.GetName(), labels, want)
			}
		}
	}
	for name := range rows {
		if !gathered[name] {
			t.Errorf("no series of %s after every method was used, so its labels are not checked", name)
		}
	}

	for _, v := range []string{ResultSuccess, ResultError, ResultRequeue, ResultRequeueAfter} {
		if !strings.Contains(text, "`"+v+"`") {
			t.Errorf("README.md's %q section does not say what result %q means", readmeSection, v)
		}
	}
}
