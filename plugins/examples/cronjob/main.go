// Command cronjob is the kubebuilder book's CronJob tutorial controller
// (book.kubebuilder.io, "Tutorial: Building CronJob") ported to a plugin
// in controller mode (ABI.md §18): a CronJob of
// batch.tutorial.kubebuilder.io/v1 (crd.yaml) runs its jobTemplate as a
// Job at each time of its cron schedule, with the book's
// concurrencyPolicy (Allow, Forbid, Replace), startingDeadlineSeconds,
// suspend, successful and failed history limits, status.active and
// status.lastScheduleTime, and a reconcile requeued for the next time in
// the schedule. README.md maps each step of the book's Reconcile to what
// it is here.
//
// The Jobs are the CronJob's children: each reconcile returns the Jobs
// it keeps (the active ones and the finished ones within the history
// limits) plus the new one when a run is due; the host applies them with
// a controller ownerReference and deletes the ones left out, where the
// book deletes old and replaced Jobs one by one.
//
// Build: make plugins, or
//
//	GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o build/plugins/cronjob.wasm ./plugins/examples/cronjob
//
// and configure it with config.yaml in this directory (the CRD:
// kubectl apply -f crd.yaml).
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"time"

	"github.com/robfig/cron/v3"

	"github.com/informer-host/informer-host/abi/kit"
)

// scheduledTimeAnnotation records on each Job the schedule time it runs
// for: status.lastScheduleTime is rebuilt from it.
const scheduledTimeAnnotation = "batch.tutorial.kubebuilder.io/scheduled-at"

// cfg.Jobs is the configured resource of the Jobs, read from the cache
// by owner.
var cfg = struct {
	Jobs string `json:"jobs"`
}{Jobs: "jobs"}

func init() {
	kit.OnInit(func([]byte) error { return kit.DecodeConfig(&cfg) })
	kit.HandleReconcile(kit.ReconcileFunc(reconcile))
}

// CronJob is the part of the CRD the controller reads.
type CronJob struct {
	Metadata struct {
		Name              string    `json:"name"`
		Namespace         string    `json:"namespace"`
		UID               string    `json:"uid"`
		CreationTimestamp time.Time `json:"creationTimestamp"`
	} `json:"metadata"`
	Spec struct {
		Schedule                   string `json:"schedule"`
		StartingDeadlineSeconds    *int64 `json:"startingDeadlineSeconds"`
		ConcurrencyPolicy          string `json:"concurrencyPolicy"` // Allow (default), Forbid, Replace
		Suspend                    bool   `json:"suspend"`
		SuccessfulJobsHistoryLimit *int   `json:"successfulJobsHistoryLimit"`
		FailedJobsHistoryLimit     *int   `json:"failedJobsHistoryLimit"`
		JobTemplate                struct {
			Metadata struct {
				Labels      map[string]string `json:"labels"`
				Annotations map[string]string `json:"annotations"`
			} `json:"metadata"`
			Spec json.RawMessage `json:"spec"`
		} `json:"jobTemplate"`
	} `json:"spec"`
	Status struct {
		LastScheduleTime *time.Time `json:"lastScheduleTime"`
	} `json:"status"`
}

// Job is a Job as the controller reads it from the cache and declares
// it as a child.
type Job struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		Name            string            `json:"name"`
		Namespace       string            `json:"namespace,omitempty"`
		UID             string            `json:"uid,omitempty"`
		ResourceVersion string            `json:"resourceVersion,omitempty"`
		Labels          map[string]string `json:"labels,omitempty"`
		Annotations     map[string]string `json:"annotations,omitempty"`
	} `json:"metadata"`
	// Spec is kept as the Job has it: a Job's template cannot change, so
	// a Job kept in the set is declared with its own spec, not the
	// CronJob's current template.
	Spec   json.RawMessage `json:"spec"`
	Status *struct {
		StartTime  *time.Time `json:"startTime,omitempty"`
		Conditions []struct {
			Type   string `json:"type"`
			Status string `json:"status"`
		} `json:"conditions,omitempty"`
	} `json:"status,omitempty"`
}

// finished reports whether the Job has ended, and how: "Complete",
// "Failed" or "" (running).
func (j *Job) finished() string {
	if j.Status == nil {
		return ""
	}
	for _, c := range j.Status.Conditions {
		if (c.Type == "Complete" || c.Type == "Failed") && c.Status == "True" {
			return c.Type
		}
	}
	return ""
}

