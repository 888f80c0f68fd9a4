package informer_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiext "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	"github.com/informer-host/informer-host/event"
	"github.com/informer-host/informer-host/informer"
	"github.com/informer-host/informer-host/internal/config"
	"github.com/informer-host/informer-host/internal/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) { os.Exit(testenv.Run(m, &env)) }

// startPipeline runs a pipeline over resources until the test ends.
func startPipeline(t *testing.T, cfg *rest.Config, log *slog.Logger, resources ...config.Resource) *informer.Pipeline {
	t.Helper()
	if log == nil {
		log = slog.New(slog.NewTextHandler(testWriter{t}, nil))
	}
	p, err := informer.New(informer.Options{RESTConfig: cfg, Logger: log, PendingRetryPeriod: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Stop)
	if err := p.Apply(context.Background(), resources); err != nil {
		t.Fatal(err)
	}
	return p
}

func listen(t *testing.T, p *informer.Pipeline, resource string) (*recorder, *informer.Registration) {
	t.Helper()
	rec := &recorder{}
	reg, err := p.AddListener(resource, rec.listener())
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "listener on "+resource+" to sync", reg.HasSynced)
	return rec, reg
}

func configMap(ns, name, v string, labels map[string]string) *corev1.ConfigMap {
	return &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels},
		Data:       map[string]string{"v": v},
	}
}

