package main

import (
	"strings"
	"testing"
)

func TestParseCounts(t *testing.T) {
	for _, c := range []struct {
		in   string
		want []int
		err  bool
	}{
		{"10/50/200", []int{10, 50, 200}, false},
		{" 4 ", []int{4}, false},
		{"10//200", nil, true},
		{"10,200", nil, true},
		{"0", nil, true},
		{"ten", nil, true},
	} {
		got, err := parseCounts(c.in)
		if (err != nil) != c.err {
			t.Errorf("parseCounts(%q): error %v, want error %t", c.in, err, c.err)
			continue
		}
		if err != nil && !strings.Contains(err.Error(), "scalePlugins") {
			t.Errorf("parseCounts(%q): error %q does not name the parameter", c.in, err)
		}
		if len(got) != len(c.want) {
			t.Errorf("parseCounts(%q) = %v, want %v", c.in, got, c.want)
			continue
		}
		for i := range got {
			if got[i] != c.want[i] {
				t.Errorf("parseCounts(%q) = %v, want %v", c.in, got, c.want)
			}
		}
	}
}

// The marginal rows divide by the plugins added between two counts.
func TestScaleRowsMarginal(t *testing.T) {
	r := &results{Scale: []scaleRun{
		{Plugins: 10, Objects: 100, RSS: 100, Peak: 150, Cold: 1, CPU: 1},
		{Plugins: 50, Objects: 100, RSS: 300, Peak: 350, Cold: 5, CPU: 3},
	}}
	r.scaleRows()
	if len(r.rows) != 3 {
		t.Fatalf("got %d rows, want 3 (two counts, one marginal): %+v", len(r.rows), r.rows)
	}
	if m := r.rows[2].Host; !strings.HasPrefix(m, "+5.00 MiB (+5.00); +0.100 s; +0.050 ms") {
		t.Errorf("marginal row %q, want +5.00 MiB per plugin", m)
	}
	if r.rows[1].Ratio != "3.00x" {
		t.Errorf("ratio %q, want 3.00x", r.rows[1].Ratio)
	}
}
