package host

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	"github.com/informer-host/informer-host/event"
	"github.com/informer-host/informer-host/host/internal/engine"
	"github.com/informer-host/informer-host/internal/config"
	"github.com/informer-host/informer-host/internal/kubewrite"
)

// BenchmarkWrite: one server-side apply of a ConfigMap through the host
// (a plugin's ih_handle calling k8s_write, the host's kubewrite.Writer,
// the round trip to the apiserver) against the same apply from native
// client-go's dynamic client, same body, same field manager, same client
// limits, in the same run. The apply is the same each time, so the
// apiserver's work per call is the same on both sides.
func BenchmarkWrite(b *testing.B) {
	env := controlPlane(b)
	ns := env.Namespace(b)
	ctx := context.Background()
	body := fmt.Sprintf(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"bench","namespace":%q,"labels":{"app":"bench"}},"data":{"k":"v"}}`, ns)
	cfg := rest.CopyConfig(env.Config)
	cfg.QPS, cfg.Burst = 1e5, 1e5 // neither side waits on client-side throttling
	gvr := schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}

	// The writer fixture, applying (op 4) rather than merge-patching.
	src, err := os.ReadFile(filepath.Join("testdata", "fixtures", "writer.wat"))
	if err != nil {
		b.Fatal(err)
	}
	src = bytes.Replace(src, []byte("(call $k8s_write (i32.const 2)"), []byte("(call $k8s_write (i32.const 4)"), 1)
	watFile := filepath.Join(b.TempDir(), "apply-writer.wat")
	if err := os.WriteFile(watFile, src, 0o644); err != nil {
		b.Fatal(err)
	}
	eng, err := engine.New(ctx, engine.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { eng.Close(context.Background()) })
	mod, err := eng.Load(ctx, "bench.wasm", wat(b, watFile), engine.Limits{MemoryPages: 4, CallTimeout: time.Second})
	if err != nil {
		b.Fatal(err)
	}
	kc, err := kubewrite.New(kubewrite.Options{Config: cfg, Logger: slog.New(slog.DiscardHandler),
		Resolve: func(string) (schema.GroupVersionResource, bool) { return gvr, true }})
	if err != nil {
		b.Fatal(err)
	}
	w, err := kc.For(kubewrite.PluginOptions{Plugin: "bench.wasm", Grant: config.WritesGrant{QPS: 1e6, Burst: 1e6,
		Resources: []config.WriteGrant{{Resource: "cms", Verbs: []string{config.VerbApply}}}}})
	if err != nil {
		b.Fatal(err)
	}
	inst, err := mod.Instantiate(ctx, engine.InstanceOptions{Config: []byte(body), Writes: &clusterWriter{w: w}})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { inst.Close(context.Background()) })
	obj := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"namespace": ns, "name": "bench", "resourceVersion": "1"}}}
	ev := engine.NewEnvelope(&event.Event{Type: event.EventAdd, Resource: &event.ResourceRef{Name: "cms", Version: "v1", Resource: "configmaps"}, Object: obj})
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		b.Fatal(err)
	}
	native := func() error {
		_, err := dyn.Resource(gvr).Namespace(ns).Patch(ctx, "bench", types.ApplyPatchType, []byte(body),
			metav1.PatchOptions{FieldManager: "informer-host/bench.wasm"})
		return err
	}
	if err := native(); err != nil { // the object exists before either side is timed
		b.Fatal(err)
	}
	b.Run("host-apply", func(b *testing.B) {
		for range b.N {
			r, err := inst.Handle(ctx, ev)
			if err != nil || r.Code != engine.CodeOK {
				b.Fatalf("%+v %v", r, err)
			}
		}
	})
	b.Run("native-apply", func(b *testing.B) {
		for range b.N {
			if err := native(); err != nil {
				b.Fatal(err)
			}
		}
	})
}