func (j *Job) scheduledTime() (time.Time, bool) {
	raw := j.Metadata.Annotations[scheduledTimeAnnotation]
	if raw == "" {
		return time.Time{}, false
	}
	t, err := time.Parse(time.RFC3339, raw)
	return t, err == nil
}

// child is the Job as a member of the desired set: identity, labels,
// annotations and spec, without the cache's status and server fields.
func (j *Job) child() Job {
	c := Job{APIVersion: "batch/v1", Kind: "Job", Spec: j.Spec}
	c.Metadata.Name, c.Metadata.Namespace = j.Metadata.Name, j.Metadata.Namespace
	c.Metadata.Labels, c.Metadata.Annotations = j.Metadata.Labels, j.Metadata.Annotations
	return c
}

func reconcile(_ context.Context, req kit.Request) (kit.Result, error) {
	// 1: load the CronJob; gone, its Jobs go with it (the garbage
	// collector, through their ownerReferences).
	var cj CronJob
	if err := req.Decode(&cj); err != nil {
		if req.Object == nil {
			return kit.Result{}, nil
		}
		return kit.Result{}, err
	}
	now := kit.Now()

	// 2: list its Jobs (the cache's owner index) and rebuild the status
	// from them.
	jobs, err := ownedJobs(cj.Metadata.UID)
	if err != nil {
		return kit.Result{}, err
	}
	var active, successful, failed []*Job
	var mostRecent time.Time
	for _, j := range jobs {
		switch j.finished() {
		case "":
			active = append(active, j)
		case "Complete":
			successful = append(successful, j)
		case "Failed":
			failed = append(failed, j)
		}
		if t, ok := j.scheduledTime(); ok && t.After(mostRecent) {
			mostRecent = t
		}
	}
	// The book rebuilds lastScheduleTime from the Jobs alone, and so runs
	// again a time whose Job the history limit deleted; the stored value
	// is kept as a floor (as Kubernetes' own CronJob controller keeps it).
	if cj.Status.LastScheduleTime != nil && cj.Status.LastScheduleTime.After(mostRecent) {
		mostRecent = *cj.Status.LastScheduleTime
	}
	status := &kit.Status{}
	if !mostRecent.IsZero() {
		status.Set("lastScheduleTime", mostRecent)
		cj.Status.LastScheduleTime = &mostRecent
	}
	if len(active) > 0 {
		refs := make([]map[string]string, 0, len(active))
		for _, j := range active {
			refs = append(refs, map[string]string{"apiVersion": "batch/v1", "kind": "Job", "namespace": j.Metadata.Namespace,
				"name": j.Metadata.Name, "uid": j.Metadata.UID, "resourceVersion": j.Metadata.ResourceVersion})
		}
		status.Set("active", refs)
	}
	kit.Log.Debug("job count", "cronjob", req.Key(), "active", len(active), "successful", len(successful), "failed", len(failed))

	// 3: the history limits: the oldest finished Jobs beyond them are
	// left out of the set, and the host deletes them.
	keep := append([]*Job(nil), active...)
	keep = append(keep, newest(successful, cj.Spec.SuccessfulJobsHistoryLimit)...)
	keep = append(keep, newest(failed, cj.Spec.FailedJobsHistoryLimit)...)
	result := func(extra *Job, requeue time.Duration, replace bool) (kit.Result, error) {
		children := &kit.Children{}
		for _, j := range keep {
			if replace && j.finished() == "" {
				continue // Replace: the running ones go
			}
			if err := children.Add(j.child()); err != nil {
				return kit.Result{}, err
			}
		}
		if extra != nil {
			if err := children.Add(extra); err != nil {
				return kit.Result{}, err
			}
		}
		return kit.Result{Children: children, Status: status, RequeueAfter: requeue}, nil
	}

	// 4: suspended: nothing runs, and nothing to come back for.
	if cj.Spec.Suspend {
		return result(nil, 0, false)
	}

	// 5: the next run, and the latest one missed.
	missed, next, err := nextSchedule(&cj, now)
	if err != nil {
		// Only a change of the CronJob can fix it: no requeue.
		kit.Log.Error("unable to figure out the CronJob's schedule", "cronjob", req.Key(), "err", err)
		return result(nil, 0, false)
	}
	requeue := next.Sub(now)

	// 6: run a Job if one is due, not past its deadline and not blocked
	// by the concurrency policy.
	if missed.IsZero() {
		return result(nil, requeue, false)
	}
	if d := cj.Spec.StartingDeadlineSeconds; d != nil && missed.Add(time.Duration(*d)*time.Second).Before(now) {
		kit.Log.Debug("missed the starting deadline of the last run, sleeping till the next", "cronjob", req.Key(), "run", missed)
		return result(nil, requeue, false)
	}
	if cj.Spec.ConcurrencyPolicy == "Forbid" && len(active) > 0 {
		kit.Log.Debug("the concurrency policy forbids concurrent runs", "cronjob", req.Key(), "active", len(active))
		return result(nil, requeue, false)
	}
	job := newJob(&cj, missed)
	kit.Log.Debug("created a Job for the CronJob's run", "cronjob", req.Key(), "job", job.Metadata.Name)

	// 7: come back at the next time in the schedule (sooner if a Job or
	// the CronJob changes).
	return result(job, requeue, cj.Spec.ConcurrencyPolicy == "Replace")
}

