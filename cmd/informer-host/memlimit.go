package main

import (
	"errors"
	"fmt"
	"log/slog"
	"math"
	"os"

	"github.com/KimMachineGun/automemlimit/memlimit"
)

// defaultMemoryLimitRatio leaves a tenth of the container's limit for what
// the Go runtime does not count against GOMEMLIMIT: guest linear memories
// and compiled plugin code are mapped outside the Go heap, and the soft
// limit only makes the collector work harder as the heap nears it.
const defaultMemoryLimitRatio = 0.9

// memoryLimit sets the runtime's soft memory limit (GOMEMLIMIT) from the
// container's memory limit when `run` starts, so that the collector runs
// before a relist or a reload's peak reaches the limit the kernel enforces
// rather than after. The cgroup is read by automemlimit, not by hand.
type memoryLimit struct {
	// ratio is the fraction of the container's limit given to the
	// runtime; 0 leaves the runtime's limit alone.
	ratio float64
	// provider reports the container's limit; nil reads the cgroup.
	provider memlimit.Provider
	// source names where provider's limit comes from, for the log.
	source string
}

// check refuses a ratio the runtime cannot use.
func (m memoryLimit) check() error {
	if math.IsNaN(m.ratio) || m.ratio < 0 || m.ratio > 1 {
		return fmt.Errorf("--memory-limit-ratio: %v is not between 0 (off) and 1", m.ratio)
	}
	return nil
}

// apply sets the limit and logs the limit chosen and where it came from.
// A limit that cannot be read is logged, not fatal: the daemon runs as it
// would without the flag.
func (m memoryLimit) apply(log *slog.Logger) {
	if m.ratio == 0 {
		log.Info("memory limit: left to the runtime", "source", "--memory-limit-ratio=0")
		return
	}
	provider, source := m.provider, m.source
	if provider == nil {
		provider, source = memlimit.FromCgroup, cgroupVersion()
	}
	var container uint64
	asked := false
	recording := func() (uint64, error) {
		asked = true
		n, err := provider()
		container = n
		return n, err
	}
	limit, err := memlimit.Set(memlimit.WithRatio(m.ratio), memlimit.WithProvider(recording))
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
		log.Info("memory limit: set from the container's limit", "source", source,
			"container_limit", container, "ratio", m.ratio, "limit", limit)
	}
}

// cgroupVersion names the cgroup hierarchy automemlimit will read: the
// unified (v2) one has cgroup.controllers at its root.
func cgroupVersion() string {
	if _, err := os.Stat("/sys/fs/cgroup/cgroup.controllers"); err == nil {
		return "cgroup v2"
	}
	return "cgroup v1"
}
