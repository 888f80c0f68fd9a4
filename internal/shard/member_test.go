package shard

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

// member is a Member of group g on a fake clientset, driven round by
// round by the test (Run is not started).
func member(t *testing.T, cs *fake.Clientset, id string, renew time.Duration) *Member {
	t.Helper()
	m, err := New(Options{Client: cs.CoordinationV1(), Namespace: "ns", Group: "g", Identity: id,
		LeaseDuration: 2 * time.Hour, RenewDeadline: renew, RetryPeriod: renew / 2})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func (m *Member) active() bool { return m.Assignment().Active }

// The join handshake, round by round: a newcomer becomes active only once
// the other member's Lease lists it at its current epoch, and an
// acknowledgement of an earlier streak (the other member has not listed
// since the newcomer rejoined) does not let it in again.
func TestJoinWaitsForTheCurrentEpochsAcknowledgement(t *testing.T) {
	cs := fake.NewClientset()
	ctx := context.Background()
	x, y := member(t, cs, "x", time.Hour), member(t, cs, "y", time.Hour)
	x.round(ctx)
	x.round(ctx)
	if !x.active() {
		t.Fatal("x alone is not active after two rounds")
	}
	y.round(ctx) // lists x, writes its Lease
	y.round(ctx) // x has not acknowledged y
	if y.active() {
		t.Fatal("y active before x let its share go")
	}
	x.round(ctx) // x counts y, then acknowledges it
	if got := x.Assignment().Members; len(got) != 2 {
		t.Fatalf("x's view %v; want x and y", got)
	}
	y.round(ctx)
	if !y.active() {
		t.Fatal("y not active after x acknowledged it")
	}

	// y drops out (fenced) and rejoins under a new epoch; x's Lease still
	// acknowledges the old one.
	y.mu.Lock()
	old := y.epoch
	y.fenceLocked(time.Now())
	y.mu.Unlock()
	y.round(ctx) // writes the new epoch
	y.round(ctx) // lists x's stale acknowledgement
	if y.active() {
		t.Fatal("y let in again by an acknowledgement of its earlier streak")
	}
	if y.epoch == old || y.epoch == "" {
		t.Fatalf("y rejoined under epoch %q, was %q", y.epoch, old)
	}
	x.round(ctx)
	y.round(ctx)
	if !y.active() {
		t.Fatal("y not active after x acknowledged its new epoch")
	}
}

// A member whose Lease carries no view (a version before the handshake)
// cannot acknowledge anyone: a newcomer waits the join delay for it, a
// list sent renewDeadline after its first renewal returned.
func TestJoinWaitsTheJoinDelayForAMemberWithoutTheHandshake(t *testing.T) {
	cs := fake.NewClientset()
	ctx := context.Background()
	holder, seconds, now := "old", int32(3600), metav1.NewMicroTime(time.Now())
	if _, err := cs.CoordinationV1().Leases("ns").Create(ctx, &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: "g-old", Namespace: "ns", Labels: map[string]string{LabelGroup: "g"}},
		Spec:       coordinationv1.LeaseSpec{HolderIdentity: &holder, LeaseDurationSeconds: &seconds, RenewTime: &now}},
		metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	const delay = 200 * time.Millisecond
	y := member(t, cs, "y", delay)
	y.round(ctx)
	y.round(ctx)
	if y.active() && y.Assignment().Since.Sub(y.joinedAt) < delay {
		t.Fatal("y active before its join delay, beside a member that cannot acknowledge it")
	}
	for !y.active() {
		y.round(ctx)
	}
	if d := y.Assignment().Since.Sub(y.joinedAt); d < delay {
		t.Errorf("y active %s after its first renewal returned; want at least %s", d, delay)
	}
	if got := y.Assignment().Members; len(got) != 2 {
		t.Errorf("y's view %v; want old and y", got)
	}
}

// unowned counts the keys no active member's Assignment owns at now.
func unowned(now time.Time, keys []string, members ...*Member) int {
	n := 0
	for _, k := range keys {
		owned := false
		for _, m := range members {
			owned = owned || m.Assignment().Owns("ns", k, now)
		}
		if !owned {
			n++
		}
	}
	return n
}

// A member joining while it cannot process its share yet (its plugins
// still loading, its caches syncing) leaves that share with the others
// until it can: round after round, every object stays owned by an active
// member. Once ready, it joins by the handshake, and every object is owned
// again once it is active.
func TestJoinLeavesTheShareWithTheOthersUntilTheNewcomerIsReady(t *testing.T) {
	cs := fake.NewClientset()
	ctx := context.Background()
	keys := make([]string, 200)
	for i := range keys {
		keys[i] = fmt.Sprintf("cm%d", i)
	}
	x := member(t, cs, "x", time.Hour)
	x.round(ctx)
	x.round(ctx)
	if !x.active() || unowned(time.Now(), keys, x) != 0 {
		t.Fatal("x alone does not own every object after two rounds")
	}
	var ready atomic.Bool
	y := member(t, cs, "y", time.Hour)
	y.o.Ready = ready.Load
	for i := range 5 {
		y.round(ctx)
		x.round(ctx)
		if n := unowned(time.Now(), keys, x, y); n != 0 {
			t.Fatalf("round %d, y not ready: %d of %d objects owned by no active member (x's view %v)",
				i, n, len(keys), x.Assignment().Members)
		}
	}
	if _, err := cs.CoordinationV1().Leases("ns").Get(ctx, y.LeaseName(), metav1.GetOptions{}); err == nil {
		t.Error("y wrote its Lease before it was ready")
	}

	ready.Store(true)
	for i := 0; !y.active(); i++ {
		if i == 5 {
			t.Fatal("y not active five rounds after it was ready")
		}
		y.round(ctx)
		x.round(ctx)
	}
	if n := unowned(time.Now(), keys, x, y); n != 0 {
		t.Errorf("%d objects owned by no active member once y is active", n)
	}
	if len(x.Assignment().Members) != 2 || len(y.Assignment().Members) != 2 {
		t.Errorf("views %v and %v; want x and y in both", x.Assignment().Members, y.Assignment().Members)
	}
}

// A member waiting for the others' acknowledgements lists more often than
// retryPeriod: its share is owned by nobody until its next list.
func TestNextWaitIsShortWhileJoining(t *testing.T) {
	cases := []struct {
		name              string
		retry             time.Duration
		joined, activated bool
		want              time.Duration
	}{
		{"not joined yet", 2 * time.Second, false, false, 2 * time.Second},
		{"waiting for acknowledgements", 2 * time.Second, true, false, 250 * time.Millisecond},
		{"waiting, short retryPeriod", 200 * time.Millisecond, true, false, 50 * time.Millisecond},
		{"waiting, retryPeriod under 50ms", 20 * time.Millisecond, true, false, 20 * time.Millisecond},
		{"active", 2 * time.Second, true, true, 2 * time.Second},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m := member(t, fake.NewClientset(), "x", 2*tc.retry+time.Second)
			m.o.RetryPeriod = tc.retry
			if tc.joined {
				m.joinedAt = time.Now()
			}
			m.activated = tc.activated
			if got := m.nextWait(); got != tc.want {
				t.Errorf("nextWait() = %s; want %s", got, tc.want)
			}
		})
	}
}
