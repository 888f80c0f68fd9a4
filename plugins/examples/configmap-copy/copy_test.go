package main

import (
	"strings"
	"testing"

	"github.com/informer-host/informer-host/abi/kit/kittest"
)

// loop is the controller: block of config.yaml, offline.
func loop(t *testing.T) *kittest.Loop {
	h := kittest.New(t)
	if err := h.Init(); err != nil {
		t.Fatal(err)
	}
	return h.Controller(kittest.Controller{
		Plugin: "configmap-copy.wasm",
		For:    kittest.Kind{Name: "configmaps-src", APIVersion: "v1", Kind: "ConfigMap", Namespaces: []string{"src"}},
		Owns:   []kittest.Kind{{Name: "configmaps-dst", APIVersion: "v1", Kind: "ConfigMap", Namespaces: []string{"dst"}}},
	})
}

func settled(t *testing.T, l *kittest.Loop) {
	t.Helper()
	for _, r := range l.Run() {
		if r.Code != kittest.OK {
			t.Fatal(r)
		}
	}
}

func TestCopies(t *testing.T) {
	l := loop(t)
	l.Apply("configmaps-src", `{"metadata":{"namespace":"src","name":"a","labels":{"sync":"true"}},"data":{"k":"v1"}}`)
	l.Apply("configmaps-src", `{"metadata":{"namespace":"src","name":"b","labels":{"sync":"true"}},"binaryData":{"bin":"AAE="}}`)
	settled(t, l)
	var cp struct {
		Metadata struct {
			Labels map[string]string
		}
		Data       map[string]string
		BinaryData map[string]string
	}
	if !l.Decode("configmaps-dst", "dst", "a", &cp) || cp.Data["k"] != "v1" || cp.Metadata.Labels["copy.example.com/source"] != "src" {
		t.Fatalf("copy of a: %+v", cp)
	}
	if !l.Decode("configmaps-dst", "dst", "b", &cp) || cp.BinaryData["bin"] != "AAE=" {
		t.Fatalf("copy of b: %+v", cp)
	}

	// A change of the source reaches the copy.
	l.Apply("configmaps-src", `{"metadata":{"namespace":"src","name":"a","labels":{"sync":"true"}},"data":{"k":"v2"}}`)
	settled(t, l)
	if l.Decode("configmaps-dst", "dst", "a", &cp); cp.Data["k"] != "v2" {
		t.Fatalf("copy of a after the change: %+v", cp)
	}

	// Someone edits the copy: the host maps it back to its source (the
	// owner annotation), and the reconcile puts it back.
	l.Apply("configmaps-dst", `{"metadata":{"namespace":"dst","name":"a"},"data":{"k":"edited"}}`)
	settled(t, l)
	if l.Decode("configmaps-dst", "dst", "a", &cp); cp.Data["k"] != "v2" {
		t.Fatalf("the edited copy was not restored: %+v", cp)
	}

	// Someone deletes the copy: it comes back.
	l.Delete("configmaps-dst", "dst", "b")
	settled(t, l)
	if _, ok := l.Object("configmaps-dst", "dst", "b"); !ok {
		t.Fatal("the deleted copy was not restored")
	}

	// The source goes: so does its copy.
	l.Delete("configmaps-src", "src", "a")
	settled(t, l)
	if got := strings.Join(l.Keys("configmaps-dst"), " "); got != "dst/b" {
		t.Fatalf("copies %s", got)
	}
}

// A source that went while the daemon was down: after the restart the
// host hands the plugin the key as absent, and the copy goes.
func TestSourceGoneWhileAway(t *testing.T) {
	l := loop(t)
	l.Apply("configmaps-src", `{"metadata":{"namespace":"src","name":"a","labels":{"sync":"true"}},"data":{"k":"v"}}`)
	settled(t, l)
	l.DeleteWhileAway("configmaps-src", "src", "a")
	if keys := l.Keys("configmaps-dst"); len(keys) != 1 {
		t.Fatalf("copies before the restart: %v", keys)
	}
	l.Restart()
	settled(t, l)
	if keys := l.Keys("configmaps-dst"); len(keys) != 0 {
		t.Fatalf("copies left: %v", keys)
	}
}
