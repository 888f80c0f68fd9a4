package rbacgen

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/informer-host/informer-host/internal/config"
	"github.com/informer-host/informer-host/internal/seenkeys"
)

// Options say whose RBAC to generate and what the config alone does not.
type Options struct {
	// Namespace and ServiceAccount name the daemon's identity, the
	// subject of every binding. Required.
	Namespace      string
	ServiceAccount string
	// Name names the ClusterRole, the Roles and their bindings; empty:
	// ServiceAccount.
	Name string
	// LeaseNamespace is where the leader-election Lease lives; empty:
	// Namespace, the daemon's own, which is where the daemon puts it when
	// the file leaves leaderElection.namespace out (config.Load fills in
	// the namespace of the machine it runs on, which is not the pod's
	// when the RBAC is generated elsewhere).
	LeaseNamespace string
	// ShardNamespace is where sharding's member Leases live, as the file
	// writes sharding.namespace; empty: Namespace, for the same reason.
	ShardNamespace string
	// ServerAuth: the daemon runs with --server-auth=kubernetes, which
	// creates TokenReviews and SubjectAccessReviews.
	ServerAuth bool
	// Resolve finds the plural resource of a resource the config names
	// by kind only (through discovery). nil: such a resource is an error
	// asking for its plural, since RBAC rules name resources, not kinds.
	Resolve func(ctx context.Context, gvk schema.GroupVersionKind) (resource string, err error)
}

// Rule is one RBAC rule and why the daemon needs it.
type Rule struct {
	rbacv1.PolicyRule
	// Why are the reasons, one per config entry that needs the rule,
	// sorted; rendered as a comment above it.
	Why []string
}

// RBAC is the generated RBAC: the daemon's cluster-wide rules and rules
// per namespace, and those of each ServiceAccount a plugin acts as.
type RBAC struct {
	Options Options
	// Cluster are the ClusterRole's rules; none: no ClusterRole.
	Cluster []Rule
	// Namespaced are each namespace's Role's rules, by namespace.
	Namespaced map[string][]Rule
	// Identities are the ServiceAccounts plugins act as
	// (grants.impersonate), sorted by namespace and name: what those
	// plugins' writes and Events need, which the daemon is not given.
	Identities []Identity
}

// Identity is the RBAC of one ServiceAccount plugins act as.
type Identity struct {
	// Namespace and ServiceAccount name the subject of its bindings.
	Namespace, ServiceAccount string
	// Name names its ClusterRole, Roles and bindings:
	// "<Options.Name>:<namespace>:<service account>", unique beside the
	// daemon's and each other's.
	Name string
	// Cluster and Namespaced are as RBAC's.
	Cluster    []Rule
	Namespaced map[string][]Rule
}

// perm is one verb on one resource (and, when name is set, one object).
type perm struct {
	group, resource, verb, name string
}

// builder collects perms per scope ("" = cluster-wide) with their reasons.
type builder struct {
	scopes map[string]map[perm]map[string]bool
}

func newBuilder() *builder { return &builder{scopes: map[string]map[perm]map[string]bool{}} }

// watched is what the config watches, for narrowing what a plugin may
// write and where its Events go.
type watched struct {
	// all: every configured resource names its namespaces, so the
	// plugins see objects of those namespaces only.
	all        bool
	namespaces []string
	// namespaced holds the configured resources known to be namespaced
	// (they name namespaces); builtinResources knows the rest.
	namespaced map[schema.GroupResource]bool
}

// narrow is where a write of gr goes when its grant names no namespace:
// the watched namespaces when every resource is watched in named ones and
// gr is namespaced (a cluster-scoped resource needs the ClusterRole, and
// one of unknown scope keeps it), else everywhere (nil).
func (w watched) narrow(gr schema.GroupResource) []string {
	if !w.all {
		return nil
	}
	if w.namespaced[gr] {
		return w.namespaces
	}
	if r, ok := builtinByResource[gr]; ok && r.Namespaced {
		return w.namespaces
	}
	return nil
}

