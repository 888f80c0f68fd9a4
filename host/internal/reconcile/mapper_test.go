package reconcile

import (
	"slices"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/informer-host/informer-host/event"
	"github.com/informer-host/informer-host/internal/config"
)

var cronjobs = &event.ResourceRef{Name: "cronjobs", Group: "batch", Version: "v1", Resource: "cronjobs", Kind: "CronJob"}

// obj builds an object from its namespace/name and a tree of fields
// merged into it.
func obj(key string, fields map[string]any) *unstructured.Unstructured {
	ns, name, found := strings.Cut(key, "/")
	if !found {
		ns, name = "", key
	}
	u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Thing"}}
	for k, v := range fields {
		u.Object[k] = v
	}
	u.SetNamespace(ns)
	u.SetName(name)
	return u
}

func pairs(kv []string) map[string]string {
	m := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return m
}

func withLabels(u *unstructured.Unstructured, kv ...string) *unstructured.Unstructured {
	u = u.DeepCopy()
	u.SetLabels(pairs(kv))
	return u
}

func withAnnotations(u *unstructured.Unstructured, kv ...string) *unstructured.Unstructured {
	u = u.DeepCopy()
	u.SetAnnotations(pairs(kv))
	return u
}

func withOwners(u *unstructured.Unstructured, refs ...metav1.OwnerReference) *unstructured.Unstructured {
	u = u.DeepCopy()
	u.SetOwnerReferences(refs)
	return u
}

func ownerRef(apiVersion, kind, name string, controller bool) metav1.OwnerReference {
	return metav1.OwnerReference{APIVersion: apiVersion, Kind: kind, Name: name, UID: types.UID("u-" + name), Controller: &controller}
}

func add(u *unstructured.Unstructured) *event.Event {
	return &event.Event{Type: event.EventAdd, Object: u}
}
func del(u *unstructured.Unstructured) *event.Event {
	return &event.Event{Type: event.EventDelete, Object: u}
}
func update(old, new *unstructured.Unstructured) *event.Event {
	return &event.Event{Type: event.EventUpdate, Object: new, OldObject: old}
}

func keys(rs []Request) []string {
	out := make([]string, 0, len(rs))
	for _, r := range rs {
		out = append(out, r.String())
	}
	slices.Sort(out)
	return out
}

func newTestMapper(t *testing.T, c *config.Controller, opts ...MapperOption) *Mapper {
	t.Helper()
	m, err := NewMapper(c, cronjobs, opts...)
	if err != nil {
		t.Fatalf("NewMapper: %v", err)
	}
	return m
}

