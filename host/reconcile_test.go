package host

import (
	"testing"
	"time"
)

// The requeue annotation is written when the due time appears, goes or
// moves by a second or more (it holds seconds), and not otherwise: an OK
// answer that asks for the same time again costs no write.
func TestRequeueChanged(t *testing.T) {
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, tc := range []struct {
		name string
		old  time.Time
		had  bool
		due  time.Time
		want bool
	}{
		{"none, none", time.Time{}, false, time.Time{}, false},
		{"none, set", time.Time{}, false, at, true},
		{"set, cleared", at, true, time.Time{}, true},
		{"same second", at, true, at.Add(400 * time.Millisecond), false},
		{"moved", at, true, at.Add(time.Minute), true},
	} {
		if got := requeueChanged(tc.old, tc.had, tc.due); got != tc.want {
			t.Errorf("%s: requeueChanged = %v, want %v", tc.name, got, tc.want)
		}
	}
}
