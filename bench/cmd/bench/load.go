package main

import (
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// loadSample is the machine's 1-minute load average at one moment of the
// run, and the part of the run (a -skip name: go, 3, 8, ...) it fell in.
type loadSample struct {
	At    time.Time `json:"at"`
	Load1 float64   `json:"load1"`
	Case  string    `json:"case"`
}

// loadSampler reads /proc/loadavg every interval until stopped: the
// figures of a shared machine mean something only next to its load.
type loadSampler struct {
	mu      sync.Mutex
	cur     string
	samples []loadSample
	stopc   chan struct{}
	done    chan struct{}
}

func startLoadSampler(every time.Duration) *loadSampler {
	s := &loadSampler{stopc: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(s.done)
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-s.stopc:
				return
			case <-t.C:
				s.sample()
			}
		}
	}()
	return s
}

// phase names the part of the run that begins now, and samples at once,
// so that a part shorter than the interval has a sample too.
func (s *loadSampler) phase(name string) {
	s.mu.Lock()
	s.cur = name
	s.mu.Unlock()
	s.sample()
}

func (s *loadSampler) sample() {
	l, err := readLoad1()
	if err != nil {
		return // no /proc: the header says there were no samples
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.samples = append(s.samples, loadSample{At: time.Now(), Load1: l, Case: s.cur})
}

// stop ends the sampling, takes a last sample and returns them all.
func (s *loadSampler) stop() []loadSample {
	close(s.stopc)
	<-s.done
	s.sample()
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.samples
}

func readLoad1() (float64, error) {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 0, fmt.Errorf("machine load: %w", err)
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 0, fmt.Errorf("machine load: /proc/loadavg is empty")
	}
	return strconv.ParseFloat(f[0], 64)
}

// loadSummary is the report header's line on the load: min / median /
// max over the run, then the median (min–max) of each part of it, in the
// order the parts ran.
func loadSummary(samples []loadSample) string {
	if len(samples) == 0 {
		return "not sampled"
	}
	all := make([]float64, 0, len(samples))
	byCase := map[string][]float64{}
	var order []string
	for _, s := range samples {
		all = append(all, s.Load1)
		if s.Case == "" {
			continue
		}
		if _, seen := byCase[s.Case]; !seen {
			order = append(order, s.Case)
		}
		byCase[s.Case] = append(byCase[s.Case], s.Load1)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "min %.2f / median %.2f / max %.2f (1-min load average, %d samples)",
		slices.Min(all), median(all), slices.Max(all), len(all))
	if len(order) > 0 {
		b.WriteString("; per part, median (min–max): ")
		for i, c := range order {
			xs := byCase[c]
			if i > 0 {
				b.WriteString(", ")
			}
			fmt.Fprintf(&b, "%s %.2f (%.2f–%.2f)", c, median(xs), slices.Min(xs), slices.Max(xs))
		}
	}
	return b.String()
}
