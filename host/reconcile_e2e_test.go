package host

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/informer-host/informer-host/abi"
	"github.com/informer-host/informer-host/event"
	"github.com/informer-host/informer-host/host/internal/engine"
	"github.com/informer-host/informer-host/internal/controllerwrites"
	"github.com/informer-host/informer-host/internal/shard"
)

// The controller loop's tests run testdata/plugins/reconciler.wat, whose
// answer depends on the key's name (see the file), as the controller of
// the test's ConfigMaps labelled role=primary, owning its Secrets.

const reconcilerPlugin = "reconciler.wasm"

const testFinalizer = "test.informer-host.io/cleanup"

// controllerHarness runs reconciler.wasm with controller (the YAML flow
// mapping of its controller block) and limits.
func controllerHarness(t *testing.T, controller, limits string, setup ...func(*harness)) *harness {
	t.Helper()
	hs, err := newHarness(t, `
apiVersion: informer-host/v1
resources:
  - {name: cms, version: v1, resource: configmaps, namespaces: [NS], labelSelector: role=primary}
  - {name: secrets, version: v1, resource: secrets, namespaces: [NS]}
plugins:
  directory: DIR
  default:
    controller: `+controller+`
    grants:
      writes:
        resources:
          - {resource: cms, verbs: [patch, apply]}
          - {resource: secrets, verbs: [apply, delete]}
    limits: `+limits+`
    delivery: {retryBackoff: 20ms, maxRetryBackoff: 200ms}
`, map[string][]byte{reconcilerPlugin: testPlugin(t, "reconciler")}, setup...)
	if err != nil {
		t.Fatal(err)
	}
	return hs
}

// reconciles returns the observed reconcile calls of the primary name.
func (hs *harness) reconciles(name string) []observed {
	var out []observed
	for _, d := range hs.rec.of(reconcilerPlugin) {
		if d.Type == event.EventType(abi.EventReconcile) && d.Key == hs.ns+"/"+name {
			out = append(out, d)
		}
	}
	return out
}

// createPrimary creates a ConfigMap the controller reconciles.
func (hs *harness) createPrimary(name string) *corev1.ConfigMap {
	hs.t.Helper()
	cm, err := env.Client.CoreV1().ConfigMaps(hs.ns).Create(context.Background(),
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"role": "primary"}}}, metav1.CreateOptions{})
	if err != nil {
		hs.t.Fatal(err)
	}
	return cm
}

func (hs *harness) getCM(name string) (*corev1.ConfigMap, bool) {
	hs.t.Helper()
	cm, err := env.Client.CoreV1().ConfigMaps(hs.ns).Get(context.Background(), name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, false
	}
	if err != nil {
		hs.t.Fatal(err)
	}
	return cm, true
}

func (hs *harness) getSecret(name string) (*corev1.Secret, bool) {
	hs.t.Helper()
	s, err := env.Client.CoreV1().Secrets(hs.ns).Get(context.Background(), name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, false
	}
	if err != nil {
		hs.t.Fatal(err)
	}
	return s, true
}

// Updates of a key made while the plugin is busy with it coalesce: the
// key is reconciled again once, not once per update, and that reconcile
// sees the newest object.
func TestControllerCoalescesUpdates(t *testing.T) {
	hs := controllerHarness(t, "{for: cms}", "{}")
	held, open := hs.rec.gate(reconcilerPlugin)
	cm := hs.createPrimary("co-a")
	<-held // the worker is held after the first reconcile of co-a
	for i := range 10 {
		cm = hs.updateCM(cm, "n", fmt.Sprint(i))
	}
	open()
	eventually(t, "co-a reconciled at its newest version", func() bool {
		rs := hs.reconciles("co-a")
		return len(rs) > 0 && rs[len(rs)-1].RV == cm.ResourceVersion
	})
	// The first call, and the ones the updates made while it was held;
	// an update still in flight when the key was taken again may add one.
	if rs := hs.reconciles("co-a"); len(rs) > 3 {
		t.Errorf("%d reconciles of co-a for one add and 10 updates made during the first; want at most 3: %v", len(rs), rs)
	}
	if v := hs.pluginMetric("controller_runtime_reconcile_total", map[string]string{"controller": reconcilerPlugin, "result": "success"}); v < 2 {
		t.Errorf("controller_runtime_reconcile_total{result=success} = %v, want at least 2", v)
	}
	if st := hs.status(reconcilerPlugin); st.Controller == nil || st.Controller.For != "cms" || !st.Synced {
		t.Errorf("status.Controller = %+v, synced %v; want the loop of cms, synced", st.Controller, st.Synced)
	}
}

