package pluginstatus

import (
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/informer-host/informer-host/host"
	"github.com/informer-host/informer-host/internal/pluginapi/v1alpha1"
	"github.com/informer-host/informer-host/internal/pluginresource"
	"github.com/informer-host/informer-host/internal/pluginsource"
)

const (
	shaA = "aaaa"
	shaB = "bbbb"
	srcA = "oci://registry.example/team/labeler:v1"
)

var t0 = time.Date(2026, 12, 5, 3, 0, 0, 0, time.UTC)

func admitted(verify bool) pluginresource.Admission {
	return pluginresource.Admission{Kind: v1alpha1.KindPlugin, Namespace: "team-a", Name: "labeler", Generation: 3,
		Plugin: "team-a.labeler.wasm", Admitted: true, Applied: true, Source: srcA, VerifyPolicy: verify}
}

func admittedFrom(source string) pluginresource.Admission {
	a := admitted(false)
	a.Source = source
	return a
}

func running(mut ...func(*host.PluginStatus)) *host.PluginStatus {
	p := &host.PluginStatus{File: "team-a.labeler.wasm", SHA256: shaA, State: host.StateRunning, Synced: true,
		Bindings: []string{"pods"}, Counters: host.Counters{Delivered: 7}}
	for _, m := range mut {
		m(p)
	}
	return p
}

func sourced(mut ...func(*pluginsource.Status)) *pluginsource.Status {
	s := &pluginsource.Status{Plugin: "team-a.labeler.wasm", Source: srcA, ResolvedDigest: "sha256:" + shaA, RunningDigest: "sha256:" + shaA,
		Running: &pluginsource.RunningStatus{Digest: "sha256:" + shaA, Source: srcA, Verified: true, Signer: "ci@example.com"}}
	for _, m := range mut {
		m(s)
	}
	return s
}

// want is a condition's status and reason, and words its message holds.
type want struct {
	status metav1.ConditionStatus
	reason string
	words  []string
}

