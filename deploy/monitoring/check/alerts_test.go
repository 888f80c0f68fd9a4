package check

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prometheus/prometheus/promql/promqltest"
)

// alertExprs are rules.yaml's alert expressions by alert name, each on
// one line (promqltest's eval takes the query on its line).
func alertExprs(t *testing.T) map[string]string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "rules.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, g := range loadRules(t, b, "rules.yaml").Groups {
		for _, r := range g.Rules {
			if r.Alert != "" {
				out[r.Alert] = strings.Join(strings.Fields(r.Expr), " ")
			}
		}
	}
	return out
}

// The alerts fire on what they are for and not on its neighbours,
// evaluated by Prometheus's own engine over series shaped as the daemon
// serves them (the for: durations apart). Instance a runs plugins,
// instance b is a standby.
func TestAlertsFire(t *testing.T) {
	exprs := alertExprs(t)
	for _, tc := range []struct {
		alert, load, want string
	}{
		{
			// q loading, s running but its initial list unhandled: not ready.
			// p running and synced; r quarantined (its own alert); b's
			// plugins wait on a standby: none of them.
			alert: "InformerHostPluginNotReady",
			load: `
  informer_host_standby{instance="a"} 0x20
  informer_host_standby{instance="b"} 1x20
  informer_host_plugin_state{instance="a", plugin="p.wasm", state="running"} 1x20
  informer_host_plugin_state{instance="a", plugin="p.wasm", state="loading"} 0x20
  informer_host_plugin_state{instance="a", plugin="p.wasm", state="quarantined"} 0x20
  informer_host_plugin_synced{instance="a", plugin="p.wasm"} 1x20
  informer_host_plugin_state{instance="a", plugin="q.wasm", state="running"} 0x20
  informer_host_plugin_state{instance="a", plugin="q.wasm", state="loading"} 1x20
  informer_host_plugin_state{instance="a", plugin="q.wasm", state="quarantined"} 0x20
  informer_host_plugin_synced{instance="a", plugin="q.wasm"} 0x20
  informer_host_plugin_state{instance="a", plugin="r.wasm", state="running"} 0x20
  informer_host_plugin_state{instance="a", plugin="r.wasm", state="loading"} 0x20
  informer_host_plugin_state{instance="a", plugin="r.wasm", state="quarantined"} 1x20
  informer_host_plugin_synced{instance="a", plugin="r.wasm"} 0x20
  informer_host_plugin_state{instance="a", plugin="s.wasm", state="running"} 1x20
  informer_host_plugin_state{instance="a", plugin="s.wasm", state="loading"} 0x20
  informer_host_plugin_state{instance="a", plugin="s.wasm", state="quarantined"} 0x20
  informer_host_plugin_synced{instance="a", plugin="s.wasm"} 0x20
  informer_host_plugin_state{instance="b", plugin="p.wasm", state="standby"} 1x20
  informer_host_plugin_state{instance="b", plugin="p.wasm", state="loading"} 0x20
  informer_host_plugin_state{instance="b", plugin="p.wasm", state="quarantined"} 0x20
  informer_host_plugin_synced{instance="b", plugin="p.wasm"} 0x20`,
			want: `
  {instance="a", plugin="q.wasm"} 1
  {instance="a", plugin="s.wasm"} 0`,
		},
		{
			alert: "InformerHostPluginQuarantined",
			load: `
  informer_host_plugin_state{instance="a", plugin="p.wasm", state="quarantined"} 0x20
  informer_host_plugin_state{instance="a", plugin="r.wasm", state="quarantined"} 1x20`,
			want: `
  informer_host_plugin_state{instance="a", plugin="r.wasm", state="quarantined"} 1`,
		},
		{
			// p's events all wait 2.6s to 10.5s, q's under 0.66s.
			alert: "InformerHostDeliveryLag",
			load: `
  informer_host_plugin_queue_wait_seconds_bucket{instance="a", plugin="p.wasm", le="0.65536"} 0x20
  informer_host_plugin_queue_wait_seconds_bucket{instance="a", plugin="p.wasm", le="2.62144"} 0x20
  informer_host_plugin_queue_wait_seconds_bucket{instance="a", plugin="p.wasm", le="10.48576"} 0+60x20
  informer_host_plugin_queue_wait_seconds_bucket{instance="a", plugin="p.wasm", le="+Inf"} 0+60x20
  informer_host_plugin_queue_wait_seconds_bucket{instance="a", plugin="q.wasm", le="0.65536"} 0+60x20
  informer_host_plugin_queue_wait_seconds_bucket{instance="a", plugin="q.wasm", le="2.62144"} 0+60x20
  informer_host_plugin_queue_wait_seconds_bucket{instance="a", plugin="q.wasm", le="10.48576"} 0+60x20
  informer_host_plugin_queue_wait_seconds_bucket{instance="a", plugin="q.wasm", le="+Inf"} 0+60x20`,
			want: `
  {instance="a", plugin="p.wasm"} 10.4071168`,
		},
		{
			// p: 8500 live events of 10000 (the 1000 retrying are not held to
			// the cap); q: 7500.
			alert: "InformerHostBufferNearFull",
			load: `
  informer_host_plugin_buffer_depth{instance="a", plugin="p.wasm"} 9500x20
  informer_host_plugin_retrying{instance="a", plugin="p.wasm"} 1000x20
  informer_host_plugin_buffer_capacity{instance="a", plugin="p.wasm"} 10000x20
  informer_host_plugin_buffer_depth{instance="a", plugin="q.wasm"} 9500x20
  informer_host_plugin_retrying{instance="a", plugin="q.wasm"} 2000x20
  informer_host_plugin_buffer_capacity{instance="a", plugin="q.wasm"} 10000x20`,
			want: `
  {instance="a", plugin="p.wasm"} 0.85`,
		},
		{
			// p's writes are refused by its rate limit; q's only wait.
			alert: "InformerHostWriteBudgetExhausted",
			load: `
  informer_host_plugin_write_rate_limited_total{instance="a", plugin="p.wasm", outcome="refused"} 0+1x20
  informer_host_plugin_write_rate_limited_total{instance="a", plugin="p.wasm", outcome="waited"} 0+5x20
  informer_host_plugin_write_rate_limited_total{instance="a", plugin="q.wasm", outcome="refused"} 0x20
  informer_host_plugin_write_rate_limited_total{instance="a", plugin="q.wasm", outcome="waited"} 0+5x20`,
			want: `
  {instance="a", plugin="p.wasm"} 10`,
		},
		{
			// q waits 60s a minute for tokens: throttled; p 6s: not.
			alert: "InformerHostWritesThrottled",
			load: `
  informer_host_plugin_write_rate_limit_wait_seconds_total{instance="a", plugin="p.wasm"} 0+6x20
  informer_host_plugin_write_rate_limit_wait_seconds_total{instance="a", plugin="q.wasm"} 0+60x20`,
			want: `
  {instance="a", plugin="q.wasm"} 1`,
		},
		{
			alert: "InformerHostPluginSourceDegraded",
			load: `
  informer_host_plugin_source_degraded{instance="a", plugin="p.wasm"} 1x20
  informer_host_plugin_source_degraded{instance="a", plugin="q.wasm"} 0x20`,
			want: `
  informer_host_plugin_source_degraded{instance="a", plugin="p.wasm"} 1`,
		},
		{
			// A standby is ready; a replica whose resources do not sync is not.
			alert: "InformerHostNotReady",
			load: `
  informer_host_ready{instance="a"} 0x20
  informer_host_ready{instance="b"} 1x20`,
			want: `
  informer_host_ready{instance="a"} 0`,
		},
	} {
		t.Run(tc.alert, func(t *testing.T) {
			expr, ok := exprs[tc.alert]
			if !ok {
				t.Fatalf("rules.yaml has no alert %s", tc.alert)
			}
			script := "load 1m" + tc.load + "\n\neval instant at 15m " + expr + tc.want + "\n"
			promqltest.RunTest(t, script, promqltest.NewTestEngine(t, false, 0, promqltest.DefaultMaxSamplesPerQuery))
		})
	}
}