func mustCreate(t *testing.T, cm *corev1.ConfigMap) *corev1.ConfigMap {
	t.Helper()
	out, err := env.Client.CoreV1().ConfigMaps(cm.Namespace).Create(context.Background(), cm, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func mustUpdate(t *testing.T, cm *corev1.ConfigMap, v string) *corev1.ConfigMap {
	t.Helper()
	cm = cm.DeepCopy()
	cm.Data["v"] = v
	out, err := env.Client.CoreV1().ConfigMaps(cm.Namespace).Update(context.Background(), cm, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func mustDelete(t *testing.T, ns, name string) {
	t.Helper()
	if err := env.Client.CoreV1().ConfigMaps(ns).Delete(context.Background(), name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
}

func configMaps(name string, namespaces ...string) config.Resource {
	return config.Resource{Name: name, Version: "v1", Resource: "configmaps", Namespaces: namespaces}
}

func TestConfigMapsInTwoNamespacesWithLabelSelector(t *testing.T) {
	nsA, nsB, nsOther := env.Namespace(t), env.Namespace(t), env.Namespace(t)
	res := configMaps("cms", nsA, nsB)
	res.LabelSelector = "app=watched"
	p := startPipeline(t, env.Config, nil, res)
	rec, _ := listen(t, p, "cms")

	watched := map[string]string{"app": "watched"}
	a := mustCreate(t, configMap(nsA, "a", "1", watched))
	b := mustCreate(t, configMap(nsB, "b", "1", watched))
	mustCreate(t, configMap(nsA, "unlabelled", "1", nil))
	mustCreate(t, configMap(nsA, "other-label", "1", map[string]string{"app": "other"}))
	mustCreate(t, configMap(nsOther, "elsewhere", "1", watched))
	a = mustUpdate(t, a, "2")
	mustUpdate(t, a, "3")
	mustUpdate(t, b, "2")
	mustDelete(t, nsA, "a")
	mustDelete(t, nsB, "b")
	// A marker created last: once it is seen, everything before it in its
	// namespace has been delivered.
	mustCreate(t, configMap(nsA, "marker", "1", watched))
	mustCreate(t, configMap(nsB, "marker", "1", watched))
	eventually(t, "markers", func() bool {
		return len(rec.forKey(nsA+"/marker")) == 1 && len(rec.forKey(nsB+"/marker")) == 1
	})

	want := map[string][]string{
		nsA + "/a": {
			"add cms " + nsA + "/a \"\"->\"1\"",
			"update cms " + nsA + "/a \"1\"->\"2\"",
			"update cms " + nsA + "/a \"2\"->\"3\"",
			"delete cms " + nsA + "/a \"\"->\"3\"",
		},
		nsB + "/b": {
			"add cms " + nsB + "/b \"\"->\"1\"",
			"update cms " + nsB + "/b \"1\"->\"2\"",
			"delete cms " + nsB + "/b \"\"->\"2\"",
		},
	}
	for key, w := range want {
		var got []string
		for _, e := range rec.forKey(key) {
			got = append(got, e.String())
		}
		if !slices.Equal(got, w) {
			t.Errorf("events of %s:\n got %q\nwant %q", key, got, w)
		}
	}
	for _, e := range rec.snapshot() {
		if _, ok := want[e.Key]; !ok && !strings.HasSuffix(e.Key, "/marker") {
			t.Errorf("unexpected event for an object outside the selector or namespaces: %s", e)
		}
	}
}

func TestManagedFieldsStrippedUnlessDisabled(t *testing.T) {
	ns := env.Namespace(t)
	keep := configMaps("keep", ns)
	no := false
	keep.StripManagedFields = &no
	p := startPipeline(t, env.Config, nil, configMaps("strip", ns), keep)
	var mu sync.Mutex
	seen := map[string]*unstructured.Unstructured{}
	for _, name := range []string{"strip", "keep"} {
		if _, err := p.AddListener(name, informer.ListenerFunc(func(ev *event.Event) {
			mu.Lock()
			seen[ev.Resource.Name] = ev.Object
			mu.Unlock()
		})); err != nil {
			t.Fatal(err)
		}
	}
	mustCreate(t, configMap(ns, "x", "1", map[string]string{"l": "v"}))
	eventually(t, "both listeners", func() bool { mu.Lock(); defer mu.Unlock(); return len(seen) == 2 })
	mu.Lock()
	defer mu.Unlock()
	if mf := seen["strip"].GetManagedFields(); len(mf) != 0 {
		t.Errorf("managedFields not stripped: %v", mf)
	}
	if mf := seen["keep"].GetManagedFields(); len(mf) == 0 {
		t.Errorf("managedFields stripped although stripManagedFields: false")
	}
	if seen["strip"].GetLabels()["l"] != "v" || seen["strip"].Object["data"] == nil {
		t.Errorf("stripping removed more than managedFields: %v", seen["strip"].Object)
	}
}

func TestCRDCreatedAfterStartBecomesActive(t *testing.T) {
	ns := env.Namespace(t)
	group := ns + ".example.com"
	p := startPipeline(t, env.Config, nil,
		config.Resource{Name: "widgets", Group: group, Version: "v1", Kind: "Widget", Namespaces: []string{ns}},
		configMaps("cms", ns))
	rec := &recorder{}
	reg, err := p.AddListener("widgets", rec.listener())
	if err != nil {
		t.Fatal(err)
	}
	// The other resource runs while widgets waits.
	cmRec, _ := listen(t, p, "cms")
	if st := status(p, "widgets"); st.Phase != informer.PhasePending || st.Error == "" {
		t.Fatalf("widgets before its CRD exists: %+v, want Pending with the discovery error", st)
	}
	if reg.HasSynced() {
		t.Fatal("listener of a pending resource reports synced")
	}

	crd := testenv.WidgetCRD(group, testenv.OpenWidgetVersion("v1", true))
	ext := apiext.NewForConfigOrDie(env.Config)
	if _, err := ext.ApiextensionsV1().CustomResourceDefinitions().Create(context.Background(), crd, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = ext.ApiextensionsV1().CustomResourceDefinitions().Delete(context.Background(), crd.Name, metav1.DeleteOptions{})
	})
	eventually(t, "widgets to become active and synced", reg.HasSynced)
	if st := status(p, "widgets"); st.Phase != informer.PhaseActive || st.Ref.Resource != "widgets" || st.Ref.Kind != "Widget" {
		t.Fatalf("widgets after its CRD appeared: %+v", st)
	}

	dyn := dynamic.NewForConfigOrDie(env.Config)
	gvr := schema.GroupVersionResource{Group: group, Version: "v1", Resource: "widgets"}
	w := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": group + "/v1", "kind": "Widget",
		"metadata": map[string]any{"name": "w1", "namespace": ns},
		"spec":     map[string]any{"size": int64(3)},
	}}
	if _, err := dyn.Resource(gvr).Namespace(ns).Create(context.Background(), w, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := dyn.Resource(gvr).Namespace(ns).Delete(context.Background(), "w1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "widget add and delete", func() bool { return len(rec.forKey(ns+"/w1")) == 2 })
	got := rec.forKey(ns + "/w1")
	if got[0].Type != event.EventAdd || got[1].Type != event.EventDelete {
		t.Errorf("widget events: %v", got)
	}
	if n := len(cmRec.snapshot()); n != 0 {
		t.Errorf("configmap listener saw %d events in an empty namespace", n)
	}
}

func TestDeleteMissedByTheWatchArrivesAsFinalStateUnknown(t *testing.T) {
	ns := env.Namespace(t)
	proxy, viaProxy := testenv.NewWatchProxy(t, env.Config)
	p := startPipeline(t, viaProxy, nil, configMaps("cms", ns))
	rec, _ := listen(t, p, "cms")

	mustCreate(t, configMap(ns, "gone", "last-seen", nil))
	mustCreate(t, configMap(ns, "stays", "1", nil))
	eventually(t, "both adds", func() bool { return len(rec.snapshot()) == 2 })

	proxy.Cut()
	mustDelete(t, ns, "gone")
	proxy.Resume(true) // the watch cannot resume: the informer must relist

	eventually(t, "the delete of gone", func() bool { return len(rec.forKey(ns+"/gone")) == 2 })
	del := rec.forKey(ns + "/gone")[1]
	if del.Type != event.EventDelete || !del.FinalStateUnknown || del.Data != "last-seen" {
		t.Errorf("delete after relist = %s; want a delete with finalStateUnknown and the last known object", del)
	}
	// The watch works again afterwards.
	mustCreate(t, configMap(ns, "after", "1", nil))
	eventually(t, "an add after the relist", func() bool { return len(rec.forKey(ns+"/after")) == 1 })
	// A relist replays unchanged objects as updates with old == new, as
	// client-go does for every listener; nothing else happens to them.
	for i, e := range rec.forKey(ns + "/stays") {
		if (i == 0) != (e.Type == event.EventAdd) || e.FinalStateUnknown || e.Data != "1" || (i > 0 && e.OldData != "1") {
			t.Errorf("stays: event %d is %s; want one add, then only unchanged updates", i, e)
		}
	}
}

func TestForbiddenResourceIsReportedAndOthersKeepWorking(t *testing.T) {
	ns := env.Namespace(t)
	user := env.User(t, "limited-"+ns)
	role := &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "read-configmaps"},
		Rules: []rbacv1.PolicyRule{{
			APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "list", "watch"},
		}},
	}
	if _, err := env.Client.RbacV1().Roles(ns).Create(context.Background(), role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	binding := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "read-configmaps"},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: role.Name},
		Subjects:   []rbacv1.Subject{{Kind: "User", APIGroup: "rbac.authorization.k8s.io", Name: "limited-" + ns}},
	}
	if _, err := env.Client.RbacV1().RoleBindings(ns).Create(context.Background(), binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	logs := &testenv.LogBuffer{}
	log := slog.New(slog.NewTextHandler(logs, nil))
	p := startPipeline(t, user, log, configMaps("cms", ns),
		config.Resource{Name: "secrets", Version: "v1", Resource: "secrets", Namespaces: []string{ns}})
	cmRec, _ := listen(t, p, "cms")

	eventually(t, "the refusal to be logged", func() bool {
		return strings.Contains(logs.String(), "list/watch refused")
	})
	st := status(p, "secrets")
	if st.Synced || !strings.Contains(st.Error, "secrets") || !strings.Contains(st.Error, "cannot list") {
		t.Errorf("status of the forbidden resource: %+v; want not synced, naming secrets and the list verb", st)
	}
	var line string
	for _, l := range strings.Split(logs.String(), "\n") {
		if strings.Contains(l, "list/watch refused") {
			line = l
			break
		}
	}
	for _, want := range []string{"resource=secrets/v1", "namespace=" + ns, "verb=list"} {
		if !strings.Contains(line, want) {
			t.Errorf("log line %q lacks %q", line, want)
		}
	}
	if cms := status(p, "cms"); !cms.Synced || cms.Error != "" {
		t.Errorf("status of the permitted resource: %+v", cms)
	}
	mustCreate(t, configMap(ns, "still-flowing", "1", nil))
	eventually(t, "the permitted resource to deliver", func() bool { return len(cmRec.forKey(ns+"/still-flowing")) == 1 })
}