func TestCompute(t *testing.T) {
	loadErr := "load sha256:" + shaB + ": plugin \"team-a.labeler.wasm\": module does not export ih_handle"
	cases := []struct {
		name string
		in   Input
		want map[string]want
		// check looks at the rest of the status.
		check func(t *testing.T, st v1alpha1.PluginStatus)
	}{
		{name: "running, synced, signed",
			in: Input{Admission: admitted(true), Plugin: running(), Source: sourced()},
			want: map[string]want{
				v1alpha1.ConditionReady:       {metav1.ConditionTrue, v1alpha1.ReasonRunning, []string{"sha256:" + shaA}},
				v1alpha1.ConditionVerified:    {metav1.ConditionTrue, v1alpha1.ReasonVerified, []string{"ci@example.com"}},
				v1alpha1.ConditionSynced:      {metav1.ConditionTrue, v1alpha1.ReasonSynced, nil},
				v1alpha1.ConditionDegraded:    {metav1.ConditionFalse, v1alpha1.ReasonHealthy, nil},
				v1alpha1.ConditionQuarantined: {metav1.ConditionFalse, v1alpha1.ReasonNotQuarantined, nil},
			},
			check: func(t *testing.T, st v1alpha1.PluginStatus) {
				if st.Digest != "sha256:"+shaA || st.Signer != "ci@example.com" || st.Source != srcA || st.EventsDelivered != 7 || st.ObservedGeneration != 3 {
					t.Errorf("digest %q signer %q source %q delivered %d observedGeneration %d", st.Digest, st.Signer, st.Source, st.EventsDelivered, st.ObservedGeneration)
				}
				if len(st.Replicas) != 1 || st.Replicas[0].Name != "r1" || !st.Replicas[0].Ready || st.Replicas[0].LastFailure != nil {
					t.Errorf("replicas = %+v", st.Replicas)
				}
			}},
		{name: "a broken new version: degraded, the old one runs, not ready",
			in: Input{Admission: admitted(false), Plugin: running(),
				Source: sourced(func(s *pluginsource.Status) {
					s.ResolvedDigest, s.Degraded, s.LastError = "sha256:"+shaB, true, loadErr
				})},
			want: map[string]want{
				v1alpha1.ConditionReady:    {metav1.ConditionFalse, v1alpha1.ReasonLoadFailed, []string{"ih_handle", "previous version sha256:" + shaA + " keeps running"}},
				v1alpha1.ConditionDegraded: {metav1.ConditionTrue, v1alpha1.ReasonLoadFailed, []string{"ih_handle", "previous version sha256:" + shaA + " keeps running"}},
				v1alpha1.ConditionVerified: {metav1.ConditionUnknown, v1alpha1.ReasonNoPolicy, nil},
			},
			check: func(t *testing.T, st v1alpha1.PluginStatus) {
				if st.Digest != "sha256:"+shaA || st.LastFailure == nil || st.LastFailure.Message != loadErr || !st.LastFailure.Time.Equal(&metav1.Time{Time: t0}) {
					t.Errorf("digest %q lastFailure %+v", st.Digest, st.LastFailure)
				}
			}},
		{name: "source unreachable with a version running",
			in: Input{Admission: admitted(false), Plugin: running(),
				Source: sourced(func(s *pluginsource.Status) {
					s.Degraded, s.LastError = true, "resolve oci://registry.example/team/labeler:v1: connection refused"
				})},
			want: map[string]want{
				v1alpha1.ConditionReady:    {metav1.ConditionFalse, v1alpha1.ReasonSourceFailed, []string{"connection refused"}},
				v1alpha1.ConditionDegraded: {metav1.ConditionTrue, v1alpha1.ReasonSourceFailed, []string{"keeps running"}},
			}},
		{name: "source failed, nothing runs",
			in: Input{Admission: admitted(false), Source: &pluginsource.Status{Source: srcA, Degraded: true, LastError: "resolve: not found"}},
			want: map[string]want{
				v1alpha1.ConditionReady:    {metav1.ConditionFalse, v1alpha1.ReasonSourceFailed, []string{"not found", "nothing runs yet"}},
				v1alpha1.ConditionSynced:   {metav1.ConditionFalse, v1alpha1.ReasonSyncing, nil},
				v1alpha1.ConditionDegraded: {metav1.ConditionFalse, v1alpha1.ReasonHealthy, nil},
			}},
		{name: "no version could load",
			in: Input{Admission: admitted(false), Plugin: running(func(p *host.PluginStatus) { p.State, p.LastError = host.StateFailed, "compile: invalid magic" }),
				Source: sourced(func(s *pluginsource.Status) { s.Running, s.RunningDigest = nil, "" })},
			want: map[string]want{
				v1alpha1.ConditionReady: {metav1.ConditionFalse, v1alpha1.ReasonLoadFailed, []string{"invalid magic", "nothing runs"}},
			}},
		{name: "quarantined",
			in: Input{Admission: admitted(false), Plugin: running(func(p *host.PluginStatus) {
				p.State, p.Failures, p.LastError = host.StateQuarantined, 5, "trap: unreachable"
			}), Source: sourced()},
			want: map[string]want{
				v1alpha1.ConditionReady:       {metav1.ConditionFalse, v1alpha1.ReasonQuarantined, []string{"unreachable"}},
				v1alpha1.ConditionQuarantined: {metav1.ConditionTrue, v1alpha1.ReasonQuarantined, []string{"5 times in a row", "until its spec"}},
			}},
		{name: "restarting",
			in:   Input{Admission: admitted(false), Plugin: running(func(p *host.PluginStatus) { p.State, p.Failures, p.LastError = host.StateRestarting, 1, "deadline" }), Source: sourced()},
			want: map[string]want{v1alpha1.ConditionReady: {metav1.ConditionFalse, ReasonRestarting, []string{"deadline"}}}},
		{name: "parked objects",
			in: Input{Admission: admitted(false), Plugin: running(func(p *host.PluginStatus) {
				p.Parked = []host.ObjectFailure{{Resource: "pods", Namespace: "team-a", Name: "web-1", LastError: "ERROR: bad label"}, {Resource: "pods", Namespace: "team-a", Name: "web-2"}}
			}), Source: sourced()},
			want: map[string]want{
				v1alpha1.ConditionReady:    {metav1.ConditionFalse, v1alpha1.ReasonObjectsParked, []string{"2 objects parked"}},
				v1alpha1.ConditionDegraded: {metav1.ConditionTrue, v1alpha1.ReasonObjectsParked, []string{"pods team-a/web-1: ERROR: bad label"}},
			},
			check: func(t *testing.T, st v1alpha1.PluginStatus) {
				if st.Parked != 2 {
					t.Errorf("parked = %d, want 2", st.Parked)
				}
			}},
		{name: "buffer overflowed",
			in: Input{Admission: admitted(false), Plugin: running(func(p *host.PluginStatus) { p.Degraded, p.Repairs = true, 1 }), Source: sourced()},
			want: map[string]want{
				v1alpha1.ConditionReady:    {metav1.ConditionFalse, v1alpha1.ReasonBufferOverflowed, []string{"delivery.bufferSize"}},
				v1alpha1.ConditionDegraded: {metav1.ConditionTrue, v1alpha1.ReasonBufferOverflowed, nil},
			}},
		{name: "syncing",
			in: Input{Admission: admitted(false), Plugin: running(func(p *host.PluginStatus) { p.Synced = false }), Source: sourced()},
			want: map[string]want{
				v1alpha1.ConditionReady:  {metav1.ConditionFalse, v1alpha1.ReasonSyncing, []string{"pods"}},
				v1alpha1.ConditionSynced: {metav1.ConditionFalse, v1alpha1.ReasonSyncing, nil},
			}},
		{name: "a new version on its way",
			in:   Input{Admission: admitted(false), Plugin: running(), Source: sourced(func(s *pluginsource.Status) { s.ResolvedDigest = "sha256:" + shaB })},
			want: map[string]want{v1alpha1.ConditionReady: {metav1.ConditionFalse, v1alpha1.ReasonLoading, []string{"sha256:" + shaB}}}},
		{name: "the spec's new source has no good version yet",
			in: Input{Admission: admittedFrom("oci://registry.example/team/labeler:v2"), Plugin: running(),
				Source: sourced(func(s *pluginsource.Status) { s.Source = "oci://registry.example/team/labeler:v2" })},
			want: map[string]want{v1alpha1.ConditionReady: {metav1.ConditionFalse, v1alpha1.ReasonLoading, []string{"labeler:v2 has no good version yet"}}}},
		{name: "the spec's generation not applied yet",
			in:   Input{Admission: admittedFrom("oci://registry.example/team/labeler:v3"), Plugin: running(), Source: sourced()},
			want: map[string]want{v1alpha1.ConditionReady: {metav1.ConditionFalse, v1alpha1.ReasonLoading, []string{"labeler:v3 is not applied yet"}}}},
		{name: "a settings-only generation not applied yet",
			in:   Input{Admission: func() pluginresource.Admission { a := admitted(false); a.Applied = false; return a }(), Plugin: running(), Source: sourced()},
			want: map[string]want{v1alpha1.ConditionReady: {metav1.ConditionFalse, v1alpha1.ReasonLoading, []string{"generation 3 of the spec is not applied yet"}}}},
		{name: "not started by the host yet",
			in:   Input{Admission: admitted(false), Source: &pluginsource.Status{Source: srcA}},
			want: map[string]want{v1alpha1.ConditionReady: {metav1.ConditionFalse, v1alpha1.ReasonLoading, []string{"first version"}}}},
		{name: "unverified under a policy that does not require it",
			in: Input{Admission: admitted(true), Plugin: running(), Source: sourced(func(s *pluginsource.Status) { s.Running.Verified, s.Running.Signer = false, "" })},
			want: map[string]want{
				v1alpha1.ConditionVerified: {metav1.ConditionFalse, v1alpha1.ReasonNotVerified, []string{"unverified"}},
				v1alpha1.ConditionReady:    {metav1.ConditionTrue, v1alpha1.ReasonRunning, nil},
			},
			check: func(t *testing.T, st v1alpha1.PluginStatus) {
				if st.Signer != "" {
					t.Errorf("signer %q of an unverified version", st.Signer)
				}
			}},
		{name: "a signature that does not verify refuses the version",
			in: Input{Admission: admitted(true), Source: &pluginsource.Status{Source: srcA, Degraded: true,
				LastError: "signature of sha256:" + shaB + " not verified: no matching signatures (verify.required refuses it)"}},
			want: map[string]want{
				v1alpha1.ConditionVerified: {metav1.ConditionFalse, v1alpha1.ReasonNotVerified, []string{"no matching signatures"}},
				v1alpha1.ConditionReady:    {metav1.ConditionFalse, v1alpha1.ReasonSourceFailed, []string{"no matching signatures"}},
			}},
		{name: "another replica is quarantined",
			in: Input{Admission: admitted(false), Plugin: running(), Source: sourced(), Others: []v1alpha1.ReplicaStatus{
				{Name: "r2", State: string(host.StateQuarantined), Digest: "sha256:" + shaA, LastFailure: &v1alpha1.Failure{Message: "trap"}}}},
			want: map[string]want{
				v1alpha1.ConditionReady:       {metav1.ConditionFalse, v1alpha1.ReasonQuarantined, []string{"r2"}},
				v1alpha1.ConditionQuarantined: {metav1.ConditionTrue, v1alpha1.ReasonQuarantined, []string{"r2", "trap"}},
				v1alpha1.ConditionSynced:      {metav1.ConditionFalse, v1alpha1.ReasonSyncing, []string{"r2"}},
			}},
		{name: "another replica parks objects",
			in: Input{Admission: admitted(false), Plugin: running(), Source: sourced(), Others: []v1alpha1.ReplicaStatus{
				{Name: "r2", State: "running", Digest: "sha256:" + shaA, Synced: true, Degraded: true, Parked: 3, EventsDelivered: 10}}},
			want: map[string]want{
				v1alpha1.ConditionReady:    {metav1.ConditionFalse, ReasonReplicaNotReady, []string{"r2"}},
				v1alpha1.ConditionDegraded: {metav1.ConditionTrue, v1alpha1.ReasonObjectsParked, []string{"3 objects parked"}},
			},
			check: func(t *testing.T, st v1alpha1.PluginStatus) {
				if st.EventsDelivered != 17 || st.Parked != 3 || len(st.Replicas) != 2 || st.Replicas[1].Name != "r2" {
					t.Errorf("delivered %d parked %d replicas %+v", st.EventsDelivered, st.Parked, st.Replicas)
				}
			}},
		{name: "replicas run different versions",
			in: Input{Admission: admitted(false), Plugin: running(), Source: sourced(), Others: []v1alpha1.ReplicaStatus{
				{Name: "r0", State: "running", Digest: "sha256:" + shaB, Synced: true, Ready: true}}},
			want: map[string]want{v1alpha1.ConditionReady: {metav1.ConditionFalse, ReasonVersionSkew, []string{"r0 runs sha256:" + shaB}}}},
		{name: "all replicas ready",
			in: Input{Admission: admitted(false), Plugin: running(), Source: sourced(), Others: []v1alpha1.ReplicaStatus{
				{Name: "r0", State: "running", Digest: "sha256:" + shaA, Synced: true, Ready: true, EventsDelivered: 3},
				{Name: "r1", State: "quarantined"}}}, // its own old entry: replaced
			want: map[string]want{v1alpha1.ConditionReady: {metav1.ConditionTrue, v1alpha1.ReasonRunning, nil}},
			check: func(t *testing.T, st v1alpha1.PluginStatus) {
				if st.EventsDelivered != 10 || len(st.Replicas) != 2 {
					t.Errorf("delivered %d replicas %+v", st.EventsDelivered, st.Replicas)
				}
			}},
	}
	for _, reason := range []string{v1alpha1.ReasonRefused, v1alpha1.ReasonOverCeiling, v1alpha1.ReasonNameConflict, v1alpha1.ReasonNotAllowed} {
		adm := admitted(false)
		adm.Admitted, adm.Reason, adm.Message = false, reason, "spec.grants.writes[0]: refused because "+reason
		cases = append(cases, struct {
			name  string
			in    Input
			want  map[string]want
			check func(t *testing.T, st v1alpha1.PluginStatus)
		}{name: "refused " + reason, in: Input{Admission: adm, Plugin: running(), Source: sourced()},
			want: map[string]want{
				v1alpha1.ConditionReady:    {metav1.ConditionFalse, reason, []string{"refused because " + reason}},
				v1alpha1.ConditionVerified: {metav1.ConditionUnknown, reason, nil},
			}})
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			in := tc.in
			in.Replica, in.Now = "r1", t0
			st := Compute(in)
			if len(st.Conditions) != 5 {
				t.Errorf("%d conditions, want 5: %+v", len(st.Conditions), st.Conditions)
			}
			for typ, w := range tc.want {
				c := meta.FindStatusCondition(st.Conditions, typ)
				if c == nil {
					t.Errorf("no %s condition", typ)
					continue
				}
				if c.Status != w.status || c.Reason != w.reason {
					t.Errorf("%s = %s/%s (%q), want %s/%s", typ, c.Status, c.Reason, c.Message, w.status, w.reason)
				}
				for _, word := range w.words {
					if !strings.Contains(c.Message, word) {
						t.Errorf("%s message %q does not say %q", typ, c.Message, word)
					}
				}
				if c.ObservedGeneration != 3 || c.Message == "" || !c.LastTransitionTime.Equal(&metav1.Time{Time: t0}) {
					t.Errorf("%s: observedGeneration %d, message %q, lastTransitionTime %v", typ, c.ObservedGeneration, c.Message, c.LastTransitionTime)
				}
			}
			// A plugin that fails is never Ready, whatever else is true.
			p := in.Plugin
			failing := !in.Admission.Admitted || p == nil || p.State != host.StateRunning || p.Degraded || len(p.Parked) > 0 ||
				(in.Source != nil && in.Source.Degraded)
			if meta.IsStatusConditionTrue(st.Conditions, v1alpha1.ConditionReady) && failing {
				t.Errorf("Ready is True for a failing plugin: %+v", st.Conditions)
			}
			if tc.check != nil {
				tc.check(t, st)
			}
		})
	}
}