// ownedJobs are the Jobs in the cache whose ownerReferences name uid.
func ownedJobs(uid string) ([]*Job, error) {
	keys, err := kit.Cache().Owned(cfg.Jobs, uid)
	if err != nil {
		return nil, fmt.Errorf("listing the CronJob's Jobs: %w", err)
	}
	jobs := make([]*Job, 0, len(keys))
	for _, k := range keys {
		ns, name := kit.SplitKey(k)
		o, err := kit.Cache().Get(cfg.Jobs, ns, name)
		if err != nil {
			continue // gone since the index was read
		}
		j := &Job{}
		if err := o.Decode(j); err != nil {
			return nil, fmt.Errorf("job %s: %w", k, err)
		}
		jobs = append(jobs, j)
	}
	return jobs, nil
}

// newest returns the limit Jobs that started last (all of them without a
// limit), oldest first.
func newest(jobs []*Job, limit *int) []*Job {
	if limit == nil || len(jobs) <= *limit {
		return jobs
	}
	sort.SliceStable(jobs, func(a, b int) bool {
		ta, tb := startTime(jobs[a]), startTime(jobs[b])
		return ta.Before(tb)
	})
	return jobs[len(jobs)-max(*limit, 0):]
}

func startTime(j *Job) time.Time {
	if j.Status == nil || j.Status.StartTime == nil {
		return time.Time{}
	}
	return *j.Status.StartTime
}

// maxMissed bounds the missed runs counted: a clock years off would
// otherwise have the controller count them all.
const maxMissed = 100

// nextSchedule returns the latest run time missed (zero: none) and the
// next one, counting from the last run, or the CronJob's creation, but
// not from before the starting deadline.
func nextSchedule(cj *CronJob, now time.Time) (missed, next time.Time, err error) {
	sched, err := cron.ParseStandard(cj.Spec.Schedule)
	if err != nil {
		return time.Time{}, time.Time{}, fmt.Errorf("unparseable schedule %q: %w", cj.Spec.Schedule, err)
	}
	earliest := cj.Metadata.CreationTimestamp
	if cj.Status.LastScheduleTime != nil {
		earliest = *cj.Status.LastScheduleTime
	}
	if d := cj.Spec.StartingDeadlineSeconds; d != nil {
		if deadline := now.Add(-time.Duration(*d) * time.Second); deadline.After(earliest) {
			earliest = deadline
		}
	}
	if earliest.After(now) {
		return time.Time{}, sched.Next(now), nil
	}
	starts := 0
	for t := sched.Next(earliest); !t.After(now); t = sched.Next(t) {
		missed = t
		if starts++; starts > maxMissed {
			return time.Time{}, time.Time{}, fmt.Errorf("more than %d missed start times: set or decrease spec.startingDeadlineSeconds, or check clock skew", maxMissed)
		}
	}
	return missed, sched.Next(now), nil
}

// newJob is the Job of the run at t: a name unique to the time, so a run
// is never made twice, the template's labels, annotations and spec.
func newJob(cj *CronJob, t time.Time) *Job {
	j := &Job{APIVersion: "batch/v1", Kind: "Job", Spec: cj.Spec.JobTemplate.Spec}
	j.Metadata.Name = fmt.Sprintf("%s-%d", cj.Metadata.Name, t.Unix())
	j.Metadata.Namespace = cj.Metadata.Namespace
	j.Metadata.Labels = map[string]string{}
	for k, v := range cj.Spec.JobTemplate.Metadata.Labels {
		j.Metadata.Labels[k] = v
	}
	j.Metadata.Annotations = map[string]string{scheduledTimeAnnotation: kit.Timestamp(t)}
	for k, v := range cj.Spec.JobTemplate.Metadata.Annotations {
		j.Metadata.Annotations[k] = v
	}
	return j
}

func main() {}
