package engine

import (
	"math/rand/v2"
	"time"

	"github.com/tetratelabs/wazero"
)

// Determinism makes an instance's WASI clocks and random source
// reproducible, so that replaying the same events gives the same output
// (informer-host replay). The daemon never sets it: plugins there see the
// system's clocks and crypto/rand.
//
// Both clocks start at Start and advance by Step at every read, and a
// guest's sleep advances them by its duration without sleeping, so a
// plugin that measures or waits sees time pass, identically on every run.
// random_get returns a ChaCha8 stream seeded with Seed.
type Determinism struct {
	// Start is the wall clock's first reading; zero selects
	// DefaultReplayEpoch.
	Start time.Time
	// Step is how far each clock reading advances; zero selects 1ms.
	Step time.Duration
	// Seed seeds random_get.
	Seed uint64
}

// DefaultReplayEpoch is the wall clock a deterministic instance starts at
// when Determinism.Start is zero.
var DefaultReplayEpoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// fakeClock is one deterministic instance's clocks. It is used only by the
// goroutine calling into the instance (WASI calls run on it).
type fakeClock struct {
	wall time.Time
	mono int64
	step time.Duration
}

func newFakeClock(d *Determinism) *fakeClock {
	c := &fakeClock{wall: d.Start, step: d.Step}
	if c.wall.IsZero() {
		c.wall = DefaultReplayEpoch
	}
	if c.step <= 0 {
		c.step = time.Millisecond
	}
	return c
}

func (c *fakeClock) advance(d time.Duration) {
	c.wall = c.wall.Add(d)
	c.mono += int64(d)
}

func (c *fakeClock) walltime() (int64, int32) {
	t := c.wall
	c.advance(c.step)
	return t.Unix(), int32(t.Nanosecond())
}

func (c *fakeClock) nanotime() int64 {
	t := c.mono
	c.advance(c.step)
	return t
}

func (c *fakeClock) sleep(ns int64) {
	if ns > 0 {
		c.advance(time.Duration(ns))
	}
}

// clocks configures cfg's clocks, sleep and random source: the system's,
// or d's reproducible ones. sleep is the system sleep (the instance's,
// which ends on a kill).
func clocks(cfg wazero.ModuleConfig, d *Determinism, sleep func(int64), st *callState) wazero.ModuleConfig {
	if d == nil {
		return cfg.WithSysWalltime().WithSysNanotime().WithNanosleep(sleep).WithRandSource(guestRand{st: st})
	}
	c := newFakeClock(d)
	var seed [32]byte
	for i := range 8 {
		seed[i] = byte(d.Seed >> (8 * i))
	}
	return cfg.WithWalltime(c.walltime, 1).WithNanotime(c.nanotime, 1).WithNanosleep(c.sleep).
		WithRandSource(guestRand{st: st, src: rand.NewChaCha8(seed)})
}
