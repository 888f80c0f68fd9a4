package rbacgen

import (
	"fmt"
	"sort"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"
)

// builtinGroup reports whether group is one of Kubernetes' own: the core
// group, the ones without a dot (apps, batch, policy, autoscaling) and
// *.k8s.io. The control plane serves no other here.
func builtinGroup(group string) bool {
	return !strings.Contains(group, ".") || strings.HasSuffix(group, ".k8s.io")
}

// The static table of built-in kinds is exactly what kube-apiserver serves
// by default (the control plane's discovery): every kind, its plural and
// its scope, and nothing it does not serve. On a mismatch the test prints
// the table the apiserver gives, to paste into builtin.go.
func TestBuiltinKindsAreTheAPIServers(t *testing.T) {
	env.Require(t)
	_, lists, err := env.Client.Discovery().ServerGroupsAndResources()
	if err != nil {
		t.Fatal(err)
	}
	served := map[schema.GroupKind]builtinResource{}
	for _, l := range lists {
		gv, err := schema.ParseGroupVersion(l.GroupVersion)
		if err != nil {
			t.Fatal(err)
		}
		if !builtinGroup(gv.Group) {
			continue
		}
		for _, r := range l.APIResources {
			if strings.Contains(r.Name, "/") {
				continue // a subresource: not what a config's kind names
			}
			gk := schema.GroupKind{Group: gv.Group, Kind: r.Kind}
			if prev, ok := served[gk]; ok && prev != (builtinResource{r.Name, r.Namespaced}) {
				t.Errorf("kind %s is %v in one version and %s (namespaced %v) in %s", gk, prev, r.Name, r.Namespaced, gv)
			}
			served[gk] = builtinResource{Resource: r.Name, Namespaced: r.Namespaced}
		}
	}
	mismatch := len(served) != len(builtinResources)
	for gk, want := range served {
		if got, ok := builtinResources[gk]; !ok || got != want {
			mismatch = true
			t.Errorf("kind %s: table has %+v (listed %v), the apiserver serves %+v", gk, got, ok, want)
		}
	}
	for gk := range builtinResources {
		if _, ok := served[gk]; !ok {
			t.Errorf("kind %s is in the table but not served", gk)
		}
	}
	if mismatch {
		keys := make([]schema.GroupKind, 0, len(served))
		for gk := range served {
			keys = append(keys, gk)
		}
		sort.Slice(keys, func(i, j int) bool {
			if keys[i].Group != keys[j].Group {
				return keys[i].Group < keys[j].Group
			}
			return keys[i].Kind < keys[j].Kind
		})
		var b strings.Builder
		for _, gk := range keys {
			r := served[gk]
			fmt.Fprintf(&b, "\t{Group: %q, Kind: %q}: {%q, %v},\n", gk.Group, gk.Kind, r.Resource, r.Namespaced)
		}
		t.Logf("the apiserver's table:\n%s", b.String())
	}
}
