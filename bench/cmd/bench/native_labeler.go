package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"runtime/pprof"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	appslisters "k8s.io/client-go/listers/apps/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/util/workqueue"
)

// nativeLabelerMain is case 9's baseline ("bench native-labeler"): the
// team-labeler plugin's job written the way a client-go or
// controller-runtime user writes it. Pods, ReplicaSets and Deployments
// from one shared informer factory (in one namespace), their listers; Pod
// events put the Pod's key on a workqueue with client-go's default
// controller rate limiter (per-item exponential backoff, 5 ms to 1000 s,
// and an overall 10/s, burst 100 bucket), drained by one worker
// (controller-runtime's default MaxConcurrentReconciles). The reconciler
// follows Pod → ReplicaSet → Deployment through the listers and
// server-side applies the Deployment's team label with the Pod's uid in
// the applied object (an update, never a create), forcing only after a
// field-manager conflict, as the plugin does.
//
// Its informers' client has the daemon's own default limit (50/s, burst
// 100, --kube-api-qps); its writes' client has -qps and -burst, which the
// harness sets to the plugin's write grant. It runs until stdin says
// "exit" or closes, then stops at once, leaving its queue.
func nativeLabelerMain(args []string) int {
	fs := flag.NewFlagSet("native-labeler", flag.ContinueOnError)
	kubeconfig := fs.String("kubeconfig", "", "kubeconfig of the control plane")
	ns := fs.String("namespace", "", "namespace to label the Pods of")
	label := fs.String("label", "team", "the label's key")
	manager := fs.String("field-manager", "bench/native-labeler", "field manager of the apply")
	qps := fs.Float64("qps", 5, "the writes' client-side limit, requests a second")
	burst := fs.Int("burst", 10, "the writes' client-side burst")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of the whole run to this file (bench -profile)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *cpuProfile != "" {
		// The whole process, as the daemon's --cpu-profile: the profiles
		// of the two sides of case 9 compare like for like.
		f, err := os.Create(*cpuProfile)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer func() {
			pprof.StopCPUProfile()
			_ = f.Close()
		}()
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", *kubeconfig)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	readCfg := rest.CopyConfig(cfg)
	readCfg.QPS, readCfg.Burst = 50, 100
	readClient, err := kubernetes.NewForConfig(readCfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	writeCfg := rest.CopyConfig(cfg)
	writeCfg.QPS, writeCfg.Burst = float32(*qps), *burst
	writeClient, err := kubernetes.NewForConfig(writeCfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}

	factory := informers.NewSharedInformerFactoryWithOptions(readClient, 0, informers.WithNamespace(*ns))
	pods := factory.Core().V1().Pods()
	c := &nativeLabeler{
		client: writeClient, label: *label, manager: *manager,
		pods: pods.Lister(), rss: factory.Apps().V1().ReplicaSets().Lister(), deps: factory.Apps().V1().Deployments().Lister(),
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[cache.ObjectName](),
			workqueue.TypedRateLimitingQueueConfig[cache.ObjectName]{Name: "team-labeler"}),
	}
	enqueue := func(obj any) {
		if name, err := cache.DeletionHandlingObjectToName(obj); err == nil {
			c.queue.Add(name)
		}
	}
	if _, err := pods.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: enqueue, UpdateFunc: func(_, o any) { enqueue(o) },
	}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	factory.Start(ctx.Done())
	for typ, ok := range factory.WaitForCacheSync(ctx.Done()) {
		if !ok {
			fmt.Fprintf(os.Stderr, "native-labeler: %v did not sync\n", typ)
			return 1
		}
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil && c.next(ctx) {
		}
	}()
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() && in.Text() != "exit" {
	}
	// Stop as controller-runtime does on SIGTERM: the context is
	// canceled (the apply in flight with it) and the queue shut down;
	// what is still queued is left to the next process. (Draining it
	// instead would finish the work before the restart.)
	cancel()
	c.queue.ShutDown()
	<-done
	factory.Shutdown()
	return 0
}

type nativeLabeler struct {
	client         kubernetes.Interface
	label, manager string
	pods           corelisters.PodLister
	rss            appslisters.ReplicaSetLister
	deps           appslisters.DeploymentLister
	queue          workqueue.TypedRateLimitingInterface[cache.ObjectName]
}

// next reconciles one key; false once the queue is shut down.
func (c *nativeLabeler) next(ctx context.Context) bool {
	key, quit := c.queue.Get()
	if quit {
		return false
	}
	defer c.queue.Done(key)
	if err := c.reconcile(ctx, key); err != nil {
		utilruntime.HandleError(err)
		c.queue.AddRateLimited(key)
		return true
	}
	c.queue.Forget(key)
	return true
}

// errOwnerMissing is an owner not in the cache yet: try again later, as
// the plugin answers RETRY.
var errOwnerMissing = errors.New("owner not in the cache yet")

func (c *nativeLabeler) reconcile(ctx context.Context, key cache.ObjectName) error {
	pod, err := c.pods.Pods(key.Namespace).Get(key.Name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	want, ok, err := c.desiredTeam(pod)
	if err != nil || !ok {
		return err
	}
	if have, ok := pod.Labels[c.label]; ok && have == want {
		return nil
	}
	err = c.apply(ctx, pod, want, false)
	if apierrors.IsConflict(err) && apierrors.HasStatusCause(err, metav1.CauseTypeFieldManagerConflict) {
		err = c.apply(ctx, pod, want, true)
	}
	switch {
	case err == nil, apierrors.IsNotFound(err):
		return nil
	case apierrors.IsConflict(err):
		// Gone (the uid in the applied object matches no Pod), or gone and
		// created again: its own events follow.
		return nil
	}
	return fmt.Errorf("apply %s: %w", key, err)
}

func (c *nativeLabeler) desiredTeam(pod *corev1.Pod) (string, bool, error) {
	rsRef := metav1.GetControllerOf(pod)
	if rsRef == nil || rsRef.Kind != "ReplicaSet" {
		return "", false, nil
	}
	rs, err := c.rss.ReplicaSets(pod.Namespace).Get(rsRef.Name)
	if apierrors.IsNotFound(err) {
		return "", false, fmt.Errorf("replicaset %s/%s: %w", pod.Namespace, rsRef.Name, errOwnerMissing)
	}
	if err != nil {
		return "", false, err
	}
	depRef := metav1.GetControllerOf(rs)
	if depRef == nil || depRef.Kind != "Deployment" {
		return "", false, nil
	}
	dep, err := c.deps.Deployments(pod.Namespace).Get(depRef.Name)
	if apierrors.IsNotFound(err) {
		return "", false, fmt.Errorf("deployment %s/%s: %w", pod.Namespace, depRef.Name, errOwnerMissing)
	}
	if err != nil {
		return "", false, err
	}
	team, ok := dep.Labels[c.label]
	return team, ok, nil
}

// apply sets the label on the Pod as it exists: the uid in the applied
// object makes the apply fail rather than create a Pod deleted meanwhile.
func (c *nativeLabeler) apply(ctx context.Context, pod *corev1.Pod, team string, force bool) error {
	ac := corev1ac.Pod(pod.Name, pod.Namespace).WithUID(pod.UID).WithLabels(map[string]string{c.label: team})
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second) // the plugin's default write timeout
	defer cancel()
	_, err := c.client.CoreV1().Pods(pod.Namespace).Apply(ctx, ac, metav1.ApplyOptions{FieldManager: c.manager, Force: force})
	return err
}
