package main

import (
	"bytes"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"

	"github.com/informer-host/informer-host/internal/config"
	"github.com/informer-host/informer-host/internal/pluginapi/v1alpha1"
)

const crdDir = "../../deploy/crds"

// The committed CRDs are what the generator makes from the types now: a
// field added to config or v1alpha1 without `make crds` fails here.
func TestCommittedCRDsAreCurrent(t *testing.T) {
	files, err := Generate()
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != 2 {
		t.Fatalf("Generate made %d files, want 2", len(files))
	}
	for name, want := range files {
		got, err := os.ReadFile(filepath.Join(crdDir, name))
		if err != nil {
			t.Fatalf("%v (run make crds)", err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("deploy/crds/%s differs from what hack/crdgen makes from the Go types now; run make crds and commit it", name)
		}
	}
}

// committed reads a committed CRD's v1alpha1 schema.
func committed(t *testing.T, plural string) *apiextv1.CustomResourceDefinition {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(crdDir, FileName(plural)))
	if err != nil {
		t.Fatal(err)
	}
	var crd apiextv1.CustomResourceDefinition
	if err := yaml.UnmarshalStrict(b, &crd); err != nil {
		t.Fatalf("%s: %v", FileName(plural), err)
	}
	return &crd
}

func specOf(crd *apiextv1.CustomResourceDefinition) apiextv1.JSONSchemaProps {
	return crd.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"]
}

// moduleKeys lists the yaml keys a plugins.modules entry's settings
// have, as dotted paths, walked here apart from the generator (so a
// generator that skipped a field would be caught): every field of
// config.PluginSettings, recursively, without the file-only ones (verify:
// a resource's own verify has inline keys; namespace: never written).
func moduleKeys(t reflect.Type, prefix string, out *[]string) {
	for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice || t.Kind() == reflect.Map {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct || t == reflect.TypeFor[config.Duration]() {
		return
	}
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		name, opts, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		switch {
		case name == "-" || !f.IsExported():
		case strings.Contains(opts, "inline"):
			moduleKeys(f.Type, prefix, out)
		case prefix == "" && name == "verify":
			*out = append(*out, name)
		default:
			*out = append(*out, prefix+name)
			moduleKeys(f.Type, prefix+name+".", out)
		}
	}
}

// missing returns the keys the schema lacks.
func missing(s apiextv1.JSONSchemaProps, keys []string) []string {
	var out []string
	for _, k := range keys {
		at := s
		for _, part := range strings.Split(k, ".") {
			if at.Items != nil && at.Items.Schema != nil {
				at = *at.Items.Schema
			}
			if at.AdditionalProperties != nil && at.AdditionalProperties.Schema != nil {
				at = *at.AdditionalProperties.Schema
			}
			p, ok := at.Properties[part]
			if !ok {
				out = append(out, k)
				break
			}
			at = p
		}
	}
	return out
}

// Every module field config.ParseModule reads is in both CRDs' spec, at
// the same path, and Module's source fields are in spec.source: config
// and the CRDs cannot drift apart unnoticed. A Plugin lacks exactly
// grants.impersonate (its identity is its serviceAccountName).
func TestSpecHasEveryModuleField(t *testing.T) {
	var keys []string
	moduleKeys(reflect.TypeFor[config.PluginSettings](), "", &keys)
	if len(keys) < 50 || !slices.Contains(keys, "grants.writes.resources.verbs") || !slices.Contains(keys, "controller.watches.referencedBy") {
		t.Fatalf("the walk of config.PluginSettings found too little: %v", keys)
	}
	var sourceKeys []string
	mt := reflect.TypeFor[config.Module]()
	for i := 0; i < mt.NumField(); i++ {
		name, _, _ := strings.Cut(mt.Field(i).Tag.Get("yaml"), ",")
		switch name {
		case "", "file": // inline settings; the object's name
		case "source":
			sourceKeys = append(sourceKeys, name)
		default:
			sourceKeys = append(sourceKeys, "source."+name)
		}
	}
	if len(sourceKeys) != 5 {
		t.Fatalf("config.Module's source fields = %v; the test does not know a new one", sourceKeys)
	}
	for _, plural := range []string{"plugins", "clusterplugins"} {
		spec := specOf(committed(t, plural))
		gaps := missing(spec, append(keys, sourceKeys...))
		var want []string
		if plural == "plugins" {
			want = []string{"grants.impersonate", "grants.impersonate.serviceAccount"}
		}
		if !slices.Equal(gaps, want) {
			t.Errorf("%s: the spec lacks %v of the module fields (want lacking only %v); run make crds", plural, gaps, want)
		}
	}

	// The check finds a field the schema lacks.
	spec := specOf(committed(t, "clusterplugins"))
	delivery := spec.Properties["delivery"]
	delete(delivery.Properties, "missedDeletes")
	spec.Properties["delivery"] = delivery
	if gaps := missing(spec, keys); !slices.Equal(gaps, []string{"delivery.missedDeletes"}) {
		t.Errorf("with delivery.missedDeletes removed, missing = %v", gaps)
	}
}

// The wire forms config's decoders accept: a duration is a string, a
// size an int or a string, config any value.
func TestSchemaTypes(t *testing.T) {
	spec := specOf(committed(t, v1alpha1.ClusterPluginsGVR.Resource))
	if s := spec.Properties["limits"].Properties["callTimeout"]; s.Type != "string" {
		t.Errorf("limits.callTimeout = %+v, want a string", s)
	}
	if s := spec.Properties["grants"].Properties["state"].Properties["maxBytes"]; !s.XIntOrString || s.Type != "" {
		t.Errorf("grants.state.maxBytes = %+v, want int-or-string", s)
	}
	if s := spec.Properties["config"]; s.XPreserveUnknownFields == nil || !*s.XPreserveUnknownFields || s.Type != "" {
		t.Errorf("config = %+v, want any value", s)
	}
	if s := spec.Properties["source"].Properties["pullPolicy"]; len(s.Enum) != 3 {
		t.Errorf("source.pullPolicy enum = %v", s.Enum)
	}
}
