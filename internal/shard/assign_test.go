package shard

import (
	"fmt"
	"testing"
	"time"
)

func TestAssignmentSpreadsAndMovesLittle(t *testing.T) {
	now := time.Now()
	until := now.Add(time.Hour)
	three := []string{"a", "b", "c"}
	views := map[string]*Assignment{}
	for _, m := range three {
		views[m] = NewAssignment(m, three, KeyNamespaceName, true, now, until)
	}
	const n = 3000
	owned := map[string]int{}
	for i := range n {
		ns, name := fmt.Sprintf("ns%d", i%7), fmt.Sprintf("o%d", i)
		owners := 0
		for m, a := range views {
			if a.Owns(ns, name, now) {
				owners++
				owned[m]++
			}
		}
		if owners != 1 {
			t.Fatalf("%s/%s has %d owners among identical views", ns, name, owners)
		}
	}
	for m, c := range owned {
		if c < n/3-n/10 || c > n/3+n/10 {
			t.Errorf("member %s owns %d of %d objects; want about a third", m, c, n)
		}
	}

	// c leaves: only c's objects move, and nothing moves to c.
	two := NewAssignment("a", []string{"a", "b"}, KeyNamespaceName, true, now, until)
	moved := 0
	for i := range n {
		ns, name := fmt.Sprintf("ns%d", i%7), fmt.Sprintf("o%d", i)
		before, after := views["a"].Owner(ns, name), two.Owner(ns, name)
		if before != after {
			moved++
			if before != "c" {
				t.Fatalf("%s/%s moved from %s to %s when c left", ns, name, before, after)
			}
		}
	}
	if moved != owned["c"] {
		t.Errorf("%d objects moved, c owned %d", moved, owned["c"])
	}
}

func TestAssignmentKeyNamespace(t *testing.T) {
	now := time.Now()
	a := NewAssignment("a", []string{"a", "b", "c", "d"}, KeyNamespace, true, now, now.Add(time.Hour))
	for i := range 50 {
		ns := fmt.Sprintf("team-%d", i)
		want := a.Owner(ns, "x")
		for j := range 20 {
			if got := a.Owner(ns, fmt.Sprintf("o%d", j)); got != want {
				t.Fatalf("namespace %s split between %s and %s", ns, want, got)
			}
		}
		// A cluster-scoped object is keyed by its name: the Namespace
		// object goes with its contents.
		if got := a.Owner("", ns); got != want {
			t.Errorf("Namespace %s on %s, its objects on %s", ns, got, want)
		}
	}
}

func TestAssignmentValidity(t *testing.T) {
	now := time.Now()
	cases := []struct {
		name   string
		a      *Assignment
		at     time.Time
		owns   bool
		extend time.Time
	}{
		{"nil owns everything", nil, now, true, time.Time{}},
		{"valid", NewAssignment("a", nil, KeyNamespaceName, true, now, now.Add(time.Second)), now, true, time.Time{}},
		{"expired", NewAssignment("a", nil, KeyNamespaceName, true, now, now.Add(time.Second)), now.Add(time.Second), false, time.Time{}},
		{"extended", NewAssignment("a", nil, KeyNamespaceName, true, now, now.Add(time.Second)), now.Add(time.Second), true, now.Add(2 * time.Second)},
		{"never shortened", NewAssignment("a", nil, KeyNamespaceName, true, now, now.Add(time.Second)), now, true, now.Add(-time.Second)},
		{"inactive", NewAssignment("a", []string{"b"}, KeyNamespaceName, false, now, now.Add(time.Second)), now, false, time.Time{}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if !tc.extend.IsZero() {
				tc.a.extend(tc.extend)
			}
			if got := tc.a.Owns("ns", "x", tc.at); got != tc.owns {
				t.Errorf("Owns = %t, want %t", got, tc.owns)
			}
		})
	}
}

func TestNewRefusesBadOptions(t *testing.T) {
	ok := Options{Client: fakeLeases{}, Namespace: "ns", Group: "g", Identity: "m",
		LeaseDuration: 3 * time.Second, RenewDeadline: 2 * time.Second, RetryPeriod: time.Second}
	cases := []struct {
		name string
		edit func(*Options)
	}{
		{"no client", func(o *Options) { o.Client = nil }},
		{"renew not below lease", func(o *Options) { o.RenewDeadline = 3 * time.Second }},
		{"retry not below renew", func(o *Options) { o.RetryPeriod = 2 * time.Second }},
		{"bad key", func(o *Options) { o.Key = "name" }},
		{"bad lease name", func(o *Options) { o.Identity = "Not_A_Name" }},
	}
	if _, err := New(ok); err != nil {
		t.Fatalf("valid options refused: %v", err)
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			o := ok
			tc.edit(&o)
			if _, err := New(o); err == nil {
				t.Error("accepted")
			}
		})
	}
}
