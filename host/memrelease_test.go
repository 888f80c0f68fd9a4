package host

import (
	"testing"
	"time"
)

// TestMemReleaserCoalesces: plugins finishing their initial lists together
// cause one release, and a later replay another.
func TestMemReleaserCoalesces(t *testing.T) {
	ran := make(chan time.Time, 10)
	m := &memReleaser{release: func() { ran <- time.Now() }}
	for i := 0; i < 10; i++ {
		m.soon()
	}
	<-ran
	m.soon()
	<-ran
	select {
	case <-ran:
		t.Fatal("a third release ran; want one per burst of soon")
	default:
	}
}
