package host

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/informer-host/informer-host/event"
	"github.com/informer-host/informer-host/host/internal/engine"
	"github.com/informer-host/informer-host/informer"
	"github.com/informer-host/informer-host/internal/config"
	"github.com/informer-host/informer-host/internal/shard"
	"github.com/informer-host/informer-host/internal/testenv"
)

// Short lease timings: the tests wait on conditions, and these only make
// the waits short.
const (
	testLease   = 2 * time.Second
	testRenew   = time.Second
	testRetry   = 150 * time.Millisecond
	shardPlugin = "counter.wasm"
)

// shardMember is one in-process replica of a sharding group: its own
// pipeline, host, and membership, and the records a test checks.
type shardMember struct {
	id     string
	plugin string
	dir    string // the plugin directory
	p      *informer.Pipeline
	h      *Host
	m      *shard.Member
	rec    *recorder
	logs   *logs
	cancel context.CancelFunc
	done   chan struct{}

	mu sync.Mutex
	// timeline is every Assignment the member published, in order.
	timeline []*shard.Assignment
	// delivered are the adds and updates handed to the plugin, with the
	// Assignment each was decided under; handed counts handed-over
	// deletes.
	delivered []shardDelivery
	handed    int
	// haltedAt is when the test killed the member (zero: alive).
	haltedAt time.Time
}

type shardDelivery struct {
	key string
	a   *shard.Assignment
}

// memberOptions vary a test's member from the default: the counter
// plugin on every ConfigMap of the namespace, the short lease timings.
type memberOptions struct {
	// lease, renew and retry replace testLease, testRenew, testRetry.
	lease, renew, retry time.Duration
	// plugin is the plugin file; wasm its module; module the rest of its
	// entry in the config (bindings, config, grants). Default: counter.
	plugin, module string
	wasm           []byte
	// selector restricts the resource to labelled ConfigMaps.
	selector string
	// resources, when set, replaces the ConfigMaps resource: the config's
	// resources list, one "- {...}" entry a line, NS for the namespace.
	resources string
	// writes, when set, is the client config of the plugins' writes
	// (k8s_write); nil: no writes client.
	writes *rest.Config
}

// startShardMember starts member id of group on namespace ns. rc is the
// client config of its membership (the informers use the control plane's
// directly).
func startShardMember(t *testing.T, ns, group, id string, rc *rest.Config, abandon bool) *shardMember {
	t.Helper()
	return startShardMemberWith(t, ns, group, id, rc, abandon, memberOptions{})
}

