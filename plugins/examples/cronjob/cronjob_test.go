package main

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/informer-host/informer-host/abi/kit"
	"github.com/informer-host/informer-host/abi/kit/kittest"
)

// The kubebuilder book's suite (envtest, a real apiserver, Ginkgo) and
// its schedule logic, offline on kittest's controller loop with a fake
// clock: the loop starts at 2026-01-01T00:00:00Z, when each CronJob here
// is created.

const ns = "default"

func loop(t *testing.T) *kittest.Loop {
	h := kittest.New(t)
	if err := h.Init(); err != nil {
		t.Fatal(err)
	}
	return h.Controller(kittest.Controller{
		Plugin: "cronjob.wasm",
		For:    kittest.Kind{Name: "cronjobs", APIVersion: "batch.tutorial.kubebuilder.io/v1", Kind: "CronJob"},
		Owns:   []kittest.Kind{{Name: "jobs", APIVersion: "batch/v1", Kind: "Job"}},
	})
}

// cronJob is a CronJob with the book's job template; spec adds fields.
func cronJob(name, schedule, spec string) string {
	if spec != "" {
		spec = "," + spec
	}
	return fmt.Sprintf(`{"apiVersion":"batch.tutorial.kubebuilder.io/v1","kind":"CronJob","metadata":{"namespace":%q,"name":%q},
	"spec":{"schedule":%q,"jobTemplate":{"spec":{"template":{"spec":{"containers":[{"name":"test-container","image":"test-image"}],
	"restartPolicy":"OnFailure"}}}}%s}}`, ns, name, schedule, spec)
}

func run(t *testing.T, rs []kittest.Reconciled) {
	t.Helper()
	for _, r := range rs {
		if r.Code != kittest.OK {
			t.Fatal(r)
		}
	}
}

type status struct {
	Status struct {
		Active []struct {
			Name, Kind, UID string
		}
		LastScheduleTime string
	}
}

func statusOf(t *testing.T, l *kittest.Loop, name string) status {
	t.Helper()
	var s status
	if !l.Decode("cronjobs", ns, name, &s) {
		t.Fatalf("no CronJob %s", name)
	}
	return s
}

func active(t *testing.T, l *kittest.Loop, name string) string {
	var names []string
	for _, a := range statusOf(t, l, name).Status.Active {
		names = append(names, a.Name)
	}
	return strings.Join(names, " ")
}

// jobName is the Job of the run at minute m of hour h on the loop's day.
func jobName(cron string, h, m int) string {
	return fmt.Sprintf("%s-%d", cron, time.Date(2026, 1, 1, h, m, 0, 0, time.UTC).Unix())
}

func jobs(l *kittest.Loop) string { return strings.Join(l.Keys("jobs"), " ") }

// finish marks a Job finished ("Complete" or "Failed"), as the Job
// controller would, its start time at the clock's now.
func finish(t *testing.T, l *kittest.Loop, name, how string) {
	t.Helper()
	o, ok := l.Object("jobs", ns, name)
	if !ok {
		t.Fatalf("no Job %s", name)
	}
	o["status"] = map[string]any{"startTime": kit.Timestamp(l.Now()),
		"conditions": []any{map[string]any{"type": how, "status": "True"}}}
	l.Apply("jobs", o)
}

// The book's test: a new CronJob has no active Job; a Job it owns that
// runs appears in status.active.
func TestBookStatusActive(t *testing.T) {
	l := loop(t)
	l.Apply("cronjobs", cronJob("test-cronjob", "1 * * * *", ""))
	run(t, l.Run())
	if got := active(t, l, "test-cronjob"); got != "" || jobs(l) != "" {
		t.Fatalf("active %q, jobs %q", got, jobs(l))
	}
	cj, _ := l.Object("cronjobs", ns, "test-cronjob")
	uid := cj["metadata"].(map[string]any)["uid"]
	l.Apply("jobs", fmt.Sprintf(`{"apiVersion":"batch/v1","kind":"Job","metadata":{"namespace":%q,"name":"test-job",
	"ownerReferences":[{"apiVersion":"batch.tutorial.kubebuilder.io/v1","kind":"CronJob","name":"test-cronjob","uid":%q,"controller":true}]},
	"spec":{"template":{"spec":{"containers":[{"name":"test-container","image":"test-image"}],"restartPolicy":"OnFailure"}}},
	"status":{"active":2}}`, ns, uid))
	run(t, l.Run())
	if got := active(t, l, "test-cronjob"); got != "test-job" {
		t.Fatalf("active %q, want test-job", got)
	}
}

