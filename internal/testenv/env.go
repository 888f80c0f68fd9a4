package testenv

import (
	"context"
	"flag"
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
		cache, err := cacheDir()
		if err != nil {
			return "", err
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

// cacheDir is informer-host's cache directory, as the Makefile computes it.
func cacheDir() (string, error) {
	if cache := os.Getenv("INFORMER_HOST_CACHE"); cache != "" {
		return cache, nil
	}
	base, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("testenv: no cache directory: %w", err)
	}
	return filepath.Join(base, "informer-host"), nil
}

// Env is a running control plane.
type Env struct {
	Environment *envtest.Environment
	// Config is an administrator's client configuration.
	Config *rest.Config
	Client kubernetes.Interface
	seq    atomic.Int64
	// record is the file naming this control plane's processes as a test
	// run's (reap.go), removed by Stop; "" when not recorded.
	record string
}

// Start starts kube-apiserver and etcd on loopback ports, for a command
// (`make cluster`, `make demo`, the benchmarks). Unlike Run's, this control
// plane is not recorded as a test run's, so no later test run reaps it.
func Start() (*Env, error) { return start(false, Options{}) }

// Options change the control plane RunWith starts, for the one test
// package that asks: every other package's stays as Run starts it.
type Options struct {
	// AdmissionPlugins are enabled beside the apiserver's default ones,
	// for tests of what an admission plugin refuses (for example
	// OwnerReferencesPermissionEnforcement, which clusters enable and the
	// apiserver does not by default).
	AdmissionPlugins []string
}

func start(owned bool, o Options) (*Env, error) {
	dir, err := AssetsDir()
	if err != nil {
		return nil, err
	}
	runs, err := runDir()
	if err == nil {
		reapOrphans(runs, dir)
	}
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
	if len(o.AdmissionPlugins) > 0 {
		api.Configure().Set("enable-admission-plugins", strings.Join(o.AdmissionPlugins, ","))
	}
	cfg, err := te.Start()
	if err != nil {
		return nil, fmt.Errorf("testenv: start control plane from %s: %w", dir, err)
	}
	e := &Env{Environment: te, Config: cfg}
	if owned && runs != "" {
		if e.record, err = record(runs, dir); err != nil {
			// The tests can run; only a crash would leave the control
			// plane behind for a person to kill.
			fmt.Fprintf(os.Stderr, "testenv: cannot record the control plane's processes in %s, "+
				"so if this test binary crashes they are left running: %v\n", runs, err)
		}
	}
	cfg.QPS, cfg.Burst = 200, 400
	if e.Client, err = kubernetes.NewForConfig(cfg); err != nil {
		_ = e.Stop()
		return nil, err
	}
	return e, nil
}

// Stop stops the control plane and removes its data.
func (e *Env) Stop() error {
	err := e.Environment.Stop()
	if e.record != "" && err == nil {
		_ = os.Remove(e.record)
	}
	return err
}

// Run is TestMain's body: it starts the control plane into *env, runs the
// tests and stops it. A missing binary fails the package with the message
// saying how to build it; it never skips.
//
// Under -short (`make test-unit`) it starts nothing and leaves *env nil:
// every test that needs the control plane skips at its first use of env
// (Require, Namespace, User, ServiceAccount), so a package's unit tests
// run in seconds beside its integration tests. This is the one place
// where -short decides about the control plane.
//
// Its control plane is recorded as this test binary's: if the binary dies
// without stopping it, the next Start anywhere kills it.
func Run(m *testing.M, env **Env) int { return RunWith(m, env, Options{}) }

// RunWith is Run with a control plane changed by o.
func RunWith(m *testing.M, env **Env, o Options) int {
	// testing.Short reads the flags, which m.Run would parse only later.
	flag.Parse()
	if testing.Short() {
		return m.Run()
	}
	e, err := start(true, o)
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

// Require skips t when there is no control plane because the tests run
// under -short (Run started none), and fails it when there is none for
// any other reason (a TestMain that does not call Run). A test calls it
// (or Namespace, User or ServiceAccount, which call it) before it touches
// e's fields.
func (e *Env) Require(t testing.TB) {
	t.Helper()
	if e != nil {
		return
	}
	if testing.Short() {
		t.Skip("needs the control plane (kube-apiserver and etcd), which -short does not start")
	}
	t.Fatal("testenv: no control plane: the package's TestMain must call testenv.Run(m, &env)")
}

// Namespace creates a namespace for one test and deletes it when the test
// ends. Tests isolate themselves by namespace; they share the apiserver.
func (e *Env) Namespace(t testing.TB) string {
	t.Helper()
	e.Require(t)
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
	e.Require(t)
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