func startShardMemberWith(t *testing.T, ns, group, id string, rc *rest.Config, abandon bool, mo memberOptions) *shardMember {
	t.Helper()
	if mo.plugin == "" {
		mo.plugin, mo.wasm, mo.module = shardPlugin, testPlugin(t, "counter"), "bindings: [{resource: cms}]"
	}
	if mo.lease == 0 {
		mo.lease, mo.renew, mo.retry = testLease, testRenew, testRetry
	}
	sm := &shardMember{id: id, plugin: mo.plugin, rec: &recorder{by: map[string][]observed{}, gates: map[string]chan struct{}{}, blocked: map[string]chan struct{}{}},
		logs: &logs{}, done: make(chan struct{})}
	dir := t.TempDir()
	sm.dir = dir
	if err := os.WriteFile(filepath.Join(dir, mo.plugin), mo.wasm, 0o644); err != nil {
		t.Fatal(err)
	}
	if mo.resources == "" {
		mo.resources = fmt.Sprintf("- {name: cms, version: v1, resource: configmaps, namespaces: [NS], labelSelector: %q}", mo.selector)
	}
	cfg, err := config.Parse(filepath.Join(dir, "config.yaml"), []byte(fmt.Sprintf(`
apiVersion: informer-host/v1
resources:
  %s
plugins:
  directory: %s
  modules:
  - file: %s
    %s
`, strings.ReplaceAll(strings.ReplaceAll(mo.resources, "NS", ns), "\n", "\n  "), dir, mo.plugin, strings.ReplaceAll(mo.module, "\n", "\n    "))))
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(sm.logs, &slog.HandlerOptions{Level: slog.LevelInfo})).With("member", id)
	if sm.p, err = informer.New(informer.Options{RESTConfig: env.Config, Logger: log}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(sm.p.Stop)
	if err := sm.p.Apply(context.Background(), cfg.Resources); err != nil {
		t.Fatal(err)
	}
	ho := Options{Pipeline: sm.p, Config: cfg, Logger: log, observe: sm.rec.observe, CacheDir: "-"}
	if mo.writes != nil {
		if ho.Writes, err = NewWritesClient(mo.writes, sm.p, log); err != nil {
			t.Fatal(err)
		}
	}
	if sm.h, err = New(context.Background(), ho); err != nil {
		t.Fatal(err)
	}
	sm.h.shard.onDeliver = func(_ string, ev *event.Event, a *shard.Assignment, _ time.Time) {
		sm.mu.Lock()
		defer sm.mu.Unlock()
		switch {
		case ev.HandedOver:
			sm.handed++
		case ev.Type != event.EventDelete:
			sm.delivered = append(sm.delivered, shardDelivery{key: ev.Key(), a: a})
		}
	}
	cs, err := kubernetes.NewForConfig(rc)
	if err != nil {
		t.Fatal(err)
	}
	sm.m, err = shard.New(shard.Options{Client: cs.CoordinationV1(), Namespace: ns, Group: group, Identity: id,
		LeaseDuration: mo.lease, RenewDeadline: mo.renew, RetryPeriod: mo.retry, Abandon: abandon, Logger: log,
		OnChange: func(a *shard.Assignment) {
			sm.mu.Lock()
			sm.timeline = append(sm.timeline, a)
			sm.mu.Unlock()
			sm.h.SetAssignment(a)
		}})
	if err != nil {
		t.Fatal(err)
	}
	first := sm.m.Assignment()
	sm.timeline = []*shard.Assignment{first}
	sm.h.SetAssignment(first) // before any plugin loads: nothing is delivered before the member joins
	if err := sm.h.LoadDir(context.Background()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	sm.cancel = cancel
	go func() {
		defer close(sm.done)
		sm.m.Run(ctx)
	}()
	t.Cleanup(func() {
		sm.kill()
		if t.Failed() {
			t.Logf("member %s log:\n%s", id, sm.logs.String())
		}
	})
	return sm
}

// kill stops the member as a crash would: its plugins stop at once, and
// its membership stops renewing (the Lease is kept if it abandons it).
func (sm *shardMember) kill() {
	sm.mu.Lock()
	if !sm.haltedAt.IsZero() {
		sm.mu.Unlock()
		return
	}
	sm.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	sm.h.Halt(ctx)
	sm.mu.Lock()
	sm.haltedAt = time.Now()
	sm.mu.Unlock()
	sm.cancel()
	<-sm.done
}

// view is the plugin's view: key -> resourceVersion.
func (sm *shardMember) view() map[string]string { return view(sm.rec.of(sm.plugin), "cms") }

// active reports whether the member is active and counts n members.
func (sm *shardMember) active(n int) bool {
	a := sm.h.Assignment()
	return a.Active && len(a.Members) == n && a.Valid(time.Now())
}

// interval is how long a published Assignment was in force: from its
// publication to the next one's, or its validity's end, or the member's
// death, whichever came first.
type interval struct {
	member   string
	a        *shard.Assignment
	from, to time.Time
}

func (sm *shardMember) intervals(end time.Time) []interval {
	sm.mu.Lock()
	defer sm.mu.Unlock()
	var out []interval
	for i, a := range sm.timeline {
		if !a.Active {
			continue
		}
		to := a.ValidUntil()
		if i+1 < len(sm.timeline) && sm.timeline[i+1].Since.Before(to) {
			to = sm.timeline[i+1].Since
		}
		if !sm.haltedAt.IsZero() && sm.haltedAt.Before(to) {
			to = sm.haltedAt
		}
		if end.Before(to) {
			to = end
		}
		if a.Since.Before(to) {
			out = append(out, interval{member: sm.id, a: a, from: a.Since, to: to})
		}
	}
	return out
}

// doubleOwnership returns, for every key owned by two members' views in
// force at once, how long that lasted.
func doubleOwnership(members []*shardMember, keys []string) []string {
	end := time.Now()
	var all [][]interval
	for _, sm := range members {
		all = append(all, sm.intervals(end))
	}
	var out []string
	for i := range all {
		for j := i + 1; j < len(all); j++ {
			for _, x := range all[i] {
				for _, y := range all[j] {
					from, to := later(x.from, y.from), earlier(x.to, y.to)
					if !from.Before(to) {
						continue
					}
					for _, k := range keys {
						ns, name, _ := strings.Cut(k, "/")
						if x.a.OwnsKey(ns, name) && y.a.OwnsKey(ns, name) {
							out = append(out, fmt.Sprintf("%s owned by %s (%v) and %s (%v) for %s", k, x.member, x.a.Members,
								y.member, y.a.Members, to.Sub(from)))
						}
					}
				}
			}
		}
	}
	return out
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

func earlier(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

// churn updates, deletes and creates ConfigMaps of ns until stop is
// closed, and records every name it created.
func churn(t *testing.T, ns string, names *sync.Map, stop <-chan struct{}, done chan<- struct{}) {
	defer close(done)
	cms := env.Client.CoreV1().ConfigMaps(ns)
	rnd := rand.New(rand.NewPCG(1, 2))
	for i := 0; ; i++ {
		select {
		case <-stop:
			return
		default:
		}
		name := fmt.Sprintf("cm%d", rnd.IntN(1000))
		var err error
		switch i % 3 {
		case 0:
			_, err = cms.Update(context.Background(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name},
				Data: map[string]string{"i": fmt.Sprint(i)}}, metav1.UpdateOptions{})
		case 1:
			err = cms.Delete(context.Background(), name, metav1.DeleteOptions{})
		case 2:
			name = fmt.Sprintf("new%d", i)
			names.Store(ns+"/"+name, true)
			_, err = cms.Create(context.Background(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
		}
		if err != nil && !strings.Contains(err.Error(), "not found") {
			t.Errorf("churn: %v", err)
			return
		}
	}
}

// checkPartition reports how the members' views differ from the
// cluster's ConfigMaps: each object in exactly one view, at the cluster's
// resourceVersion, and in the view of the member that owns it.
func checkPartition(members []*shardMember, cluster map[string]string) string {
	owner := map[string]string{}
	for _, sm := range members {
		for k, rv := range sm.view() {
			if o, dup := owner[k]; dup {
				return fmt.Sprintf("%s in the views of %s and %s", k, o, sm.id)
			}
			owner[k] = sm.id
			if cluster[k] != rv {
				return fmt.Sprintf("%s: %s has resourceVersion %s, the cluster %q", k, sm.id, rv, cluster[k])
			}
			ns, name, _ := strings.Cut(k, "/")
			if !sm.h.Assignment().OwnsKey(ns, name) {
				return fmt.Sprintf("%s in the view of %s, which does not own it", k, sm.id)
			}
		}
	}
	for k := range cluster {
		if owner[k] == "" {
			return fmt.Sprintf("%s in no member's view", k)
		}
	}
	return ""
}

// Three members share 1,000 ConfigMaps under churn; each object
// reaches exactly one member's plugin; a member killed without giving its
// Lease up has its objects taken over once the Lease expires; and no two
// members' views in force at once ever owned one object.
func TestShardingThreeMembersUnderChurnAndAKill(t *testing.T) {
	cp := controlPlane(t)
	hs := &harness{t: t, ns: cp.Namespace(t)}
	ns := hs.ns
	hs.createMany("cm", 1000)
	var names sync.Map
	for i := range 1000 {
		names.Store(fmt.Sprintf("%s/cm%d", ns, i), true)
	}

	stop, churned := make(chan struct{}), make(chan struct{})
	go churn(t, ns, &names, stop, churned)
	// Members join one at a time under churn, so objects move twice.
	var members []*shardMember
	for i := range 3 {
		members = append(members, startShardMember(t, ns, "g", fmt.Sprintf("m%d", i), env.Config, true))
		n := i + 1
		eventually(t, fmt.Sprintf("%d members active", n), func() bool {
			for _, sm := range members {
				if !sm.active(n) {
					return false
				}
			}
			return true
		})
	}
	close(stop)
	<-churned

	cluster := hs.clusterCMs()
	var why string
	eventually(t, "every object in exactly one member's view", func() bool {
		why = checkPartition(members, cluster)
		return why == ""
	})
	for _, sm := range members {
		if n := len(sm.view()); n == 0 || n == len(cluster) {
			t.Errorf("member %s holds %d of %d objects: the objects are not shared", sm.id, n, len(cluster))
		}
	}

	// Kill m1 as a crash would: its Lease stays until it expires.
	victim := members[1]
	victim.kill()
	if _, err := env.Client.CoordinationV1().Leases(ns).Get(context.Background(), "g-"+victim.id, metav1.GetOptions{}); err != nil {
		t.Fatalf("the killed member's Lease: %v; a crash leaves it to expire", err)
	}
	rest := []*shardMember{members[0], members[2]}
	eventually(t, "the survivors to count two members", func() bool { return rest[0].active(2) && rest[1].active(2) })
	for i := range 50 {
		_, err := env.Client.CoreV1().ConfigMaps(ns).Update(context.Background(), &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("cm%d", i*7)}, Data: map[string]string{"after": "kill"}}, metav1.UpdateOptions{})
		if err != nil && !strings.Contains(err.Error(), "not found") {
			t.Fatal(err)
		}
	}
	cluster = hs.clusterCMs()
	eventually(t, "the survivors' views to equal the cluster", func() bool {
		why = checkPartition(rest, cluster)
		return why == ""
	})

	var keys []string
	names.Range(func(k, _ any) bool {
		keys = append(keys, k.(string))
		return true
	})
	sort.Strings(keys)
	if d := doubleOwnership(members, keys); len(d) > 0 {
		t.Errorf("%d objects were owned by two members at once, e.g.:\n%s", len(d), strings.Join(d[:min(5, len(d))], "\n"))
	}
	handed := 0
	for _, sm := range members {
		sm.mu.Lock()
		for _, d := range sm.delivered {
			ns, name, _ := strings.Cut(d.key, "/")
			if !d.a.OwnsKey(ns, name) {
				t.Errorf("member %s delivered %s, which its view (%v) gives another member", sm.id, d.key, d.a.Members)
				break
			}
		}
		handed += sm.handed
		sm.mu.Unlock()
	}
	if handed == 0 {
		t.Error("no handed-over delete: the joins moved no object a member had")
	}
	// The members that joined later got the objects that existed before
	// (cm*) only by ownership moves: each as an add with the initial-list
	// flag.
	for _, sm := range members[1:] {
		for _, d := range sm.rec.of(shardPlugin) {
			if d.Type == event.EventAdd && strings.HasPrefix(d.Key, ns+"/cm") && !d.Initial {
				t.Errorf("member %s got %s as an add without the initial-list flag", sm.id, d.Key)
				break
			}
		}
	}
	if why != "" {
		t.Log(why)
	}
}

// A member that loses contact with the apiserver (a partition:
// its connections stay open and nothing gets through) stops delivering
// before its Lease can expire, hands its objects' views back (deletes
// flagged handed over), and the other member takes them over only after.
func TestShardingMemberCutOffStopsDeliveringBeforeItsLeaseExpires(t *testing.T) {
	cp := controlPlane(t)
	hs := &harness{t: t, ns: cp.Namespace(t)}
	ns := hs.ns
	hs.createMany("cm", 200)
	proxy, cut := testenv.NewOutageProxy(t, env.Config)
	a := startShardMember(t, ns, "g", "a", env.Config, true)
	b := startShardMember(t, ns, "g", "b", cut, true)
	eventually(t, "both members active", func() bool { return a.active(2) && b.active(2) })
	cluster := hs.clusterCMs()
	eventually(t, "the objects shared by both", func() bool { return checkPartition([]*shardMember{a, b}, cluster) == "" })
	if len(b.view()) == 0 {
		t.Fatal("member b owns nothing; the test needs it to own objects")
	}

	proxy.Partition()
	eventually(t, "member b fenced", func() bool { return !b.h.Assignment().Active })
	eventually(t, "member b's plugin to hold nothing", func() bool { return len(b.view()) == 0 })
	eventually(t, "member a alone to hold every object", func() bool { return checkPartition([]*shardMember{a}, cluster) == "" })

	// When b stopped owning and when a started owning b's objects, from
	// their own records: b's last active view was valid until its last
	// successful renewal was renewDeadline old; a counted b gone once it
	// had not seen b's Lease change for leaseDuration.
	b.mu.Lock()
	var lastActive *shard.Assignment
	for _, x := range b.timeline {
		if x.Active {
			lastActive = x
		}
	}
	handed := b.handed
	b.mu.Unlock()
	a.mu.Lock()
	var takeover *shard.Assignment
	for _, x := range a.timeline {
		if x.Active && len(x.Members) == 1 && x.Since.After(lastActive.Since) {
			takeover = x
			break
		}
	}
	a.mu.Unlock()
	if takeover == nil {
		t.Fatal("member a never published a view without b")
	}
	if !lastActive.ValidUntil().Before(takeover.Since) {
		t.Errorf("member b owned objects until %s, member a took them over at %s: both owned them at once",
			lastActive.ValidUntil().Format(time.StampMicro), takeover.Since.Format(time.StampMicro))
	}
	if handed == 0 {
		t.Error("member b's plugin got no handed-over delete")
	}
	if d := doubleOwnership([]*shardMember{a, b}, keysOf2(cluster)); len(d) > 0 {
		t.Errorf("objects owned by both members at once: %s", strings.Join(d[:min(5, len(d))], "\n"))
	}
}

// eventuallyShared waits until ready holds and the members' views
// partition cluster (checkPartition), and says how they did not if they
// never do.
func eventuallyShared(t *testing.T, what string, members []*shardMember, cluster map[string]string, ready func() bool) {
	t.Helper()
	why := "not ready"
	defer func() {
		if t.Failed() {
			t.Logf("last mismatch: %s", why)
		}
	}()
	eventually(t, what, func() bool {
		if !ready() {
			why = "not ready"
			return false
		}
		why = checkPartition(members, cluster)
		return why == ""
	})
}

func keysOf2(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

// A member that renews its Lease but may not list the group's (a Role
// without list on Leases) is not counted by the others, so every object
// stays owned: it never renews, since it renews only after a successful
// list. It says so loudly (an error in its log, a problem in its status,
// not ready) and joins once it may list.
func TestShardingMemberThatCannotListTheGroupIsNotCounted(t *testing.T) {
	cp := controlPlane(t)
	hs := &harness{t: t, ns: cp.Namespace(t)}
	ns := hs.ns
	hs.createMany("cm", 100)
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "member", Namespace: ns}, Rules: []rbacv1.PolicyRule{{
		APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: []string{"get", "create", "update", "delete"}}}}
	rbac := env.Client.RbacV1()
	if _, err := rbac.Roles(ns).Create(context.Background(), role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := rbac.RoleBindings(ns).Create(context.Background(), &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "member", Namespace: ns},
		RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: "member"},
		Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: "blind", Namespace: ns}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	a := startShardMember(t, ns, "g", "a", env.Config, true)
	c := startShardMember(t, ns, "g", "c", env.ServiceAccount(t, ns, "blind"), true)

	eventually(t, "member c to report that it cannot list its group", func() bool {
		return strings.Contains(c.h.ShardNotReady(), "cannot list") &&
			len(c.logs.lines("level=ERROR", "may not list the group's Leases")) > 0
	})
	if st := c.h.ShardStatus(); st.Active || st.Problem == "" {
		t.Errorf("member c's status %+v: want inactive, with its problem", st)
	}
	// c has listed and failed at least once: had it renewed regardless,
	// its Lease would exist now.
	if _, err := env.Client.CoordinationV1().Leases(ns).Get(context.Background(), "g-c", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("member c's Lease: %v; a member that cannot list its group must not renew", err)
	}
	cluster := hs.clusterCMs()
	eventuallyShared(t, "member a alone to hold every object", []*shardMember{a}, cluster, func() bool { return a.active(1) })
	a.mu.Lock()
	for _, x := range a.timeline {
		if slices.Contains(x.Members, "c") {
			t.Errorf("member a counted c, which cannot list the group: %v", x)
		}
	}
	a.mu.Unlock()

	// Given list, c joins and takes its share.
	role.Rules[0].Verbs = append(role.Rules[0].Verbs, "list")
	if _, err := rbac.Roles(ns).Update(context.Background(), role, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventuallyShared(t, "both members active and sharing the objects", []*shardMember{a, c}, cluster,
		func() bool { return a.active(2) && c.active(2) })
	if why := c.h.ShardNotReady(); why != "" {
		t.Errorf("member c still not ready: %s", why)
	}
	if d := doubleOwnership([]*shardMember{a, c}, keysOf2(cluster)); len(d) > 0 {
		t.Errorf("objects owned by both members at once: %s", strings.Join(d[:min(5, len(d))], "\n"))
	}
}

// A member joining takes its share over once the others have let it go
// (their Leases acknowledge it), not after a join delay of renewDeadline
// during which they had already dropped the share: with a renewDeadline
// far longer than the test, the join still completes, the old owner
// keeps delivering until it publishes the view with the new member, and
// no object is ever owned by both.
func TestShardingJoinHandsOverOnceTheOthersLetGo(t *testing.T) {
	cp := controlPlane(t)
	hs := &harness{t: t, ns: cp.Namespace(t)}
	ns := hs.ns
	hs.createMany("cm", 200)
	long := memberOptions{lease: 2 * time.Hour, renew: time.Hour, retry: testRetry}
	a := startShardMemberWith(t, ns, "g", "a", env.Config, true, long)
	cluster := hs.clusterCMs()
	eventuallyShared(t, "member a alone to hold every object", []*shardMember{a}, cluster, func() bool { return a.active(1) })
	b := startShardMemberWith(t, ns, "g", "b", env.Config, true, long)
	eventuallyShared(t, "both members active and sharing the objects", []*shardMember{a, b}, cluster,
		func() bool { return a.active(2) && b.active(2) })
	if len(b.view()) == 0 {
		t.Fatal("member b owns nothing; the test needs it to own objects")
	}
	// a owned everything up to the view that gave b its share: it was
	// never inactive, never without itself.
	var released, admitted time.Time
	a.mu.Lock()
	for _, x := range a.timeline[1:] {
		if !x.Active {
			t.Errorf("member a published an inactive view during the join: %v", x)
		}
		if released.IsZero() && len(x.Members) == 2 {
			released = x.Since
		}
	}
	a.mu.Unlock()
	b.mu.Lock()
	for _, x := range b.timeline {
		if x.Active && admitted.IsZero() {
			admitted = x.Since
		}
	}
	b.mu.Unlock()
	// For the record, not asserted: how long b's share had no owner.
	t.Logf("b's share owned by nobody for %s (retryPeriod %s)", admitted.Sub(released), testRetry)
	if d := doubleOwnership([]*shardMember{a, b}, keysOf2(cluster)); len(d) > 0 {
		t.Errorf("objects owned by both members at once: %s", strings.Join(d[:min(5, len(d))], "\n"))
	}
}

// A plugin's write already waiting on the apiserver when its member stops
// owning the object (another member joined and won it, or this member was
// cut off from the apiserver and fenced) is canceled: the plugin gets
// ERR_CANCELED, the held request is abandoned, never forwarded, and the
// new owner's write is the only one that lands.
func TestShardingCancelsAWriteWaitingWhenOwnershipMoves(t *testing.T) {
	writer := func(label string, writes *rest.Config) memberOptions {
		return memberOptions{plugin: "writer.wasm", wasm: fixture(t, "writer"), selector: "fence=yes", writes: writes,
			module: `bindings: [{resource: cms, events: [add]}]
config: {metadata: {labels: {written: "` + label + `"}}}
grants:
  writes:
    resources: [{resource: cms, verbs: [patch]}]
    timeout: 5m`}
	}
	cases := []struct {
		name string
		// owner is who owns the object while both are members.
		owner string
		// move starts b and takes the object away from a.
		move func(t *testing.T, ns string, b func(rc *rest.Config) *shardMember, cutA *testenv.OutageProxy)
	}{
		{"a member joins and wins the object", "b", func(t *testing.T, ns string, b func(*rest.Config) *shardMember, _ *testenv.OutageProxy) {
			b(env.Config)
		}},
		{"the owner is cut off and fenced", "a", func(t *testing.T, ns string, b func(*rest.Config) *shardMember, cutA *testenv.OutageProxy) {
			sb := b(env.Config)
			eventually(t, "member b active beside a", func() bool { return sb.active(2) })
			cutA.Partition()
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cp := controlPlane(t)
			ns := cp.Namespace(t)
			now := time.Now()
			view := shard.NewAssignment(tc.owner, []string{"a", "b"}, shard.KeyNamespaceName, true, now, now.Add(time.Hour))
			name := ""
			for i := 0; name == ""; i++ {
				if n := fmt.Sprintf("x%d", i); view.OwnsKey(ns, n) {
					name = n
				}
			}
			cms := env.Client.CoreV1().ConfigMaps(ns)
			if _, err := cms.Create(context.Background(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name,
				Labels: map[string]string{"fence": "yes"}}}, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			// Every write through it waits an hour, unless its client
			// gives up.
			proxy, held := testenv.NewSlowProxy(t, env.Config)
			proxy.Delay.Store(int64(time.Hour))
			outage, cut := testenv.NewOutageProxy(t, env.Config)
			a := startShardMemberWith(t, ns, "g", "a", cut, true, writer("a", held))
			eventually(t, "member a's write to wait in the proxy", func() bool { return proxy.Writes.Load() == 1 })

			tc.move(t, ns, func(rc *rest.Config) *shardMember {
				return startShardMemberWith(t, ns, "g", "b", rc, true, writer("b", env.Config))
			}, outage)
			eventually(t, "member b's write to land", func() bool {
				cm, err := cms.Get(context.Background(), name, metav1.GetOptions{})
				return err == nil && cm.Labels["written"] == "b"
			})
			eventually(t, "member a's held write to be canceled", func() bool { return proxy.Canceled.Load() == 1 })
			// The writer answers RETRY to ERR_CANCELED only.
			eventually(t, "member a's plugin to have answered the canceled write", func() bool {
				return slices.ContainsFunc(a.rec.of("writer.wasm"), func(d observed) bool {
					return d.Key == ns+"/"+name && d.Failure == 0 && d.Code == engine.CodeRetry
				})
			})
			// Every write of a's was abandoned, none forwarded.
			if w, c := proxy.Writes.Load(), proxy.Canceled.Load(); w != c {
				t.Errorf("member a sent %d writes, %d of them canceled", w, c)
			}
			if cm, err := cms.Get(context.Background(), name, metav1.GetOptions{}); err != nil || cm.Labels["written"] != "b" {
				t.Errorf("the object after both writes: %v, %v; want b's label", cm.Labels, err)
			}
		})
	}
}
