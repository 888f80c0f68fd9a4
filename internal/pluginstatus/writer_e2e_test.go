package pluginstatus

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	eventsv1 "k8s.io/api/events/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/yaml"

	"github.com/informer-host/informer-host/host"
	"github.com/informer-host/informer-host/internal/pluginapi/v1alpha1"
	"github.com/informer-host/informer-host/internal/pluginresource"
	"github.com/informer-host/informer-host/internal/pluginsource"
	"github.com/informer-host/informer-host/internal/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) { os.Exit(testenv.Run(m, &env)) }

// installCRDs installs Plugin and ClusterPlugin: the committed CRDs of
// deploy/crds when the tree has them (so the status written is one the
// real schema keeps), otherwise as far as the writer needs them, a
// status subresource and any fields.
func installCRDs(t *testing.T) dynamic.Interface {
	t.Helper()
	env.Require(t)
	cs, err := apiextensionsclient.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	yes := true
	for _, c := range []struct {
		plural, kind string
		scope        apiextensionsv1.ResourceScope
	}{{"plugins", v1alpha1.KindPlugin, apiextensionsv1.NamespaceScoped}, {"clusterplugins", v1alpha1.KindClusterPlugin, apiextensionsv1.ClusterScoped}} {
		crd := &apiextensionsv1.CustomResourceDefinition{
			ObjectMeta: metav1.ObjectMeta{Name: c.plural + "." + v1alpha1.Group},
			Spec: apiextensionsv1.CustomResourceDefinitionSpec{Group: v1alpha1.Group, Scope: c.scope,
				Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: c.plural, Kind: c.kind},
				Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{Name: v1alpha1.Version, Served: true, Storage: true,
					Subresources: &apiextensionsv1.CustomResourceSubresources{Status: &apiextensionsv1.CustomResourceSubresourceStatus{}},
					Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{Type: "object",
						XPreserveUnknownFields: &yes}}}}}}
		if b, err := os.ReadFile(filepath.Join("..", "..", "deploy", "crds", v1alpha1.Group+"_"+c.plural+".yaml")); err == nil {
			crd = &apiextensionsv1.CustomResourceDefinition{}
			if err := yaml.UnmarshalStrict(b, crd); err != nil {
				t.Fatalf("deploy/crds: %v", err)
			}
		}
		if _, err := cs.ApiextensionsV1().CustomResourceDefinitions().Create(context.Background(), crd, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
	dyn := dynamic.NewForConfigOrDie(env.Config)
	for _, gvr := range []schema.GroupVersionResource{v1alpha1.PluginsGVR, v1alpha1.ClusterPluginsGVR} {
		testenv.Eventually(t, gvr.Resource+" served", func() bool {
			_, err := dyn.Resource(gvr).List(context.Background(), metav1.ListOptions{Limit: 1})
			return err == nil
		})
	}
	return dyn
}

// createObject creates a plugin object and returns its admission as the
// resource controller would make it.
func createObject(t *testing.T, dyn dynamic.Interface, kind, ns, name string) pluginresource.Admission {
	t.Helper()
	obj := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": v1alpha1.Group + "/" + v1alpha1.Version, "kind": kind,
		"metadata": map[string]any{"name": name},
		"spec": map[string]any{"source": map[string]any{"oci": "registry.example/team/labeler:v1"},
			"serviceAccountName": "labeler"},
	}}
	ri := dynamic.ResourceInterface(dyn.Resource(v1alpha1.ClusterPluginsGVR))
	if kind == v1alpha1.KindPlugin {
		obj.SetNamespace(ns)
		ri = dyn.Resource(v1alpha1.PluginsGVR).Namespace(ns)
	} else {
		ns = ""
		t.Cleanup(func() { _ = ri.Delete(context.Background(), name, metav1.DeleteOptions{}) })
	}
	got, err := ri.Create(context.Background(), obj, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return pluginresource.Admission{Kind: kind, Namespace: ns, Name: name, UID: got.GetUID(), Generation: got.GetGeneration(),
		Plugin: v1alpha1.PluginName(ns, name), Admitted: true, Applied: true, Source: srcA, VerifyPolicy: true}
}

