package host

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/informer-host/informer-host/internal/testenv"
)

// The convergence test's workload: teams Deployments, each with one
// ReplicaSet owning podsPerTeam Pods, and a write limit of 5/s per
// member (burst 10), as in the default grant.
const (
	convergeTeams       = 5
	convergePodsPerTeam = 100
	convergePlugin      = "team-labeler.wasm"
	poisonPod           = "poison"
)

// startLabeler starts one replica of the sharded team-labeler: its own
// pipeline, writes client, host and group membership.
func startLabeler(t *testing.T, ns, group, id string, wasm []byte) *shardMember {
	t.Helper()
	return startShardMemberWith(t, ns, group, id, env.Config, false, memberOptions{
		plugin: convergePlugin, wasm: wasm, writes: env.Config,
		resources: `- {name: pods, version: v1, resource: pods, namespaces: [NS]}
- {name: replicasets, group: apps, version: v1, resource: replicasets, namespaces: [NS]}
- {name: deployments, group: apps, version: v1, resource: deployments, namespaces: [NS]}`,
		module: `bindings: [{resource: pods, events: [add, update]}]
grants:
  cache: [{resource: replicasets}, {resource: deployments}]
  writes:
    qps: 5
    burst: 10
    resources: [{resource: pods, verbs: [apply]}]`,
	})
}

// reload puts wasm in place of the member's plugin file and loads it.
func (sm *shardMember) reload(t *testing.T, wasm []byte) {
	t.Helper()
	replace(t, sm.dir, sm.plugin, wasm)
	if err := sm.h.Load(context.Background(), filepath.Join(sm.dir, sm.plugin)); err != nil {
		t.Fatal(err)
	}
}

func (sm *shardMember) status(t *testing.T) PluginStatus {
	t.Helper()
	for _, s := range sm.h.Status() {
		if s.File == sm.plugin {
			return s
		}
	}
	t.Fatalf("member %s has no %s", sm.id, sm.plugin)
	return PluginStatus{}
}

// parked reports whether the plugin has parked the object ns/name.
func parked(st PluginStatus, ns, name string) bool {
	for _, o := range st.Parked {
		if o.Namespace == ns && o.Name == name {
			return true
		}
	}
	return false
}

// buildTeamLabeler builds the team-labeler example with its test hook
// trapOn set: a version that panics on one Pod.
func buildTeamLabeler(t *testing.T, trapOn string) []byte {
	t.Helper()
	out := filepath.Join(t.TempDir(), "team-labeler.wasm")
	cmd := exec.Command("go", "build", "-buildmode=c-shared", "-trimpath",
		"-ldflags=-X=main.trapOn="+trapOn, "-o", out, "./plugins/examples/team-labeler")
	cmd.Dir = ".."
	cmd.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build team-labeler with trapOn=%s: %v\n%s", trapOn, err, b)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// teamWorkload creates the Deployments, their ReplicaSets and their Pods,
// with owner references as the controllers would set them, and returns
// each Pod's desired team.
func teamWorkload(t *testing.T, ns string) map[string]string {
	t.Helper()
	ctx := context.Background()
	want := map[string]string{}
	var names []string
	var owners []metav1.OwnerReference
	for i := range convergeTeams {
		team := fmt.Sprintf("team-%d", i)
		labels := map[string]string{"app": team}
		dep, err := env.Client.AppsV1().Deployments(ns).Create(ctx, &appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{Name: team, Labels: map[string]string{"team": team}},
			Spec: appsv1.DeploymentSpec{Selector: &metav1.LabelSelector{MatchLabels: labels},
				Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels},
					Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "x"}}}}},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		rs, err := env.Client.AppsV1().ReplicaSets(ns).Create(ctx, &appsv1.ReplicaSet{
			ObjectMeta: metav1.ObjectMeta{Name: team + "-rs", Labels: labels, OwnerReferences: []metav1.OwnerReference{ownerRef("apps/v1", "Deployment", dep.Name, dep.UID)}},
			Spec: appsv1.ReplicaSetSpec{Selector: &metav1.LabelSelector{MatchLabels: labels},
				Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels},
					Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "x"}}}}},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for j := range convergePodsPerTeam {
			name := fmt.Sprintf("%s-%03d", team, j)
			names = append(names, name)
			owners = append(owners, ownerRef("apps/v1", "ReplicaSet", rs.Name, rs.UID))
			want[name] = team
		}
	}
	createOwnedPods(t, ns, names, owners)
	return want
}

func ownerRef(apiVersion, kind, name string, uid types.UID) metav1.OwnerReference {
	yes := true
	return metav1.OwnerReference{APIVersion: apiVersion, Kind: kind, Name: name, UID: uid, Controller: &yes}
}

func createOwnedPods(t *testing.T, ns string, names []string, owners []metav1.OwnerReference) {
	t.Helper()
	var wg sync.WaitGroup
	sem := make(chan struct{}, 20)
	errs := make(chan error, len(names))
	for i, n := range names {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			_, err := env.Client.CoreV1().Pods(ns).Create(context.Background(), &corev1.Pod{
				ObjectMeta: metav1.ObjectMeta{Name: n, OwnerReferences: []metav1.OwnerReference{owners[i]}},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "x"}}}}, metav1.CreateOptions{})
			if err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