// A child's event enqueues its primary: deleting the child the plugin
// wants makes the host reconcile the primary, which applies it again;
// once the primary is gone the host prunes the child.
func TestControllerOwnsMapsChildToPrimary(t *testing.T) {
	hs := controllerHarness(t, "{for: cms, owns: [secrets]}", "{}")
	primary := hs.createPrimary("kids-a")
	var child *corev1.Secret
	eventually(t, "the child applied", func() bool {
		s, ok := hs.getSecret("kids-a")
		child = s
		return ok
	})
	if refs := child.OwnerReferences; len(refs) != 1 || refs[0].UID != primary.UID || refs[0].Controller == nil || !*refs[0].Controller {
		t.Errorf("child's ownerReferences %+v, want the primary as controller", refs)
	}
	if child.Labels[controllerwrites.LabelPlugin] == "" {
		t.Errorf("child's labels %v lack the host's %s", child.Labels, controllerwrites.LabelPlugin)
	}
	n := len(hs.reconciles("kids-a"))
	if err := env.Client.CoreV1().Secrets(hs.ns).Delete(context.Background(), "kids-a", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the child's delete reconciling the primary, and the child applied again", func() bool {
		s, ok := hs.getSecret("kids-a")
		return len(hs.reconciles("kids-a")) > n && ok && s.UID != child.UID
	})
	hs.deleteCM("kids-a")
	eventually(t, "the child pruned once the primary is gone", func() bool {
		_, ok := hs.getSecret("kids-a")
		return !ok
	})
}

// With a finalizer, the host adds it before the plugin first reconciles
// the object, hands the plugin the object once it is being deleted, and
// removes the finalizer when the plugin answers OK: the object goes.
func TestControllerFinalizer(t *testing.T) {
	hadFinalizer := make(chan bool, 100)
	var hs *harness
	hs = controllerHarness(t, "{for: cms, finalizer: "+testFinalizer+"}", "{}", func(h *harness) {
		h.rec.probe = func(plugin string, d observed) {
			if d.Type != event.EventType(abi.EventReconcile) || !strings.HasSuffix(d.Key, "/fin-a") {
				return
			}
			// The worker is between the call and its settling: the
			// apiserver has what the host wrote before the call.
			cm, err := env.Client.CoreV1().ConfigMaps(h.ns).Get(context.Background(), "fin-a", metav1.GetOptions{})
			hadFinalizer <- err == nil && slices.Contains(cm.Finalizers, testFinalizer) || apierrors.IsNotFound(err)
		}
	})
	hs.createPrimary("fin-a")
	if !<-hadFinalizer {
		t.Fatal("the first reconcile of fin-a came before the host added its finalizer")
	}
	cm, _ := hs.getCM("fin-a")
	if !slices.Contains(cm.Finalizers, testFinalizer) {
		t.Fatalf("finalizers %v, want %s", cm.Finalizers, testFinalizer)
	}
	hs.deleteCM("fin-a")
	eventually(t, "fin-a gone once the plugin reconciled its deletion", func() bool {
		_, ok := hs.getCM("fin-a")
		return !ok
	})
	deleting := false
	for _, d := range hs.reconciles("fin-a") {
		deleting = deleting || d.Code == engine.CodeOK && d.Failure == 0
	}
	if !deleting {
		t.Errorf("reconciles of fin-a %v", hs.reconciles("fin-a"))
	}
}

// A requeue-after answer reconciles the key again with no change to it,
// shows in the status, is persisted on the object, and survives a
// reload: the new version's replay DROPs the key (reconciler.wat does),
// so only the persisted timer brings it back.
func TestControllerRequeueAfterSurvivesReload(t *testing.T) {
	hs := controllerHarness(t, "{for: cms}", "{}")
	hs.createPrimary("requ-a")
	live := func() int {
		n := 0
		for _, d := range hs.reconciles("requ-a") {
			if !d.Initial {
				n++
			}
		}
		return n
	}
	eventually(t, "the requeue timer persisted on requ-a", func() bool {
		cm, ok := hs.getCM("requ-a")
		if !ok {
			return false
		}
		for k := range cm.Annotations {
			if strings.HasPrefix(k, controllerwrites.AnnotationRequeuePrefix) {
				return true
			}
		}
		return false
	})
	st := hs.status(reconcilerPlugin)
	if st.Controller == nil || !slices.ContainsFunc(st.Controller.NextRequeue, func(d RequeueDue) bool { return d.Name == "requ-a" }) {
		t.Errorf("status.Controller %+v: want requ-a among the next requeues", st.Controller)
	}
	eventually(t, "requ-a reconciled again by its timer", func() bool { return live() >= 2 })
	// The host's own annotation write is an update of the primary that
	// enqueues nothing (else every requeue would reconcile at once).
	eventually(t, "the annotation's update passed over", func() bool {
		return hs.status(reconcilerPlugin).Filtered["cms"].Unchanged > 0
	})

	// A new version: the same module with a custom section appended.
	b, err := os.ReadFile(filepath.Join(hs.dir, reconcilerPlugin))
	if err != nil {
		t.Fatal(err)
	}
	hs.write(reconcilerPlugin, append(b, 0, 5, 3, 'n', 'e', 'w', 1))
	if err := hs.h.Load(context.Background(), filepath.Join(hs.dir, reconcilerPlugin)); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the new version's replay of requ-a", func() bool {
		return slices.ContainsFunc(hs.reconciles("requ-a"), func(d observed) bool { return d.Initial })
	})
	before := live()
	eventually(t, "requ-a reconciled by the timer re-armed from its annotation", func() bool { return live() > before })
}

