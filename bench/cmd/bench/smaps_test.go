package main

import (
	"os"
	"testing"
	"time"
)

func TestProcSplitAccountsForTheRSS(t *testing.T) {
	keep := make([]byte, 32<<20)
	for i := range keep {
		keep[i] = 1 // touched: resident
	}
	s, err := procSplit(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if sum := s.Heap + s.Guest + s.Code + s.File + s.Other; sum != s.Rss {
		t.Errorf("the classes sum to %d bytes, the RSS is %d", sum, s.Rss)
	}
	if s.Heap < int64(len(keep)) {
		t.Errorf("Go heap %d bytes, below the %d this test holds: %v", s.Heap, len(keep), s)
	}
	if s.File == 0 {
		t.Errorf("no file-backed memory (the test binary's text): %v", s)
	}
	_ = keep[len(keep)-1]
}

func TestSettledMemoryWaitsForTheRSSToStop(t *testing.T) {
	readings := []int64{100 << 20, 60 << 20, 40 << 20, 40<<20 + 1000, 10 << 20}
	n := 0
	rss, _, waited, err := settledMemory(func() (int64, int64, error) {
		r := readings[n]
		n++
		return r, 0, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if rss != 40<<20+1000 || waited != 3 {
		t.Errorf("settled at %d bytes after %d s, want %d after 3", rss, waited, 40<<20+1000)
	}
}

func TestSamplePeakSamplesBeforeItStops(t *testing.T) {
	keep := make([]byte, 64<<20)
	for i := range keep {
		keep[i] = 1 // touched: resident
	}
	// The sampler reads once as it starts, so even a stop at once has
	// a split: the buffer is in it.
	got := samplePeak(os.Getpid(), time.Now(), time.Hour)()
	_ = keep[len(keep)-1]
	if got.Split.Rss < int64(len(keep)) || got.Split.Heap < int64(len(keep)) {
		t.Errorf("peak split %v, below the %d bytes this test holds", got.Split, len(keep))
	}
}
