package main

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// memSplit is a process's resident memory split by what its mappings
// hold, from /proc/PID/smaps, in bytes. It explains an RSS figure: which
// part grows with one more plugin, and which part moves between runs.
//
//   - Heap: the Go heap's arenas: anonymous mappings between 4 GiB and
//     the kernel's mmap area (0x7f...), where the runtime places its
//     arenas (at a random base in recent Go versions): the cache, the
//     views, the queues, wazero's module instances and every Go
//     allocation of the daemon.
//   - Guest: anonymous read-write mappings directly followed by a
//     PROT_NONE one, outside the heap's range: the accessible prefix of
//     a plugin's linear memory in its reservation (engine/linearmem.go).
//     The Go runtime's own sparse reservations (page summaries) look the
//     same but are small; the figure is an estimate, labelled so.
//   - Code: anonymous executable mappings: wazero's compiled code.
//   - File: file-backed mappings (the binary, shared libraries).
//   - Other: the rest (runtime metadata, stacks of threads).
//
// Pss is the proportional set size: pages shared with another process
// (the binary's text) count in part.
type memSplit struct {
	Rss, Pss                       int64
	Heap, Guest, Code, File, Other int64
}

func (m memSplit) String() string {
	mib := func(b int64) float64 { return float64(b) / (1 << 20) }
	return fmt.Sprintf("rss %.1f pss %.1f: heap %.1f guest~ %.1f code %.1f file %.1f other %.1f MiB",
		mib(m.Rss), mib(m.Pss), mib(m.Heap), mib(m.Guest), mib(m.Code), mib(m.File), mib(m.Other))
}

type mapping struct {
	start, end uint64
	perms      string
	path       string
	rss, pss   int64
}

func procSplit(pid int) (memSplit, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/smaps", pid))
	if err != nil {
		return memSplit{}, err
	}
	defer f.Close()
	var maps []mapping
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		fields := strings.Fields(line)
		if len(fields) == 0 {
			continue
		}
		if r, ok := strings.CutSuffix(fields[0], ":"); ok {
			if len(fields) < 2 || len(maps) == 0 {
				continue
			}
			kb, _ := strconv.ParseInt(fields[1], 10, 64)
			switch r {
			case "Rss":
				maps[len(maps)-1].rss = kb << 10
			case "Pss":
				maps[len(maps)-1].pss = kb << 10
			}
			continue
		}
		lo, hi, ok := strings.Cut(fields[0], "-")
		if !ok || len(fields) < 5 {
			continue
		}
		start, err1 := strconv.ParseUint(lo, 16, 64)
		end, err2 := strconv.ParseUint(hi, 16, 64)
		if err1 != nil || err2 != nil {
			continue
		}
		m := mapping{start: start, end: end, perms: fields[1]}
		if len(fields) > 5 {
			m.path = fields[5]
		}
		maps = append(maps, m)
	}
	if err := sc.Err(); err != nil {
		return memSplit{}, err
	}
	var s memSplit
	for i, m := range maps {
		s.Rss += m.rss
		s.Pss += m.pss
		anon := m.path == ""
		switch {
		case anon && m.start >= 1<<32 && m.end <= 0x700000000000:
			s.Heap += m.rss
		case anon && strings.Contains(m.perms, "x"):
			s.Code += m.rss
		case anon && strings.HasPrefix(m.perms, "rw") && i+1 < len(maps) &&
			maps[i+1].start == m.end && maps[i+1].path == "" && strings.HasPrefix(maps[i+1].perms, "---"):
			s.Guest += m.rss
		case !anon && !strings.HasPrefix(m.path, "["):
			s.File += m.rss
		default:
			s.Other += m.rss
		}
	}
	return s, nil
}

// goMemstats reads the daemon's go_memstats_* gauges from its /metrics,
// by name without the prefix.
func (d *daemon) goMemstats() (map[string]float64, error) {
	resp, err := httpClient.Get("http://" + d.addr + "/metrics")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	v := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		name, val, ok := strings.Cut(sc.Text(), " ")
		if !ok || !strings.HasPrefix(name, "go_memstats_") {
			continue
		}
		if f, err := strconv.ParseFloat(strings.TrimSpace(val), 64); err == nil {
			v[strings.TrimPrefix(name, "go_memstats_")] = f
		}
	}
	return v, sc.Err()
}

