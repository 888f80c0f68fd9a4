package informer

import (
	"fmt"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"

	"github.com/informer-host/informer-host/event"
	"github.com/informer-host/informer-host/internal/config"
	"github.com/informer-host/informer-host/internal/nearest"
)

// NotServedError says that the apiserver serves nothing under a configured
// resource's group, version and resource (or kind), and which served
// resources are nearest to it. Unless Matched is set, the resource stays
// pending, since its CRD may be installed later. Suggestions come from the
// discovery the pipeline's RESTMapper reads, so they name what the
// pipeline could watch.
type NotServedError struct {
	// Spec is the configured resource.
	Spec config.Resource
	// Suggestions are the nearest served resources, best first, as
	// "pods (v1)" or "deployments (apps/v1)"; for a spec naming a kind,
	// "Deployment (apps/v1)".
	Suggestions []string
	// Matched, when set, is the served resource the RESTMapper took the
	// spec for all the same ("pod" for pods, group "" for the one group
	// serving "deployments"), which is then watched: the entry works, but
	// does not say what it watches, and the RBAC rules generated from the
	// file (rbacgen) name the resource as written, which the apiserver
	// refuses.
	Matched string
	// Err is the RESTMapper's error; nil when it matched.
	Err error
}

func (e *NotServedError) Error() string {
	s := e.Spec
	what, gv := fmt.Sprintf("resource %q", s.Resource), s.GroupVersion().String()
	if s.Kind != "" {
		what = fmt.Sprintf("kind %q", s.Kind)
	}
	msg := fmt.Sprintf("the apiserver serves no %s in %s", what, gv)
	if e.Matched != "" {
		return msg + "; did you mean " + e.Matched + "? It is watched as that; write it so, since the RBAC rules generated from this file name the resource as written"
	}
	switch n := len(e.Suggestions); {
	case n == 1:
		msg += "; did you mean " + e.Suggestions[0] + "?"
	case n > 1:
		msg += "; did you mean " + strings.Join(e.Suggestions[:n-1], ", ") + " or " + e.Suggestions[n-1] + "?"
	default:
		field := "resource"
		if s.Kind != "" {
			field = "kind"
		}
		msg += "; fix group, version and " + field + ", or install the CRD that serves it (it is looked up again until then)"
	}
	return msg
}

func (e *NotServedError) Unwrap() error { return e.Err }

// asWritten returns a *NotServedError when ref, what the RESTMapper
// resolved spec to, is not what spec says: the mapper takes a singular
// ("pod") for the resource, and an empty group for whichever group serves
// the name. (Short names such as "cm" it does not take.)
func asWritten(spec config.Resource, ref *event.ResourceRef) *NotServedError {
	gvr := schema.GroupVersionResource{Group: ref.Group, Version: ref.Version, Resource: ref.Resource}
	same := ref.Group == spec.Group && ref.Version == spec.Version
	if spec.Kind != "" {
		same = same && ref.Kind == spec.Kind
	} else {
		same = same && ref.Resource == spec.Resource
	}
	if same {
		return nil
	}
	name := gvr.Resource
	if spec.Kind != "" {
		name = ref.Kind
	}
	return &NotServedError{Spec: spec, Matched: name + " (" + gvr.GroupVersion().String() + ")"}
}

// maxSuggestions bounds a "did you mean": more than three is a list to
// read, not a hint.
const maxSuggestions = 3

// suggest returns the served, watchable resources nearest to spec: by
// name (plural, singular, short names and kind for a resource; kind for
// a kind), then those in the spec's group, then in its version, then in
// discovery's order, which puts each group's preferred version first.
// Each group and resource is suggested once. Discovery that fails in
// part still suggests from the part it returned.
func suggest(disco discovery.DiscoveryInterface, spec config.Resource) []string {
	_, lists, _ := disco.ServerGroupsAndResources()
	type candidate struct {
		gvr   schema.GroupVersionResource
		label string
		score int
		order int
	}
	var cands []candidate
	for _, l := range lists {
		gv, err := schema.ParseGroupVersion(l.GroupVersion)
		if err != nil {
			continue
		}
		for _, r := range l.APIResources {
			if strings.Contains(r.Name, "/") || !slices.Contains(r.Verbs, "list") || !slices.Contains(r.Verbs, "watch") {
				continue // a subresource, or nothing an informer can watch
			}
			gvr := gv.WithResource(r.Name)
			if gvr == (schema.GroupVersionResource{Group: spec.Group, Version: spec.Version, Resource: spec.Resource}) {
				continue
			}
			score, ok := scoreResource(spec, r)
			if !ok {
				continue
			}
			name := r.Name
			if spec.Kind != "" {
				name = r.Kind
			}
			cands = append(cands, candidate{gvr: gvr, label: name + " (" + gv.String() + ")", score: score, order: len(cands)})
		}
	}
	slices.SortStableFunc(cands, func(a, b candidate) int {
		if a.score != b.score {
			return a.score - b.score
		}
		if c := trueFirst(a.gvr.Group == spec.Group, b.gvr.Group == spec.Group); c != 0 {
			return c
		}
		if c := trueFirst(a.gvr.Version == spec.Version, b.gvr.Version == spec.Version); c != 0 {
			return c
		}
		return a.order - b.order
	})
	if len(cands) > 0 && cands[0].score == 0 {
		// A name kubectl would take ("pod", "deployment", "cm"): that
		// resource is the one meant, and the merely near ones are noise.
		cands = slices.DeleteFunc(cands, func(c candidate) bool { return c.score > 0 })
	}
	var out []string
	seen := map[schema.GroupResource]bool{}
	for _, c := range cands {
		if gr := c.gvr.GroupResource(); !seen[gr] && len(out) < maxSuggestions {
			seen[gr] = true
			out = append(out, c.label)
		}
	}
	return out
}

// scoreResource is how near the served resource r is to spec
// (nearest.Score): for a kind, by kind; for a resource, by the best of
// the names kubectl accepts for it.
func scoreResource(spec config.Resource, r metav1.APIResource) (int, bool) {
	if spec.Kind != "" {
		return nearest.Score(spec.Kind, r.Kind)
	}
	best, found := 0, false
	for _, n := range append([]string{r.Name, r.SingularName, r.Kind}, r.ShortNames...) {
		if n == "" {
			continue
		}
		if s, ok := nearest.Score(spec.Resource, n); ok && (!found || s < best) {
			best, found = s, true
		}
	}
	return best, found
}

// trueFirst orders a true a before a false b, and the other way round.
func trueFirst(a, b bool) int {
	switch {
	case a == b:
		return 0
	case a:
		return -1
	}
	return 1
}
