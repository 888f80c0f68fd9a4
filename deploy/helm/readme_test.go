package helm

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	authzv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/informer-host/informer-host/internal/config"
	"github.com/informer-host/informer-host/internal/testenv"
)

// readmeSection returns the sh lines and the my-values.yaml README's
// "Install with Helm" shows, in order.
func readmeSection(t *testing.T) (lines []string, values string) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, sec, ok := strings.Cut(string(b), "\n## Install with Helm\n")
	if !ok {
		t.Fatal(`README.md has no "## Install with Helm" section`)
	}
	if i := strings.Index(sec, "\n## "); i >= 0 {
		sec = sec[:i]
	}
	blocks := strings.Split(sec, "```")
	for i := 1; i < len(blocks); i += 2 {
		lang, body, _ := strings.Cut(blocks[i], "\n")
		switch {
		case lang == "sh":
			for _, l := range strings.Split(strings.TrimSpace(body), "\n") {
				lines = append(lines, l)
			}
		case lang == "yaml" && strings.HasPrefix(body, "# my-values.yaml\n"):
			values = body
		}
	}
	if len(lines) != 4 || values == "" {
		t.Fatalf("README's Install with Helm shows %d command lines and values %q; want the install, the template, rbac and upgrade lines and my-values.yaml", len(lines), values)
	}
	return lines, values
}

// README's "Install with Helm" commands, run as written with bash in a
// directory that has the repository's deploy/ and README's my-values.yaml,
// helm and informer-host on the PATH and the test's apiserver as the
// kubeconfig's: the install gives the daemon what the default config
// needs; the upgrade with the generated RBAC runs three sharded replicas
// with a PodDisruptionBudget, and the ServiceAccount may then list
// Deployments, which it could not before.
func TestREADMEInstallWithHelm(t *testing.T) {
	env.Require(t)
	lines, values := readmeSection(t)
	dir := t.TempDir()
	deploy, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(deploy, filepath.Join(dir, "deploy")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "my-values.yaml"), []byte(values), 0o644); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "bin")
	if err := os.Mkdir(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, target := range map[string]string{"helm": helmBin(t), "informer-host": informerHost(t)} {
		if err := os.Symlink(target, filepath.Join(bin, name)); err != nil {
			t.Fatal(err)
		}
	}
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := env.WriteKubeconfig(kubeconfig); err != nil {
		t.Fatal(err)
	}
	shell := func(line string) {
		t.Helper()
		out, err := run(t, dir, []string{"KUBECONFIG=" + kubeconfig, "PATH=" + bin + ":" + os.Getenv("PATH")}, "bash", "-euo", "pipefail", "-c", line)
		if err != nil {
			t.Fatalf("%s: %v\n%s", line, err, out)
		}
	}

	ctx := context.Background()
	may := env.ServiceAccountMay(t, "informer-host", "informer-host")
	deployments := authzv1.ResourceAttributes{Group: "apps", Resource: "deployments", Verb: "list"}
	pods := authzv1.ResourceAttributes{Resource: "pods", Verb: "watch"}
	deployment := func() (int32, *config.Config) {
		d, err := env.Client.AppsV1().Deployments("informer-host").Get(ctx, "informer-host", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		cm, err := env.Client.CoreV1().ConfigMaps("informer-host").Get(ctx, "informer-host-config", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		cfg, err := config.Parse("informer-host-config", []byte(cm.Data["config.yaml"]))
		if err != nil {
			t.Fatalf("the installed config does not validate: %v", err)
		}
		return *d.Spec.Replicas, cfg
	}

	shell(lines[0]) // helm install
	if n, cfg := deployment(); n != 1 || !cfg.LeaderElection.Enabled {
		t.Errorf("installed: %d replicas, leader election %v; want the defaults, 1 and on", n, cfg.LeaderElection.Enabled)
	}
	testenv.Eventually(t, "the installed RBAC to let the daemon watch pods", func() bool { return may(pods) })
	if may(deployments) {
		t.Error("the default install may list Deployments, which its config does not watch")
	}

	for _, l := range lines[1:] { // template, rbac, upgrade
		shell(l)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "my-rbac.yaml")); err != nil || !strings.Contains(string(b), "deployments") {
		t.Errorf("README's informer-host rbac line wrote no RBAC for deployments (%v):\n%s", err, b)
	}
	if n, cfg := deployment(); n != 3 || !cfg.Sharding.Enabled || cfg.LeaderElection.Enabled {
		t.Errorf("upgraded: %d replicas, sharding %v, leader election %v; want 3, on, off", n, cfg.Sharding.Enabled, cfg.LeaderElection.Enabled)
	}
	if _, err := env.Client.PolicyV1().PodDisruptionBudgets("informer-host").Get(ctx, "informer-host", metav1.GetOptions{}); err != nil {
		t.Errorf("upgraded to 3 replicas, no PodDisruptionBudget: %v", err)
	}
	testenv.Eventually(t, "the generated RBAC to let the daemon list Deployments", func() bool { return may(deployments) })
	for _, verb := range []string{"list", "delete"} {
		testenv.Eventually(t, "the daemon to be allowed to "+verb+" the shard members' Leases", func() bool {
			return may(authzv1.ResourceAttributes{Namespace: "informer-host", Group: "coordination.k8s.io", Resource: "leases", Verb: verb})
		})
	}
}
