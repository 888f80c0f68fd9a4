package daemon

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"

	"github.com/informer-host/informer-host/internal/testenv"
)

// A leader that loses its lease stops delivering at once:
// it does not drain its plugins' backlog (the new leader delivers the same
// events), and it has stopped its plugins when Run returns.
func TestLostLeaseStopsDeliveryAtOnce(t *testing.T) {
	env.Require(t)
	const objects = 100
	ns := env.Namespace(t)
	// 100ms per event: the initial list alone is a backlog of 10s.
	cfg := leaderConfig(t, ns, "slow.wasm", "../../host/testdata/plugins/slow.wat")
	cms := env.Client.CoreV1().ConfigMaps(ns)
	for i := range objects {
		if _, err := cms.Create(context.Background(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("cm%d", i)}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}

	r := startReplica(t, cfg, Options{DrainTimeout: time.Minute})
	logs := r.logs
	handled := func() int {
		n := 0
		for _, l := range logs.Lines("plugin=slow.wasm", "stream=log") {
			if !strings.Contains(l, "msg=bye") {
				n++
			}
		}
		return n
	}
	testenv.Eventually(t, "the leader's plugin to handle an event", func() bool { return handled() > 0 })

	// Another replica takes the lease over: this one fails to renew it.
	leases := env.Client.CoordinationV1().Leases(ns)
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		l, err := leases.Get(context.Background(), "informer-host", metav1.GetOptions{})
		if err != nil {
			return err
		}
		thief, now, d := "thief", metav1.NewMicroTime(time.Now()), int32(3600)
		l.Spec.HolderIdentity, l.Spec.AcquireTime, l.Spec.RenewTime, l.Spec.LeaseDurationSeconds = &thief, &now, &now, &d
		_, err = leases.Update(context.Background(), l, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.wait(); !errors.Is(err, ErrLostLeadership) {
		t.Errorf("Run: %v, want %v", err, ErrLostLeadership)
	}

	// Run has returned: the plugin was stopped (its shutdown ran), and
	// after the stop began it finished at most the call it was in.
	lines := logs.Lines()
	stopping := -1
	for i, l := range lines {
		if strings.Contains(l, "informer-host stopping") {
			stopping = i
			break
		}
	}
	if stopping < 0 {
		t.Fatalf("no stop logged:\n%s", strings.Join(lines, "\n"))
	}
	after := 0
	for _, l := range lines[stopping:] {
		if strings.Contains(l, "plugin=slow.wasm") && strings.Contains(l, "stream=log") && !strings.Contains(l, "msg=bye") {
			after++
		}
	}
	if after > 1 {
		t.Errorf("%d events delivered after the lease was lost, want at most the one in progress", after)
	}
	if len(logs.Lines("plugin=slow.wasm", "msg=bye")) != 1 {
		t.Errorf("the plugin was not stopped when Run returned")
	}
	if n := handled(); n >= objects {
		t.Errorf("the plugin handled %d events: its backlog was drained", n)
	}
}
