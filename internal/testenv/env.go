package testenv

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// Versions of the control plane binaries; hack/controlplane/build.sh uses
// the same directory name.
const (
	KubernetesVersion = "1.37.2"
	EtcdVersion       = "3.6.16"
)

// AssetsDir returns the directory holding kube-apiserver and etcd:
// $KUBEBUILDER_ASSETS when set, else the cache directory build.sh fills.
// The error says how to build the binaries.
func AssetsDir() (string, error) {
	dir := os.Getenv("KUBEBUILDER_ASSETS")
	if dir == "" {
		cache := os.Getenv("INFORMER_HOST_CACHE")
		if cache == "" {
			base, err := os.UserCacheDir()
			if err != nil {
				return "", fmt.Errorf("testenv: no cache directory: %w", err)
			}
			cache = filepath.Join(base, "informer-host")
		}
		dir = filepath.Join(cache, "controlplane", "k8s-"+KubernetesVersion+"-etcd-"+EtcdVersion)
	}
	var missing []string
	for _, bin := range []string{"kube-apiserver", "etcd"} {
		if st, err := os.Stat(filepath.Join(dir, bin)); err != nil || st.Mode()&0o111 == 0 {
			missing = append(missing, bin)
		}
	}
	if len(missing) > 0 {
		return "", fmt.Errorf("testenv: %s not found in %s: run `make controlplane` "+
			"(hack/controlplane/build.sh builds kube-apiserver v%s and etcd v%s from the Go module proxy, "+
			"about 10 minutes once) or point KUBEBUILDER_ASSETS at a directory holding them",
			strings.Join(missing, " and "), dir, KubernetesVersion, EtcdVersion)
	}
	return dir, nil
}

// Env is a running control plane.
type Env struct {
	Environment *envtest.Environment
	// Config is an administrator's client configuration.
	Config *rest.Config
	Client kubernetes.Interface
	seq    atomic.Int64
}

// Start starts kube-apiserver and etcd on loopback ports.
func Start() (*Env, error) {
	dir, err := AssetsDir()
	if err != nil {
		return nil, err
	}
	reapOrphans(dir)
	te := &envtest.Environment{
		BinaryAssetsDirectory:    dir,
		ControlPlaneStartTimeout: 2 * time.Minute,
		ControlPlaneStopTimeout:  time.Minute,
	}
	// No controller-manager runs here, so no namespace gets a "default"
	// ServiceAccount, and the ServiceAccount admission plugin would refuse
	// every Pod the tests create.
	api := te.ControlPlane.GetAPIServer()
	api.Configure().Set("disable-admission-plugins", "ServiceAccount")
	cfg, err := te.Start()
	if err != nil {
		return nil, fmt.Errorf("testenv: start control plane from %s: %w", dir, err)
	}
	cfg.QPS, cfg.Burst = 200, 400
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		_ = te.Stop()
		return nil, err
	}
	return &Env{Environment: te, Config: cfg, Client: cs}, nil
}

// Stop stops the control plane and removes its data.
func (e *Env) Stop() error { return e.Environment.Stop() }

// Run is TestMain's body: it starts the control plane into *env, runs the
// tests and stops it. A missing binary fails the package with the message
// saying how to build it; it never skips.
func Run(m *testing.M, env **Env) int {
	e, err := Start()
	if err != nil {
		fmt.Fprintln(os.Stderr, "FAIL:", err)
		return 1
	}
	*env = e
	code := m.Run()
	if err := e.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, "testenv: stop:", err)
	}
	return code
}

// Namespace creates a namespace for one test and deletes it when the test
// ends. Tests isolate themselves by namespace; they share the apiserver.
func (e *Env) Namespace(t testing.TB) string {
	t.Helper()
	name := fmt.Sprintf("t%d-%s", e.seq.Add(1), sanitize(t.Name()))
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if _, err := e.Client.CoreV1().Namespaces().Create(context.Background(), ns, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create namespace %s: %v", name, err)
	}
	t.Cleanup(func() {
		_ = e.Client.CoreV1().Namespaces().Delete(context.Background(), name, metav1.DeleteOptions{})
	})
	return name
}

// User provisions a user with no permissions beyond what RBAC gives every
// authenticated user (discovery); the test grants what it needs.
func (e *Env) User(t testing.TB, name string) *rest.Config {
	t.Helper()
	u, err := e.Environment.AddUser(envtest.User{Name: name}, e.Config)
	if err != nil {
		t.Fatalf("add user %s: %v", name, err)
	}
	return u.Config()
}

func sanitize(s string) string {
	s = strings.ToLower(s)
	var b strings.Builder
	for _, r := range s {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9':
			b.WriteRune(r)
		default:
			b.WriteByte('-')
		}
	}
	out := strings.Trim(b.String(), "-")
	if len(out) > 40 {
		out = strings.Trim(out[:40], "-")
	}
	return out
}

// WriteKubeconfig writes an administrator kubeconfig for the control plane
// to path (mode 0600), creating its directory.
func (e *Env) WriteKubeconfig(path string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(path, e.Environment.KubeConfig, 0o600); err != nil {
		return fmt.Errorf("write kubeconfig: %w", err)
	}
	return nil
}
