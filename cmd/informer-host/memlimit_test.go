package main

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"math"
	"os"
	"runtime"
	"runtime/debug"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/KimMachineGun/automemlimit/memlimit"
)

const mib = 1 << 20

// withEnv sets the memory-limit variables for one test (unset when value
// is empty) and restores the runtime's limit after it: the limit is
// process-wide, so these tests do not run in parallel.
func withEnv(t *testing.T, gomemlimit string) {
	t.Helper()
	prev := debug.SetMemoryLimit(-1)
	t.Cleanup(func() { debug.SetMemoryLimit(prev) })
	for name, value := range map[string]string{"GOMEMLIMIT": gomemlimit, "AUTOMEMLIMIT": ""} {
		t.Setenv(name, value)
		if value == "" {
			os.Unsetenv(name)
		}
	}
}

func TestMemoryLimitApply(t *testing.T) {
	const before = 7777 * mib
	none := func() (uint64, error) { return 0, nil }
	for _, tc := range []struct {
		name       string
		gomemlimit string
		ratio      float64
		provider   memlimit.Provider
		outside    func() (uint64, error)
		want       int64
		log        string
	}{
		{"ratio of the container's limit", "", 0.9, memlimit.Limit(1000 * mib), none, 900 * mib, "source=test"},
		{"whole limit", "", 1, memlimit.Limit(1000 * mib), none, 1000 * mib, "container_limit=1048576000"},
		{"less the memory outside the runtime", "", 0.9, memlimit.Limit(1000 * mib),
			func() (uint64, error) { return 130 * mib, nil }, 770 * mib, "outside_go_runtime=136314880"},
		{"never below a quarter", "", 0.8, memlimit.Limit(1000 * mib),
			func() (uint64, error) { return 700 * mib, nil }, 200 * mib, "limit=209715200"},
		{"outside unreadable: the fraction alone", "", 0.9, memlimit.Limit(1000 * mib),
			func() (uint64, error) { return 0, errors.New("no proc") }, 900 * mib, "outside_go_runtime=0"},
		{"no limit", "", 0.9, func() (uint64, error) { return 0, memlimit.ErrNoLimit }, none, math.MaxInt64, "source=none"},
		{"no cgroup", "", 0.9, func() (uint64, error) { return 0, memlimit.ErrNoCgroup }, none, before, "source=none"},
		{"unreadable", "", 0.9, func() (uint64, error) { return 0, errors.New("boom") }, none, before, "could not be read"},
		{"off", "", 0, memlimit.Limit(1000 * mib), none, before, "--memory-limit-ratio=0"},
		{"GOMEMLIMIT in the environment wins", "123MiB", 0.9, memlimit.Limit(1000 * mib), none, before, "source=env"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			withEnv(t, tc.gomemlimit)
			debug.SetMemoryLimit(before)
			var out bytes.Buffer
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			m := memoryLimit{ratio: tc.ratio, provider: tc.provider, source: "test", outside: tc.outside}
			m.apply(ctx, slog.New(slog.NewTextHandler(&out, nil)))
			if got := debug.SetMemoryLimit(-1); got != tc.want {
				t.Errorf("limit = %d MiB, want %d MiB", got/mib, tc.want/mib)
			}
			if !strings.Contains(out.String(), tc.log) {
				t.Errorf("log %q does not say %q", out.String(), tc.log)
			}
		})
	}
}

// The limit follows the memory outside the runtime as plugins come and
// go.
func TestMemoryLimitFollowsTheMemoryOutsideTheRuntime(t *testing.T) {
	withEnv(t, "")
	var outside atomic.Uint64
	ctx, cancel := context.WithCancel(context.Background())
	m := memoryLimit{ratio: 1, provider: memlimit.Limit(1000 * mib), source: "test", refresh: time.Millisecond,
		outside: func() (uint64, error) { return outside.Load(), nil }}
	m.apply(ctx, slog.New(slog.DiscardHandler))
	waitLimit := func(want int64) {
		t.Helper()
		for got := debug.SetMemoryLimit(-1); got != want; got = debug.SetMemoryLimit(-1) {
			select {
			case <-time.After(time.Millisecond):
			case <-t.Context().Done():
				t.Fatalf("limit %d MiB, want %d MiB", got/mib, want/mib)
			}
		}
	}
	waitLimit(1000 * mib)
	outside.Store(300 * mib) // plugins loaded
	waitLimit(700 * mib)
	outside.Store(100 * mib) // some removed
	waitLimit(900 * mib)
	cancel() // automemlimit's refresh loop ends with ctx
}

// outsideGoRuntime sees memory mapped outside the Go heap, as the engine
// maps a guest's linear memory, and not the Go heap's own growth.
func TestOutsideGoRuntimeCountsMemoryMappedOutsideIt(t *testing.T) {
	const size = 64 * mib
	before, err := outsideGoRuntime()
	if err != nil {
		t.Fatal(err)
	}
	mem, err := syscall.Mmap(-1, 0, size, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_PRIVATE|syscall.MAP_ANON)
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Munmap(mem)
	for i := 0; i < len(mem); i += 4096 {
		mem[i] = 1
	}
	after, err := outsideGoRuntime()
	if err != nil {
		t.Fatal(err)
	}
	if grew := int64(after) - int64(before); grew < size*9/10 || grew > size*11/10 {
		t.Errorf("outside the runtime grew by %d MiB after touching a %d MiB mapping, want about %d", grew/mib, size/mib, size/mib)
	}
	if raceDetector {
		// The race detector's shadow of the heap is resident memory
		// outside the runtime's accounting: outside, rightly, and as
		// large as the heap touched, so the heap half holds only in the
		// build without it (make test's first pass).
		return
	}
	heap := make([]byte, size)
	for i := 0; i < len(heap); i += 4096 {
		heap[i] = 1
	}
	withHeap, err := outsideGoRuntime()
	if err != nil {
		t.Fatal(err)
	}
	if grew := int64(withHeap) - int64(after); grew > size/10 {
		t.Errorf("outside the runtime grew by %d MiB for %d MiB of Go heap, want about 0", grew/mib, size/mib)
	}
	runtime.KeepAlive(heap)
}

func TestMemoryLimitCheck(t *testing.T) {
	for _, ratio := range []float64{0, 0.5, 1} {
		if err := (memoryLimit{ratio: ratio}).check(); err != nil {
			t.Errorf("ratio %v: %v", ratio, err)
		}
	}
	for _, ratio := range []float64{-0.1, 1.5, math.NaN()} {
		if err := (memoryLimit{ratio: ratio}).check(); err == nil || !strings.Contains(err.Error(), "--memory-limit-ratio") {
			t.Errorf("ratio %v: error %v does not name the flag", ratio, err)
		}
	}
}

func TestRunRefusesABadMemoryLimitRatio(t *testing.T) {
	var stderr bytes.Buffer
	if code := runCommand(context.Background(), []string{"--memory-limit-ratio=2"}, &stderr, nil, nil); code != 2 {
		t.Fatalf("exit code %d, want 2; stderr: %s", code, stderr.String())
	}
	if !strings.Contains(stderr.String(), "--memory-limit-ratio") {
		t.Errorf("stderr %q does not name the flag", stderr.String())
	}
}
