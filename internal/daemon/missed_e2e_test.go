package daemon

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/informer-host/informer-host/internal/seenkeys"
	"github.com/informer-host/informer-host/internal/testenv"
)

// A leader-elected daemon keeps the keys its plugins were handed in
// ConfigMaps in its Lease's namespace, so a delete that happens while it
// is down reaches the plugin after it starts again. The counter plugin
// counts adds and deletes, and logs the missed deletes apart: its fresh
// instance counts the two objects left (the initial list), and then gets
// exactly the two deletes it missed.
func TestMissedDeletesAcrossADaemonRestart(t *testing.T) {
	env.Require(t)
	ns, daemonNS := env.Namespace(t), env.Namespace(t)
	cfg := writeDaemonConfig(t, ns, "counter.wasm", "../../host/testdata/plugins/counter.wat", `leaderElection:
  enabled: true
  namespace: `+daemonNS+`
  leaseName: informer-host
  leaseDuration: 2s
  renewDeadline: 1500ms
  retryPeriod: 250ms
`)
	ctx := context.Background()
	cms := env.Client.CoreV1().ConfigMaps(ns)
	for i := range 4 {
		if _, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("cm%d", i)}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	r := startReplica(t, cfg, Options{})
	testenv.Eventually(t, "the plugin to count the four ConfigMaps", func() bool { return r.last() == 4 })
	if err := r.stop(); err != nil {
		t.Fatal(err)
	}
	seen, err := env.Client.CoreV1().ConfigMaps(daemonNS).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, cm := range seen.Items {
		if strings.HasPrefix(cm.Name, seenkeys.NamePrefix) {
			n++
		}
	}
	if n != 1 {
		t.Fatalf("%d seen-keys ConfigMaps in the daemon's namespace after a graceful stop; want 1", n)
	}

	for _, name := range []string{"cm0", "cm1"} {
		if err := cms.Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	r = startReplica(t, cfg, Options{})
	missed := func() []string { return r.logs.Lines("plugin=counter.wasm", `msg="missed=`) }
	testenv.Eventually(t, "the two missed deletes", func() bool { return len(missed()) == 2 })
	if c := r.counts(); !slices.Equal(c, []int{1, 2}) {
		t.Errorf("counts after the restart: %v; want the initial list's 1,2 and no other add or delete", c)
	}
	if l := r.logs.Lines("handing the plugin the deletes it missed", "objects=2"); len(l) != 1 {
		t.Errorf("log of the missed deletes: %q", l)
	}
}