func (b *builder) add(namespaces []string, group string, resources, verbs, names []string, why string) {
	if len(namespaces) == 0 {
		namespaces = []string{""}
	}
	if len(names) == 0 {
		names = []string{""}
	}
	for _, ns := range namespaces {
		s := b.scopes[ns]
		if s == nil {
			s = map[perm]map[string]bool{}
			b.scopes[ns] = s
		}
		for _, r := range resources {
			for _, v := range verbs {
				for _, n := range names {
					p := perm{group, r, v, n}
					if s[p] == nil {
						s[p] = map[string]bool{}
					}
					s[p][why] = true
				}
			}
		}
	}
}

// Generate derives the daemon's RBAC from cfg (a loaded config).
func Generate(ctx context.Context, cfg *config.Config, o Options) (*RBAC, error) {
	if o.Namespace == "" || o.ServiceAccount == "" {
		return nil, errors.New("rbac: the daemon's namespace and service account are required")
	}
	if o.Name == "" {
		o.Name = o.ServiceAccount
	}
	if o.LeaseNamespace == "" {
		o.LeaseNamespace = o.Namespace
	}
	if o.ShardNamespace == "" {
		o.ShardNamespace = o.Namespace
	}
	b := newBuilder()
	var errs []error

	// Watches: what the informers list and watch.
	plural := map[string]schema.GroupResource{} // configured name → group/resource
	w := watched{all: len(cfg.Resources) > 0, namespaced: map[schema.GroupResource]bool{}}
	for _, r := range cfg.Resources {
		gr, err := resourceOf(ctx, cfg, r, o.Resolve)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		plural[r.Name] = gr
		b.add(r.Namespaces, gr.Group, []string{gr.Resource}, []string{"get", "list", "watch"}, nil,
			fmt.Sprintf("watch resource %q", r.Name))
		if len(r.Namespaces) == 0 {
			w.all = false
		} else {
			w.namespaced[gr] = true
		}
		w.namespaces = append(w.namespaces, r.Namespaces...)
	}

	if le := cfg.LeaderElection; le.Enabled {
		why := fmt.Sprintf("leader election (lease %s/%s)", o.LeaseNamespace, le.LeaseName)
		// client-go's LeaseLock gets and updates its Lease by name and
		// creates it when missing; a create has no name to restrict.
		b.add([]string{o.LeaseNamespace}, "coordination.k8s.io", []string{"leases"}, []string{"get", "update"}, []string{le.LeaseName}, why)
		b.add([]string{o.LeaseNamespace}, "coordination.k8s.io", []string{"leases"}, []string{"create"}, nil, why)
	}
	if sh := cfg.Sharding; sh.Enabled {
		ns := o.ShardNamespace
		// Package shard: each member gets, creates, updates and (on
		// SIGTERM) deletes its own Lease, lists the group's, and deletes
		// the Leases of members long gone. Member names are not known in
		// advance (pod names), so nothing restricts by name.
		b.add([]string{ns}, "coordination.k8s.io", []string{"leases"}, []string{"get", "list", "create", "update", "delete"}, nil,
			fmt.Sprintf("sharding (member leases %s-* in %s)", sh.LeasePrefix, ns))
	}

	// The keys each plugin was handed (internal/seenkeys), kept in
	// ConfigMaps in the namespace of the daemon's Leases so the next
	// leader or another member reads them. Their names are
	// seenkeys.NamePrefix and a hash, unknown in advance, and a member
	// lists the group's: nothing restricts by name.
	if ns, ok := seenKeysNamespace(cfg, o); ok {
		b.add([]string{ns}, "", []string{"configmaps"}, []string{"get", "list", "create", "update", "delete"}, nil,
			fmt.Sprintf("the keys plugins were handed (ConfigMaps %s* in %s)", seenkeys.NamePrefix, ns))
	}

	if o.ServerAuth {
		why := "--server-auth=kubernetes"
		b.add(nil, "authentication.k8s.io", []string{"tokenreviews"}, []string{"create"}, nil, why)
		b.add(nil, "authorization.k8s.io", []string{"subjectaccessreviews"}, []string{"create"}, nil, why)
	}

	pluginResources(b, cfg)

	idents := map[[2]string]*builder{} // by ServiceAccount namespace, name
	for _, p := range plugins(cfg) {
		acts := b // whose RBAC the plugin's writes and Events need
		if imp := p.grants.Impersonate; imp != nil {
			ns, name, ok := strings.Cut(imp.ServiceAccount, "/")
			if !ok || ns == "" || name == "" || strings.Contains(name, "/") {
				errs = append(errs, fmt.Errorf("%s: grants.impersonate.serviceAccount %q is not namespace/name", p.name, imp.ServiceAccount))
				continue
			}
			// The plugin's writes and Events are made as the
			// ServiceAccount: they go into its RBAC, not the daemon's.
			b.add([]string{ns}, "", []string{"serviceaccounts"}, []string{"impersonate"}, []string{name},
				fmt.Sprintf("%s acts as %s", p.name, imp.ServiceAccount))
			k := [2]string{ns, name}
			if idents[k] == nil {
				idents[k] = newBuilder()
			}
			acts = idents[k]
		}
		errs = append(errs, acts.actions(cfg, p, plural, w)...)
	}
	b.configMapSources(cfg, idents)
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	out := &RBAC{Options: o}
	out.Cluster, out.Namespaced = b.build()
	for k, ib := range idents {
		id := Identity{Namespace: k[0], ServiceAccount: k[1], Name: o.Name + ":" + k[0] + ":" + k[1]}
		id.Cluster, id.Namespaced = ib.build()
		out.Identities = append(out.Identities, id)
	}
	sort.Slice(out.Identities, func(i, j int) bool { return out.Identities[i].Name < out.Identities[j].Name })
	return out, nil
}

