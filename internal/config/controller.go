package config

import (
	"errors"
	"slices"
	"strings"

	"github.com/google/cel-go/cel"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/informer-host/informer-host/internal/filter"
)

// OnRemove values of a controller's finalizer.
const (
	OnRemoveKeep    = "keep"
	OnRemoveRelease = "release"
)

// Resources returns the resources a controller listens to, each once, in
// the order for, owns, watches: the resources of its derived bindings.
func (c *Controller) Resources() []string {
	out := []string{c.For}
	add := func(r string) {
		if r != "" && !slices.Contains(out, r) {
			out = append(out, r)
		}
	}
	for _, o := range c.Owns {
		add(o)
	}
	for _, w := range c.Watches {
		add(w.Resource)
	}
	return out
}

// Bindings derives a controller's bindings: every event of every resource
// it listens to, unfiltered, so the rest of the host sees ordinary
// bindings. What a controller does not want (a primary failing Filter, a
// status-only update) is decided per key, where the key's state is known.
func (c *Controller) Bindings() []Binding {
	rs := c.Resources()
	out := make([]Binding, len(rs))
	for i, r := range rs {
		out[i] = Binding{Resource: r, Events: normaliseEvents(nil)}
	}
	return out
}

func (c *Controller) clone() *Controller {
	if c == nil {
		return nil
	}
	out := *c
	out.Owns = slices.Clone(c.Owns)
	out.Watches = slices.Clone(c.Watches)
	return &out
}

// mappings returns the names of the mappings w sets.
func (w *Watch) mappings() []string {
	var out []string
	for _, m := range []struct{ name, v string }{
		{"label", w.Label}, {"annotation", w.Annotation}, {"field", w.Field}, {"map", w.Map}, {"referencedBy", w.ReferencedBy},
	} {
		if m.v != "" {
			out = append(out, m.name)
		}
	}
	return out
}

// validateController checks the controller block of the settings at sp,
// as written there. Grant coverage needs the effective grants and is
// checked by validateControllerGrants.
func validateController(p *problems, sp path, s *PluginSettings, names map[string]int, complete bool) {
	c := s.Controller
	if c == nil {
		return
	}
	cp := sp.key("controller")
	if len(s.Bindings) > 0 {
		p.add(sp.key("bindings"), "controller mode derives its bindings from controller.for/owns/watches; remove bindings")
	}
	known := func(at path, what, r string) bool {
		if r == "" {
			p.add(at, "required: the name of a configured resource")
			return false
		}
		if _, ok := names[r]; !ok && complete {
			p.add(at, "%s %q is not a configured resource (%s)", what, r, knownNames(names))
			return false
		}
		return true
	}
	known(cp.key("for"), "controller.for names resource", c.For)
	if c.Filter != "" {
		if _, err := filter.Compile(filter.Spec{Expression: c.Filter}, filter.Options{}); err != nil {
			p.add(cp.key("filter"), "%s", filterMessage(err))
		}
	}
	seen := map[string]int{}
	for i, o := range c.Owns {
		at := cp.key("owns").index(i)
		if !known(at, "owns names resource", o) {
			continue
		}
		switch first, dup := seen[o]; {
		case o == c.For:
			p.add(at, "%q is the primary resource (for); a controller does not own objects of its own kind", o)
		case dup:
			p.add(at, "duplicate %q (first at line %d)", o, first)
		default:
			seen[o] = p.line(at)
		}
	}
	for i := range c.Watches {
		w := &c.Watches[i]
		wp := cp.key("watches").index(i)
		known(wp.key("resource"), "watch names resource", w.Resource)
		switch ms := w.mappings(); len(ms) {
		case 0:
			p.add(wp, "no mapping: set exactly one of label, annotation, field, map or referencedBy to say which primaries an object of %q concerns", w.Resource)
		case 1:
		default:
			p.add(wp.key(ms[1]), "a watch has exactly one mapping, and this one also sets %s; split it into one watch per mapping", ms[0])
		}
		for _, m := range []struct{ key, v string }{{"label", w.Label}, {"annotation", w.Annotation}} {
			if m.v == "" {
				continue
			}
			if errs := validation.IsQualifiedName(m.v); len(errs) > 0 {
				p.add(wp.key(m.key), "%q is not a %s key: %s", m.v, m.key, strings.Join(errs, "; "))
			}
		}
		if w.Field != "" {
			// The field path syntax of the binding's changed: list.
			if _, err := filter.Compile(filter.Spec{Changed: []string{w.Field}}, filter.Options{}); err != nil {
				p.add(wp.key("field"), "%s", filterMessage(err))
			}
		}
		for _, m := range []struct{ key, v, over string }{{"map", w.Map, "the watched object"}, {"referencedBy", w.ReferencedBy, "the primary"}} {
			if m.v == "" {
				continue
			}
			if err := checkKeysExpression(m.v); err != "" {
				p.add(wp.key(m.key), "%s (a CEL expression over %s, as object, returning a key \"name\" or \"namespace/name\" or a list of them)", err, m.over)
			}
		}
	}
	if c.Finalizer != "" {
		if errs := validation.IsQualifiedName(c.Finalizer); len(errs) > 0 {
			p.add(cp.key("finalizer"), "%q is not a finalizer name (a qualified name such as example.com/cleanup): %s", c.Finalizer, strings.Join(errs, "; "))
		}
	}
	switch c.OnRemove {
	case "", OnRemoveKeep, OnRemoveRelease:
		if c.OnRemove != "" && c.Finalizer == "" {
			p.add(cp.key("onRemove"), "says what happens to the finalizer, but controller.finalizer is not set; remove onRemove or set a finalizer")
		}
	default:
		p.add(cp.key("onRemove"), "unknown onRemove %q; expected %q (the finalizer stays on live objects when the plugin is removed) or %q (the host removes it)",
			c.OnRemove, OnRemoveKeep, OnRemoveRelease)
	}
}

