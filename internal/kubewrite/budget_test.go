package kubewrite

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/informer-host/informer-host/internal/testenv"
)

// Budget.Wait: within the burst at once; a wait past the deadline is a
// *RateLimitedError at once that takes no token; a wait ended by its
// context gives its token back.
func TestBudgetWait(t *testing.T) {
	b := NewBudget(0.001, 2) // refills one token in 1000s: none during the test
	for i := range 2 {
		if err := b.Wait(context.Background()); err != nil {
			t.Fatalf("token %d of the burst: %v", i+1, err)
		}
	}
	short, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var rl *RateLimitedError
	if err := b.Wait(short); !errors.As(err, &rl) || rl.Wait < 900*time.Second || rl.Left > time.Minute || rl.QPS != 0.001 || rl.Burst != 2 {
		t.Fatalf("a wait of ~1000s with a minute left: %v, want a RateLimitedError", err)
	}
	before := b.Tokens()
	if before > 0.01 || before < -0.01 {
		t.Fatalf("%.3f tokens after the refused wait, want ~0: the refusal took one", before)
	}
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- b.Wait(ctx) }()
	testenv.Eventually(t, "the wait to hold a reservation (a debt of one token)", func() bool { return b.Tokens() < -0.5 })
	stop()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("canceled wait: %v", err)
	}
	if after := b.Tokens(); after < -0.01 {
		t.Fatalf("%.3f tokens after the canceled wait, want ~0: the token was not given back", after)
	}
}

// The writes client's rate limiter counts what the budget held back: a
// token there counts nothing, a wait counts one waited and its time, a
// refusal one refused; Forget drops the plugin's series.
func TestMeteredBudgetCounts(t *testing.T) {
	c := &Client{metrics: newMetrics()}
	m := c.metrics.meter("p.wasm", NewBudget(50, 1)) // a token every 20ms
	limited := func(outcome string) float64 {
		return testutil.ToFloat64(c.metrics.limited.WithLabelValues("p.wasm", outcome))
	}
	if err := m.Wait(context.Background()); err != nil {
		t.Fatal(err)
	}
	if w, r := limited("waited"), limited("refused"); w != 0 || r != 0 {
		t.Fatalf("a token was there: waited %v, refused %v; want 0, 0", w, r)
	}
	if err := m.Wait(context.Background()); err != nil {
		t.Fatal(err)
	}
	if w := limited("waited"); w != 1 {
		t.Fatalf("the bucket was empty: waited %v, want 1", w)
	}
	if s := testutil.ToFloat64(c.metrics.limitWait.WithLabelValues("p.wasm")); s <= 0 {
		t.Errorf("wait seconds %v after a wait, want > 0", s)
	}
	// An hour's debt makes the next wait outlast any deadline: refused.
	for range 180000 {
		m.lim.Reserve()
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var rl *RateLimitedError
	if err := m.Wait(ctx); !errors.As(err, &rl) {
		t.Fatalf("a wait of an hour with a minute left: %v, want a RateLimitedError", err)
	}
	if r := limited("refused"); r != 1 {
		t.Errorf("refused %v, want 1", r)
	}
	c.Forget("p.wasm")
	if n := testutil.CollectAndCount(c); n != 0 {
		t.Errorf("%d series after Forget, want 0", n)
	}
}
