package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"os"
	"runtime/metrics"
	"sync"
	"time"

	"github.com/KimMachineGun/automemlimit/memlimit"
	"github.com/prometheus/procfs"
)

// defaultMemoryLimitRatio is the fraction of the container's limit the
// daemon plans to use at its peak; the rest is headroom for what moves
// between two readings of the memory outside the Go runtime.
const defaultMemoryLimitRatio = 0.9

// outsideRefresh is how often the soft limit is set again from the memory
// outside the Go runtime: plugins loaded, reloaded or removed change it.
const outsideRefresh = 5 * time.Second

// memoryLimit sets the runtime's soft memory limit (GOMEMLIMIT) from the
// container's memory limit, so that the collector runs before a relist or
// a reload's peak reaches the limit the kernel enforces rather than after.
// The cgroup is read by automemlimit, not by hand, which also refreshes
// the limit.
//
// The soft limit counts only the Go runtime's memory, and a good part of
// the daemon's lies outside it: the plugins' linear memories and compiled
// code (mapped by the engine) and the binary's mapped pages. A fixed
// fraction of the container's limit left the collector idle until the
// whole process was past it by that much (bench/NOTES.md, "Peak memory:
// the soft limit"), so the limit is ratio × the container's limit less
// what lies outside the runtime now, read again every outsideRefresh.
type memoryLimit struct {
	// ratio is the fraction of the container's limit the daemon's whole
	// resident memory may take; 0 leaves the runtime's limit alone.
	ratio float64
	// provider reports the container's limit; nil reads the cgroup.
	provider memlimit.Provider
	// source names where provider's limit comes from, for the log.
	source string
	// outside reports the resident memory the Go runtime does not
	// manage; nil reads this process's (outsideGoRuntime).
	outside func() (uint64, error)
	// refresh is how often the limit is set again; 0 is outsideRefresh.
	refresh time.Duration
}

// check refuses a ratio the runtime cannot use.
func (m memoryLimit) check() error {
	if math.IsNaN(m.ratio) || m.ratio < 0 || m.ratio > 1 {
		return fmt.Errorf("--memory-limit-ratio: %v is not between 0 (off) and 1", m.ratio)
	}
	return nil
}

// apply sets the limit, logs the limit chosen and where it came from, and
// keeps it current until ctx ends. A limit that cannot be read is logged,
// not fatal: the daemon runs as it would without the flag.
func (m memoryLimit) apply(ctx context.Context, log *slog.Logger) {
	if m.ratio == 0 {
		log.Info("memory limit: left to the runtime", "source", "--memory-limit-ratio=0")
		return
	}
	provider, source := m.provider, m.source
	if provider == nil {
		provider, source = memlimit.FromCgroup, cgroupVersion()
	}
	outside := m.outside
	if outside == nil {
		outside = outsideGoRuntime
	}
	refresh := m.refresh
	if refresh == 0 {
		refresh = outsideRefresh
	}
	// What the first call saw, for the log. The refresh goroutine calls
	// derived too, so the fields are written under mu.
	var seen struct {
		mu                  sync.Mutex
		asked               bool
		container, outsideN uint64
	}
	derived := func() (uint64, error) {
		n, err := provider()
		out := uint64(0)
		if err == nil {
			if out, err = outside(); err != nil {
				out, err = 0, nil // the fixed fraction, as before the derivation
			}
		}
		seen.mu.Lock()
		if !seen.asked {
			seen.asked, seen.container, seen.outsideN = true, n, out
		}
		seen.mu.Unlock()
		if err != nil {
			return 0, err
		}
		return derivedLimit(n, m.ratio, out), nil
	}
	// The ratio is in derived; automemlimit's own is 1 (an AUTOMEMLIMIT
	// in the environment still scales the result down).
	limit, err := memlimit.Set(memlimit.WithRatio(1), memlimit.WithProvider(derived),
		memlimit.WithRefreshInterval(ctx, refresh))
	seen.mu.Lock()
	asked, container, outsideNow := seen.asked, seen.container, seen.outsideN
	seen.mu.Unlock()
	switch {
	case !asked && os.Getenv("GOMEMLIMIT") != "":
		log.Info("memory limit: GOMEMLIMIT from the environment", "source", "env", "limit", limit)
	case !asked:
		// automemlimit's own switch: AUTOMEMLIMIT=off.
		log.Info("memory limit: left to the runtime", "source", "env AUTOMEMLIMIT=off")
	case errors.Is(err, memlimit.ErrNoCgroup), errors.Is(err, memlimit.ErrCgroupsNotSupported),
		err == nil && limit == math.MaxInt64:
		log.Info("memory limit: none", "source", "none", "looked_at", source)
	case err != nil:
		log.Warn("memory limit: the container's limit could not be read; none set", "source", source, "err", err)
	default:
		log.Info("memory limit: set from the container's limit, less the memory outside the Go runtime", "source", source,
			"container_limit", container, "ratio", m.ratio, "outside_go_runtime", outsideNow, "limit", limit,
			"refresh", refresh)
	}
}

// derivedLimit is the soft limit for a container limit, a ratio and the
// resident memory outside the Go runtime: ratio × container − outside,
// and never below a quarter of ratio × container, where a collector
// chasing a limit the live heap alone exceeds would spend the process's
// CPU and save nothing.
func derivedLimit(container uint64, ratio float64, outside uint64) uint64 {
	if container >= math.MaxInt64 {
		return container // no limit (automemlimit's ErrNoLimit path)
	}
	whole := uint64(float64(container) * ratio)
	floor := whole / 4
	if outside >= whole-floor {
		return floor
	}
	return whole - outside
}

// outsideGoRuntime is this process's resident memory that the Go runtime
// does not manage: its resident set (VmRSS) less what the runtime has
// mapped and not returned to the system. Guests' linear memories, compiled
// code and the binary's pages are in the first and not in the second. The
// runtime's mapped memory is at least its resident part, so this errs on
// the low side: the soft limit it gives is never tighter than it should be.
func outsideGoRuntime() (uint64, error) {
	rss, err := residentBytes()
	if err != nil {
		return 0, err
	}
	samples := []metrics.Sample{{Name: "/memory/classes/total:bytes"}, {Name: "/memory/classes/heap/released:bytes"}}
	metrics.Read(samples)
	if samples[0].Value.Kind() != metrics.KindUint64 || samples[1].Value.Kind() != metrics.KindUint64 {
		return 0, errors.New("the runtime does not report its memory classes")
	}
	goMapped := samples[0].Value.Uint64() - samples[1].Value.Uint64()
	if rss <= goMapped {
		return 0, nil
	}
	return rss - goMapped, nil
}

// residentBytes is this process's resident set, from /proc/self/stat by
// procfs (the same figure as VmRSS).
func residentBytes() (uint64, error) {
	self, err := procfs.Self()
	if err != nil {
		return 0, err
	}
	stat, err := self.Stat()
	return uint64(stat.ResidentMemory()), err
}

// cgroupVersion names the cgroup hierarchy automemlimit will read: the
// unified (v2) one has cgroup.controllers at its root.
func cgroupVersion() string {
	if _, err := os.Stat("/sys/fs/cgroup/cgroup.controllers"); err == nil {
		return "cgroup v2"
	}
	return "cgroup v1"
}
