package testenv

import (
	"context"
	"sync/atomic"

	"k8s.io/client-go/util/flowcontrol"
)

// CountingLimiter stands in for a client's rate limiter (rest.Config's
// RateLimiter) to show who spends it: it lets every request through and
// counts the requests that asked.
type CountingLimiter struct{ Waits atomic.Int64 }

var _ flowcontrol.RateLimiter = (*CountingLimiter)(nil)

func (l *CountingLimiter) TryAccept() bool { l.Waits.Add(1); return true }
func (l *CountingLimiter) Accept()         { l.Waits.Add(1) }
func (l *CountingLimiter) Stop()           {}
func (l *CountingLimiter) QPS() float32    { return 5 }
func (l *CountingLimiter) Wait(context.Context) error {
	l.Waits.Add(1)
	return nil
}
