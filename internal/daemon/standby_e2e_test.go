package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/informer-host/informer-host/host"
	"github.com/informer-host/informer-host/internal/testenv"
)

// Warm standby: two replicas with leader election. Both sync
// their informers and compile their plugins; exactly one delivers. When
// the leader goes (releasing its lease on SIGTERM, or keeping it as a
// crash does), the standby takes over without compiling again, and its
// plugin's view (the counter's count) equals the cluster, including the
// changes made while nobody led.
func TestWarmStandby(t *testing.T) {
	for _, tc := range []struct {
		name  string
		crash bool // stop the leader without releasing the lease
	}{
		{name: "lease released"},
		{name: "leader crashed", crash: true},
	} {
		t.Run(tc.name, func(t *testing.T) { testWarmStandby(t, tc.crash) })
	}
}

func testWarmStandby(t *testing.T, crash bool) {
	ns := env.Namespace(t)
	cfg := leaderConfig(t, ns, "counter.wasm", "../../host/testdata/plugins/counter.wat")
	cms := env.Client.CoreV1().ConfigMaps(ns)
	create := func(name string) {
		t.Helper()
		if _, err := cms.Create(context.Background(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 5 {
		create(fmt.Sprintf("before%d", i))
	}

	a, b := startReplica(t, cfg, Options{abandonLease: crash}), startReplica(t, cfg, Options{abandonLease: crash})

	var leader, standby *replica
	testenv.Eventually(t, "one replica to lead", func() bool {
		switch {
		case !a.d.host.Standby():
			leader, standby = a, b
		case !b.d.host.Standby():
			leader, standby = b, a
		}
		return leader != nil
	})
	count := func() int {
		t.Helper()
		list, err := cms.List(context.Background(), metav1.ListOptions{LabelSelector: testenv.SeenKeysSelector})
		if err != nil {
			t.Fatal(err)
		}
		return len(list.Items)
	}
	before := count()
	testenv.Eventually(t, "the leader's plugin to count the configmaps", func() bool {
		c := leader.counts()
		return len(c) > 0 && c[len(c)-1] == before
	})
	// The standby is warm: informers synced (ready), its plugin compiled
	// and held, and it delivers nothing.
	testenv.Eventually(t, "the standby to be ready", func() bool {
		code, _ := testenv.Get(t, standby.url+"/readyz")
		return code == http.StatusOK
	})
	var dbg struct{ Plugins []host.PluginStatus }
	_, body := testenv.Get(t, standby.url+"/debug/plugins")
	if err := json.Unmarshal([]byte(body), &dbg); err != nil {
		t.Fatalf("/debug/plugins: %v: %s", err, body)
	}
	if st := dbg.Plugins; len(st) != 1 || st[0].State != host.StateStandby || st[0].SHA256 == "" || st[0].Counters.Delivered != 0 {
		t.Errorf("standby's /debug/plugins: %s, want counter.wasm in state standby, compiled, nothing delivered", body)
	}
	if !standby.d.host.Standby() {
		t.Error("both replicas lead")
	}
	compiled := standby.compiles()
	if compiled == 0 {
		t.Error("the standby has not compiled its plugin before taking over")
	}
	if c := standby.counts(); len(c) != 0 {
		t.Errorf("the standby's plugin handled events: counts %v", c)
	}

	// The leader goes; meanwhile the cluster changes.
	if err := leader.stop(); err != nil {
		t.Errorf("leader's Run: %v", err)
	}
	for i := range 3 {
		create(fmt.Sprintf("during%d", i))
	}
	if err := cms.Delete(context.Background(), "before0", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, "the standby to take over", func() bool { return !standby.d.host.Standby() })
	create("after")
	want := count()
	testenv.Eventually(t, "the new leader's plugin view to equal the cluster", func() bool {
		c := standby.counts()
		return len(c) > 0 && c[len(c)-1] == want
	})
	if n := standby.compiles(); n != compiled {
		t.Errorf("the standby compiled its plugin %d more times on takeover", n-compiled)
	}
	if crash && len(standby.logs.Lines("another replica leads")) == 0 {
		t.Error("the standby never saw the crashed leader")
	}
	if err := standby.stop(); err != nil && !errors.Is(err, context.Canceled) {
		t.Errorf("new leader's Run: %v", err)
	}
}
