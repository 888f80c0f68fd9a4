package kubewrite

import (
	"context"
	"errors"
	"testing"
	"time"

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
