package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/informer-host/informer-host/internal/testenv"
)

// informer-host record records a controller-mode plugin's reconciles
// (configmap-copy: a ConfigMap copied as a child, then its source
// deleted and the copy pruned), with the children it applied as stubs
// beside them; replay --compare of that recording makes the same
// reconciles, gives the same children sets, uses every stub and passes.
func TestRecordReplayController(t *testing.T) {
	src, dst := env.Namespace(t), env.Namespace(t)
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "plugins"), 0o755); err != nil {
		t.Fatal(err)
	}
	plugin := buildGoPlugin(t, filepath.Join(dir, "plugins", "configmap-copy.wasm"), "../../plugins/examples/configmap-copy")
	testConfig(t, dir, src, strings.ReplaceAll(`
resources:
  - {name: configmaps-src, version: v1, resource: configmaps, namespaces: [NS], labelSelector: sync=true}
  - {name: configmaps-dst, version: v1, resource: configmaps, namespaces: [DST]}
plugins:
  directory: plugins
  modules:
  - file: configmap-copy.wasm
    config: {to: DST}
    controller: {for: configmaps-src, owns: [configmaps-dst]}
    grants:
      writes:
        resources: [{resource: configmaps-dst, verbs: [apply, delete]}]
server:
  address: off
`, "DST", dst))
	ctx := context.Background()
	rec := startRecord(ctx, t, dir)
	// The record's log line first: the command sets klog's process-wide
	// logger as it starts, which the test's client reads.
	testenv.Eventually(t, "the plugin loaded", rec.logged("plugin loaded", "configmap-copy.wasm"))
	srcs, dsts := env.Client.CoreV1().ConfigMaps(src), env.Client.CoreV1().ConfigMaps(dst)
	for _, name := range []string{"a", "b"} {
		if _, err := srcs.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"sync": "true"}},
			Data: map[string]string{"k": name}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		testenv.Eventually(t, "the copy of "+name, func() bool {
			cm, err := dsts.Get(ctx, name, metav1.GetOptions{})
			return err == nil && cm.Data["k"] == name
		})
	}
	if err := srcs.Delete(ctx, "b", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, "the copy of b pruned", func() bool {
		_, err := dsts.Get(ctx, "b", metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	})
	stubs := rec.stop()
	events, err := os.ReadFile(rec.out)
	if err != nil {
		t.Fatal(err)
	}
	var rout, rerr bytes.Buffer
	code := Main(ctx, []string{"replay", "--plugin", plugin, "--events", rec.out, "--stubs", stubs, "--config", writeJSON(t, dir, `{"to":"`+dst+`"}`),
		"--compare", "--cache-dir", ""}, &rout, &rerr)
	text := rout.String()
	for _, want := range []string{"ih_reconcile reconcile configmaps-src " + src + "/a: ok", "ih_reconcile reconcile configmaps-src " + src + "/b (absent): ok",
		`    call children_apply {"body":[{"apiVersion":"v1","binaryData":null,"data":{"k":"a"}`, "\nPASS\n"} {
		if !strings.Contains(text, want) {
			t.Errorf("replay lacks %q", want)
		}
	}
	if code != 0 || strings.Contains(text, "unused stubs") || strings.Contains(text, "differs") {
		t.Errorf("replay --compare: exit %d", code)
	}
	if t.Failed() {
		t.Logf("replay:\n%s%s\nevents:\n%s", text, rerr.String(), events)
	}
}
