package main

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"math"
	"os"
	"runtime/debug"
	"strings"
	"testing"

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
	for _, tc := range []struct {
		name       string
		gomemlimit string
		ratio      float64
		provider   memlimit.Provider
		want       int64
		log        string
	}{
		{"ratio of the container's limit", "", 0.9, memlimit.Limit(1000 * mib), 900 * mib, "source=test"},
		{"whole limit", "", 1, memlimit.Limit(1000 * mib), 1000 * mib, "container_limit=1048576000"},
		{"no limit", "", 0.9, func() (uint64, error) { return 0, memlimit.ErrNoLimit }, math.MaxInt64, "source=none"},
		{"no cgroup", "", 0.9, func() (uint64, error) { return 0, memlimit.ErrNoCgroup }, before, "source=none"},
		{"unreadable", "", 0.9, func() (uint64, error) { return 0, errors.New("boom") }, before, "could not be read"},
		{"off", "", 0, memlimit.Limit(1000 * mib), before, "--memory-limit-ratio=0"},
		{"GOMEMLIMIT in the environment wins", "123MiB", 0.9, memlimit.Limit(1000 * mib), before, "source=env"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			withEnv(t, tc.gomemlimit)
			debug.SetMemoryLimit(before)
			var out bytes.Buffer
			m := memoryLimit{ratio: tc.ratio, provider: tc.provider, source: "test"}
			m.apply(slog.New(slog.NewTextHandler(&out, nil)))
			if got := debug.SetMemoryLimit(-1); got != tc.want {
				t.Errorf("limit = %d, want %d", got, tc.want)
			}
			if !strings.Contains(out.String(), tc.log) {
				t.Errorf("log %q does not say %q", out.String(), tc.log)
			}
		})
	}
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
