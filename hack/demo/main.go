// Command demo is `make demo`: it starts a local control plane, runs
// informer-host against it with the shipped config.yaml and the example
// plugins, and keeps creating, updating and deleting ConfigMaps and Pods in
// namespace "demo" so the plugins have something to report. Ctrl-C stops
// the churn, the host and the control plane, in that order.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/informer-host/informer-host/internal/testenv"
)

const namespace = "demo"

func main() {
	host := flag.String("host", "bin/informer-host", "the informer-host binary")
	cfg := flag.String("config", "config.yaml", "config file for the host")
	period := flag.Duration("period", 2*time.Second, "time between two steps of the churn")
	flag.Parse()
	if err := run(*host, *cfg, *period); err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		os.Exit(1)
	}
}

func run(hostBin, cfgPath string, period time.Duration) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	say("starting kube-apiserver and etcd on loopback")
	env, err := testenv.Start()
	if err != nil {
		return err
	}
	defer func() {
		say("stopping the control plane")
		_ = env.Stop()
	}()
	kubeconfig, err := filepath.Abs("build/demo/kubeconfig")
	if err != nil {
		return err
	}
	if err := env.WriteKubeconfig(kubeconfig); err != nil {
		return err
	}
	if _, err := env.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}, metav1.CreateOptions{}); err != nil {
		return err
	}

	say("starting %s run --config %s (KUBECONFIG=%s)", hostBin, cfgPath, kubeconfig)
	cmd := exec.Command(hostBin, "run", "--config", cfgPath)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig)
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	// The host must not outlive the demo, even if the demo is killed.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
	if err := cmd.Start(); err != nil {
		return err
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	defer func() {
		if cmd.ProcessState == nil {
			say("stopping informer-host")
			_ = cmd.Process.Signal(syscall.SIGTERM)
			select {
			case <-exited:
			case <-time.After(30 * time.Second):
				_ = cmd.Process.Kill()
				<-exited
			}
		}
	}()

	churnDone := make(chan error, 1)
	go func() { churnDone <- churn(ctx, env.Client, period) }()
	select {
	case <-ctx.Done():
		<-churnDone
		return nil
	case err := <-exited:
		stop()
		<-churnDone
		return fmt.Errorf("informer-host exited: %v", err)
	case err := <-churnDone:
		return err
	}
}

// churn walks a few objects through their lives, one step per period.
func churn(ctx context.Context, cs kubernetes.Interface, period time.Duration) error {
	cms := cs.CoreV1().ConfigMaps(namespace)
	pods := cs.CoreV1().Pods(namespace)
	tick := time.NewTicker(period)
	defer tick.Stop()
	for i := 1; ; i++ {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
		name := fmt.Sprintf("demo-%d", i)
		step := func(what string, err error) {
			if err != nil && ctx.Err() == nil {
				say("%s: %v", what, err)
				return
			}
			say("%s", what)
		}
		_, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"app": "demo"}},
			Data: map[string]string{"step": "1"}}, metav1.CreateOptions{})
		step("created configmap demo/"+name, err)
		pod, err := pods.Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"app": "demo"}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "main", Image: "registry.k8s.io/pause:3.10"}}}}, metav1.CreateOptions{})
		step("created pod demo/"+name, err)
		if err == nil {
			// No kubelet runs here: the demo plays its part and moves the
			// pod through its phases.
			for _, phase := range []corev1.PodPhase{corev1.PodPending, corev1.PodRunning} {
				pod.Status.Phase = phase
				pod, err = pods.UpdateStatus(ctx, pod, metav1.UpdateOptions{})
				step(fmt.Sprintf("pod demo/%s is %s", name, phase), err)
				if err != nil {
					break
				}
			}
		}
		if i > 1 {
			prev := fmt.Sprintf("demo-%d", i-1)
			if cm, err := cms.Get(ctx, prev, metav1.GetOptions{}); err == nil {
				cm.Data["step"] = "2"
				_, err = cms.Update(ctx, cm, metav1.UpdateOptions{})
				step("updated configmap demo/"+prev, err)
			}
			if p, err := pods.Get(ctx, prev, metav1.GetOptions{}); err == nil {
				p.Status.Phase = corev1.PodSucceeded
				_, err = pods.UpdateStatus(ctx, p, metav1.UpdateOptions{})
				step(fmt.Sprintf("pod demo/%s is Succeeded", prev), err)
			}
		}
		if i > 3 {
			old := fmt.Sprintf("demo-%d", i-3)
			step("deleted configmap demo/"+old, cms.Delete(ctx, old, metav1.DeleteOptions{}))
			step("deleted pod demo/"+old, pods.Delete(ctx, old, metav1.DeleteOptions{GracePeriodSeconds: new(int64)}))
		}
	}
}

func say(format string, args ...any) {
	fmt.Printf("demo | "+format+"\n", args...)
}