func TestMapperMaps(t *testing.T) {
	gen := func(key string, g int64) *unstructured.Unstructured {
		u := obj(key, map[string]any{"spec": map[string]any{"suspend": false}})
		u.SetGeneration(g)
		return u
	}
	deleting := func(u *unstructured.Unstructured) *unstructured.Unstructured {
		u = u.DeepCopy()
		now := metav1.Now()
		u.SetDeletionTimestamp(&now)
		return u
	}
	job := obj("ns/job-1", nil)
	cases := []struct {
		name     string
		c        config.Controller
		opts     []MapperOption
		resource string
		ev       *event.Event
		want     []string
		wantErr  string
	}{
		{name: "for: an add maps the object itself",
			c: config.Controller{For: "cronjobs"}, resource: "cronjobs", ev: add(gen("ns/a", 1)), want: []string{"ns/a"}},
		{name: "for: a cluster-scoped object maps to a key without namespace",
			c: config.Controller{For: "cronjobs"}, resource: "cronjobs", ev: add(gen("a", 1)), want: []string{"a"}},
		{name: "for: a delete maps even when the filter fails (an absent key is reconciled)",
			c:        config.Controller{For: "cronjobs", Filter: `object.spec.suspend == true`},
			resource: "cronjobs", ev: del(gen("ns/a", 1)), want: []string{"ns/a"}},
		{name: "for: a delete that only hands the object to another shard member maps nothing",
			c: config.Controller{For: "cronjobs"}, resource: "cronjobs",
			ev: &event.Event{Type: event.EventDelete, Object: gen("ns/a", 1), HandedOver: true}, want: nil},
		{name: "for: a filter failing to evaluate admits the object and says why",
			c:        config.Controller{For: "cronjobs", Filter: `object.status.ready == true`},
			resource: "cronjobs", ev: add(gen("ns/a", 1)), want: []string{"ns/a"}, wantErr: "no such key: status"},
		{name: "for: the filter keeps out an object failing it",
			c:        config.Controller{For: "cronjobs", Filter: `object.spec.suspend == true`},
			resource: "cronjobs", ev: add(gen("ns/a", 1)), want: nil},
		{name: "for: the filter lets in an object passing it",
			c:        config.Controller{For: "cronjobs", Filter: `object.spec.suspend == false`},
			resource: "cronjobs", ev: add(gen("ns/a", 1)), want: []string{"ns/a"}},
		{name: "generationChanged: an update leaving generation alone maps to nothing",
			c:        config.Controller{For: "cronjobs", GenerationChanged: true},
			resource: "cronjobs", ev: update(gen("ns/a", 3), gen("ns/a", 3)), want: nil},
		{name: "generationChanged: an update changing generation maps",
			c:        config.Controller{For: "cronjobs", GenerationChanged: true},
			resource: "cronjobs", ev: update(gen("ns/a", 3), gen("ns/a", 4)), want: []string{"ns/a"}},
		{name: "generationChanged: the start of a deletion maps though generation is unchanged",
			c:        config.Controller{For: "cronjobs", GenerationChanged: true},
			resource: "cronjobs", ev: update(gen("ns/a", 3), deleting(gen("ns/a", 3))), want: []string{"ns/a"}},
		{name: "without generationChanged: a status-only update maps",
			c:        config.Controller{For: "cronjobs"},
			resource: "cronjobs", ev: update(gen("ns/a", 3), gen("ns/a", 3)), want: []string{"ns/a"}},

		{name: "owns: the controller ownerReference names the primary in the child's namespace",
			c: config.Controller{For: "cronjobs", Owns: []string{"jobs"}}, resource: "jobs",
			ev: add(withOwners(job, ownerRef("batch/v1", "CronJob", "cj", true))), want: []string{"ns/cj"}},
		{name: "owns: another version of the primary's group still names it",
			c: config.Controller{For: "cronjobs", Owns: []string{"jobs"}}, resource: "jobs",
			ev: add(withOwners(job, ownerRef("batch/v1beta1", "CronJob", "cj", true))), want: []string{"ns/cj"}},
		{name: "owns: a reference that is not the controller is ignored",
			c: config.Controller{For: "cronjobs", Owns: []string{"jobs"}}, resource: "jobs",
			ev: add(withOwners(job, ownerRef("batch/v1", "CronJob", "cj", false))), want: nil},
		{name: "owns: a controller of another kind is ignored",
			c: config.Controller{For: "cronjobs", Owns: []string{"jobs"}}, resource: "jobs",
			ev: add(withOwners(job, ownerRef("batch/v1", "Job", "cj", true))), want: nil},
		{name: "owns: a controller of the same kind in another group is ignored",
			c: config.Controller{For: "cronjobs", Owns: []string{"jobs"}}, resource: "jobs",
			ev: add(withOwners(job, ownerRef("example.com/v1", "CronJob", "cj", true))), want: nil},
		{name: "owns: the controller among several references",
			c: config.Controller{For: "cronjobs", Owns: []string{"jobs"}}, resource: "jobs",
			ev:   add(withOwners(job, ownerRef("batch/v1", "CronJob", "other", false), ownerRef("batch/v1", "CronJob", "cj", true))),
			want: []string{"ns/cj"}},
		{name: "owns: a cluster-scoped primary's key has no namespace",
			c: config.Controller{For: "cronjobs", Owns: []string{"jobs"}}, opts: []MapperOption{PrimaryClusterScoped()}, resource: "jobs",
			ev: add(withOwners(job, ownerRef("batch/v1", "CronJob", "cj", true))), want: []string{"cj"}},
		{name: "owns: the host's owner annotation names a primary in another namespace",
			c: config.Controller{For: "cronjobs", Owns: []string{"jobs"}}, resource: "jobs",
			ev:   add(withAnnotations(obj("other/job", nil), OwnerAnnotation, "cronjobs/ns/cj/u-1")),
			want: []string{"ns/cj"}},
		{name: "owns: the owner annotation may name the resource as plural.group",
			c: config.Controller{For: "cronjobs", Owns: []string{"jobs"}}, resource: "jobs",
			ev:   add(withAnnotations(obj("other/job", nil), OwnerAnnotation, "cronjobs.batch/ns/cj/u-1")),
			want: []string{"ns/cj"}},
		{name: "owns: the owner annotation of a cluster-scoped primary",
			c: config.Controller{For: "cronjobs", Owns: []string{"jobs"}}, resource: "jobs",
			ev:   add(withAnnotations(obj("other/job", nil), OwnerAnnotation, "cronjobs//cj/u-1")),
			want: []string{"cj"}},
		{name: "owns: an owner annotation naming another resource is ignored",
			c: config.Controller{For: "cronjobs", Owns: []string{"jobs"}}, resource: "jobs",
			ev:   add(withAnnotations(obj("other/job", nil), OwnerAnnotation, "deployments/ns/cj/u-1")),
			want: nil},
		{name: "owns: a malformed owner annotation is ignored",
			c: config.Controller{For: "cronjobs", Owns: []string{"jobs"}}, resource: "jobs",
			ev:   add(withAnnotations(obj("other/job", nil), OwnerAnnotation, "cronjobs/ns/cj")),
			want: nil},
		{name: "owns: an update whose controller changed maps the old and the new owner",
			c: config.Controller{For: "cronjobs", Owns: []string{"jobs"}}, resource: "jobs",
			ev: update(withOwners(job, ownerRef("batch/v1", "CronJob", "old", true)),
				withOwners(job, ownerRef("batch/v1", "CronJob", "new", true))),
			want: []string{"ns/new", "ns/old"}},
		{name: "owns: a resource not owned maps nothing",
			c: config.Controller{For: "cronjobs", Owns: []string{"jobs"}}, resource: "pods",
			ev: add(withOwners(job, ownerRef("batch/v1", "CronJob", "cj", true))), want: nil},

		{name: "watches label: a name is in the watched object's namespace",
			c:        config.Controller{For: "cronjobs", Watches: []config.Watch{{Resource: "configmaps", Label: "copy/source"}}},
			resource: "configmaps", ev: add(withLabels(obj("ns/cm", nil), "copy/source", "cj")), want: []string{"ns/cj"}},
		{name: "watches label: a label that moved from A to B maps both",
			c:        config.Controller{For: "cronjobs", Watches: []config.Watch{{Resource: "configmaps", Label: "copy/source"}}},
			resource: "configmaps",
			ev:       update(withLabels(obj("ns/cm", nil), "copy/source", "a"), withLabels(obj("ns/cm", nil), "copy/source", "b")),
			want:     []string{"ns/a", "ns/b"}},
		{name: "watches label: absent maps nothing",
			c:        config.Controller{For: "cronjobs", Watches: []config.Watch{{Resource: "configmaps", Label: "copy/source"}}},
			resource: "configmaps", ev: add(obj("ns/cm", nil)), want: nil},
		{name: "watches annotation: namespace/name names another namespace",
			c:        config.Controller{For: "cronjobs", Watches: []config.Watch{{Resource: "secrets", Annotation: "example.com/owner"}}},
			resource: "secrets", ev: add(withAnnotations(obj("ns/s", nil), "example.com/owner", "other/cj")), want: []string{"other/cj"}},
		{name: "watches annotation: a malformed key is an error",
			c:        config.Controller{For: "cronjobs", Watches: []config.Watch{{Resource: "secrets", Annotation: "example.com/owner"}}},
			resource: "secrets", ev: add(withAnnotations(obj("ns/s", nil), "example.com/owner", "a/b/c")),
			want: nil, wantErr: `annotation example.com/owner on ns/s: "a/b/c" is not a key`},
		{name: "watches field: a path to a string",
			c:        config.Controller{For: "cronjobs", Watches: []config.Watch{{Resource: "x", Field: "spec.sourceRef.name"}}},
			resource: "x", ev: add(obj("ns/x", map[string]any{"spec": map[string]any{"sourceRef": map[string]any{"name": "cj"}}})),
			want: []string{"ns/cj"}},
		{name: "watches field: bracketed keys and indexes",
			c:        config.Controller{For: "cronjobs", Watches: []config.Watch{{Resource: "x", Field: `spec.refs[1]["owner.example.com/name"]`}}},
			resource: "x", ev: add(obj("ns/x", map[string]any{"spec": map[string]any{"refs": []any{
				map[string]any{}, map[string]any{"owner.example.com/name": "o/cj"}}}})),
			want: []string{"o/cj"}},
		{name: "watches field: absent maps nothing",
			c:        config.Controller{For: "cronjobs", Watches: []config.Watch{{Resource: "x", Field: "spec.sourceRef.name"}}},
			resource: "x", ev: add(obj("ns/x", nil)), want: nil},
		{name: "watches field: a number is an error",
			c:        config.Controller{For: "cronjobs", Watches: []config.Watch{{Resource: "x", Field: "spec.n"}}},
			resource: "x", ev: add(obj("ns/x", map[string]any{"spec": map[string]any{"n": int64(3)}})),
			want: nil, wantErr: "watch field spec.n on ns/x: holds a int64, not a key"},
		{name: "watches map: a list of keys",
			c: config.Controller{For: "cronjobs", Watches: []config.Watch{{Resource: "x",
				Map: `[object.metadata.namespace + "/" + object.spec.owner, "plain"]`}}},
			resource: "x", ev: add(obj("ns/x", map[string]any{"spec": map[string]any{"owner": "cj"}})),
			want: []string{"ns/cj", "ns/plain"}},
		{name: "watches map: a single key",
			c:        config.Controller{For: "cronjobs", Watches: []config.Watch{{Resource: "x", Map: `object.spec.owner`}}},
			resource: "x", ev: add(obj("ns/x", map[string]any{"spec": map[string]any{"owner": "other/cj"}})),
			want: []string{"other/cj"}},
		{name: "watches map: an evaluation error is returned, naming the watch",
			c:        config.Controller{For: "cronjobs", Watches: []config.Watch{{Resource: "x", Map: `object.spec.owner`}}},
			resource: "x", ev: add(obj("ns/x", nil)),
			want: nil, wantErr: `controller.watches[0].map "object.spec.owner" on ns/x: no such key: spec`},
		{name: "watches map: the old and the new object",
			c:        config.Controller{For: "cronjobs", Watches: []config.Watch{{Resource: "x", Map: `object.spec.owner`}}},
			resource: "x",
			ev: update(obj("ns/x", map[string]any{"spec": map[string]any{"owner": "a"}}),
				obj("ns/x", map[string]any{"spec": map[string]any{"owner": "b"}})),
			want: []string{"ns/a", "ns/b"}},
		{name: "several relations at once are each mapped once",
			c: config.Controller{For: "cronjobs", Owns: []string{"jobs"}, Watches: []config.Watch{
				{Resource: "jobs", Label: "cj"}, {Resource: "jobs", Annotation: "cj"}}},
			resource: "jobs",
			ev:       add(withOwners(withAnnotations(withLabels(job, "cj", "cj"), "cj", "ns/other"), ownerRef("batch/v1", "CronJob", "cj", true))),
			want:     []string{"ns/cj", "ns/other"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m := newTestMapper(t, &tc.c, tc.opts...)
			got, err := m.Map(tc.resource, tc.ev)
			if tc.wantErr == "" && err != nil {
				t.Fatalf("Map: %v", err)
			}
			if tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
				t.Fatalf("Map error = %v, want one containing %q", err, tc.wantErr)
			}
			if k := keys(got); !slices.Equal(k, tc.want) {
				t.Fatalf("Map = %v, want %v", k, tc.want)
			}
		})
	}
}