// lastGC is when the daemon's last collection ended.
func lastGC(v map[string]float64) time.Time {
	return time.Unix(0, int64(v["last_gc_time_seconds"]*1e9))
}

// waitCollected waits until the daemon has collected since t, at most
// limit. The daemon collects and returns its free memory to the OS once
// its plugins have synced a large initial list (host/memrelease.go), 1 s
// after the last of them; on a loaded machine that came up to 5 s after
// every plugin was synced, and a reading before it counted the initial
// list's garbage (bench/NOTES.md, case 5). It returns whether it saw one.
func (d *daemon) waitCollected(t time.Time, limit time.Duration) bool {
	deadline := time.Now().Add(limit)
	for {
		if v, err := d.goMemstats(); err == nil && lastGC(v).After(t) {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// logSplit logs where the daemon's resident memory is, next to an RSS
// reading: the case's log explains the figure (bench/NOTES.md, case 5).
func (d *daemon) logSplit(name string) {
	split, err := procSplit(d.cmd.Process.Pid)
	if err != nil {
		d.h.logf("%s: smaps: %v", name, err)
		return
	}
	stats := ""
	if v, err := d.goMemstats(); err != nil {
		stats = err.Error()
	} else {
		mib := func(k string) float64 { return v[k] / (1 << 20) }
		stats = fmt.Sprintf("go heap: inuse %.1f, idle unreleased %.1f, next GC %.1f, sys %.1f MiB, last GC %.1f s ago",
			mib("heap_inuse_bytes"), mib("heap_idle_bytes")-mib("heap_released_bytes"), mib("next_gc_bytes"), mib("sys_bytes"),
			time.Since(lastGC(v)).Seconds())
	}
	d.h.logf("%s: %v; %s", name, split, stats)
}

// settledMemory reads mem once the process's RSS has stopped moving: two
// readings a second apart within settleSlack of each other, at most
// settleTries times. A process still handling, collecting or giving its
// garbage back to the OS when the settle time ends read anywhere between
// its live set and its peak, and one more plugin's cost, a difference of
// two such readings, moved between runs by more than the plugin itself
// costs (bench/NOTES.md, case 5). It returns the last reading either way,
// with how many seconds it waited.
func settledMemory(mem func() (int64, int64, error)) (rss, peak int64, waited int, err error) {
	if rss, peak, err = mem(); err != nil {
		return 0, 0, 0, err
	}
	for waited < settleTries {
		time.Sleep(time.Second)
		waited++
		prev := rss
		if rss, peak, err = mem(); err != nil {
			return 0, 0, waited, err
		}
		if d := rss - prev; d < settleSlack && d > -settleSlack {
			break
		}
	}
	return rss, peak, waited, nil
}

const (
	settleSlack = 1 << 20 // bytes
	settleTries = 30
)

// peakSplit samples a process's smaps every interval until its stop is
// called, and keeps the split with the largest RSS: where the memory was
// at the peak a VmHWM reports, which a reading once settled cannot say
// (case 5's peak is the initial list, long gone by then). At is how long
// after start the peak was sampled, to find it in the collector's trace
// (gctrace's @ is seconds since the process started).
type peakSplit struct {
	Split memSplit
	At    time.Duration
}

func samplePeak(pid int, start time.Time, every time.Duration) (stop func() peakSplit) {
	done := make(chan struct{})
	out := make(chan peakSplit, 1)
	go func() {
		var best peakSplit
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			if s, err := procSplit(pid); err == nil && s.Rss > best.Split.Rss {
				best = peakSplit{Split: s, At: time.Since(start)}
			}
			select {
			case <-done:
				out <- best
				return
			case <-t.C:
			}
		}
	}()
	return func() peakSplit { close(done); return <-out }
}