// The API group of the Plugin and ClusterPlugin resources
// (internal/pluginapi/v1alpha1, which rbacgen does not import).
const pluginGroup = "informer-host.io"

// pluginResources adds what running plugins from Plugin and
// ClusterPlugin objects takes: reading them (internal/pluginresource),
// writing their status and Events about them (internal/pluginstatus);
// and, with tenancy ceilings, acting as a tenant's ServiceAccount in the
// ceilings' namespaces (its writes, Events and ConfigMap source reads)
// and asking the apiserver what that ServiceAccount may do
// (internal/tenancy's SubjectAccessReviews).
func pluginResources(b *builder, cfg *config.Config) {
	if cfg.PluginResources.Watch == config.WatchOff {
		return
	}
	why := "plugins from Plugin and ClusterPlugin objects (pluginResources)"
	b.add(nil, pluginGroup, []string{"plugins", "clusterplugins"}, []string{"get", "list", "watch"}, nil, why)
	b.add(nil, pluginGroup, []string{"plugins/status", "clusterplugins/status"}, []string{"update"}, nil, why+": their status")
	b.add(nil, "events.k8s.io", []string{"events"}, []string{"create", "patch"}, nil, why+": Events about them")
	if len(cfg.Tenancy.Ceilings) == 0 {
		return
	}
	var namespaces []string
	for _, c := range cfg.Tenancy.Ceilings {
		for _, ns := range c.Namespaces {
			if ns == config.AllNamespaces {
				ns = "" // every namespace: the ClusterRole
			}
			namespaces = append(namespaces, ns)
		}
	}
	if slices.Contains(namespaces, "") {
		namespaces = []string{""}
	}
	slices.Sort(namespaces)
	// A team's Plugin names any ServiceAccount of its namespace: none is
	// known in advance.
	b.add(slices.Compact(namespaces), "", []string{"serviceaccounts"}, []string{"impersonate"}, nil,
		"tenants' plugins act as their ServiceAccounts (tenancy.ceilings)")
	b.add(nil, "authorization.k8s.io", []string{"subjectaccessreviews"}, []string{"create"}, nil,
		"what a tenant's ServiceAccount may do, reviewed before its plugin runs (tenancy)")
}

