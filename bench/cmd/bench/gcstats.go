package main

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"runtime"
	"strconv"
	"strings"
)

// gcStats is what a side's Go runtime says about its garbage collector so
// far: the structural evidence for CPU per event and p99 that a loaded
// machine does not blur (a wall-clock figure moves with the load; the
// count of collections and the bytes allocated per event do not).
type gcStats struct {
	Cycles  float64 // completed GC cycles
	PauseNs float64 // stop-the-world pause time, total
	Alloc   float64 // bytes allocated on the heap, total
	Mallocs float64 // heap objects allocated, total
}

func (a gcStats) sub(b gcStats) gcStats {
	return gcStats{a.Cycles - b.Cycles, a.PauseNs - b.PauseNs, a.Alloc - b.Alloc, a.Mallocs - b.Mallocs}
}

// ownGCStats reads this process's (the native child's).
func ownGCStats() gcStats {
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return gcStats{float64(m.NumGC), float64(m.PauseTotalNs), float64(m.TotalAlloc), float64(m.Mallocs)}
}

func (s gcStats) line() string {
	return fmt.Sprintf("gc %.0f %.0f %.0f %.0f", s.Cycles, s.PauseNs, s.Alloc, s.Mallocs)
}

func parseGCLine(line string) (gcStats, error) {
	var s gcStats
	if _, err := fmt.Sscanf(line, "gc %g %g %g %g", &s.Cycles, &s.PauseNs, &s.Alloc, &s.Mallocs); err != nil {
		return s, fmt.Errorf("native child: gc stats %q: %w", line, err)
	}
	return s, nil
}

// metricsGCStats reads the same from a Prometheus text exposition of the
// client_golang Go collector (the daemon's /metrics).
func metricsGCStats(r io.Reader) (gcStats, error) {
	var s gcStats
	seen := 0
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		name, v, ok := strings.Cut(sc.Text(), " ")
		if !ok {
			continue
		}
		var dst *float64
		scale := 1.0
		switch name {
		case "go_gc_duration_seconds_count":
			dst = &s.Cycles
		case "go_gc_duration_seconds_sum":
			dst, scale = &s.PauseNs, 1e9
		case "go_memstats_alloc_bytes_total":
			dst = &s.Alloc
		case "go_memstats_mallocs_total":
			dst = &s.Mallocs
		default:
			continue
		}
		f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
		if err != nil {
			return s, fmt.Errorf("daemon /metrics: %s: %w", name, err)
		}
		*dst = f * scale
		seen++
	}
	if err := sc.Err(); err != nil {
		return s, err
	}
	if seen != 4 {
		return s, fmt.Errorf("daemon /metrics: %d of the 4 Go GC series", seen)
	}
	return s, nil
}

func (d *daemon) gcStats() (gcStats, error) {
	resp, err := httpClient.Get("http://" + d.addr + "/metrics")
	if err != nil {
		return gcStats{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return gcStats{}, err
	}
	return metricsGCStats(bytes.NewReader(b))
}

func (n *native) gcStats() (gcStats, error) {
	if _, err := fmt.Fprintln(n.in, "gc"); err != nil {
		return gcStats{}, err
	}
	line, err := n.read()
	if err != nil {
		return gcStats{}, err
	}
	return parseGCLine(line)
}
