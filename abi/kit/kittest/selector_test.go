package kittest

import "testing"

// The answers are apimachinery's labels.Parse(sel).Matches(labels.Set(l)),
// written out: the kit's module may not import apimachinery.
func TestSelector(t *testing.T) {
	l := map[string]string{"app": "web", "tier": "front"}
	for _, c := range []struct {
		sel     string
		match   bool
		invalid bool
	}{
		{"", true, false},
		{"app=web", true, false},
		{"app==web", true, false},
		{"app=db", false, false},
		{"app!=db", true, false},
		{"app!=web", false, false},
		{"missing!=x", true, false},
		{"app in (db, web)", true, false},
		{"app in (db)", false, false},
		{"app notin (db,cache)", true, false},
		{"app notin (web)", false, false},
		{"missing notin (web)", true, false},
		{"app", true, false},
		{"missing", false, false},
		{"!missing", true, false},
		{"!app", false, false},
		{"app=web,tier=front", true, false},
		{"app=web, tier in (back)", false, false},
		{"app=web,,tier=front", false, true},
		{"app in web", false, true},
		{"=web", false, true},
	} {
		s, err := parseSelector(c.sel)
		if (err != nil) != c.invalid {
			t.Errorf("%q: err = %v, want invalid %v", c.sel, err, c.invalid)
			continue
		}
		if err == nil && s.matches(l) != c.match {
			t.Errorf("%q matches %v = %v, want %v", c.sel, l, !c.match, c.match)
		}
	}
}
