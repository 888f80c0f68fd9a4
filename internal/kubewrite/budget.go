package kubewrite

import (
	"context"
	"fmt"
	"time"

	"golang.org/x/time/rate"
	"k8s.io/client-go/util/flowcontrol"
)

// Budget is one plugin's client-side API budget: a token bucket
// (golang.org/x/time/rate) that is the rate limiter of the plugin's own
// REST client, so the plugin's requests take tokens from it and from
// nothing else: not from the daemon's client (informers, leases), not
// from another plugin's.
//
// Its Wait waits for a token within the request's context deadline (the
// write's I/O timeout) and refuses at once, taking no token, when the
// wait would outlast it: the caller then sends no request and tells the
// plugin how long the wait would have been. client-go calls Wait before
// each attempt of a request, 429 retries included, so a retry spends the
// budget too.
type Budget struct{ lim *rate.Limiter }

var _ flowcontrol.RateLimiter = (*Budget)(nil)

// NewBudget returns a bucket of burst tokens refilled at qps a second.
func NewBudget(qps float64, burst int) *Budget {
	return &Budget{lim: rate.NewLimiter(rate.Limit(qps), max(burst, 1))}
}

// RateLimitedError is Budget.Wait's refusal: the token would come only
// after Wait, later than the request's deadline allows (Left).
type RateLimitedError struct {
	Wait, Left time.Duration
	QPS        float64
	Burst      int
}

func (e *RateLimitedError) Error() string {
	return fmt.Sprintf("rate limit %g/s, burst %d: the wait for a token (%s) would outlast the request's deadline (%s left)",
		e.QPS, e.Burst, e.Wait.Round(time.Millisecond), e.Left.Round(time.Millisecond))
}

// Wait takes a token, waiting for it within ctx: a *RateLimitedError at
// once when ctx's deadline comes before the token, ctx's error when ctx
// ends while it waits (the token is given back either way).
func (b *Budget) Wait(ctx context.Context) error {
	_, err := b.wait(ctx)
	return err
}

// wait is Wait that also says how long the bucket made the caller wait
// (0: a token was there), for the metrics of a plugin's writes client.
func (b *Budget) wait(ctx context.Context) (time.Duration, error) {
	now := time.Now()
	r := b.lim.ReserveN(now, 1)
	if !r.OK() {
		return 0, &RateLimitedError{Wait: rate.InfDuration, QPS: float64(b.lim.Limit()), Burst: b.lim.Burst()}
	}
	d := r.DelayFrom(now)
	if d == 0 {
		return 0, nil
	}
	if dl, ok := ctx.Deadline(); ok && dl.Sub(now) < d {
		r.CancelAt(now)
		return 0, &RateLimitedError{Wait: d, Left: dl.Sub(now), QPS: float64(b.lim.Limit()), Burst: b.lim.Burst()}
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return d, nil
	case <-ctx.Done():
		r.Cancel()
		return time.Since(now), ctx.Err()
	}
}

// TryAccept takes a token if one is there now.
func (b *Budget) TryAccept() bool { return b.lim.Allow() }

// Accept waits for a token however long it takes.
func (b *Budget) Accept() { _ = b.lim.Wait(context.Background()) }

// Stop implements flowcontrol.RateLimiter; a Budget holds no goroutine.
func (b *Budget) Stop() {}

// QPS is the refill rate.
func (b *Budget) QPS() float32 { return float32(b.lim.Limit()) }

// Tokens is how many requests could go now without waiting (fractional;
// negative while waits are reserved).
func (b *Budget) Tokens() float64 { return b.lim.Tokens() }