func TestRunsOnSchedule(t *testing.T) {
	l := loop(t)
	l.Apply("cronjobs", cronJob("nightly", "1 * * * *", ""))
	run(t, l.Run())
	start := l.Now()
	if at, ok := l.RequeueAt(ns, "nightly"); !ok || !at.Equal(start.Add(time.Minute)) {
		t.Fatalf("requeue at %v %t, want the next run", at, ok)
	}
	if rs := l.Advance(59 * time.Second); len(rs) != 0 {
		t.Fatalf("reconciled before the next run: %v", rs)
	}
	run(t, l.Advance(time.Second))
	want := jobName("nightly", 0, 1)
	if jobs(l) != ns+"/"+want {
		t.Fatalf("jobs %q, want %s", jobs(l), want)
	}
	var j Job
	l.Decode("jobs", ns, want, &j)
	if j.Metadata.Annotations[scheduledTimeAnnotation] != "2026-01-01T00:01:00Z" || !strings.Contains(string(j.Spec), "test-image") {
		t.Fatalf("job %+v %s", j.Metadata, j.Spec)
	}
	s := statusOf(t, l, "nightly")
	if s.Status.LastScheduleTime != "2026-01-01T00:01:00Z" || active(t, l, "nightly") != want {
		t.Fatalf("status %+v", s.Status)
	}
	if at, _ := l.RequeueAt(ns, "nightly"); !at.Equal(time.Date(2026, 1, 1, 1, 1, 0, 0, time.UTC)) {
		t.Fatalf("requeue at %v, want 01:01", at)
	}
	// The CronJob goes: its Jobs go with it.
	l.Delete("cronjobs", ns, "nightly")
	run(t, l.Run())
	if jobs(l) != "" {
		t.Fatalf("jobs left: %s", jobs(l))
	}
}

// Runs missed while the controller was away: only the latest is run.
func TestMissedRuns(t *testing.T) {
	l := loop(t)
	l.Apply("cronjobs", cronJob("hourly", "1 * * * *", ""))
	run(t, l.Run())
	run(t, l.Advance(3*time.Hour))
	if want := ns + "/" + jobName("hourly", 2, 1); jobs(l) != want {
		t.Fatalf("jobs %q, want %s", jobs(l), want)
	}
}

// More than a hundred missed runs and no deadline: nothing runs, and the
// controller does not come back until the CronJob changes.
func TestTooManyMissedRuns(t *testing.T) {
	l := loop(t)
	l.Apply("cronjobs", cronJob("often", "* * * * *", ""))
	run(t, l.Run())
	l.Restart()
	l.Advance(2 * time.Hour)
	if jobs(l) != "" {
		t.Fatalf("jobs %q", jobs(l))
	}
	if _, ok := l.RequeueAt(ns, "often"); ok {
		t.Fatal("requeued despite the schedule error")
	}
	// The fix: a deadline, so only the last minutes count.
	l.Apply("cronjobs", cronJob("often", "* * * * *", `"startingDeadlineSeconds":120`))
	run(t, l.Run())
	if want := ns + "/" + jobName("often", 2, 0); jobs(l) != want {
		t.Fatalf("jobs %q, want %s", jobs(l), want)
	}
}

func TestStartingDeadline(t *testing.T) {
	cases := []struct {
		deadline int
		want     string
	}{
		{deadline: 60, want: ""}, // the 00:01 run is two minutes late at 00:03: past its deadline
		{deadline: 300, want: ns + "/" + jobName("late", 0, 1)},
	}
	for _, c := range cases {
		t.Run(fmt.Sprint(c.deadline), func(t *testing.T) {
			l := loop(t)
			l.Apply("cronjobs", cronJob("late", "1 * * * *", fmt.Sprintf(`"startingDeadlineSeconds":%d`, c.deadline)))
			run(t, l.Run())
			// The controller was away at 00:01 and comes back at 00:03.
			l.Restart()
			run(t, l.Advance(3*time.Minute))
			if jobs(l) != c.want {
				t.Fatalf("jobs %q, want %q", jobs(l), c.want)
			}
			if at, _ := l.RequeueAt(ns, "late"); !at.Equal(time.Date(2026, 1, 1, 1, 1, 0, 0, time.UTC)) {
				t.Fatalf("requeue at %v, want the next run", at)
			}
		})
	}
}