func TestMapperReferencedByIndex(t *testing.T) {
	c := &config.Controller{For: "cronjobs", Watches: []config.Watch{{Resource: "configmaps",
		ReferencedBy: `object.spec.volumes.filter(v, has(v.configMap)).map(v, v.configMap.name)`}}}
	m := newTestMapper(t, c)
	primary := func(key string, cms ...string) *unstructured.Unstructured {
		var vols []any
		for _, cm := range cms {
			vols = append(vols, map[string]any{"configMap": map[string]any{"name": cm}})
		}
		vols = append(vols, map[string]any{"emptyDir": map[string]any{}})
		return obj(key, map[string]any{"spec": map[string]any{"volumes": vols}})
	}
	cmEvent := func(key string) []string {
		t.Helper()
		got, err := m.Map("configmaps", add(obj(key, nil)))
		if err != nil {
			t.Fatalf("Map(configmap %s): %v", key, err)
		}
		return keys(got)
	}
	mapPrimary := func(ev *event.Event) {
		t.Helper()
		if _, err := m.Map("cronjobs", ev); err != nil {
			t.Fatalf("Map(primary): %v", err)
		}
	}

	if got := cmEvent("ns/shared"); len(got) != 0 {
		t.Fatalf("before any primary: %v, want none", got)
	}
	a, b := primary("ns/a", "shared", "only-a"), primary("ns/b", "shared", "other/remote")
	mapPrimary(add(a))
	mapPrimary(add(b))
	for _, tc := range []struct {
		cm   string
		want []string
	}{
		{"ns/shared", []string{"ns/a", "ns/b"}},
		{"ns/only-a", []string{"ns/a"}},
		{"other/remote", []string{"ns/b"}}, // "ns/name" names another namespace
		{"other/shared", nil},              // "name" is the primary's namespace
	} {
		if got := cmEvent(tc.cm); !slices.Equal(got, tc.want) {
			t.Errorf("after adding a and b, configmap %s maps to %v, want %v", tc.cm, got, tc.want)
		}
	}

	// a stops referring to shared: its entry goes, b's stays.
	mapPrimary(update(a, primary("ns/a", "only-a")))
	if got := cmEvent("ns/shared"); !slices.Equal(got, []string{"ns/b"}) {
		t.Errorf("after a dropped shared: %v, want [ns/b]", got)
	}
	// b is deleted: nothing refers to its configmaps any more.
	mapPrimary(del(b))
	if got := cmEvent("ns/shared"); len(got) != 0 {
		t.Errorf("after b was deleted: %v, want none", got)
	}
	if got := cmEvent("other/remote"); len(got) != 0 {
		t.Errorf("after b was deleted, other/remote: %v, want none", got)
	}
	mapPrimary(del(primary("ns/a", "only-a")))
	ref := m.refs[0].index
	if len(ref.byWatched) != 0 || len(ref.byPrimary) != 0 {
		t.Errorf("after every primary was deleted the index holds %d watched keys and %d primaries, want none: it must not grow with churn",
			len(ref.byWatched), len(ref.byPrimary))
	}
}