// A condition whose status holds keeps its lastTransitionTime; one that
// turns takes the time of the report; a failure keeps the time it was
// first shown while its message holds.
func TestComputeTransitionTimes(t *testing.T) {
	first := Compute(Input{Admission: admitted(false), Plugin: running(func(p *host.PluginStatus) { p.LastError = "trap" }), Source: sourced(), Replica: "r1", Now: t0})
	later := t0.Add(time.Minute)
	second := Compute(Input{Admission: admitted(false), Plugin: running(func(p *host.PluginStatus) {
		p.LastError = "trap"
		p.Parked = []host.ObjectFailure{{Resource: "pods", Name: "x"}}
	}), Source: sourced(), Replica: "r1", Now: later, Prev: first})
	for typ, at := range map[string]time.Time{v1alpha1.ConditionReady: later, v1alpha1.ConditionDegraded: later,
		v1alpha1.ConditionSynced: t0, v1alpha1.ConditionVerified: t0, v1alpha1.ConditionQuarantined: t0} {
		c := meta.FindStatusCondition(second.Conditions, typ)
		if c == nil || !c.LastTransitionTime.Time.Equal(at) {
			t.Errorf("%s lastTransitionTime = %v, want %v", typ, c, at)
		}
	}
	if f := second.Replicas[0].LastFailure; f == nil || !f.Time.Time.Equal(t0) {
		t.Errorf("lastFailure = %+v, want its first time %v", f, t0)
	}
}
