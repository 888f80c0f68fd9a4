package reconcile

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// controller-runtime's names and label sets, which dashboards and alerts
// for controller-runtime operators query.
var controllerRuntimeSeries = map[string][]string{
	"controller_runtime_reconcile_total":           {"controller", "result"},
	"controller_runtime_reconcile_errors_total":    {"controller"},
	"controller_runtime_reconcile_time_seconds":    {"controller"},
	"controller_runtime_max_concurrent_reconciles": {"controller"},
	"controller_runtime_active_workers":            {"controller"},
	"workqueue_depth":                              {"controller", "name", "priority"},
	"workqueue_adds_total":                         {"controller", "name"},
	"workqueue_retries_total":                      {"controller", "name"},
	"workqueue_queue_duration_seconds":             {"controller", "name"},
	"workqueue_work_duration_seconds":              {"controller", "name"},
	"workqueue_unfinished_work_seconds":            {"controller", "name"},
	"workqueue_longest_running_processor_seconds":  {"controller", "name"},
}

func TestMetricsUseControllerRuntimeNamesAfterAReconcile(t *testing.T) {
	m := NewMetrics()
	reg := prometheus.NewPedanticRegistry()
	if err := reg.Register(m); err != nil {
		t.Fatalf("registering the metrics: %v", err)
	}
	q := NewQueue("cron", nil, m)
	t.Cleanup(q.ShutDown)
	m.SetMaxConcurrentReconciles("cron", 1)

	q.Add(Request{Namespace: "ns", Name: "a"})
	q.Add(Request{Namespace: "ns", Name: "a"})
	r := mustGet(t, q)
	idle := m.WorkerActive("cron")
	m.ObserveReconcile("cron", ResultRequeueAfter, 30*time.Millisecond)
	idle()
	q.Done(r)
	q.AddAfter(r, time.Hour)
	m.ObserveReconcile("cron", ResultError, time.Millisecond)
	m.ObservePanic("cron")

	families, err := reg.Gather()
	if err != nil {
		t.Fatalf("gathering: %v", err)
	}
	got := map[string][]string{}
	for _, f := range families {
		for _, mt := range f.GetMetric() {
			var labels []string
			for _, l := range mt.GetLabel() {
				labels = append(labels, l.GetName())
				if (l.GetName() == "controller" || l.GetName() == "name") && l.GetValue() != "cron" {
					t.Errorf("%s{%s=%q}, want the plugin's name, cron", f.GetName(), l.GetName(), l.GetValue())
				}
			}
			got[f.GetName()] = labels
		}
	}
	for name, labels := range controllerRuntimeSeries {
		if have, ok := got[name]; !ok {
			t.Errorf("no series %s after a reconcile", name)
		} else if !slices.Equal(have, labels) {
			t.Errorf("%s has labels %v, want controller-runtime's %v", name, have, labels)
		}
	}

	want := `
# HELP controller_runtime_reconcile_total Total number of reconciliations per controller
# TYPE controller_runtime_reconcile_total counter
controller_runtime_reconcile_total{controller="cron",result="error"} 1
controller_runtime_reconcile_total{controller="cron",result="requeue_after"} 1
# HELP controller_runtime_reconcile_errors_total Total number of reconciliation errors per controller
# TYPE controller_runtime_reconcile_errors_total counter
controller_runtime_reconcile_errors_total{controller="cron"} 1
# HELP controller_runtime_reconcile_panics_total Total number of reconciliation panics per controller
# TYPE controller_runtime_reconcile_panics_total counter
controller_runtime_reconcile_panics_total{controller="cron"} 1
# HELP controller_runtime_active_workers Number of currently used workers per controller
# TYPE controller_runtime_active_workers gauge
controller_runtime_active_workers{controller="cron"} 0
# HELP workqueue_adds_total Total number of adds handled by workqueue
# TYPE workqueue_adds_total counter
workqueue_adds_total{controller="cron",name="cron"} 1
# HELP workqueue_retries_total Total number of items added to the workqueue with a non-zero delay (rate-limited requeues, explicit RequeueAfter or AddAfter calls)
# TYPE workqueue_retries_total counter
workqueue_retries_total{controller="cron",name="cron"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want),
		"controller_runtime_reconcile_total", "controller_runtime_reconcile_errors_total",
		"controller_runtime_reconcile_panics_total", "controller_runtime_active_workers",
		"workqueue_adds_total", "workqueue_retries_total"); err != nil {
		t.Error(err)
	}
	if n := testutil.CollectAndCount(m, "controller_runtime_reconcile_time_seconds"); n != 1 {
		t.Errorf("controller_runtime_reconcile_time_seconds has %d series, want 1", n)
	}
}

func TestMetricsForgetRemovesOnlyThatPlugin(t *testing.T) {
	m := NewMetrics()
	for _, name := range []string{"a", "b"} {
		q := NewQueue(name, nil, m)
		q.Add(Request{Name: "x"})
		m.ObserveReconcile(name, ResultSuccess, time.Millisecond)
		m.SetMaxConcurrentReconciles(name, 1)
		q.ShutDown()
	}
	m.Forget("a")
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(m)
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var kept int
	for _, f := range families {
		for _, mt := range f.GetMetric() {
			for _, l := range mt.GetLabel() {
				if l.GetName() == "controller" {
					if l.GetValue() == "a" {
						t.Errorf("%s{controller=\"a\"} survived Forget(\"a\")", f.GetName())
					} else {
						kept++
					}
				}
			}
		}
	}
	if kept == 0 {
		t.Error("Forget(\"a\") removed b's series too")
	}
}