// A trap restarts the instance, and the fresh instance is handed every
// key again, flagged as a replay of the cache.
func TestControllerRestartReconcilesEveryKey(t *testing.T) {
	hs := controllerHarness(t, "{for: cms}", "{restartBackoff: 10ms}")
	names := []string{"ok-1", "ok-2", "ok-3"}
	for _, n := range names {
		hs.createPrimary(n)
	}
	eventually(t, "the keys reconciled", func() bool {
		for _, n := range names {
			if len(hs.reconciles(n)) == 0 {
				return false
			}
		}
		return true
	})
	hs.createPrimary("trap-a")
	eventually(t, "every key replayed after the restart", func() bool {
		for _, n := range append(names, "trap-a") {
			if !slices.ContainsFunc(hs.reconciles(n), func(d observed) bool { return d.Initial && d.Code == engine.CodeOK && d.Failure == 0 }) {
				return false
			}
		}
		return true
	})
	if c := hs.status(reconcilerPlugin).Counters; c.Traps != 1 || c.Restarts != 1 {
		t.Errorf("traps %d, restarts %d; want 1 and 1", c.Traps, c.Restarts)
	}
}

// RETRY answers are retried with the key's backoff, forever by default;
// ERROR answers count towards parking: after limits.parkAfter of them
// the key is parked, listed in the status, and not reconciled again
// until it changes.
func TestControllerRetryBackoffAndParking(t *testing.T) {
	hs := controllerHarness(t, "{for: cms}", "{parkAfter: 3}")
	hs.createPrimary("rtry-a")
	eventually(t, "rtry-a retried", func() bool { return len(hs.reconciles("rtry-a")) >= 4 })
	errr := hs.createPrimary("errr-a")
	eventually(t, "errr-a parked", func() bool {
		st := hs.status(reconcilerPlugin)
		return st.Controller != nil && st.Controller.Parked == 1 && len(st.Parked) == 1 && st.Parked[0].Name == "errr-a"
	})
	if n := len(hs.reconciles("errr-a")); n != 3 {
		t.Errorf("%d reconciles of errr-a, want 3 (parkAfter)", n)
	}
	// Other keys go on; the parked one is not handed again.
	hs.createPrimary("ok-b")
	eventually(t, "ok-b reconciled", func() bool { return len(hs.reconciles("ok-b")) > 0 })
	if n := len(hs.reconciles("errr-a")); n != 3 {
		t.Errorf("%d reconciles of the parked errr-a, want still 3", n)
	}
	if c := hs.status(reconcilerPlugin).Counters; c.Retries < 3 {
		t.Errorf("retries %d, want at least 3", c.Retries)
	}
	// A change hands it again at once.
	hs.updateCM(errr, "k", "v")
	eventually(t, "the changed errr-a reconciled again", func() bool { return len(hs.reconciles("errr-a")) > 3 })
}

// Sharded, a member reconciles only the keys it owns (the event mode's
// hash of namespace and name); on a handover it reconciles the keys it
// gains, flagged as a replay of the cache, and a key it lost is not
// reconciled again when it changes.
func TestControllerShardedHandover(t *testing.T) {
	now := time.Now()
	pair := func() *shard.Assignment {
		return shard.NewAssignment("a", []string{"a", "b"}, shard.KeyNamespaceName, true, now, now.Add(time.Hour))
	}
	alone := shard.NewAssignment("a", []string{"a"}, shard.KeyNamespaceName, true, now, now.Add(time.Hour))
	hs := controllerHarness(t, "{for: cms}", "{}", func(h *harness) { h.assignment = pair() })
	var mine, theirs []string
	for i := range 20 {
		n := fmt.Sprintf("sh-%d", i)
		hs.createPrimary(n)
		if pair().OwnsKey(hs.ns, n) {
			mine = append(mine, n)
		} else {
			theirs = append(theirs, n)
		}
	}
	if len(mine) == 0 || len(theirs) == 0 {
		t.Fatalf("the pair splits the keys %d/%d; the test needs both sides", len(mine), len(theirs))
	}
	reconciled := func(names []string, initial bool) bool {
		for _, n := range names {
			if !slices.ContainsFunc(hs.reconciles(n), func(d observed) bool { return !initial || d.Initial }) {
				return false
			}
		}
		return true
	}
	eventually(t, "this member's keys reconciled, every key in the cache", func() bool {
		keys, err := hs.p.CacheKeys(nil, "cms", "", "")
		return err == nil && len(keys) == 20 && reconciled(mine, false)
	})
	for _, n := range theirs {
		if rs := hs.reconciles(n); len(rs) > 0 {
			t.Errorf("%s, the other member's, reconciled here: %v", n, rs)
		}
	}
	hs.h.SetAssignment(alone)
	eventually(t, "the keys gained reconciled as a replay", func() bool { return reconciled(theirs, true) })

	hs.h.SetAssignment(pair())
	lost, kept := theirs[0], mine[0]
	before := len(hs.reconciles(lost))
	lostCM, _ := hs.getCM(lost)
	keptCM, _ := hs.getCM(kept)
	hs.updateCM(lostCM, "k", "v")
	keptCM = hs.updateCM(keptCM, "k", "v")
	eventually(t, "the kept key's change reconciled", func() bool {
		return slices.ContainsFunc(hs.reconciles(kept), func(d observed) bool { return d.RV == keptCM.ResourceVersion })
	})
	if n := len(hs.reconciles(lost)); n != before {
		t.Errorf("%s, handed back to the other member, reconciled %d more times here", lost, n-before)
	}
}