func TestLateListenerGetsCacheThenLiveEventsAndRemoveWaits(t *testing.T) {
	ns := env.Namespace(t)
	p := startPipeline(t, env.Config, nil, configMaps("cms", ns))
	first, _ := listen(t, p, "cms")
	mustCreate(t, configMap(ns, "old-1", "1", nil))
	mustCreate(t, configMap(ns, "old-2", "1", nil))
	eventually(t, "first listener sees both", func() bool { return len(first.snapshot()) == 2 })

	// The late listener blocks in its first live callback until released.
	late := &recorder{}
	record := late.listener()
	release := make(chan struct{})
	inCallback := make(chan struct{}, 1)
	var callbackReturned atomic.Bool
	reg, err := p.AddListener("cms", informer.ListenerFunc(func(ev *event.Event) {
		record(ev)
		if ev.Object.GetName() == "live" {
			inCallback <- struct{}{}
			<-release
			callbackReturned.Store(true)
		}
	}))
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "late listener synced", reg.HasSynced)
	got := late.snapshot()
	slices.SortFunc(got, func(a, b recorded) int { return strings.Compare(a.Key, b.Key) })
	if len(got) != 2 || !got[0].Initial || !got[1].Initial || got[0].Type != event.EventAdd ||
		got[0].Key != ns+"/old-1" || got[1].Key != ns+"/old-2" {
		t.Fatalf("late listener's replay: %v; want two initial-list adds", got)
	}

	mustCreate(t, configMap(ns, "live", "1", nil))
	<-inCallback
	if e := late.forKey(ns + "/live"); len(e) != 1 || e[0].Initial {
		t.Fatalf("live event: %v; want one add, not initial", e)
	}
	removed := make(chan struct{})
	var returnedFirst bool
	go func() {
		reg.Remove()
		returnedFirst = !callbackReturned.Load()
		close(removed)
	}()
	// Remove has begun (the registration reads as removed) while the
	// callback is still held; it must not return before the callback does.
	eventually(t, "Remove to begin", func() bool { return !reg.HasSynced() })
	close(release)
	<-removed
	if returnedFirst {
		t.Fatal("Remove returned while the listener was still inside a callback")
	}

	mustCreate(t, configMap(ns, "after-remove", "1", nil))
	eventually(t, "first listener sees after-remove", func() bool { return len(first.forKey(ns+"/after-remove")) == 1 })
	if e := late.forKey(ns + "/after-remove"); len(e) != 0 {
		t.Errorf("removed listener still received %v", e)
	}
	reg.Remove() // idempotent
}

