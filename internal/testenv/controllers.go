package testenv

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// ControllerNames are the kube-controller-manager controllers
// StartControllers runs: what turns a Deployment into a ReplicaSet and its
// Pods, a StatefulSet or a Job into its Pods, and what removes objects whose owner or namespace is gone. Nothing
// that stands in for a node (no scheduler, no kubelet: Pods stay Pending)
// nor needs a cloud or volumes. The ServiceAccount controllers are left
// out because the apiserver runs without ServiceAccount admission (see
// start), so no Pod waits for a "default" ServiceAccount or its token.
func ControllerNames() []string {
	return []string{
		"deployment-controller",        // Deployment -> ReplicaSet
		"replicaset-controller",        // ReplicaSet -> Pods
		"garbage-collector-controller", // owner deleted -> dependents deleted (ownerReferences)
		"namespace-controller",         // namespace deleted -> its objects deleted, the namespace finalized
		"statefulset-controller",       // StatefulSet -> Pods (service-per-pod's e2e; Parallel: no kubelet makes a Pod Ready)
		"job-controller",               // Job -> its Pods, and the Job's status from them (cronjob's e2e)
	}
}

// controllersStartTimeout bounds the wait for a started
// kube-controller-manager to answer /healthz; it only detects a hang.
const controllersStartTimeout = 2 * time.Minute

// controllersStopTimeout is how long Stop waits after SIGTERM before it
// kills the process.
const controllersStopTimeout = 30 * time.Second

// Controllers is a kube-controller-manager running against an Env's
// apiserver. Run one per control plane: two would both run every
// controller (there is no leader election) and fight over the objects.
type Controllers struct {
	cmd    *exec.Cmd
	dir    string // kubeconfig, serving certificate and log; removed by Stop
	log    string
	exited chan struct{}
	err    error // cmd.Wait's, valid once exited is closed
}

// StartControllers starts kube-controller-manager (from AssetsDir, built
// by `make controlplane`) with ControllerNames against the control plane
// and returns once it answers /healthz on its loopback port. ctx bounds
// that wait, not the process: Stop ends it.
//
// It runs as a user of its own in system:masters, with
// --use-service-account-credentials=false: every controller acts as that
// user rather than as a kube-system ServiceAccount of its own. The
// controllers are the cluster's, not what a test checks, so their
// least-privilege roles would only test Kubernetes' bootstrap RBAC.
func (e *Env) StartControllers(ctx context.Context) (*Controllers, error) {
	assets, err := AssetsDir()
	if err != nil {
		return nil, err
	}
	bin := filepath.Join(assets, "kube-controller-manager")
	if st, err := os.Stat(bin); err != nil || st.Mode()&0o111 == 0 {
		return nil, fmt.Errorf("testenv: kube-controller-manager not found in %s: run `make controlplane` "+
			"(hack/controlplane/build.sh builds it, v%s, from the Go module proxy, a few minutes once "+
			"kube-apiserver is built)", assets, KubernetesVersion)
	}
	user, err := e.Environment.AddUser(envtest.User{Name: "kube-controller-manager", Groups: []string{"system:masters"}}, e.Config)
	if err != nil {
		return nil, fmt.Errorf("testenv: a user for kube-controller-manager: %w", err)
	}
	kubeconfig, err := user.KubeConfig()
	if err != nil {
		return nil, fmt.Errorf("testenv: kubeconfig for kube-controller-manager: %w", err)
	}
	port, err := freeLoopbackPort()
	if err != nil {
		return nil, fmt.Errorf("testenv: a port for kube-controller-manager: %w", err)
	}
	dir, err := os.MkdirTemp("", "kube-controller-manager-")
	if err != nil {
		return nil, fmt.Errorf("testenv: kube-controller-manager's directory: %w", err)
	}
	c := &Controllers{dir: dir, log: filepath.Join(dir, "kube-controller-manager.log"), exited: make(chan struct{})}
	if err := c.start(ctx, bin, kubeconfig, port); err != nil {
		_ = c.Stop()
		return nil, err
	}
	if e.record != "" {
		// Record it with the rest of this test binary's control plane, so
		// that a crash leaves no controller manager behind either.
		if runs, err := runDir(); err == nil {
			if _, err := record(runs, assets); err != nil {
				fmt.Fprintf(os.Stderr, "testenv: cannot record kube-controller-manager in %s, "+
					"so if this test binary crashes it is left running: %v\n", runs, err)
			}
		}
	}
	return c, nil
}