// podTeams returns each Pod's team label ("" when it has none).
func podTeams(t *testing.T, ns string) map[string]string {
	t.Helper()
	l, err := env.Client.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, p := range l.Items {
		out[p.Name] = p.Labels["team"]
	}
	return out
}

// wrong lists the Pods whose team label is not the desired one.
func wrong(have, want map[string]string) []string {
	var out []string
	for name, team := range want {
		if have[name] != team {
			out = append(out, name+"="+have[name])
		}
	}
	return out
}

// waitLong polls cond like eventually, for a workload whose pace is set by
// a rate limit rather than by the machine: 500 writes at 5/s take 100 s
// on one member alone. The bound only ends a test that would never pass.
func waitLong(t *testing.T, what string, cond func() bool) {
	t.Helper()
	testenv.EventuallyWithin(t, 4*testenv.EventuallyTimeout, what, cond)
}

// TestTeamLabelerConverges is the contract of a plugin that writes,
// checked end to end against the real apiserver: a labelling controller
// over 500 Pods (desired label read through the owner chain Pod →
// ReplicaSet → Deployment in the cache), a write limit of 5/s, two
// reloads, a version that panics on one Pod, kubectl taking the label
// over on some Pods, and a second replica joining the sharding group
// (half the Pods handed over). Every Pod ends with its Deployment's team,
// nothing is dropped, the poison Pod is parked and reported while the
// broken version runs (not retried on every restart, the plugin not
// quarantined), and the time to converge is printed.
func TestTeamLabelerConverges(t *testing.T) {
	ns := controlPlane(t).Namespace(t)
	good := example(t, "team-labeler")
	broken := buildTeamLabeler(t, poisonPod)
	want := teamWorkload(t, ns)
	start := time.Now()

	a := startLabeler(t, ns, "labelers", "a", good)
	waitLong(t, "60 pods labelled by the first member", func() bool { return len(want)-len(wrong(podTeams(t, ns), want)) >= 60 })

	// kubectl takes the label over on ten labelled Pods: the plugin's
	// apply then conflicts with kubectl's field manager, and it forces.
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := env.WriteKubeconfig(kubeconfig); err != nil {
		t.Fatal(err)
	}
	var taken []string
	for name, team := range podTeams(t, ns) {
		if team != "" && len(taken) < 10 {
			taken = append(taken, name)
		}
	}
	args := append([]string{"--kubeconfig", kubeconfig, "-n", ns, "label", "--overwrite", "pod"}, taken...)
	if out, err := exec.Command("kubectl", append(args, "team=intruder")...).CombinedOutput(); err != nil {
		t.Fatalf("kubectl label: %v\n%s", err, out)
	}

	// The first reload: a version that panics on one Pod, which is
	// created once it runs.
	a.reload(t, broken)
	rs0, err := env.Client.AppsV1().ReplicaSets(ns).Get(context.Background(), "team-0-rs", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	createOwnedPods(t, ns, []string{poisonPod}, []metav1.OwnerReference{ownerRef("apps/v1", "ReplicaSet", rs0.Name, rs0.UID)})
	want[poisonPod] = "team-0"
	waitLong(t, "the poison pod parked", func() bool { return parked(a.status(t), ns, poisonPod) })
	if st := a.status(t); st.State == StateQuarantined || st.Counters.Traps < 3 {
		t.Fatalf("one poison pod: want it parked after its traps (limits.parkAfter 3) and the plugin running: %+v", st)
	}
	if n := len(a.logs.lines("parked")); n == 0 {
		t.Errorf("the poison pod was parked without a log line")
	}

	// A second replica joins: half the Pods move to it, while the first
	// still has writes to do.
	b := startLabeler(t, ns, "labelers", "b", broken)
	waitLong(t, "the second member to own objects", func() bool {
		as := b.h.Assignment()
		return as != nil && as.Active && len(as.Members) == 2 && as.Valid(time.Now())
	})

	// The second reload, on both: the fixed version; parked objects get
	// a new chance with new code.
	a.reload(t, variant(good, 1))
	b.reload(t, variant(good, 1))

	waitLong(t, "every pod labelled with its deployment's team", func() bool { return len(wrong(podTeams(t, ns), want)) == 0 })
	elapsed := time.Since(start)

	for _, lb := range []*shardMember{a, b} {
		st := lb.status(t)
		c := st.Counters
		if c.RetryExhausted != 0 || c.Dropped != 0 {
			t.Errorf("member %s dropped objects: %+v", lb.id, c)
		}
		if st.State == StateQuarantined {
			t.Errorf("member %s quarantined: %+v", lb.id, st)
		}
		t.Logf("member %s: %+v", lb.id, c)
	}
	takeovers := len(a.logs.lines("took over")) + len(b.logs.lines("took over"))
	if takeovers < len(taken) {
		t.Errorf("%d takeovers from kubectl's field manager for %d pods it labelled", takeovers, len(taken))
	}
	t.Logf("converged: %d pods labelled in %s (write limit 5/s per member, two reloads, one poison pod, %d pods taken over from kubectl, one member joined)",
		len(want), elapsed.Round(time.Millisecond), len(taken))
}