func TestApplyStartsAndStopsSingleResources(t *testing.T) {
	ns := env.Namespace(t)
	p := startPipeline(t, env.Config, nil, configMaps("a", ns))
	recA, _ := listen(t, p, "a")

	// Add b; a's informer must not restart (a restart would replay its
	// cache to recA as initial-list adds).
	mustCreate(t, configMap(ns, "x", "1", nil))
	eventually(t, "a sees x", func() bool { return len(recA.snapshot()) == 1 })
	if err := p.Apply(context.Background(), []config.Resource{configMaps("a", ns), configMaps("b", ns)}); err != nil {
		t.Fatal(err)
	}
	recB, _ := listen(t, p, "b")
	if got := recB.snapshot(); len(got) != 1 || !got[0].Initial {
		t.Errorf("b's listener: %v; want x as an initial-list add", got)
	}

	// Remove a: its listener stops receiving, b carries on.
	if err := p.Apply(context.Background(), []config.Resource{configMaps("b", ns)}); err != nil {
		t.Fatal(err)
	}
	mustCreate(t, configMap(ns, "y", "1", nil))
	eventually(t, "b sees y", func() bool { return len(recB.forKey(ns+"/y")) == 1 })
	if got := recA.snapshot(); len(got) != 1 {
		t.Errorf("a after it was removed from the config: %v; want only its first add", got)
	}
	if names := statusNames(p); !slices.Equal(names, []string{"b"}) {
		t.Errorf("resources after removing a: %v", names)
	}
	if _, err := p.AddListener("a", recA.listener()); err == nil {
		t.Error("AddListener on a resource no longer configured succeeded")
	}
}

