package rbacgen

import (
	"context"
	"reflect"
	"strings"
	"testing"
)

// A configmap:// source's ConfigMap is readable, by name, by whoever
// reads it: the impersonated ServiceAccount when the module has one, the
// daemon otherwise.
func TestGenerateConfigMapSources(t *testing.T) {
	cfg := parse(t, `plugins:
  sourceCache: /tmp/cache
  modules:
  - file: own.wasm
    source: configmap://plugins/mods/own.wasm
  - file: tenant.wasm
    source: configmap://team-a/labeler/labeler.wasm
    grants: {impersonate: {serviceAccount: team-a/labeler}}
`)
	r, err := Generate(context.Background(), cfg, Options{Namespace: "ih", ServiceAccount: "daemon"})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		`plugins "" configmaps [mods] get`,
		`team-a "" serviceaccounts [labeler] impersonate`,
		`as team-a/labeler team-a "" configmaps [labeler] get`,
	}
	if got := rulesText(r); !reflect.DeepEqual(got, want) {
		t.Errorf("rules:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