func (c *Controllers) start(ctx context.Context, bin string, kubeconfig []byte, port int) error {
	kc := filepath.Join(c.dir, "kubeconfig")
	if err := os.WriteFile(kc, kubeconfig, 0o600); err != nil {
		return fmt.Errorf("testenv: write kube-controller-manager's kubeconfig: %w", err)
	}
	logFile, err := os.Create(c.log)
	if err != nil {
		return fmt.Errorf("testenv: kube-controller-manager's log: %w", err)
	}
	defer logFile.Close() // the child has its own descriptor
	c.cmd = exec.Command(bin,
		"--kubeconfig="+kc,
		// Its /healthz authenticates and authorizes through the apiserver,
		// as a real one's does; /healthz itself is always allowed.
		"--authentication-kubeconfig="+kc,
		"--authorization-kubeconfig="+kc,
		"--bind-address=127.0.0.1",
		"--secure-port="+strconv.Itoa(port),
		"--cert-dir="+filepath.Join(c.dir, "certs"),
		"--leader-elect=false",
		"--use-service-account-credentials=false",
		"--controllers="+strings.Join(ControllerNames(), ","),
	)
	c.cmd.Stdout, c.cmd.Stderr = logFile, logFile
	if err := c.cmd.Start(); err != nil {
		return fmt.Errorf("testenv: start kube-controller-manager: %w", err)
	}
	go func() { c.err = c.cmd.Wait(); close(c.exited) }()

	ctx, cancel := context.WithTimeout(ctx, controllersStartTimeout)
	defer cancel()
	// Loopback, and the certificate is the one the process just made for
	// itself: only whether it answers is read.
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}, Timeout: 5 * time.Second}
	url := fmt.Sprintf("https://127.0.0.1:%d/healthz", port)
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		if healthy(ctx, client, url) {
			return nil
		}
		select {
		case <-c.exited:
			return fmt.Errorf("testenv: kube-controller-manager exited before it was healthy (%v); its log:\n%s", c.err, c.logTail())
		case <-ctx.Done():
			return fmt.Errorf("testenv: kube-controller-manager not healthy at %s: %w; its log:\n%s", url, ctx.Err(), c.logTail())
		case <-tick.C:
		}
	}
}

func healthy(ctx context.Context, client *http.Client, url string) bool {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return false
	}
	resp, err := client.Do(req)
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// logTail is the end of the process's log, for an error to show why it
// did not start.
func (c *Controllers) logTail() string {
	b, err := os.ReadFile(c.log)
	if err != nil {
		return err.Error()
	}
	const keep = 4 << 10
	if len(b) > keep {
		b = b[len(b)-keep:]
		if i := bytes.IndexByte(b, '\n'); i >= 0 {
			b = b[i+1:]
		}
	}
	return string(b)
}

// Stop ends kube-controller-manager (SIGTERM, then SIGKILL if it has not
// exited after a while) and removes its directory.
func (c *Controllers) Stop() error {
	var err error
	if c.cmd != nil && c.cmd.Process != nil {
		select {
		case <-c.exited:
		default:
			_ = c.cmd.Process.Signal(syscall.SIGTERM)
			select {
			case <-c.exited:
			case <-time.After(controllersStopTimeout):
				_ = c.cmd.Process.Kill()
				<-c.exited
				err = fmt.Errorf("testenv: kube-controller-manager ignored SIGTERM for %s and was killed", controllersStopTimeout)
			}
		}
	}
	return errors.Join(err, os.RemoveAll(c.dir))
}

// Controllers starts kube-controller-manager for one test (StartControllers)
// and stops it when the test ends.
func (e *Env) Controllers(t testing.TB) *Controllers {
	t.Helper()
	c, err := e.StartControllers(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.Stop(); err != nil {
			t.Error(err)
		}
	})
	return c
}

// freeLoopbackPort returns a TCP port nothing listens on at the moment,
// as envtest picks the apiserver's.
func freeLoopbackPort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// Deployment is a Deployment of replicas Pods labelled app=name, each a
// pause container (no kubelet runs it: only the objects matter), for the
// controllers to act on.
func Deployment(name string, replicas int32) *appsv1.Deployment {
	// A map each, so that a caller adding a label changes one place only.
	labels := func() map[string]string { return map[string]string{"app": name} }
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels()},
		Spec: appsv1.DeploymentSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: labels()},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels()},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "main", Image: "registry.k8s.io/pause:3.10"}}},
			},
		},
	}
}