func status(p *informer.Pipeline, name string) informer.ResourceStatus {
	for _, s := range p.Status() {
		if s.Name == name {
			return s
		}
	}
	return informer.ResourceStatus{}
}

func statusNames(p *informer.Pipeline) []string {
	var out []string
	for _, s := range p.Status() {
		out = append(out, s.Name)
	}
	return out
}

func ptr[T any](v T) *T { return &v }

// testWriter sends logs to t.Log, so they show only for failing tests.
type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Helper()
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// A resource the apiserver does not serve as configured is pending with
// a NotServedError naming the nearest served resources (by name, then
// group, then version); one the RESTMapper takes all the same for another
// name runs, with a Warning saying which. Resolve says the same without
// starting anything.
func TestNotServedResourcesSuggestTheNearestServed(t *testing.T) {
	ns := env.Namespace(t)
	tests := []struct {
		spec    config.Resource
		pending bool
		want    string
	}{
		{config.Resource{Version: "v1", Resource: "confgimaps"}, true,
			`the apiserver serves no resource "confgimaps" in v1; did you mean configmaps (v1)?`},
		{config.Resource{Version: "v1", Resource: "cm"}, true, // kubectl's short name, which the RESTMapper does not take
			`the apiserver serves no resource "cm" in v1; did you mean configmaps (v1)?`},
		{config.Resource{Group: "apps", Version: "v1", Resource: "deploymnets"}, true,
			`the apiserver serves no resource "deploymnets" in apps/v1; did you mean deployments (apps/v1)?`},
		{config.Resource{Group: "apps", Version: "v1", Kind: "Deploymnet"}, true,
			`the apiserver serves no kind "Deploymnet" in apps/v1; did you mean Deployment (apps/v1)?`},
		{config.Resource{Group: "apps", Version: "v1", Resource: "pods"}, true,
			`the apiserver serves no resource "pods" in apps/v1; did you mean pods (v1)?`},
		{config.Resource{Group: ns + ".example.com", Version: "v1", Resource: "gizmos"}, true,
			`the apiserver serves no resource "gizmos" in ` + ns + `.example.com/v1; fix group, version and resource, or install the CRD that serves it`},
		{config.Resource{Version: "v1", Resource: "pod"}, false,
			`the apiserver serves no resource "pod" in v1; did you mean pods (v1)? It is watched as that`},
		{config.Resource{Version: "v1", Resource: "deployments"}, false,
			`the apiserver serves no resource "deployments" in v1; did you mean deployments (apps/v1)? It is watched as that`},
	}
	var specs []config.Resource
	for i := range tests {
		tests[i].spec.Name = fmt.Sprint("r", i)
		tests[i].spec.Namespaces = []string{ns}
		specs = append(specs, tests[i].spec)
	}
	p := startPipeline(t, env.Config, nil, specs...)
	for _, tc := range tests {
		st := status(p, tc.spec.Name)
		got, wantPhase := st.Warning, informer.PhaseActive
		if tc.pending {
			got, wantPhase = st.Error, informer.PhasePending
		}
		if st.Phase != wantPhase || !strings.HasPrefix(got, tc.want) {
			t.Errorf("%+v: %s %q, want %s %q", tc.spec, st.Phase, got, wantPhase, tc.want)
		}
		_, err := p.Resolve(context.Background(), tc.spec)
		var notServed *informer.NotServedError
		if !errors.As(err, &notServed) || !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("Resolve(%+v) = %v, want a NotServedError %q", tc.spec, err, tc.want)
		}
	}
}
