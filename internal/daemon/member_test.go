package daemon

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/informer-host/informer-host/host"
	"github.com/informer-host/informer-host/informer"
	"github.com/informer-host/informer-host/internal/pluginsource"
)

// fakeMember is a member whose readiness reads the given plugins,
// sources and resources, on a clock the test moves; its log is returned.
func fakeMember(plugins []host.PluginStatus, sources map[string]pluginsource.Status, resources []informer.ResourceStatus,
	clock *time.Time) (*member, *bytes.Buffer) {
	var buf bytes.Buffer
	m := &member{log: slog.New(slog.NewTextHandler(&buf, nil)), stop: func() {},
		plugins: func() []host.PluginStatus { return plugins },
		now:     func() time.Time { return *clock }, joinBy: clock.Add(time.Minute)}
	m.loaded(readiness{sources: func() map[string]pluginsource.Status { return sources },
		resources: func() []informer.ResourceStatus { return resources }})
	return m, &buf
}

// A member waits for what will be ready soon (a plugin loading, a first
// pull, an initial list its informers can still complete), not for what
// cannot be ready while nothing changes (a plugin bound to a resource not
// served, failed, or whose lists fail): it would keep the whole group
// from processing anything if every replica did the same.
func TestMemberReady(t *testing.T) {
	running := func(synced bool, bindings ...string) []host.PluginStatus {
		return []host.PluginStatus{{File: "p.wasm", State: host.StateRunning, Synced: synced, Bindings: bindings}}
	}
	active := informer.ResourceStatus{Name: "cms", Phase: informer.PhaseActive}
	syncedRes := informer.ResourceStatus{Name: "cms", Phase: informer.PhaseActive, Synced: true}
	pending := informer.ResourceStatus{Name: "widgets", Phase: informer.PhasePending, Error: `the server could not find the requested resource`}
	failed := informer.ResourceStatus{Name: "widgets", Phase: informer.PhaseFailed, Error: "namespaces named for a cluster-scoped resource"}
	refused := informer.ResourceStatus{Name: "widgets", Phase: informer.PhaseActive,
		Error: `widgets.example.com/v1: widgets.example.com is forbidden: User "x" cannot list resource "widgets"`}
	src := func(running, lastErr string) map[string]pluginsource.Status {
		return map[string]pluginsource.Status{"p.wasm": {Plugin: "p.wasm", Source: "oci://r/p:v1", RunningDigest: running, LastError: lastErr}}
	}
	tests := []struct {
		name      string
		plugins   []host.PluginStatus
		sources   map[string]pluginsource.Status
		resources []informer.ResourceStatus
		ready     bool
	}{
		{"plugin synced", running(true, "cms"), nil, []informer.ResourceStatus{syncedRes}, true},
		{"plugin loading", []host.PluginStatus{{File: "p.wasm", State: host.StateLoading}}, nil, nil, false},
		{"plugin failed", []host.PluginStatus{{File: "p.wasm", State: host.StateFailed}}, nil, nil, true},
		{"initial list under way", running(false, "cms"), nil, []informer.ResourceStatus{active}, false},
		{"initial list done, ih_synced not yet", running(false, "cms"), nil, []informer.ResourceStatus{syncedRes}, false},
		{"bound to a resource not served", running(false, "cms", "widgets"), nil, []informer.ResourceStatus{syncedRes, pending}, true},
		{"bound to a failed resource", running(false, "widgets"), nil, []informer.ResourceStatus{failed}, true},
		{"bound to a resource whose lists are refused", running(false, "widgets"), nil, []informer.ResourceStatus{refused}, true},
		{"bound to a resource not configured", running(false, "gone"), nil, nil, true},
		{"first pull under way", nil, src("", ""), nil, false},
		{"first pull failed once: retried", nil, src("", "GET https://r/v2/p/manifests/v1: 503 Service Unavailable"), nil, false},
		{"source pulled, plugin synced", running(true, "cms"), src("sha256:ab", ""), []informer.ResourceStatus{syncedRes}, true},
		{"source degraded, last good version synced", running(true, "cms"), src("sha256:ab", "503"), []informer.ResourceStatus{syncedRes}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clock := time.Unix(1000, 0)
			m, log := fakeMember(tt.plugins, tt.sources, tt.resources, &clock)
			if got := m.ready(); got != tt.ready {
				t.Errorf("ready() = %v, want %v; log:\n%s", got, tt.ready, log)
			}
		})
	}
}

// Whatever it waits for, a member joins once its join deadline has
// passed, and says in its log what it could not wait for any longer.
func TestMemberJoinsAtItsDeadline(t *testing.T) {
	clock := time.Unix(1000, 0)
	m, log := fakeMember([]host.PluginStatus{{File: "slow.wasm", State: host.StateLoading}},
		map[string]pluginsource.Status{"pulled.wasm": {Plugin: "pulled.wasm", Source: "oci://r/p:v1", LastError: "503 Service Unavailable"}},
		nil, &clock)
	if m.ready() {
		t.Fatal("ready before the deadline with a plugin loading and a first pull failing")
	}
	clock = m.joinBy.Add(-time.Millisecond)
	if m.ready() {
		t.Fatal("ready just before the deadline")
	}
	clock = m.joinBy
	if !m.ready() {
		t.Fatalf("not ready at the deadline; log:\n%s", log)
	}
	for _, want := range []string{"level=WARN", "slow.wasm", "pulled.wasm", "503 Service Unavailable"} {
		if !strings.Contains(log.String(), want) {
			t.Errorf("the join's log does not say %q:\n%s", want, log)
		}
	}
}

// A member whose plugins were not even started by its deadline (a load
// stuck) joins too.
func TestMemberJoinsAtItsDeadlineBeforeLoaded(t *testing.T) {
	clock := time.Unix(1000, 0)
	var buf bytes.Buffer
	m := &member{log: slog.New(slog.NewTextHandler(&buf, nil)), stop: func() {},
		plugins: func() []host.PluginStatus { return nil }, now: func() time.Time { return clock }, joinBy: clock.Add(time.Minute)}
	if m.ready() {
		t.Fatal("ready before its plugins were started")
	}
	clock = m.joinBy
	if !m.ready() {
		t.Fatalf("not ready at the deadline; log:\n%s", &buf)
	}
}
