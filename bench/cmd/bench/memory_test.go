package main

import "testing"

func TestRunsSide(t *testing.T) {
	for _, c := range []struct {
		sides, side string
		plugins     int
		want        bool
	}{
		{"", "host", 20, true},
		{"  ", "controllers", 10, true},
		{"native-stripped host/10", "native-stripped", 0, true},
		{"native-stripped host/10", "host", 10, true},
		{"native-stripped host/10", "host", 20, false},
		{"native-stripped host/10", "native", 0, false},
		{"host", "host", 20, true},
	} {
		if got := runsSide(c.sides, c.side, c.plugins); got != c.want {
			t.Errorf("runsSide(%q, %q, %d) = %v, want %v", c.sides, c.side, c.plugins, got, c.want)
		}
	}
}
