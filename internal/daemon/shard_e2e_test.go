package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/informer-host/informer-host/host"
	"github.com/informer-host/informer-host/internal/config"
	"github.com/informer-host/informer-host/internal/shard"
	"github.com/informer-host/informer-host/internal/testenv"
)

// Sharding through the daemon: two replicas with sharding on
// share the objects (their plugins' counts add up to the cluster's),
// /debug/plugins and /metrics show the member, the live members and what
// each owns; on SIGTERM a member drains, deletes its Lease, and the other
// takes its objects over.
func TestShardedDaemons(t *testing.T) {
	ns := env.Namespace(t)
	cfg := shardConfig(t, ns)
	cms := env.Client.CoreV1().ConfigMaps(ns)
	for i := range 40 {
		if _, err := cms.Create(context.Background(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("cm%d", i)}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	a := startReplica(t, cfg, Options{})
	b := startReplica(t, cfg, Options{})

	status := func(r *replica) *host.ShardStatus {
		t.Helper()
		var dbg struct{ Shard *host.ShardStatus }
		_, body := testenv.Get(t, r.url+"/debug/plugins")
		if err := json.Unmarshal([]byte(body), &dbg); err != nil {
			t.Fatalf("/debug/plugins: %v: %s", err, body)
		}
		return dbg.Shard
	}
	testenv.Eventually(t, "both members to count two members and share the objects", func() bool {
		sa, sb := status(a), status(b)
		return sa != nil && sb != nil && sa.Active && sb.Active && len(sa.Members) == 2 && len(sb.Members) == 2 &&
			sa.Owned["cms"]+sb.Owned["cms"] == 40 && a.last()+b.last() == 40 && a.last() == sa.Owned["cms"]
	})
	sa := status(a)
	if sa.Member == "" || sa.Owned["cms"] == 0 || sa.Owned["cms"] == 40 || sa.Key != config.ShardKeyObject {
		t.Errorf("member a's status: %+v: want a member id, key namespace/name and a share of the 40 objects", sa)
	}
	_, metrics := testenv.Get(t, a.url+"/metrics")
	for _, want := range []string{
		fmt.Sprintf(`informer_host_shard_member_info{active="1",member=%q} 1`, sa.Member),
		fmt.Sprintf(`informer_host_shard_owned_objects{resource="cms"} %d`, sa.Owned["cms"]),
		`informer_host_shard_live_member{member=`,
	} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	leases, err := env.Client.CoordinationV1().Leases(ns).List(context.Background(), metav1.ListOptions{LabelSelector: shard.LabelGroup + "=hooks"})
	if err != nil || len(leases.Items) != 2 {
		t.Fatalf("the group's Leases: %v, %v; want two", leases, err)
	}

	// SIGTERM's path: a drains, deletes its Lease; b owns everything.
	if err := a.stop(); err != nil && !errors.Is(err, context.Canceled) {
		t.Errorf("a's Run: %v", err)
	}
	testenv.Eventually(t, "b alone to own every object", func() bool {
		sb := status(b)
		return sb.Active && len(sb.Members) == 1 && sb.Owned["cms"] == 40 && b.last() == 40
	})
	leases, err = env.Client.CoordinationV1().Leases(ns).List(context.Background(), metav1.ListOptions{LabelSelector: shard.LabelGroup + "=hooks"})
	if err != nil || len(leases.Items) != 1 {
		t.Errorf("the group's Leases after a left: %d, %v; want b's alone", len(leases.Items), err)
	}
}

// A replica whose identity may not list its group's Leases (a Role
// without list) takes no share of the objects, and says so where an
// operator looks: /readyz is not ready with the reason, /metrics has
// informer_host_shard_member_blocked 1. Given list, it joins and is ready.
func TestShardedDaemonThatCannotListItsGroupIsNotReady(t *testing.T) {
	ns := env.Namespace(t)
	cfg := shardConfig(t, ns)
	ctx := context.Background()
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "member", Namespace: ns}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "list", "watch"}},
		{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: []string{"get", "create", "update", "delete"}},
	}}
	rbac := env.Client.RbacV1()
	if _, err := rbac.Roles(ns).Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := rbac.RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "member", Namespace: ns},
		RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: "member"},
		Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: "member", Namespace: ns}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := testenv.WriteConfigKubeconfig(env.ServiceAccount(t, ns, "member"), filepath.Join(cfg.Dir(), "kubeconfig")); err != nil {
		t.Fatal(err)
	}
	r := startReplica(t, cfg, Options{})
	testenv.Eventually(t, "/readyz to say the member cannot list its group", func() bool {
		code, body := testenv.Get(t, r.url+"/readyz")
		return code == http.StatusServiceUnavailable && strings.Contains(body, "cannot list the sharding group's Leases")
	})
	if _, metrics := testenv.Get(t, r.url+"/metrics"); !strings.Contains(metrics, "informer_host_shard_member_blocked 1") {
		t.Error("/metrics lacks informer_host_shard_member_blocked 1")
	}

	role.Rules[1].Verbs = append(role.Rules[1].Verbs, "list")
	if _, err := rbac.Roles(ns).Update(ctx, role, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, "/readyz ok once the member may list", func() bool {
		code, _ := testenv.Get(t, r.url+"/readyz")
		return code == http.StatusOK
	})
	if _, metrics := testenv.Get(t, r.url+"/metrics"); !strings.Contains(metrics, "informer_host_shard_member_blocked 0") {
		t.Error("/metrics lacks informer_host_shard_member_blocked 0")
	}
}
