package main

import (
	"strings"
	"testing"
)

func TestMetricsGCStats(t *testing.T) {
	const exposition = `# HELP go_gc_duration_seconds A summary of the wall-time pause (stop-the-world) duration in garbage collection cycles.
# TYPE go_gc_duration_seconds summary
go_gc_duration_seconds{quantile="0"} 2.1e-05
go_gc_duration_seconds_sum 0.0125
go_gc_duration_seconds_count 42
go_memstats_alloc_bytes_total 1.5e+09
go_memstats_mallocs_total 7.5e+06
go_memstats_alloc_bytes 1.2e+07
`
	got, err := metricsGCStats(strings.NewReader(exposition))
	if err != nil {
		t.Fatal(err)
	}
	want := gcStats{Cycles: 42, PauseNs: 12.5e6, Alloc: 1.5e9, Mallocs: 7.5e6}
	if got != want {
		t.Fatalf("got %+v, want %+v", got, want)
	}
	if _, err := metricsGCStats(strings.NewReader("go_gc_duration_seconds_count 1\n")); err == nil {
		t.Fatal("an exposition without the allocation series: no error")
	}
}

func TestGCLineRoundTrip(t *testing.T) {
	s := gcStats{Cycles: 3, PauseNs: 123456, Alloc: 987654321, Mallocs: 4321}
	got, err := parseGCLine(s.line())
	if err != nil {
		t.Fatal(err)
	}
	if got != s {
		t.Fatalf("got %+v, want %+v", got, s)
	}
}