// actions adds what p's writes and Events need: its write grants' verbs
// on their resources and subresources, in the grant's namespaces, else
// the watched ones (watched.narrow); create and patch on Events where
// the objects they are about can be.
func (b *builder) actions(cfg *config.Config, p plugin, plural map[string]schema.GroupResource, w watched) []error {
	var errs []error
	g := p.grants
	if g.Writes != nil {
		for i, wg := range g.Writes.Resources {
			gr, err := writeResource(cfg, plural, wg.Resource)
			if err != nil {
				errs = append(errs, fmt.Errorf("%s: grants.writes.resources[%d]: %w", p.name, i, err))
				continue
			}
			verbs, err := writeVerbs(wg.Verbs, "")
			if err != nil {
				errs = append(errs, fmt.Errorf("%s: grants.writes.resources[%d]: %w", p.name, i, err))
				continue
			}
			why := fmt.Sprintf("%s writes %s", p.name, wg.Resource)
			ns := wg.Namespaces
			if len(ns) == 0 {
				// The plugin writes what its events and caches show it,
				// which is in the watched namespaces.
				if ns = w.narrow(gr); ns != nil {
					why += " (the watched namespaces: the grant names none)"
				}
			}
			b.add(ns, gr.Group, []string{gr.Resource}, verbs, nil, why)
			for _, sub := range wg.Subresources {
				subVerbs, _ := writeVerbs(wg.Verbs, sub)
				b.add(ns, gr.Group, []string{gr.Resource + "/" + sub}, subVerbs, nil, why)
			}
		}
	}
	if c := p.controller; c != nil && g.Writes != nil && len(g.Writes.Resources) > 0 {
		// What the host does as the plugin's identity beside the
		// writes the grant allows (config validation has made the
		// grant cover the rest), where the primaries are. Without a
		// writes grant the host writes nothing for the plugin, not
		// even its requeue time.
		for _, n := range c.Needs() {
			if n.Grant != "" {
				continue
			}
			gr, ok := plural[n.Resource]
			if !ok {
				continue // unknown or unresolved: reported with the resource
			}
			r, _ := cfg.Resource(n.Resource)
			res := gr.Resource
			if n.Subresource != "" {
				res += "/" + n.Subresource
			}
			b.add(r.Namespaces, gr.Group, []string{res}, n.Verbs, nil, fmt.Sprintf("%s, a controller of %s: %s", p.name, c.For, n.Why))
		}
	}
	if g.Events != nil {
		// An Event goes to the namespace of the object it is about,
		// which comes from the informers' caches: when every resource
		// is watched in named namespaces, those are the only ones.
		var ns []string
		if w.all {
			ns = w.namespaces
		}
		why := fmt.Sprintf("%s records Events", p.name)
		b.add(ns, "", []string{"events"}, []string{"create", "patch"}, nil, why)
		b.add(ns, "events.k8s.io", []string{"events"}, []string{"create", "patch"}, nil, why)
	}
	return errs
}

type plugin struct {
	name       string
	grants     config.Grants
	controller *config.Controller
}

// plugins are the config's modules and plugins.default, which every
// module the config does not name gets.
func plugins(cfg *config.Config) []plugin {
	out := []plugin{{name: "plugins.default", grants: cfg.Plugins.Default.Grants, controller: cfg.Plugins.Default.Controller}}
	for _, m := range cfg.Plugins.Modules {
		out = append(out, plugin{name: fmt.Sprintf("plugin %q", m.File), grants: m.Grants, controller: m.Controller})
	}
	return out
}

// resourceOf returns a configured resource's group and plural resource.
func resourceOf(ctx context.Context, cfg *config.Config, r config.Resource, resolve func(context.Context, schema.GroupVersionKind) (string, error)) (schema.GroupResource, error) {
	if r.Resource != "" {
		return schema.GroupResource{Group: r.Group, Resource: r.Resource}, nil
	}
	gvk := schema.GroupVersionKind{Group: r.Group, Version: r.Version, Kind: r.Kind}
	if b, ok := builtinResources[gvk.GroupKind()]; ok {
		return schema.GroupResource{Group: r.Group, Resource: b.Resource}, nil
	}
	if resolve == nil {
		guess, _ := meta.UnsafeGuessKindToResource(gvk)
		return schema.GroupResource{}, fmt.Errorf("%sresource %q names kind %s only, which is not a built-in kind, and RBAC rules name plural resources: "+
			"set its resource (probably %q) instead of kind, or pass --kubeconfig to look it up through discovery",
			fileOf(cfg), r.Name, gvk.GroupKind(), guess.Resource)
	}
	res, err := resolve(ctx, gvk)
	if err != nil {
		return schema.GroupResource{}, fmt.Errorf("%sresource %q: kind %s: %w", fileOf(cfg), r.Name, gvk.GroupKind(), err)
	}
	return schema.GroupResource{Group: r.Group, Resource: res}, nil
}