// filterMessage is the message of filter.Compile's one problem.
func filterMessage(err error) string {
	var probs filter.Errors
	if errors.As(err, &probs) && len(probs) > 0 {
		return probs[0].Message
	}
	return err.Error()
}

// checkKeysExpression compiles a watch's map or referencedBy expression
// and returns CEL's problem, or "" when it compiles to something that can
// be keys.
func checkKeysExpression(expr string) string {
	env, err := cel.NewEnv(cel.Variable("object", cel.DynType), cel.OptionalTypes(), cel.CrossTypeNumericComparisons(true))
	if err != nil {
		return err.Error()
	}
	ast, iss := env.Compile(expr)
	if iss.Err() != nil {
		return iss.Err().Error()
	}
	switch t := ast.OutputType(); {
	case t.IsExactType(cel.StringType), t.IsExactType(cel.DynType), t.IsExactType(cel.ListType(cel.StringType)), t.IsExactType(cel.ListType(cel.DynType)):
		return ""
	default:
		return "returns " + t.String() + ", not a string or a list of strings"
	}
}

// ControllerNeed is one thing the host does with the Kubernetes API as a
// controller plugin's identity (the daemon's, or the ServiceAccount of
// grants.impersonate) for the controller block: what config validation
// asks of grants.writes and what `informer-host rbac` gives the identity.
// The plugin's own calls (status_apply, k8s_write) are not here: the
// write grant gates them, and RBAC follows the grant.
type ControllerNeed struct {
	// Resource is a configured resource's name: controller.for or an
	// owns entry.
	Resource string
	// Subresource is "" or "finalizers".
	Subresource string
	// Grant is the grants.writes verb that must allow it, for a write
	// the plugin asks for (its children, its finalizer); "" for the
	// host's own bookkeeping, which no grant verb names.
	Grant string
	// Verbs are the Kubernetes verbs the apiserver authorizes.
	Verbs []string
	// Why says what the host does, for an RBAC rule's comment.
	Why string
	// Key and Index name the controller key that asks for it, for
	// validation's message (Index -1: Key is not a list).
	Key   string
	Index int
}

// GrantVerbs are the Kubernetes verbs a grants.writes verb needs on the
// object (subresource "") or a subresource, nil for an unknown verb.
// Server-side apply is a PATCH that creates the object when it is
// missing, and the apiserver's patch handler then authorizes a create
// too: apply needs both; never on a subresource, which an update does
// not create (status of an object that does not exist is not found).
func GrantVerbs(verb, subresource string) []string {
	switch verb {
	case VerbCreate:
		return []string{"create"}
	case VerbPatch:
		return []string{"patch"}
	case VerbApply:
		if subresource != "" {
			return []string{"patch"}
		}
		return []string{"patch", "create"}
	case VerbDelete:
		return []string{"delete"}
	}
	return nil
}

