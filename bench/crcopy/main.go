// Command crcopy copies every ConfigMap labelled sync=true from one
// namespace to another, and deletes a copy once its source is gone: the
// controller of `make bench`'s case 10, written the controller-runtime
// way, the baseline of the same controller as a plugin.
//
// No finalizer: a copy carries a label naming its source, and an event on
// a copy (its add when the cache fills at start among them) maps back to
// the source, whose reconcile deletes a copy whose source is gone. So a
// delete missed while the process was down is caught at the next start.
package main

import (
	"context"
	"flag"
	"os"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// sourceLabel, on a copy, names its source in the source namespace.
const sourceLabel = "copy.example.com/source"

type copier struct {
	client.Client
	src, dst string
}

func (c *copier) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var source corev1.ConfigMap
	err := c.Get(ctx, req.NamespacedName, &source)
	if apierrors.IsNotFound(err) {
		stale := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: c.dst, Name: req.Name}}
		return ctrl.Result{}, client.IgnoreNotFound(c.Delete(ctx, stale))
	}
	if err != nil {
		return ctrl.Result{}, err
	}
	dup := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: c.dst, Name: source.Name}}
	_, err = controllerutil.CreateOrPatch(ctx, c.Client, dup, func() error {
		if dup.Labels == nil {
			dup.Labels = map[string]string{}
		}
		dup.Labels[sourceLabel] = source.Name
		dup.Data = source.Data
		dup.BinaryData = source.BinaryData
		return nil
	})
	return ctrl.Result{}, err
}

func main() {
	src := flag.String("source", "src", "namespace of the ConfigMaps to copy")
	dst := flag.String("destination", "dst", "namespace of the copies")
	metrics := flag.String("metrics-bind-address", "127.0.0.1:0", "address of /metrics")
	qps := flag.Float64("kube-api-qps", -1, "client-side limit of requests to the apiserver per second (-1, controller-runtime's default: none, the apiserver's fairness limits)")
	burst := flag.Int("kube-api-burst", 0, "client-side burst of requests to the apiserver")
	opts := zap.Options{}
	opts.BindFlags(flag.CommandLine)
	flag.Parse()
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&opts)))
	log := ctrl.Log.WithName("crcopy")

	// The cache holds the sources and the copies, nothing else.
	cfg := ctrl.GetConfigOrDie()
	cfg.QPS, cfg.Burst = float32(*qps), *burst
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Metrics: metricsserver.Options{BindAddress: *metrics},
		Cache: cache.Options{ByObject: map[client.Object]cache.ByObject{
			&corev1.ConfigMap{}: {Namespaces: map[string]cache.Config{
				*src: {LabelSelector: labels.SelectorFromSet(labels.Set{"sync": "true"})},
				*dst: {},
			}},
		}},
	})
	if err != nil {
		log.Error(err, "new manager")
		os.Exit(1)
	}
	in := func(ns string) predicate.Predicate {
		return predicate.NewPredicateFuncs(func(o client.Object) bool { return o.GetNamespace() == ns })
	}
	toSource := handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
		name, ok := o.GetLabels()[sourceLabel]
		if !ok {
			return nil
		}
		return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: *src, Name: name}}}
	})
	err = ctrl.NewControllerManagedBy(mgr).
		Named("configmap-copy").
		For(&corev1.ConfigMap{}, builder.WithPredicates(in(*src))).
		Watches(&corev1.ConfigMap{}, toSource, builder.WithPredicates(in(*dst))).
		Complete(&copier{Client: mgr.GetClient(), src: *src, dst: *dst})
	if err != nil {
		log.Error(err, "new controller")
		os.Exit(1)
	}
	if err := mgr.Start(ctrl.SetupSignalHandler()); err != nil {
		log.Error(err, "manager")
		os.Exit(1)
	}
}
