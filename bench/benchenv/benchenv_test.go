package benchenv

import "testing"

// Wakeups counts a goroutine made to run again after blocking: a
// ping-pong of n round trips over unbuffered channels wakes each side n
// times. The runtime samples one transition in 8 per goroutine, so the
// estimate is checked against half of the 2n, not exactly.
func TestWakeupsCountsHandOvers(t *testing.T) {
	const n = 2000
	ping, pong := make(chan struct{}), make(chan struct{})
	go func() {
		for range ping {
			pong <- struct{}{}
		}
	}()
	before := Wakeups()
	for range n {
		ping <- struct{}{}
		<-pong
	}
	close(ping)
	if got := Wakeups() - before; got < n {
		t.Errorf("%d round trips between two goroutines counted %d wake-ups, want at least %d", n, got, n)
	}
}
