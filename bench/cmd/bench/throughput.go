package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Case 3: create, update and delete N ConfigMaps (1 KiB of data each, 8
// client goroutines) against the real apiserver, with either the daemon
// (10 Go plugins reading two fields of every event) or the native
// baseline (a dynamic informer with one handler doing the same) watching
// the namespace. One side at a time, in alternating order, several times.
//
// Measured per run:
//   - events/s per phase: N / (last handler entry of the phase - first
//     write of the phase sent); the next phase starts once every handler
//     has seen the whole phase;
//   - delivery latency: handler entered (the guest's clock, time.Now in
//     the plugin; the same wall clock as the harness) minus the time the
//     harness sent the write, over every event and, for the daemon, every
//     plugin;
//   - CPU per event: the child's utime + stime (/proc/PID/stat) from
//     ready to the last event handled, divided by the 3N events.

type throughputRun struct {
	Side     string             `json:"side"`
	Rate     map[string]float64 `json:"rate"` // events/s by phase
	P50      float64            `json:"p50Ms"`
	P99      float64            `json:"p99Ms"`
	P99Phase map[string]float64 `json:"p99ByPhaseMs"`
	CPU      float64            `json:"cpuMsPerEvent"`
	Missing  int                `json:"missingRecords"`
	// The peers' cases (peers.go) also read these; case 3 records them too.
	RSS      float64 `json:"rssMiB,omitempty"`             // peak resident set of the side's processes during the workload (sampled)
	CPUChild float64 `json:"cpuChildMsPerEvent,omitempty"` // of CPU, the part of the side's child processes (hooks)
	Watches  int     `json:"watches,omitempty"`            // ConfigMap watches the side holds open on the apiserver
	// The side's Go garbage collector over the workload, per 1000 events
	// (cycles, stop-the-world pause) and per event (heap bytes and
	// objects allocated): why CPU per event and p99 move between runs,
	// in figures the machine's load does not change. Zero for the peers.
	GCCycles   float64 `json:"gcCyclesPer1kEvents,omitempty"`
	GCPauseMs  float64 `json:"gcPauseMsPer1kEvents,omitempty"`
	AllocBytes float64 `json:"allocBytesPerEvent,omitempty"`
	AllocObjs  float64 `json:"allocObjectsPerEvent,omitempty"`
}

var phases = []string{"create", "update", "delete"}

func (h *e2e) throughput(n, runs, plugins int) ([]throughputRun, error) {
	var out []throughputRun
	for r := 0; r < runs; r++ {
		// The native baseline, the daemon, and (to tell the host's own cost
		// from client-go's per-listener cost) the native baseline with as
		// many handlers as the daemon has plugins.
		sides := []string{"native", "host", "native-n"}
		if r%2 == 1 {
			sides = []string{"native-n", "host", "native"}
		}
		for _, side := range sides {
			h.logf("case 3: run %d/%d, %s, %d ConfigMaps", r+1, runs, side, n)
			res, err := h.throughputRun(side, n, plugins, r)
			if err != nil {
				return out, fmt.Errorf("%s run %d: %w", side, r+1, err)
			}
			h.logf("case 3: %s: %.0f/%.0f/%.0f events/s, p50 %.1f ms, p99 %.1f ms (%.1f/%.1f/%.1f by phase), %.3f ms CPU/event",
				side, res.Rate["create"], res.Rate["update"], res.Rate["delete"], res.P50, res.P99,
				res.P99Phase["create"], res.P99Phase["update"], res.P99Phase["delete"], res.CPU)
			h.logf("case 3: %s: per 1000 events %.2f GC cycles, %.2f ms GC pause; per event %.0f B, %.1f objects allocated",
				side, res.GCCycles, res.GCPauseMs, res.AllocBytes, res.AllocObjs)
			out = append(out, res)
		}
	}
	return out, nil
}

// sideUnderTest is the daemon or the native child, as the workload sees
// it.
type sideUnderTest struct {
	pid      int
	handlers int                           // records per event
	wait     func(perHandler uint64) error // every handler has seen so many events
	records  func() ([]record, error)
	stop     func()
	// usage is the CPU the side has used, its children's included (and
	// that part apart), and its resident set now; nil: pid's own.
	usage func() (cpu, children time.Duration, rss int64, err error)
	// gc reads the side's GC statistics (gcStats); nil for the peers.
	gc func() (gcStats, error)
}

func (h *e2e) throughputRun(side string, n, plugins, run int) (throughputRun, error) {
	ns, err := h.namespace("tput")
	if err != nil {
		return throughputRun{Side: side}, err
	}
	watches0, _ := h.watches()
	// One recorder on each side, as native's first handler: the other
	// plugins read the same two fields and record nothing.
	s, err := h.throughputSide(side, ns, plugins, 1, run)
	if err != nil {
		return throughputRun{Side: side}, err
	}
	defer s.stop()
	return h.drive(side, ns, n, s, watches0)
}

// throughputSide starts the side that watches ns and waits until it is
// ready. On the daemon, the first recorders plugins record each event's
// latency (a clock read and a record per event); the others only read
// the two fields, as native's extra handlers do.
func (h *e2e) throughputSide(side, ns string, plugins, recorders, run int) (sideUnderTest, error) {
	var s sideUnderTest
	switch side {
	case "host":
		dir := filepath.Join(h.work, fmt.Sprintf("tput-plugins-%d", run))
		names, modules, err := twofieldsDir(dir, plugins, func(i int) string {
			return fmt.Sprintf("{fields: [metadata.labels.app, data.seq], record: %t}", i < recorders)
		})
		if err != nil {
			return s, err
		}
		d, err := h.startDaemon(fmt.Sprintf("tput-%s-%d", side, run), dir, func(dir, addr string) string {
			return h.daemonConfig(ns, dir, addr, "", modules)
		})
		if err != nil {
			return s, err
		}
		if _, err := d.waitReady(plugins, 5*time.Minute); err != nil {
			_ = d.stop()
			return s, err
		}
		s = sideUnderTest{pid: d.cmd.Process.Pid, handlers: min(recorders, plugins), gc: d.gcStats,
			wait: func(k uint64) error { return d.waitDelivered(names, k, 10*time.Minute) },
			records: func() ([]record, error) {
				if err := d.stop(); err != nil {
					return nil, err
				}
				prs, err := d.records()
				var out []record
				for _, r := range prs {
					out = append(out, r.record)
				}
				return out, err
			},
			stop: func() {
				select {
				case <-d.exited:
				default:
					_ = d.stop()
				}
			}}
	case "native", "native-n":
		handlers := 1
		if side == "native-n" {
			handlers = plugins
		}
		var flags []string
		if h.profileDir != "" {
			flags = append(flags, "-cpuprofile", filepath.Join(h.profileDir, fmt.Sprintf("tput-%s-%d.pprof", side, run)))
		}
		c, err := h.startNative(ns, "record", handlers, flags...)
		if err != nil {
			return s, err
		}
		s = sideUnderTest{pid: c.cmd.Process.Pid, handlers: 1, gc: c.gcStats,
			wait: func(k uint64) error { return c.waitCount(k, 10*time.Minute) },
			records: func() ([]record, error) {
				return c.records(filepath.Join(h.work, fmt.Sprintf("native-records-%d.txt", run)))
			},
			stop: c.stop}
	default:
		return h.peerSide(side, ns, plugins, run)
	}
	return s, nil
}

// drive runs the workload against the side, which holds watches (less
// watches0, from before it started) on the apiserver, and measures it.
func (h *e2e) drive(side, ns string, n int, s sideUnderTest, watches0 int) (throughputRun, error) {
	res := throughputRun{Side: side, Rate: map[string]float64{}, P99Phase: map[string]float64{}}
	plugins := s.handlers
	if s.usage == nil {
		s.usage = func() (time.Duration, time.Duration, int64, error) {
			cpu, err := procCPU(s.pid)
			rss, _, err2 := procMemory(s.pid)
			return cpu, 0, rss, errors.Join(err, err2)
		}
	}
	cpu0, child0, _, err := s.usage()
	if err != nil {
		return res, err
	}
	var gc0 gcStats
	if s.gc != nil {
		if gc0, err = s.gc(); err != nil {
			return res, err
		}
	}
	peak := sampleRSS(s.usage)
	var sent sentTimes
	ctx := context.Background()
	cms := h.client.CoreV1().ConfigMaps(ns)
	objs := make([]*corev1.ConfigMap, n)
	for k, phase := range phases {
		err := parallel(n, 8, func(i int) error {
			name := fmt.Sprintf("cm-%05d", i)
			switch phase {
			case "create":
				sent.note("a:"+name+":c", time.Now())
				o, err := cms.Create(ctx, configMap(ns, name, "c", i), metav1.CreateOptions{})
				objs[i] = o
				return err
			case "update":
				o := objs[i].DeepCopy()
				o.Data["seq"] = "u"
				sent.note("u:"+name+":u", time.Now())
				_, err := cms.Update(ctx, o, metav1.UpdateOptions{})
				return err
			default:
				sent.note("d:"+name+":u", time.Now())
				return cms.Delete(ctx, name, metav1.DeleteOptions{})
			}
		})
		if err != nil {
			return res, fmt.Errorf("%s: %w", phase, err)
		}
		if err := s.wait(uint64((k + 1) * n)); err != nil {
			return res, fmt.Errorf("%s: %w", phase, err)
		}
	}
	if s.gc != nil {
		gc1, err := s.gc()
		if err != nil {
			return res, err
		}
		d, events := gc1.sub(gc0), float64(3*n)
		res.GCCycles, res.GCPauseMs = d.Cycles/events*1000, d.PauseNs/1e6/events*1000
		res.AllocBytes, res.AllocObjs = d.Alloc/events, d.Mallocs/events
	}
	cpu1, child1, _, err := s.usage()
	res.RSS = float64(peak()) / (1 << 20)
	// Counted while the side still runs: its watches are open.
	if w, werr := h.watches(); werr == nil {
		res.Watches = w - watches0
	}
	if err != nil {
		return res, err
	}
	res.CPU = float64((cpu1 - cpu0).Microseconds()) / 1000 / float64(3*n)
	res.CPUChild = float64((child1 - child0).Microseconds()) / 1000 / float64(3*n)

	recs, err := s.records()
	if err != nil {
		return res, err
	}
	firstSent := map[byte]int64{}
	lastEntered := map[byte]int64{}
	var lat []float64
	byPhase := map[byte][]float64{}
	// The samples, for a closer look: type key sent entered.
	samples, _ := os.Create(filepath.Join(h.work, fmt.Sprintf("%s-%s.latency", ns, side)))
	for _, r := range recs {
		t0, ok := sent.m[r.key()]
		if !ok {
			continue
		}
		lat = append(lat, float64(r.entered-t0)/1e6)
		byPhase[r.typ] = append(byPhase[r.typ], float64(r.entered-t0)/1e6)
		if samples != nil {
			fmt.Fprintf(samples, "%s %d %d\n", r.key(), t0, r.entered)
		}
		if r.entered > lastEntered[r.typ] {
			lastEntered[r.typ] = r.entered
		}
	}
	for key, t := range sent.m {
		if f, ok := firstSent[key[0]]; !ok || t < f {
			firstSent[key[0]] = t
		}
	}
	res.Missing = 3*n*plugins - len(lat)
	for i, phase := range phases {
		c := "aud"[i]
		if d := lastEntered[c] - firstSent[c]; d > 0 {
			res.Rate[phase] = float64(n) / (float64(d) / 1e9)
		}
	}
	if samples != nil {
		samples.Close()
	}
	for i, phase := range phases {
		res.P99Phase[phase] = percentile(byPhase["aud"[i]], 99)
	}
	res.P50, res.P99 = percentile(lat, 50), percentile(lat, 99)
	return res, nil
}