// Needs lists what the host does as the controller plugin's identity
// when the plugin has a writes grant; without one the host writes
// nothing for it (its requeue times are not persisted).
func (c *Controller) Needs() []ControllerNeed {
	var out []ControllerNeed
	granted := func(res, verb, why, key string, index int) {
		out = append(out, ControllerNeed{Resource: res, Grant: verb, Verbs: GrantVerbs(verb, ""), Why: why, Key: key, Index: index})
	}
	own := func(res, sub, why string, verbs ...string) {
		out = append(out, ControllerNeed{Resource: res, Subresource: sub, Verbs: verbs, Why: why, Index: -1})
	}
	// Any answer may ask for a requeue, which the host persists on the
	// primary so it survives a restart or a change of leader.
	own(c.For, "", "persist the requeue time (an annotation on the primary)", "patch")
	if c.Finalizer != "" {
		granted(c.For, VerbPatch, "add and remove the finalizer "+c.Finalizer, "finalizer", -1)
		own(c.For, "", "read the primary again after a conflicting finalizer patch", "get")
		if c.OnRemove == OnRemoveRelease {
			own(c.For, "", "release the finalizer from every primary when the plugin is removed (onRemove: release)", "list")
		}
	}
	owns := false
	for i, o := range c.Owns {
		if o == c.For {
			continue // refused on its own
		}
		owns = true
		granted(o, VerbApply, "apply the children (server-side apply)", "owns", i)
		granted(o, VerbDelete, "prune the children", "owns", i)
	}
	if owns {
		// A child's controller ownerReference sets blockOwnerDeletion,
		// which the OwnerReferencesPermissionEnforcement admission
		// plugin lets through only for who may update the owner's
		// finalizers.
		own(c.For, "finalizers", "set blockOwnerDeletion in the children's ownerReference", "update")
	}
	return out
}

// validateControllerGrants checks that the effective writes grant of every
// controller-mode plugin covers the writes the host makes for it as its
// identity that are the plugin's to grant (Controller.Needs).
func validateControllerGrants(p *problems, c *Config) {
	check := func(sp path, s PluginSettings, own bool) {
		ctl := s.Controller
		if ctl == nil || !own {
			return
		}
		cp := sp.key("controller")
		res := func(name string) *Resource {
			for i := range c.Resources {
				if c.Resources[i].Name == name {
					return &c.Resources[i]
				}
			}
			return nil
		}
		// One message per key and resource, naming every verb missing.
		type at struct {
			key      string
			index    int
			resource string
		}
		var order []at
		missing := map[at][]string{}
		for _, n := range ctl.Needs() {
			r := res(n.Resource)
			if n.Grant == "" || r == nil { // an unknown resource is reported as such
				continue
			}
			if writesCover(s.Grants.Writes, r, n.Grant) {
				continue
			}
			k := at{n.Key, n.Index, n.Resource}
			if _, ok := missing[k]; !ok {
				order = append(order, k)
			}
			missing[k] = append(missing[k], n.Grant)
		}
		for _, k := range order {
			where := cp.key(k.key)
			if k.index >= 0 {
				where = where.index(k.index)
			}
			verbs := strings.Join(missing[k], ", ")
			p.add(where, "the host does this as the plugin's identity, but grants.writes does not allow %s on %q; add {resource: %s, verbs: [%s]} to grants.writes.resources",
				verbs, k.resource, k.resource, verbs)
		}
	}
	dp := path{"plugins", "default"}
	def := resolveSettings(c.Plugins.Default, fieldsSet(c.Plugins.Default, p, dp), PluginSettings{}, 0)
	check(dp, def, c.Plugins.Default.Controller != nil)
	for i, m := range c.Plugins.Modules {
		mp := path{"plugins", "modules", i}
		set := fieldsSet(m.PluginSettings, p, mp)
		// A module inheriting the default's controller is checked when
		// it brings its own writes grant; otherwise the default's check
		// said it all.
		own := m.Controller != nil || (c.Plugins.Default.Controller != nil && set&(setGrantWrites|setBindings) == setGrantWrites)
		check(mp, resolveSettings(m.PluginSettings, set, def, allFields), own)
	}
}

// writesCover reports whether g lets the plugin use verb on r, named by
// its name or its group/version/resource. A grant narrowed to namespaces
// counts: the writer refuses a write outside them with its own message.
func writesCover(g *WritesGrant, r *Resource, verb string) bool {
	if g == nil {
		return false
	}
	for _, w := range g.Resources {
		byName := w.Resource == r.Name
		gvr, ok := ParseGVR(w.Resource)
		byGVR := ok && r.Resource != "" && gvr.Group == r.Group && gvr.Version == r.Version && gvr.Resource == r.Resource
		if (byName || byGVR) && w.Allows(verb, "") {
			return true
		}
	}
	return false
}