func readStatus(t *testing.T, dyn dynamic.Interface, adm pluginresource.Admission) v1alpha1.PluginStatus {
	t.Helper()
	ri := dynamic.ResourceInterface(dyn.Resource(v1alpha1.ClusterPluginsGVR))
	if adm.Kind == v1alpha1.KindPlugin {
		ri = dyn.Resource(v1alpha1.PluginsGVR).Namespace(adm.Namespace)
	}
	obj, err := ri.Get(context.Background(), adm.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	st, err := StatusOf(obj)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// world is what a replica's host, sources and resource controller report,
// set by the test.
type world struct {
	mu         sync.Mutex
	plugins    []host.PluginStatus
	sources    map[string]pluginsource.Status
	admissions []pluginresource.Admission
	members    []string
	standby    bool
	// onLook changes the plugins at every look (counters that move).
	onLook func(ps []host.PluginStatus)
	looks  atomic.Int64
}

func (w *world) set(f func(w *world)) {
	w.mu.Lock()
	defer w.mu.Unlock()
	f(w)
}

func (w *world) options(replica string, cfg *rest.Config) Options {
	return Options{RESTConfig: cfg, Replica: replica, Poll: 10 * time.Millisecond,
		Plugins: func() []host.PluginStatus {
			w.mu.Lock()
			defer w.mu.Unlock()
			w.looks.Add(1)
			if w.onLook != nil {
				w.onLook(w.plugins)
			}
			return append([]host.PluginStatus(nil), w.plugins...)
		},
		Sources: func() map[string]pluginsource.Status {
			w.mu.Lock()
			defer w.mu.Unlock()
			out := map[string]pluginsource.Status{}
			for k, v := range w.sources {
				out[k] = v
			}
			return out
		},
		Admissions: func() []pluginresource.Admission {
			w.mu.Lock()
			defer w.mu.Unlock()
			return append([]pluginresource.Admission(nil), w.admissions...)
		},
		Standby: func() bool {
			w.mu.Lock()
			defer w.mu.Unlock()
			return w.standby
		},
	}
}

// waitLooks waits until the writer has looked n more times.
func (w *world) waitLooks(t *testing.T, n int64) {
	t.Helper()
	target := w.looks.Load() + n
	testenv.Eventually(t, "the writer's looks", func() bool { return w.looks.Load() >= target })
}

// statusUpdates counts the status updates the apiserver accepted through
// the config it returns.
func statusUpdates(cfg *rest.Config) (*rest.Config, *atomic.Int64) {
	var n atomic.Int64
	c := rest.CopyConfig(cfg)
	c.WrapTransport = func(rt http.RoundTripper) http.RoundTripper {
		return roundTripper(func(r *http.Request) (*http.Response, error) {
			resp, err := rt.RoundTrip(r)
			if err == nil && resp.StatusCode == http.StatusOK && r.Method == http.MethodPut && strings.HasSuffix(r.URL.Path, "/status") {
				n.Add(1)
			}
			return resp, err
		})
	}
	return c, &n
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

func start(t *testing.T, o Options) context.CancelFunc {
	t.Helper()
	w, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); w.Run(ctx) }()
	stop := func() { cancel(); <-done }
	t.Cleanup(stop)
	return stop
}

func runningAs(file string, delivered uint64) host.PluginStatus {
	p := *running(func(p *host.PluginStatus) { p.File, p.Counters.Delivered = file, delivered })
	return p
}

func conditionIs(st v1alpha1.PluginStatus, typ string, status metav1.ConditionStatus, reason string) bool {
	c := meta.FindStatusCondition(st.Conditions, typ)
	return c != nil && c.Status == status && c.Reason == reason
}

// A plugin object that runs shows Ready with its digest and signer; a
// refused one shows why; each transition is one Event on the object.
func TestStatusWritten(t *testing.T) {
	dyn := installCRDs(t)
	ns := env.Namespace(t)
	ok := createObject(t, dyn, v1alpha1.KindPlugin, ns, "labeler")
	refused := createObject(t, dyn, v1alpha1.KindClusterPlugin, "", ns+"-shadow")
	refused.Admitted, refused.Reason, refused.Message = false, v1alpha1.ReasonNameConflict,
		"config.yaml's plugins.modules has a plugin named "+refused.Plugin+"; config wins: rename the object or the module"
	w := &world{plugins: []host.PluginStatus{runningAs(ok.Plugin, 3)},
		sources:    map[string]pluginsource.Status{ok.Plugin: *sourced()},
		admissions: []pluginresource.Admission{ok, refused}}
	start(t, w.options("r1", env.Config))

	testenv.Eventually(t, "Ready with digest and signer", func() bool {
		st := readStatus(t, dyn, ok)
		return conditionIs(st, v1alpha1.ConditionReady, metav1.ConditionTrue, v1alpha1.ReasonRunning) &&
			conditionIs(st, v1alpha1.ConditionVerified, metav1.ConditionTrue, v1alpha1.ReasonVerified) &&
			st.Digest == "sha256:"+shaA && st.Signer == "ci@example.com" && st.EventsDelivered == 3 && st.ObservedGeneration == ok.Generation
	})
	testenv.Eventually(t, "the refusal's reason", func() bool {
		st := readStatus(t, dyn, refused)
		c := meta.FindStatusCondition(st.Conditions, v1alpha1.ConditionReady)
		return c != nil && c.Status == metav1.ConditionFalse && c.Reason == v1alpha1.ReasonNameConflict && c.Message == refused.Message
	})

	// Many looks at the same state: one Loaded Event, no more.
	w.waitLooks(t, 50)
	w.set(func(w *world) {
		w.plugins[0].State, w.plugins[0].Failures, w.plugins[0].LastError = host.StateQuarantined, 5, "trap: unreachable"
	})
	testenv.Eventually(t, "Quarantined", func() bool {
		st := readStatus(t, dyn, ok)
		return conditionIs(st, v1alpha1.ConditionQuarantined, metav1.ConditionTrue, v1alpha1.ReasonQuarantined) &&
			conditionIs(st, v1alpha1.ConditionReady, metav1.ConditionFalse, v1alpha1.ReasonQuarantined)
	})
	reasons := func(namespace, name string) map[string][]eventsv1.Event {
		list, err := env.Client.EventsV1().Events(namespace).List(context.Background(), metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		out := map[string][]eventsv1.Event{}
		for _, e := range list.Items {
			if e.Regarding.Name == name && e.ReportingController == ReportingController {
				out[e.Reason] = append(out[e.Reason], e)
			}
		}
		return out
	}
	testenv.Eventually(t, "Loaded and Quarantined Events", func() bool {
		r := reasons(ns, ok.Name)
		return len(r["Loaded"]) > 0 && len(r["Quarantined"]) > 0
	})
	testenv.Eventually(t, "a Refused Event", func() bool { return len(reasons(metav1.NamespaceDefault, refused.Name)["Refused"]) > 0 })
	w.waitLooks(t, 50)
	r := reasons(ns, ok.Name)
	for reason, evs := range r {
		if len(evs) != 1 || evs[0].Series != nil {
			t.Errorf("%d %s Events (series %+v), want one per transition", len(evs), reason, evs[0].Series)
		}
		if evs[0].Regarding.Kind != v1alpha1.KindPlugin || evs[0].Regarding.UID != ok.UID {
			t.Errorf("%s Event regards %+v", reason, evs[0].Regarding)
		}
	}
	if len(r) != 2 {
		t.Errorf("Events %v, want Loaded and Quarantined", r)
	}
}

// Counter-only changes are written at most once per statusInterval, and
// condition changes within the per-object token bucket, however often
// they change.
func TestStatusWritesBounded(t *testing.T) {
	dyn := installCRDs(t)
	ns := env.Namespace(t)
	adm := createObject(t, dyn, v1alpha1.KindPlugin, ns, "counter")
	clk := clocktesting.NewFakeClock(t0)
	w := &world{plugins: []host.PluginStatus{runningAs(adm.Plugin, 0)},
		sources: map[string]pluginsource.Status{adm.Plugin: *sourced()}, admissions: []pluginresource.Admission{adm},
		// Every look delivers one more event.
		onLook: func(ps []host.PluginStatus) { ps[0].Counters.Delivered++ }}
	cfg, updates := statusUpdates(env.Config)
	o := w.options("r1", cfg)
	o.Clock, o.StatusInterval = clk, 10*time.Second
	start(t, o)

	testenv.Eventually(t, "the first status", func() bool { return updates.Load() >= 1 })
	const n = 100
	w.waitLooks(t, n)
	if got := updates.Load(); got != 1 {
		t.Fatalf("%d status updates after %d counter changes within one interval, want 1", got, n)
	}
	first := readStatus(t, dyn, adm).EventsDelivered
	clk.Step(10 * time.Second)
	testenv.Eventually(t, "the counters written once the interval passed", func() bool { return updates.Load() >= 2 })
	w.waitLooks(t, n)
	if got := updates.Load(); got != 2 {
		t.Fatalf("%d status updates after another %d counter changes within one interval, want 2", got, n)
	}
	if second := readStatus(t, dyn, adm).EventsDelivered; second <= first {
		t.Errorf("eventsDelivered %d after the interval, was %d", second, first)
	}

	// A plugin flapping between running and restarting at every look:
	// the token bucket (burst 5, refilled by the 10s step above) bounds
	// the writes while the clock stands still.
	w.set(func(w *world) {
		w.onLook = func(ps []host.PluginStatus) {
			if ps[0].State == host.StateRunning {
				ps[0].State = host.StateRestarting
			} else {
				ps[0].State = host.StateRunning
			}
		}
	})
	w.waitLooks(t, n)
	if got := updates.Load() - 2; got < 1 || got > DefaultConditionBurst {
		t.Fatalf("%d status updates over %d condition changes, want 1 to %d (the burst)", got, n, DefaultConditionBurst)
	}
}

// Two shard members each write their own entry and the aggregate sums
// them; a member that left is dropped by the one that stays.
func TestStatusReplicas(t *testing.T) {
	dyn := installCRDs(t)
	ns := env.Namespace(t)
	adm := createObject(t, dyn, v1alpha1.KindPlugin, ns, "sharded")
	members := []string{"m1", "m2"}
	w1 := &world{plugins: []host.PluginStatus{runningAs(adm.Plugin, 5)}, sources: map[string]pluginsource.Status{adm.Plugin: *sourced()},
		admissions: []pluginresource.Admission{adm}, members: members}
	w2 := &world{plugins: []host.PluginStatus{runningAs(adm.Plugin, 7)}, sources: map[string]pluginsource.Status{adm.Plugin: *sourced()},
		admissions: []pluginresource.Admission{adm}, members: members}
	for _, x := range []struct {
		w    *world
		name string
	}{{w1, "m1"}, {w2, "m2"}} {
		o := x.w.options(x.name, env.Config)
		w := x.w
		o.Members = func() []string {
			w.mu.Lock()
			defer w.mu.Unlock()
			return append([]string(nil), w.members...)
		}
		stop := start(t, o)
		if x.name == "m2" {
			defer func() {
				// m2 leaves: the group's live members are m1 alone.
				stop()
				w1.set(func(w *world) { w.members = []string{"m1"} })
				testenv.Eventually(t, "m2's entry dropped", func() bool {
					st := readStatus(t, dyn, adm)
					return len(st.Replicas) == 1 && st.Replicas[0].Name == "m1" && st.EventsDelivered == 5
				})
			}()
		}
	}
	testenv.Eventually(t, "both entries and their sum", func() bool {
		st := readStatus(t, dyn, adm)
		return len(st.Replicas) == 2 && st.EventsDelivered == 12 &&
			conditionIs(st, v1alpha1.ConditionReady, metav1.ConditionTrue, v1alpha1.ReasonRunning)
	})
	// m2's plugin parks objects: the object is not Ready, whoever wrote last.
	w2.set(func(w *world) {
		w.plugins[0].Parked = []host.ObjectFailure{{Resource: "pods", Namespace: ns, Name: "web-1", LastError: "ERROR"}}
	})
	testenv.Eventually(t, "m2's parked objects in the aggregate", func() bool {
		st := readStatus(t, dyn, adm)
		return st.Parked == 1 && conditionIs(st, v1alpha1.ConditionDegraded, metav1.ConditionTrue, v1alpha1.ReasonObjectsParked) &&
			!meta.IsStatusConditionTrue(st.Conditions, v1alpha1.ConditionReady)
	})
	w2.set(func(w *world) { w.plugins[0].Parked = nil })
	testenv.Eventually(t, "Ready again", func() bool {
		return conditionIs(readStatus(t, dyn, adm), v1alpha1.ConditionReady, metav1.ConditionTrue, v1alpha1.ReasonRunning)
	})
}

// A standby writes nothing until it stops being one.
func TestStatusStandby(t *testing.T) {
	dyn := installCRDs(t)
	ns := env.Namespace(t)
	adm := createObject(t, dyn, v1alpha1.KindPlugin, ns, "standby")
	w := &world{plugins: []host.PluginStatus{runningAs(adm.Plugin, 1)}, sources: map[string]pluginsource.Status{adm.Plugin: *sourced()},
		admissions: []pluginresource.Admission{adm}, standby: true}
	cfg, updates := statusUpdates(env.Config)
	o := w.options("r1", cfg)
	var standbyLooks atomic.Int64
	standby := o.Standby
	o.Standby = func() bool { standbyLooks.Add(1); return standby() }
	start(t, o)
	testenv.Eventually(t, "the standby's looks", func() bool { return standbyLooks.Load() >= 50 })
	if n := updates.Load(); n != 0 || len(readStatus(t, dyn, adm).Conditions) != 0 {
		t.Fatalf("a standby wrote %d status updates", n)
	}
	w.set(func(w *world) { w.standby = false })
	testenv.Eventually(t, "the status once it leads", func() bool {
		return conditionIs(readStatus(t, dyn, adm), v1alpha1.ConditionReady, metav1.ConditionTrue, v1alpha1.ReasonRunning)
	})
}
