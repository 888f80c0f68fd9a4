package engine

import (
	"github.com/informer-host/informer-host/event"
	"github.com/informer-host/informer-host/internal/testenv"

	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// fixtureDir holds the conformance fixtures, assembled once per test
// binary by TestMain.
var fixtureDir string

func TestMain(m *testing.M) {
	code := func() int {
		dir, err := os.MkdirTemp("", "engine-fixtures-")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer os.RemoveAll(dir)
		if err := assembleFixtures(dir); err != nil {
			// Every test here needs them: fail loudly rather than skip.
			fmt.Fprintln(os.Stderr, "FAIL: fixtures:", err)
			return 1
		}
		fixtureDir = dir
		defer func() {
			if examples.dir != "" {
				os.RemoveAll(examples.dir)
			}
		}()
		return m.Run()
	}()
	os.Exit(code)
}

// assembleFixtures runs wat2wasm (or $WAT2WASM) on every fixture.
func assembleFixtures(dir string) error {
	tool := os.Getenv("WAT2WASM")
	if tool == "" {
		tool = "wat2wasm"
	}
	if _, err := exec.LookPath(tool); err != nil {
		return fmt.Errorf("%s not found (apt-get install wabt): %w", tool, err)
	}
	srcs, err := filepath.Glob("../../testdata/fixtures/*.wat")
	if err != nil || len(srcs) == 0 {
		return fmt.Errorf("no fixtures found: %v", err)
	}
	for _, src := range srcs {
		out := filepath.Join(dir, strings.TrimSuffix(filepath.Base(src), ".wat")+".wasm")
		if b, err := exec.Command(tool, src, "-o", out).CombinedOutput(); err != nil {
			return fmt.Errorf("%s: %v\n%s", src, err, b)
		}
	}
	return nil
}

// fixture returns the bytes of an assembled fixture.
func fixture(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(fixtureDir, name+".wasm"))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// logBuffer is a slog handler target that tests can search.
type logBuffer struct{ testenv.LogBuffer }

func (l *logBuffer) count(sub string) int { return strings.Count(l.String(), sub) }

func newLogger(w *logBuffer) *slog.Logger {
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

func newEngine(t testing.TB, opts Options) *Engine {
	t.Helper()
	e, err := New(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close(context.Background()) })
	return e
}

func load(t testing.TB, e *Engine, name string, limits Limits) *Module {
	t.Helper()
	m, err := e.Load(context.Background(), name+".wasm", fixture(t, name), limits)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close(context.Background()) })
	return m
}

func instantiate(t testing.TB, m *Module, o InstanceOptions) *Instance {
	t.Helper()
	i, err := m.Instantiate(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { i.Close(context.Background()) })
	return i
}

var podsRef = &event.ResourceRef{Name: "pods", Version: "v1", Resource: "pods", Kind: "Pod"}

func pod(ns, name, phase string) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1",
		"kind":       "Pod",
		"metadata": map[string]any{
			"namespace":       ns,
			"name":            name,
			"uid":             "uid-" + name,
			"resourceVersion": "42",
			"labels":          map[string]any{"app": "web", "app.kubernetes.io/name": "shop"},
		},
		"spec": map[string]any{
			"containers": []any{
				map[string]any{"name": "main", "image": "nginx:1.27", "ports": []any{map[string]any{"containerPort": int64(80)}}},
			},
			"hostNetwork":   false,
			"priority":      int64(-3),
			"overhead":      nil,
			"weight":        1.5,
			"terminationGr": int64(30),
		},
		"status": map[string]any{"phase": phase, "message": "<ok> & \"quoted\""},
	}}
}

func addEvent(o *unstructured.Unstructured) *Envelope {
	return NewEnvelope(&event.Event{Type: event.EventAdd, Resource: podsRef, Object: o})
}

func updateEvent(old, o *unstructured.Unstructured) *Envelope {
	return NewEnvelope(&event.Event{Type: event.EventUpdate, Resource: podsRef, Object: o, OldObject: old})
}

// generous is a deadline that only a broken host would reach; tests use it
// to fail instead of hanging, never to measure.
const generous = 2 * time.Minute
