package pluginstatus

import (
	"strings"
	"testing"

	"k8s.io/client-go/tools/events"

	"github.com/informer-host/informer-host/host"
	"github.com/informer-host/informer-host/internal/pluginresource"
	"github.com/informer-host/informer-host/internal/pluginsource"
)

// Events come from transitions between successive looks, one each, never
// one per look.
func TestEventsOnTransitionsOnly(t *testing.T) {
	loadErr := "load sha256:cccc: module does not export ih_handle"
	withB := func(s *pluginsource.Status) {
		s.ResolvedDigest, s.RunningDigest, s.Running.Digest = "sha256:"+shaB, "sha256:"+shaB, "sha256:"+shaB
	}
	refused := func(gen int64) pluginresource.Admission {
		a := admitted(false)
		a.Admitted, a.Reason, a.Message, a.Generation = false, "OverCeiling", "spec.limits.memoryPages: 512 is over the ceiling's 256", gen
		return a
	}
	type look struct {
		adm   pluginresource.Admission
		p     *host.PluginStatus
		src   *pluginsource.Status
		times int
		want  []string // reasons recorded by these looks
	}
	steps := []look{
		{admitted(false), running(func(p *host.PluginStatus) { p.State = host.StateLoading }), sourced(), 2, nil},
		{admitted(false), running(), sourced(), 5, []string{"Normal Loaded loaded sha256:" + shaA}},
		{admitted(false), running(func(p *host.PluginStatus) { p.Counters.Delivered = 99 }), sourced(), 3, nil},
		{admitted(false), running(func(p *host.PluginStatus) { p.SHA256 = shaB }), sourced(withB), 3, []string{"Normal Swapped swapped sha256:" + shaA + " for sha256:" + shaB}},
		{admitted(false), running(func(p *host.PluginStatus) { p.SHA256 = shaB }), sourced(withB, func(s *pluginsource.Status) { s.Degraded, s.LastError = true, loadErr }), 4,
			[]string{"Warning LoadFailed " + loadErr}},
		{admitted(false), running(func(p *host.PluginStatus) {
			p.SHA256, p.Parked = shaB, []host.ObjectFailure{{Resource: "pods", Namespace: "team-a", Name: "web-1", LastError: "ERROR"}}
		}), sourced(withB), 3, []string{"Warning Parked 1 objects parked"}},
		{admitted(false), running(func(p *host.PluginStatus) { p.SHA256, p.State, p.Failures = shaB, host.StateQuarantined, 5 }), sourced(withB), 3,
			[]string{"Warning Quarantined sha256:" + shaB + " failed 5 times"}},
		{admitted(false), running(func(p *host.PluginStatus) { p.SHA256 = shaB }), sourced(withB), 2, []string{"Normal Loaded loaded sha256:" + shaB}},
		{refused(4), nil, nil, 3, []string{"Warning Refused spec.limits.memoryPages: 512 is over"}},
		{refused(5), nil, nil, 1, []string{"Warning Refused spec.limits.memoryPages"}},
	}
	w := &Writer{o: Options{Replica: "r1"}}
	ob := &object{}
	rec := events.NewFakeRecorder(100)
	for i, s := range steps {
		for range s.times {
			a := assess(Input{Admission: s.adm, Plugin: s.p, Source: s.src, Replica: "r1", Now: t0})
			w.record(rec, s.adm, ob, a, nil)
		}
		var got []string
		for len(rec.Events) > 0 {
			got = append(got, <-rec.Events)
		}
		if len(got) != len(s.want) {
			t.Fatalf("step %d: events %q, want %d: %q", i, got, len(s.want), s.want)
		}
		for j := range got {
			if !strings.HasPrefix(got[j], s.want[j]) {
				t.Errorf("step %d: event %q, want %q…", i, got[j], s.want[j])
			}
		}
	}
}

// With sharding, the object's own Events are said once, by the first
// live member; what happens to a replica, by that replica.
func TestEventsOfShardMembers(t *testing.T) {
	members := []string{"r1", "r2"}
	src := sourced(func(s *pluginsource.Status) { s.Degraded, s.LastError = true, "load sha256:cccc: bad" })
	for _, tc := range []struct {
		replica string
		want    []string
	}{
		{"r1", []string{"Normal Loaded", "Warning LoadFailed replica r1: load sha256:cccc"}},
		{"r2", []string{"Warning LoadFailed replica r2: load sha256:cccc"}},
	} {
		w := &Writer{o: Options{Replica: tc.replica}}
		rec := events.NewFakeRecorder(10)
		a := assess(Input{Admission: admitted(false), Plugin: running(), Source: src, Replica: tc.replica, Now: t0})
		w.record(rec, admitted(false), &object{}, a, members)
		var got []string
		for len(rec.Events) > 0 {
			got = append(got, <-rec.Events)
		}
		if len(got) != len(tc.want) {
			t.Fatalf("%s: events %q, want %q", tc.replica, got, tc.want)
		}
		for j := range got {
			if !strings.HasPrefix(got[j], tc.want[j]) {
				t.Errorf("%s: event %q, want %q…", tc.replica, got[j], tc.want[j])
			}
		}
	}
}
