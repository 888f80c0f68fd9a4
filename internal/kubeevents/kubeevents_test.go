package kubeevents

import (
	"context"

	"bytes"
	"log/slog"
	"strings"
	"testing"

	"github.com/informer-host/informer-host/abi"
	"github.com/informer-host/informer-host/internal/config"
)

func TestComponent(t *testing.T) {
	for in, want := range map[string]string{
		"event-recorder.wasm":          "informer-host/event-recorder",
		"My_Plugin.v2.wasm":            "informer-host/My_Plugin.v2",
		"späß plugin.wasm":             "informer-host/sp---plugin",
		".wasm":                        "informer-host/plugin",
		strings.Repeat("a", 80) + ".x": "informer-host/" + strings.Repeat("a", 63),
	} {
		if got := Component(in); got != want {
			t.Errorf("Component(%q) = %q, want %q", in, got, want)
		}
	}
}

// Record refuses what the Events API would, before queueing anything; a
// dry-run recorder logs the Event.
func TestRecord(t *testing.T) {
	var logs bytes.Buffer
	rs := New(Options{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	defer rs.Close()
	dry := true
	rec, err := rs.For("p.wasm", config.Grants{Events: &config.EventsGrant{}, DryRun: &dry})
	if err != nil || rec == nil {
		t.Fatal(rec, err)
	}
	if r, _ := rs.For("q.wasm", config.Grants{}); r != nil {
		t.Fatal("a recorder without the grant")
	}
	cm := map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "c", "namespace": "ns"}}
	for _, tc := range []struct {
		name        string
		obj         map[string]any
		reason, msg string
		code        int32
	}{
		{"ok", cm, "TooLarge", "m", 0},
		{"no reason", cm, "", "m", abi.ErrInvalid},
		{"reason with a space", cm, "Too Large", "m", abi.ErrInvalid},
		{"long reason", cm, strings.Repeat("R", abi.MaxEventReason+1), "m", abi.ErrInvalid},
		{"long message", cm, "R", strings.Repeat("m", abi.MaxEventMessage+1), abi.ErrTooLarge},
		{"no kind", map[string]any{"metadata": map[string]any{"name": "c"}}, "R", "m", abi.ErrInvalid},
	} {
		if code, msg := rec.Record(context.Background(), tc.obj, "Warning", tc.reason, tc.msg); code != tc.code {
			t.Errorf("%s: %d (%s), want %d", tc.name, code, msg, tc.code)
		}
	}
	if n := strings.Count(logs.String(), "dry run"); n != 1 {
		t.Errorf("%d dry-run log lines, want 1:\n%s", n, logs.String())
	}
	// The same grants give the same recorder (its aggregation and spam
	// filter span instances); another dry-run setting, a new one.
	if again, _ := rs.For("p.wasm", config.Grants{Events: &config.EventsGrant{}, DryRun: &dry}); again != rec {
		t.Error("a second recorder for unchanged grants")
	}
	if other, _ := rs.For("p.wasm", config.Grants{Events: &config.EventsGrant{}}); other == rec {
		t.Error("the dry-run recorder kept after dryRun was turned off")
	}
}
