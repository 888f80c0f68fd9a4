package rbacgen

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	authzv1 "k8s.io/api/authorization/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiext "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/informer-host/informer-host/internal/config"
	"github.com/informer-host/informer-host/internal/controllerwrites"
	"github.com/informer-host/informer-host/internal/daemon"
	"github.com/informer-host/informer-host/internal/testenv"
)

const ctlGroup = "rbacctl.example.com"

var widgetsGVR = schema.GroupVersionResource{Group: ctlGroup, Version: "v1", Resource: "widgets"}

// createWidgetCRD installs a namespaced Widget with a status subresource
// and waits until the apiserver serves it.
func createWidgetCRD(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	crds := apiext.NewForConfigOrDie(env.Config).ApiextensionsV1().CustomResourceDefinitions()
	_, err := crds.Create(ctx, testenv.WidgetCRD(ctlGroup, apiextv1.CustomResourceDefinitionVersion{Name: "v1", Served: true, Storage: true,
		Subresources: &apiextv1.CustomResourceSubresources{Status: &apiextv1.CustomResourceSubresourceStatus{}},
		Schema: &apiextv1.CustomResourceValidation{OpenAPIV3Schema: &apiextv1.JSONSchemaProps{Type: "object",
			Properties: map[string]apiextv1.JSONSchemaProps{
				"spec":   {Type: "object", XPreserveUnknownFields: new(true)},
				"status": {Type: "object", Properties: map[string]apiextv1.JSONSchemaProps{"phase": {Type: "string"}}},
			}}}}), metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	dyn := dynamic.NewForConfigOrDie(env.Config)
	testenv.Eventually(t, "widgets to be served", func() bool {
		_, err := dyn.Resource(widgetsGVR).List(ctx, metav1.ListOptions{Limit: 1})
		return err == nil
	})
}

const controllerDaemonConfig = `apiVersion: informer-host/v1
kubeconfig: kubeconfig
resources:
  - {name: widgets, group: rbacctl.example.com, version: v1, resource: widgets, namespaces: [NS]}
  - {name: cms, version: v1, resource: configmaps, namespaces: [NS]}
plugins:
  directory: plugins
  modules:
    - file: ctl.wasm
      controller: {for: widgets, owns: [cms], finalizer: rbacctl.example.com/cleanup}
      limits: {restartBackoff: 10ms}
      grants:
        impersonate: {serviceAccount: NS/ctl}
        writes:
          resources:
            - {resource: widgets, verbs: [patch, apply], subresources: [status]}
            - {resource: cms, verbs: [apply, delete]}
server:
  address: 127.0.0.1:0
`

// A controller plugin runs in the daemon, the daemon as its ServiceAccount
// and the plugin as the ServiceAccount it impersonates, each with exactly
// the RBAC Generate gives them, on an apiserver that enforces
// OwnerReferencesPermissionEnforcement: the plugin's children get their
// controller ownerReference with blockOwnerDeletion, its status is
// applied, its finalizer added and, once the primary is deleted and its
// children pruned, removed, and its requeue time persisted; nothing is
// refused. Then, without the generated rule on widgets/finalizers, a
// child's apply is refused by the admission plugin: the rule is needed.
func TestControllerRunsWithItsGeneratedRBAC(t *testing.T) {
	env.Require(t)
	createWidgetCRD(t)
	ctx := context.Background()
	ns := env.Namespace(t)
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "plugins"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "plugins", "ctl.wasm"), testenv.WAT(t, "testdata/controller.wat"), 0o644); err != nil {
		t.Fatal(err)
	}
	cfgPath := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(cfgPath, []byte(strings.ReplaceAll(controllerDaemonConfig, "NS", ns)), 0o644); err != nil {
		t.Fatal(err)
	}
	daemonSA := env.ServiceAccount(t, ns, "informer-host")
	if err := testenv.WriteConfigKubeconfig(daemonSA, filepath.Join(dir, "kubeconfig")); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	r, err := Generate(ctx, cfg, Options{Namespace: ns, ServiceAccount: "informer-host", Name: "informer-host-" + ns})
	if err != nil {
		t.Fatal(err)
	}
	// The rule the second half takes away must be one of the generated.
	if len(r.Identities) != 1 || !slices.ContainsFunc(r.Identities[0].Namespaced[ns], func(rule Rule) bool {
		return slices.Contains(rule.Resources, "widgets/finalizers") && slices.Equal(rule.Verbs, []string{"update"})
	}) {
		t.Fatalf("no generated rule for update on widgets/finalizers in %s:\n%s", ns, strings.Join(rulesText(r), "\n"))
	}
	apply(t, r.Objects())

	ctlUser := fmt.Sprintf("system:serviceaccount:%s:ctl", ns)
	asCtl := rest.CopyConfig(env.Config)
	asCtl.Impersonate = rest.ImpersonationConfig{UserName: ctlUser}
	mayCtl := mayFunc(t, kubernetes.NewForConfigOrDie(asCtl))
	type attrs = authzv1.ResourceAttributes
	finalizersRule := attrs{Verb: "update", Group: ctlGroup, Resource: "widgets", Subresource: "finalizers", Namespace: ns, Name: "w"}
	testenv.Eventually(t, "the generated RBAC to take effect", func() bool {
		return mayCtl(finalizersRule) && mayCtl(attrs{Verb: "delete", Resource: "configmaps", Namespace: ns})
	})

	logs := &testenv.LogBuffer{}
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		done <- daemon.Run(runCtx, daemon.Options{Config: cfg, Logger: slog.New(slog.NewTextHandler(logs, nil)), DrainTimeout: 10 * time.Second})
	}()
	defer func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Run: %v", err)
			}
		case <-time.After(time.Minute):
			t.Error("Run did not return after its context ended")
		}
		if t.Failed() {
			t.Logf("daemon log:\n%s", strings.Join(logs.Lines(), "\n"))
		}
	}()

	dyn := dynamic.NewForConfigOrDie(env.Config)
	widgets := dyn.Resource(widgetsGVR).Namespace(ns)
	create := func(name string) {
		t.Helper()
		w := &unstructured.Unstructured{Object: map[string]any{"apiVersion": ctlGroup + "/v1", "kind": "Widget",
			"metadata": map[string]any{"name": name}, "spec": map[string]any{"n": int64(1)}}}
		if _, err := widgets.Create(ctx, w, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	getWidget := func(name string) *unstructured.Unstructured {
		t.Helper()
		w, err := widgets.Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			t.Fatal(err)
		}
		return w
	}

	create("w")
	testenv.Eventually(t, "the child configmap w with a controller ownerReference that blocks the owner's deletion", func() bool {
		cm, err := env.Client.CoreV1().ConfigMaps(ns).Get(ctx, "w", metav1.GetOptions{})
		if err != nil {
			return false
		}
		ref := metav1.GetControllerOf(cm)
		return ref != nil && ref.Kind == "Widget" && ref.Name == "w" && ref.BlockOwnerDeletion != nil && *ref.BlockOwnerDeletion
	})
	testenv.Eventually(t, "w's finalizer, status and requeue time", func() bool {
		w := getWidget("w")
		if w == nil {
			return false
		}
		phase, _, _ := unstructured.NestedString(w.Object, "status", "phase")
		requeue := false
		for k := range w.GetAnnotations() {
			requeue = requeue || strings.HasPrefix(k, controllerwrites.AnnotationRequeuePrefix)
		}
		return slices.Contains(w.GetFinalizers(), "rbacctl.example.com/cleanup") && phase == "Ready" && requeue
	})
	if err := widgets.Delete(ctx, "w", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, "w and its child to go: the child pruned, then the finalizer removed", func() bool {
		_, err := env.Client.CoreV1().ConfigMaps(ns).Get(ctx, "w", metav1.GetOptions{})
		return apierrors.IsNotFound(err) && getWidget("w") == nil
	})
	for _, word := range []string{"forbidden", "refused", "failed to reconcile", "answer failed", "cannot add its finalizer"} {
		if lines := logs.Lines(word); len(lines) > 0 {
			t.Fatalf("the daemon logged %q under its generated RBAC:\n%s", word, strings.Join(lines, "\n"))
		}
	}

	// Without the rule on widgets/finalizers the admission plugin refuses
	// the child's blockOwnerDeletion.
	roles := env.Client.RbacV1().Roles(ns)
	role, err := roles.Get(ctx, r.Identities[0].Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	n := len(role.Rules)
	role.Rules = slices.DeleteFunc(role.Rules, func(rule rbacv1.PolicyRule) bool { return slices.Contains(rule.Resources, "widgets/finalizers") })
	if len(role.Rules) != n-1 {
		t.Fatalf("removed %d rules, want 1", n-len(role.Rules))
	}
	if _, err := roles.Update(ctx, role, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, "the rule's removal to take effect", func() bool { return !mayCtl(finalizersRule) })
	create("v")
	testenv.Eventually(t, "the plugin's failed child apply for v, refused for blockOwnerDeletion, in the log", func() bool {
		return len(logs.Lines(" "+ns+"/v\"", "cannot set blockOwnerDeletion")) > 0
	})
	if _, err := env.Client.CoreV1().ConfigMaps(ns).Get(ctx, "v", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("child v: %v, want not found", err)
	}
}
