package filter

import (
	"testing"
	"time"
)

func TestErrorLimiter(t *testing.T) {
	now := time.Unix(1000, 0)
	l := NewErrorLimiter(0)
	l.now = func() time.Time { return now }

	step := func(key string, wantOK bool, wantSuppressed int) {
		t.Helper()
		ok, n := l.Allow(key)
		if ok != wantOK || n != wantSuppressed {
			t.Fatalf("Allow(%q) at %v = %v, %d; want %v, %d", key, now.Unix(), ok, n, wantOK, wantSuppressed)
		}
	}
	step("a", true, 0)
	step("a", false, 0)
	step("b", true, 0) // keys are independent
	now = now.Add(59 * time.Second)
	step("a", false, 0)
	now = now.Add(time.Second) // a minute after the first
	step("a", true, 2)
	step("a", false, 0)
	l.Forget("a")
	step("a", true, 0)
	step("p.wasm/x", true, 0)
	step("p.wasm/y", true, 0)
	step("q.wasm/x", true, 0)
	l.ForgetPrefix("p.wasm/")
	if n := l.Len(); n != 3 { // a, b, q.wasm/x
		t.Fatalf("%d keys after ForgetPrefix, want 3", n)
	}
	step("p.wasm/x", true, 0)
}