func fileOf(cfg *config.Config) string {
	if cfg.File == "" {
		return ""
	}
	return cfg.File + ": "
}

// writeResource resolves a WriteGrant.Resource: a configured resource's
// name, else "version/resource" (core) or "group/version/resource".
func writeResource(cfg *config.Config, plural map[string]schema.GroupResource, s string) (schema.GroupResource, error) {
	if gr, ok := plural[s]; ok {
		return gr, nil
	}
	parts := strings.Split(s, "/")
	switch {
	case len(parts) == 2 && parts[0] != "" && parts[1] != "":
		return schema.GroupResource{Resource: parts[1]}, nil
	case len(parts) == 3 && parts[0] != "" && parts[1] != "" && parts[2] != "":
		return schema.GroupResource{Group: parts[0], Resource: parts[2]}, nil
	}
	if _, ok := cfg.Resource(s); ok {
		// Configured, but its plural could not be found (reported
		// with the resource).
		return schema.GroupResource{}, fmt.Errorf("resource %q has no plural resource", s)
	}
	return schema.GroupResource{}, fmt.Errorf("resource %q is neither a configured resource's name nor version/resource or group/version/resource", s)
}

// writeVerbs maps grant verbs to RBAC verbs on the object (subresource
// "") or a subresource (config.GrantVerbs).
func writeVerbs(verbs []string, subresource string) ([]string, error) {
	var out []string
	for _, v := range verbs {
		rv := config.GrantVerbs(v, subresource)
		if rv == nil {
			return nil, fmt.Errorf("verb %q is none of create, patch, apply, delete", v)
		}
		out = append(out, rv...)
	}
	if len(out) == 0 {
		return nil, errors.New("no verbs")
	}
	return out, nil
}

// build turns the perms into rules, cluster-wide and by namespace: what a
// cluster-wide perm covers is dropped from the namespaces, a perm on any
// name covers its named ones, then perms sharing group, names and verbs
// share a rule.
func (b *builder) build() (cluster []Rule, namespaced map[string][]Rule) {
	all := b.scopes[""]
	covered := func(s map[perm]map[string]bool, p perm) bool {
		if s == nil {
			return false
		}
		if _, ok := s[p]; ok {
			return true
		}
		if p.name != "" {
			_, ok := s[perm{p.group, p.resource, p.verb, ""}]
			return ok
		}
		return false
	}
	namespaced = map[string][]Rule{}
	for ns, s := range b.scopes {
		kept := map[perm]map[string]bool{}
		for p, why := range s {
			if ns != "" && covered(all, p) {
				continue
			}
			if p.name != "" && covered(s, perm{p.group, p.resource, p.verb, ""}) {
				continue
			}
			kept[p] = why
		}
		rules := rulesOf(kept)
		if len(rules) == 0 {
			continue
		}
		if ns == "" {
			cluster = rules
		} else {
			namespaced[ns] = rules
		}
	}
	return cluster, namespaced
}

func rulesOf(perms map[perm]map[string]bool) []Rule {
	// (group, resource, name) → verbs, then (group, verbs, name) → resources.
	type object struct{ group, resource, name string }
	verbs := map[object][]string{}
	whyOf := map[object]map[string]bool{}
	for p, why := range perms {
		k := object{p.group, p.resource, p.name}
		verbs[k] = append(verbs[k], p.verb)
		if whyOf[k] == nil {
			whyOf[k] = map[string]bool{}
		}
		for w := range why {
			whyOf[k][w] = true
		}
	}
	type shape struct{ group, verbs, name string }
	rules := map[shape]*Rule{}
	reasons := map[shape]map[string]bool{}
	for k, v := range verbs {
		sort.Strings(v)
		sh := shape{k.group, strings.Join(v, ","), k.name}
		r := rules[sh]
		if r == nil {
			r = &Rule{PolicyRule: rbacv1.PolicyRule{APIGroups: []string{k.group}, Verbs: v}}
			if k.name != "" {
				r.ResourceNames = []string{k.name}
			}
			rules[sh], reasons[sh] = r, map[string]bool{}
		}
		r.Resources = append(r.Resources, k.resource)
		for w := range whyOf[k] {
			reasons[sh][w] = true
		}
	}
	out := make([]Rule, 0, len(rules))
	for sh, r := range rules {
		sort.Strings(r.Resources)
		for w := range reasons[sh] {
			r.Why = append(r.Why, w)
		}
		sort.Strings(r.Why)
		out = append(out, *r)
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.APIGroups[0] != b.APIGroups[0] {
			return a.APIGroups[0] < b.APIGroups[0]
		}
		if c := slices.Compare(a.Resources, b.Resources); c != 0 {
			return c < 0
		}
		if c := slices.Compare(a.ResourceNames, b.ResourceNames); c != 0 {
			return c < 0
		}
		return slices.Compare(a.Verbs, b.Verbs) < 0
	})
	return out
}

