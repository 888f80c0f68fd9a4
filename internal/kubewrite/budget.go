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
type Budget struct {
	lim *rate.Limiter
	// within is the bucket this one draws from as well (a tenant
	// namespace's, shared by all its plugins); nil: none. A request
	// takes a token from both or from neither.
	within *Budget
}

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
	// Shared says the bucket is a shared one (Within's), not the
	// request's own.
	Shared bool
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
	rs, d, refused := b.reserve(now)
	if refused != nil {
		return 0, refused
	}
	if d == 0 {
		return 0, nil
	}
	if dl, ok := ctx.Deadline(); ok && dl.Sub(now) < d {
		cancelAt(rs, now)
		e := b.slowest(rs, now)
		e.Wait, e.Left = d, dl.Sub(now)
		return 0, e
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return d, nil
	case <-ctx.Done():
		for _, r := range rs {
			r.Cancel()
		}
		return time.Since(now), ctx.Err()
	}
}

// reserve takes a reservation from b and every bucket it is within; d is
// the longest wait. A bucket that can never grant one (burst 0) refuses,
// and nothing is taken.
func (b *Budget) reserve(now time.Time) (rs []*rate.Reservation, d time.Duration, refused *RateLimitedError) {
	for c := b; c != nil; c = c.within {
		r := c.lim.ReserveN(now, 1)
		if !r.OK() {
			cancelAt(rs, now)
			return nil, 0, &RateLimitedError{Wait: rate.InfDuration, QPS: float64(c.lim.Limit()), Burst: c.lim.Burst(), Shared: c != b}
		}
		rs = append(rs, r)
		d = max(d, r.DelayFrom(now))
	}
	return rs, d, nil
}

// slowest describes the bucket whose wait is the longest: the one a
// person has to raise.
func (b *Budget) slowest(rs []*rate.Reservation, now time.Time) *RateLimitedError {
	c, at := b, b
	var longest time.Duration
	for _, r := range rs {
		if w := r.DelayFrom(now); w > longest {
			longest, at = w, c
		}
		c = c.within
	}
	return &RateLimitedError{QPS: float64(at.lim.Limit()), Burst: at.lim.Burst(), Shared: at != b}
}

func cancelAt(rs []*rate.Reservation, now time.Time) {
	for _, r := range rs {
		r.CancelAt(now)
	}
}

// TryAccept takes a token if one is there now, from every bucket.
func (b *Budget) TryAccept() bool {
	now := time.Now()
	rs, d, refused := b.reserve(now)
	if refused != nil {
		return false
	}
	if d > 0 {
		cancelAt(rs, now)
		return false
	}
	return true
}

// Accept waits for a token however long it takes.
func (b *Budget) Accept() { _ = b.Wait(context.Background()) }

// Within returns a bucket of b's rate drawing from shared as well: a
// request waits for a token of both.
func (b *Budget) Within(shared *Budget) *Budget {
	return &Budget{lim: b.lim, within: shared}
}

// Stop implements flowcontrol.RateLimiter; a Budget holds no goroutine.
func (b *Budget) Stop() {}

// QPS is the refill rate.
func (b *Budget) QPS() float32 { return float32(b.lim.Limit()) }

// Tokens is how many requests could go now without waiting (fractional;
// negative while waits are reserved).
func (b *Budget) Tokens() float64 { return b.lim.Tokens() }