// releaseAll frees the test namespace's ConfigMaps of the test finalizer
// (so the namespace can go once the test is over).
func (hs *harness) releaseAll() {
	gvr := schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	dyn, err := dynamic.NewForConfig(env.Config)
	if err != nil {
		hs.t.Fatal(err)
	}
	if _, err := controllerwrites.Release(context.Background(), dyn, gvr, testFinalizer, false, hs.ns); err != nil {
		hs.t.Errorf("releasing the test finalizer: %v", err)
	}
}

// A quarantined controller keeps its finalizer (it may come back), and
// the objects being deleted that wait on it are reported: in the status,
// as informer_host_controller_finalizer_stuck, and in /readyz (server).
func TestControllerQuarantinedFinalizerIsReported(t *testing.T) {
	hs := controllerHarness(t, "{for: cms, finalizer: "+testFinalizer+"}", "{maxConsecutiveFailures: 1, parkAfter: 0}")
	t.Cleanup(hs.releaseAll)
	hs.createPrimary("fin-a")
	eventually(t, "fin-a reconciled", func() bool { return len(hs.reconciles("fin-a")) > 0 })
	hs.createPrimary("trap-a")
	eventually(t, "quarantine", func() bool { return hs.status(reconcilerPlugin).State == StateQuarantined })
	hs.deleteCM("fin-a")
	eventually(t, "fin-a reported stuck on the finalizer", func() bool {
		c := hs.status(reconcilerPlugin).Controller
		return c != nil && c.Finalizer == testFinalizer && c.FinalizerStuck == 1
	})
	if v := hs.pluginMetric("informer_host_controller_finalizer_stuck", map[string]string{"plugin": reconcilerPlugin, "finalizer": testFinalizer}); v != 1 {
		t.Errorf("informer_host_controller_finalizer_stuck = %v, want 1", v)
	}
	if cm, ok := hs.getCM("fin-a"); !ok || !slices.Contains(cm.Finalizers, testFinalizer) {
		t.Errorf("fin-a %v: want it still there, held by the finalizer", cm)
	}
	if n := len(hs.logs.lines("quarantined controller keeps its finalizer")); n != 1 {
		t.Errorf("%d warnings of the finalizer kept on quarantine, want 1", n)
	}
}

// A controller removed with onRemove: release has its finalizer taken
// off its objects; with the default (keep) it stays.
func TestControllerOnRemove(t *testing.T) {
	for _, tc := range []struct {
		onRemove string
		released bool
	}{{"release", true}, {"keep", false}} {
		t.Run(tc.onRemove, func(t *testing.T) {
			hs := controllerHarness(t, "{for: cms, finalizer: "+testFinalizer+", onRemove: "+tc.onRemove+"}", "{}")
			t.Cleanup(hs.releaseAll)
			hs.createPrimary("fin-a")
			eventually(t, "fin-a reconciled", func() bool { return len(hs.reconciles("fin-a")) > 0 })
			if cm, _ := hs.getCM("fin-a"); !slices.Contains(cm.Finalizers, testFinalizer) {
				t.Fatalf("finalizers %v, want %s", cm.Finalizers, testFinalizer)
			}
			hs.h.removed(context.Background(), reconcilerPlugin)
			cm, _ := hs.getCM("fin-a")
			if has := slices.Contains(cm.Finalizers, testFinalizer); has == tc.released {
				t.Errorf("onRemove: %s: finalizers after the removal %v", tc.onRemove, cm.Finalizers)
			}
		})
	}
}