// Namespaces returns the namespaces with a daemon's Role, sorted.
func (r *RBAC) Namespaces() []string { return sortedKeys(r.Namespaced) }

// Namespaces returns the namespaces with a Role of the identity, sorted.
func (id *Identity) Namespaces() []string { return sortedKeys(id.Namespaced) }

func sortedKeys(m map[string][]Rule) []string {
	out := make([]string, 0, len(m))
	for ns := range m {
		out = append(out, ns)
	}
	sort.Strings(out)
	return out
}

// subjectRBAC is the RBAC of one subject: the daemon's, or an identity's.
type subjectRBAC struct {
	name                      string // of its roles and bindings
	namespace, serviceAccount string // the subject
	cluster                   []Rule
	namespaced                map[string][]Rule
	namespaces                []string // namespaced's, sorted
}

// subjects are the daemon's RBAC, then each identity's, in the order
// Objects and Write give them.
func (r *RBAC) subjects() []subjectRBAC {
	o := r.Options
	out := []subjectRBAC{{o.Name, o.Namespace, o.ServiceAccount, r.Cluster, r.Namespaced, r.Namespaces()}}
	for i := range r.Identities {
		id := &r.Identities[i]
		out = append(out, subjectRBAC{id.Name, id.Namespace, id.ServiceAccount, id.Cluster, id.Namespaced, id.Namespaces()})
	}
	return out
}

// Objects returns the ClusterRoles, Roles and their bindings, in the
// order Write prints them: the daemon's, then each identity's.
func (r *RBAC) Objects() []runtime.Object {
	policy := func(rules []Rule) []rbacv1.PolicyRule {
		out := make([]rbacv1.PolicyRule, len(rules))
		for i, rule := range rules {
			out[i] = rule.PolicyRule
		}
		return out
	}
	var out []runtime.Object
	for _, sr := range r.subjects() {
		subjects := []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: sr.serviceAccount, Namespace: sr.namespace}}
		if len(sr.cluster) > 0 {
			out = append(out,
				&rbacv1.ClusterRole{TypeMeta: typeMeta("ClusterRole"), ObjectMeta: metav1.ObjectMeta{Name: sr.name}, Rules: policy(sr.cluster)},
				&rbacv1.ClusterRoleBinding{TypeMeta: typeMeta("ClusterRoleBinding"), ObjectMeta: metav1.ObjectMeta{Name: sr.name},
					RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: sr.name}, Subjects: subjects})
		}
		for _, ns := range sr.namespaces {
			meta := metav1.ObjectMeta{Name: sr.name, Namespace: ns}
			out = append(out,
				&rbacv1.Role{TypeMeta: typeMeta("Role"), ObjectMeta: meta, Rules: policy(sr.namespaced[ns])},
				&rbacv1.RoleBinding{TypeMeta: typeMeta("RoleBinding"), ObjectMeta: meta,
					RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: sr.name}, Subjects: subjects})
		}
	}
	return out
}

func typeMeta(kind string) metav1.TypeMeta {
	return metav1.TypeMeta{APIVersion: rbacv1.SchemeGroupVersion.String(), Kind: kind}
}

// seenKeysNamespace is where the daemon keeps the keys plugins were
// handed, as internal/daemon decides: the leader Lease's namespace, else
// the member Leases'; none without either.
func seenKeysNamespace(cfg *config.Config, o Options) (string, bool) {
	switch {
	case cfg.LeaderElection.Enabled:
		return o.LeaseNamespace, true
	case cfg.Sharding.Enabled:
		return o.ShardNamespace, true
	}
	return "", false
}