func TestMapperReferencedByKeepsOldEntriesWhenEvaluationFails(t *testing.T) {
	c := &config.Controller{For: "cronjobs", Watches: []config.Watch{{Resource: "configmaps", ReferencedBy: `object.spec.cm`}}}
	m := newTestMapper(t, c)
	if _, err := m.Map("cronjobs", add(obj("ns/a", map[string]any{"spec": map[string]any{"cm": "c"}}))); err != nil {
		t.Fatal(err)
	}
	_, err := m.Map("cronjobs", update(obj("ns/a", map[string]any{"spec": map[string]any{"cm": "c"}}), obj("ns/a", nil)))
	if err == nil || !strings.Contains(err.Error(), "controller.watches[0].referencedBy") {
		t.Fatalf("Map of a primary the expression fails on: error %v, want one naming controller.watches[0].referencedBy", err)
	}
	got, _ := m.Map("configmaps", add(obj("ns/c", nil)))
	if k := keys(got); !slices.Equal(k, []string{"ns/a"}) {
		t.Fatalf("configmap ns/c maps to %v, want [ns/a] (kept: missing a change is worse than one reconcile too many)", k)
	}
}

func TestNewMapperRefusesBadConfig(t *testing.T) {
	c := &config.Controller{
		For:    "cronjobs",
		Filter: `object.spec.paused`,
		Watches: []config.Watch{
			{Resource: "a", Label: "x", Annotation: "y"},
			{Resource: "b"},
			{Resource: "c", Field: "spec..name"},
			{Resource: "d", Map: `object.spec.`},
			{Resource: "e", Map: `1 + 2`},
			{Resource: "f", ReferencedBy: `object.spec.x.filter(a, object.spec.y.exists(b, object.spec.z.exists(c, object.spec.w.exists(d, d == a))))`},
		},
	}
	_, err := NewMapper(c, cronjobs)
	if err == nil {
		t.Fatal("NewMapper accepted a config with seven mistakes")
	}
	for _, want := range []string{
		"controller.filter:",
		"controller.watches[0] (resource \"a\"): set exactly one of label, annotation, field, map and referencedBy, not 2 (label, annotation)",
		"controller.watches[1] (resource \"b\"): set exactly one of label, annotation, field, map and referencedBy, none is set",
		"controller.watches[2].field: invalid field path \"spec..name\": empty key at byte 5; keys with",
		"controller.watches[3].map:",
		"controller.watches[4].map: the expression must return a key (string) or a list of keys",
		"controller.watches[5].referencedBy: the expression's estimated worst-case cost",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("NewMapper error lacks %q:\n%v", want, err)
		}
	}
}

func TestMapperAdmitsAndResources(t *testing.T) {
	m := newTestMapper(t, &config.Controller{For: "cronjobs", Filter: `object.?spec.?suspend.orValue(false) == false`,
		Owns: []string{"jobs", "pods"}, Watches: []config.Watch{{Resource: "pods", Label: "x"}, {Resource: "configmaps", Label: "y"}}})
	if ok, err := m.Admits(obj("ns/a", map[string]any{"spec": map[string]any{"suspend": true}})); ok || err != nil {
		t.Errorf("Admits(suspended) = %v, %v; want false, nil", ok, err)
	}
	if ok, err := m.Admits(obj("ns/a", nil)); !ok || err != nil {
		t.Errorf("Admits(no spec) = %v, %v; want true, nil", ok, err)
	}
	if got, want := m.Resources(), []string{"cronjobs", "jobs", "pods", "configmaps"}; !slices.Equal(got, want) {
		t.Errorf("Resources() = %v, want %v", got, want)
	}
}