func TestConcurrencyPolicy(t *testing.T) {
	first, second := ns+"/"+jobName("c", 0, 1), ns+"/"+jobName("c", 0, 2)
	cases := []struct{ policy, want string }{
		{"Allow", first + " " + second},
		{"Forbid", first},
		{"Replace", second},
	}
	for _, c := range cases {
		t.Run(c.policy, func(t *testing.T) {
			l := loop(t)
			l.Apply("cronjobs", cronJob("c", "* * * * *", fmt.Sprintf(`"concurrencyPolicy":%q`, c.policy)))
			run(t, l.Run())
			run(t, l.Advance(time.Minute))
			run(t, l.Advance(time.Minute)) // the first Job still running
			if jobs(l) != c.want {
				t.Fatalf("jobs %q, want %q", jobs(l), c.want)
			}
			// Once the first has finished, Forbid makes the run it held
			// back (late: there is no deadline), and holds back the next.
			if c.policy == "Forbid" {
				finish(t, l, jobName("c", 0, 1), "Complete")
				run(t, l.Run())
				if jobs(l) != first+" "+second {
					t.Fatalf("jobs %q, want %q", jobs(l), first+" "+second)
				}
				run(t, l.Advance(time.Minute))
				if jobs(l) != first+" "+second {
					t.Fatalf("jobs %q, want %q", jobs(l), first+" "+second)
				}
			}
		})
	}
}

func TestSuspend(t *testing.T) {
	l := loop(t)
	l.Apply("cronjobs", cronJob("s", "* * * * *", `"suspend":true`))
	run(t, l.Run())
	if _, ok := l.RequeueAt(ns, "s"); ok {
		t.Fatal("a suspended CronJob has a timer")
	}
	l.Apply("cronjobs", cronJob("s", "* * * * *", `"suspend":true,"startingDeadlineSeconds":60`))
	run(t, l.Advance(5*time.Minute))
	run(t, l.Run())
	if jobs(l) != "" {
		t.Fatalf("a suspended CronJob ran %s", jobs(l))
	}
	// Resumed, it runs the last run within its deadline.
	l.Apply("cronjobs", cronJob("s", "* * * * *", `"startingDeadlineSeconds":60`))
	run(t, l.Run())
	if want := ns + "/" + jobName("s", 0, 5); jobs(l) != want {
		t.Fatalf("jobs %q, want %s", jobs(l), want)
	}
}

func TestHistoryLimits(t *testing.T) {
	l := loop(t)
	l.Apply("cronjobs", cronJob("h", "* * * * *", `"successfulJobsHistoryLimit":1,"failedJobsHistoryLimit":1`))
	run(t, l.Run())
	outcome := []string{"Complete", "Failed", "Complete", "Failed"}
	for i, how := range outcome {
		run(t, l.Advance(time.Minute))
		finish(t, l, jobName("h", 0, i+1), how)
		run(t, l.Run())
	}
	// Of two successful and two failed Jobs, the newest of each stays.
	if want := ns + "/" + jobName("h", 0, 3) + " " + ns + "/" + jobName("h", 0, 4); jobs(l) != want {
		t.Fatalf("jobs %q, want %q", jobs(l), want)
	}
	if s := statusOf(t, l, "h"); s.Status.LastScheduleTime != "2026-01-01T00:04:00Z" || len(s.Status.Active) != 0 {
		t.Fatalf("status %+v", s.Status)
	}
}

// The book rebuilds lastScheduleTime from the Jobs alone: with a history
// limit of 0 the finished Job goes, and the same run would be made again.
// The port keeps the stored time as a floor.
func TestNoRerunAfterTheHistoryLimit(t *testing.T) {
	l := loop(t)
	l.Apply("cronjobs", cronJob("z", "1 * * * *", `"successfulJobsHistoryLimit":0`))
	run(t, l.Run())
	run(t, l.Advance(time.Minute))
	finish(t, l, jobName("z", 0, 1), "Complete")
	run(t, l.Run())
	run(t, l.Advance(time.Second))
	l.Restart()
	run(t, l.Run())
	if jobs(l) != "" {
		t.Fatalf("jobs %q: the run was made again", jobs(l))
	}
	if s := statusOf(t, l, "z"); s.Status.LastScheduleTime != "2026-01-01T00:01:00Z" {
		t.Fatalf("status %+v", s.Status)
	}
}

func TestUnparseableSchedule(t *testing.T) {
	l := loop(t)
	l.Apply("cronjobs", cronJob("bad", "every minute", ""))
	run(t, l.Run())
	if _, ok := l.RequeueAt(ns, "bad"); ok || jobs(l) != "" {
		t.Fatalf("jobs %q", jobs(l))
	}
}
