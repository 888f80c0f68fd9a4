package pluginstatus

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/informer-host/informer-host/host"
	"github.com/informer-host/informer-host/internal/pluginapi/v1alpha1"
	"github.com/informer-host/informer-host/internal/pluginresource"
	"github.com/informer-host/informer-host/internal/pluginsource"
)

// Reasons beside v1alpha1's, for states only this writer tells apart.
const (
	// ReasonRestarting: the instance failed and a fresh one starts
	// after a backoff.
	ReasonRestarting = "Restarting"
	// ReasonStopped: the host stopped the plugin (removed, or stopping).
	ReasonStopped = "Stopped"
	// ReasonReplicaNotReady: another replica's share is not ready.
	ReasonReplicaNotReady = "ReplicaNotReady"
	// ReasonVersionSkew: replicas run different versions (a swap on its
	// way).
	ReasonVersionSkew = "VersionSkew"
)

// maxMessage bounds a condition's message: an error can quote a whole
// module's refusal, and the object is read by people and kubectl.
const maxMessage = 2048

// Input is what one replica knows of one plugin object.
type Input struct {
	// Admission is the object's spec as the daemon admitted or refused it.
	Admission pluginresource.Admission
	// Plugin is the host's report of its plugin; nil when it does not run
	// here.
	Plugin *host.PluginStatus
	// Source is its source's report; nil when it has none (yet).
	Source *pluginsource.Status
	// Replica is this replica's name in status.replicas.
	Replica string
	// Others are the other live replicas' entries as the object holds
	// them; an entry named Replica is ignored.
	Others []v1alpha1.ReplicaStatus
	// Prev is the object's status as read: conditions keep their
	// lastTransitionTime while their status holds, and a failure its
	// time while its message does.
	Prev v1alpha1.PluginStatus
	Now  time.Time
}

// assessment is this replica's view alone: its conditions (without
// times) and its entry.
type assessment struct {
	ready, synced, degraded, quarantined, verified metav1.Condition
	entry                                          v1alpha1.ReplicaStatus
	// loadFailed is why the version asked for does not load ("" when it
	// does), for the LoadFailed event.
	loadFailed string
}

func cond(typ string, status metav1.ConditionStatus, reason, format string, args ...any) metav1.Condition {
	msg := format
	if len(args) > 0 {
		msg = fmt.Sprintf(format, args...)
	}
	if len(msg) > maxMessage {
		msg = msg[:maxMessage-3] + "..."
	}
	return metav1.Condition{Type: typ, Status: status, Reason: reason, Message: msg}
}

// Compute is the object's status after this replica's report: its own
// entry set, the others kept as given, the aggregate and the conditions
// recomputed from them.
func Compute(in Input) v1alpha1.PluginStatus {
	a := assess(in)
	st := v1alpha1.PluginStatus{ObservedGeneration: in.Admission.Generation, Source: in.Admission.Source,
		Digest: a.entry.Digest}
	if in.Source != nil && in.Source.Running != nil && in.Source.Running.Verified {
		st.Signer = in.Source.Running.Signer
	}
	entries := []v1alpha1.ReplicaStatus{a.entry}
	for _, o := range in.Others {
		if o.Name != in.Replica {
			entries = append(entries, o)
		}
	}
	slices.SortFunc(entries, func(x, y v1alpha1.ReplicaStatus) int { return strings.Compare(x.Name, y.Name) })
	for i := range entries {
		e := &entries[i]
		st.EventsDelivered += e.EventsDelivered
		st.Parked += e.Parked
		if e.LastFailure != nil && (st.LastFailure == nil || e.LastFailure.Time.After(st.LastFailure.Time.Time)) {
			f := *e.LastFailure
			st.LastFailure = &f
		}
	}
	st.Replicas = entries
	a.mergeOthers(in)

	st.Conditions = slices.Clone(in.Prev.Conditions)
	for _, c := range []metav1.Condition{a.ready, a.verified, a.synced, a.degraded, a.quarantined} {
		c.ObservedGeneration = in.Admission.Generation
		c.LastTransitionTime = metav1.NewTime(in.Now)
		meta.SetStatusCondition(&st.Conditions, c)
	}
	return st
}

// mergeOthers lets the other replicas' entries take Ready, Synced,
// Degraded and Quarantined away: the object is only as well as its
// worst share.
func (a *assessment) mergeOthers(in Input) {
	for _, o := range in.Others {
		if o.Name == in.Replica {
			continue
		}
		failure := ""
		if o.LastFailure != nil {
			failure = ": " + o.LastFailure.Message
		}
		if o.State == string(host.StateQuarantined) && a.quarantined.Status != metav1.ConditionTrue {
			a.quarantined = cond(v1alpha1.ConditionQuarantined, metav1.ConditionTrue, v1alpha1.ReasonQuarantined,
				"quarantined on replica %s%s", o.Name, failure)
		}
		if o.Degraded && a.degraded.Status != metav1.ConditionTrue {
			reason := ReasonReplicaNotReady
			if o.Parked > 0 {
				reason = v1alpha1.ReasonObjectsParked
			}
			a.degraded = cond(v1alpha1.ConditionDegraded, metav1.ConditionTrue, reason,
				"degraded on replica %s (%d objects parked)%s", o.Name, o.Parked, failure)
		}
		if !o.Synced && a.synced.Status == metav1.ConditionTrue {
			a.synced = cond(v1alpha1.ConditionSynced, metav1.ConditionFalse, v1alpha1.ReasonSyncing,
				"replica %s has not handled the initial list of every binding yet", o.Name)
		}
		if a.ready.Status != metav1.ConditionTrue {
			continue
		}
		switch {
		case o.State == string(host.StateQuarantined):
			a.ready = cond(v1alpha1.ConditionReady, metav1.ConditionFalse, v1alpha1.ReasonQuarantined, "%s", a.quarantined.Message)
		case !o.Ready:
			a.ready = cond(v1alpha1.ConditionReady, metav1.ConditionFalse, ReasonReplicaNotReady,
				"replica %s is not ready (state %q)%s", o.Name, o.State, failure)
		case o.Digest != a.entry.Digest:
			a.ready = cond(v1alpha1.ConditionReady, metav1.ConditionFalse, ReasonVersionSkew,
				"replicas run different versions: %s runs %s, %s runs %s; a swap is on its way or failed on one of them",
				in.Replica, a.entry.Digest, o.Name, o.Digest)
		}
	}
}

// assess is this replica's view of the object, before the others'.
func assess(in Input) assessment {
	adm, p, src := in.Admission, in.Plugin, in.Source
	var a assessment
	a.entry = v1alpha1.ReplicaStatus{Name: in.Replica, ReportedAt: metav1.NewTime(in.Now)}
	a.quarantined = cond(v1alpha1.ConditionQuarantined, metav1.ConditionFalse, v1alpha1.ReasonNotQuarantined, "not quarantined")
	if !adm.Admitted {
		reason := adm.Reason
		if reason == "" {
			reason = v1alpha1.ReasonRefused
		}
		msg := adm.Message
		if msg == "" {
			msg = "the spec was refused"
		}
		a.ready = cond(v1alpha1.ConditionReady, metav1.ConditionFalse, reason, "%s", msg)
		a.synced = cond(v1alpha1.ConditionSynced, metav1.ConditionFalse, reason, "nothing runs: the spec was refused (see Ready)")
		a.degraded = cond(v1alpha1.ConditionDegraded, metav1.ConditionFalse, reason, "nothing runs: the spec was refused (see Ready)")
		a.verified = cond(v1alpha1.ConditionVerified, metav1.ConditionUnknown, reason, "nothing runs: the spec was refused (see Ready)")
		a.entry.LastFailure = failure(in, msg)
		return a
	}

	state := host.PluginState("")
	if p != nil {
		state = p.State
		a.entry.State = string(state)
	}
	runs := state == host.StateRunning || state == host.StateRestarting || state == host.StateStandby || state == host.StateLoading
	a.entry.Digest = digestOf(p, src, runs)

	// What the source says of the version the spec asks for.
	srcReason, srcErr := "", ""
	if src != nil && src.Degraded {
		srcReason, srcErr = v1alpha1.ReasonSourceFailed, src.LastError
		if strings.HasPrefix(srcErr, "load ") {
			srcReason = v1alpha1.ReasonLoadFailed
		}
	}
	pending := ""
	switch {
	case !adm.Applied:
		pending = fmt.Sprintf("generation %d of the spec is not applied yet", adm.Generation)
	case src == nil:
		pending = "waiting for its source to be started"
	case adm.Source != "" && src.Source != adm.Source:
		// The daemon has not applied this generation's spec yet.
		pending = fmt.Sprintf("the spec's source %s is not applied yet (the source followed is %s)", adm.Source, src.Source)
	case src.Running == nil:
		pending = "waiting for its first version from " + src.Source
	case src.Running.Source != src.Source:
		pending = fmt.Sprintf("%s from %s runs; the spec's source %s has no good version yet", src.Running.Digest, src.Running.Source, src.Source)
	case src.ResolvedDigest != "" && src.ResolvedDigest != src.RunningDigest:
		pending = fmt.Sprintf("%s runs; the source names %s, which is being swapped in", src.RunningDigest, src.ResolvedDigest)
	}
	if srcReason == v1alpha1.ReasonLoadFailed {
		a.loadFailed = srcErr
	}

	// Quarantined and Degraded: what the plugin survives, or not.
	if state == host.StateQuarantined {
		a.quarantined = cond(v1alpha1.ConditionQuarantined, metav1.ConditionTrue, v1alpha1.ReasonQuarantined,
			"%s failed %d times in a row (last: %s); it stays stopped until its spec or its source's version changes",
			shaOf(p), p.Failures, p.LastError)
	}
	switch {
	case srcErr != "" && runs && a.entry.Digest != "":
		a.degraded = cond(v1alpha1.ConditionDegraded, metav1.ConditionTrue, srcReason,
			"%s; the previous version %s keeps running", srcErr, a.entry.Digest)
	case p != nil && runs && p.Degraded:
		a.degraded = cond(v1alpha1.ConditionDegraded, metav1.ConditionTrue, v1alpha1.ReasonBufferOverflowed,
			"its delivery buffer overflowed, so events were dropped; it is being repaired from the cache (repair %d); raise delivery.bufferSize if this recurs",
			p.Repairs)
	case p != nil && runs && len(p.Parked) > 0:
		first := p.Parked[0]
		a.degraded = cond(v1alpha1.ConditionDegraded, metav1.ConditionTrue, v1alpha1.ReasonObjectsParked,
			"%d objects parked after failing limits.parkAfter times in a row, e.g. %s: %s; each is tried again when it changes or its backoff ends",
			len(p.Parked), objectName(first), first.LastError)
	default:
		a.degraded = cond(v1alpha1.ConditionDegraded, metav1.ConditionFalse, v1alpha1.ReasonHealthy, "nothing wrong")
	}
	if p != nil && runs {
		a.entry.EventsDelivered = int64(p.Counters.Delivered)
		a.entry.Parked = int64(len(p.Parked))
	}
	a.entry.Degraded = a.degraded.Status == metav1.ConditionTrue

	// Ready: every way of not being ready, the worst first.
	switch {
	case state == host.StateQuarantined:
		a.ready = cond(v1alpha1.ConditionReady, metav1.ConditionFalse, v1alpha1.ReasonQuarantined, "%s", a.quarantined.Message)
	case state == host.StateFailed:
		msg := p.LastError
		if srcErr != "" {
			msg = srcErr
		}
		a.ready = cond(v1alpha1.ConditionReady, metav1.ConditionFalse, v1alpha1.ReasonLoadFailed,
			"%s; nothing runs: fix the module or point the source at a version that loads", msg)
		if a.loadFailed == "" {
			a.loadFailed = msg
		}
	case p == nil && srcErr != "":
		a.ready = cond(v1alpha1.ConditionReady, metav1.ConditionFalse, srcReason, "%s; nothing runs yet", srcErr)
	case p == nil:
		why := pending
		if why == "" {
			why = "the host has not started it yet"
		}
		a.ready = cond(v1alpha1.ConditionReady, metav1.ConditionFalse, v1alpha1.ReasonLoading, "%s", why)
	case state == host.StateLoading:
		a.ready = cond(v1alpha1.ConditionReady, metav1.ConditionFalse, v1alpha1.ReasonLoading, "loading %s", a.entry.Digest)
	case state == host.StateStandby:
		a.ready = cond(v1alpha1.ConditionReady, metav1.ConditionFalse, v1alpha1.ReasonStandby, "this replica is a standby; it starts the plugin when it leads")
	case state == host.StateRestarting:
		a.ready = cond(v1alpha1.ConditionReady, metav1.ConditionFalse, ReasonRestarting,
			"its instance failed (%s); a fresh one starts after a backoff (%d failures in a row)", p.LastError, p.Failures)
	case state != host.StateRunning:
		a.ready = cond(v1alpha1.ConditionReady, metav1.ConditionFalse, ReasonStopped, "the host stopped it (state %q)", state)
	case srcErr != "":
		a.ready = cond(v1alpha1.ConditionReady, metav1.ConditionFalse, srcReason,
			"the spec's version does not run: %s; the previous version %s keeps running", srcErr, a.entry.Digest)
	case pending != "":
		a.ready = cond(v1alpha1.ConditionReady, metav1.ConditionFalse, v1alpha1.ReasonLoading, "%s", pending)
	case !p.Synced:
		a.ready = cond(v1alpha1.ConditionReady, metav1.ConditionFalse, v1alpha1.ReasonSyncing,
			"handling the initial list of its bindings (%s)", strings.Join(p.Bindings, ", "))
	case a.entry.Degraded:
		a.ready = cond(v1alpha1.ConditionReady, metav1.ConditionFalse, a.degraded.Reason, "%s", a.degraded.Message)
	default:
		a.ready = cond(v1alpha1.ConditionReady, metav1.ConditionTrue, v1alpha1.ReasonRunning, "%s runs", a.entry.Digest)
	}
	a.entry.Ready = a.ready.Status == metav1.ConditionTrue

	if p != nil && state == host.StateRunning && p.Synced {
		a.synced = cond(v1alpha1.ConditionSynced, metav1.ConditionTrue, v1alpha1.ReasonSynced, "handled the initial list of every binding")
		a.entry.Synced = true
	} else {
		a.synced = cond(v1alpha1.ConditionSynced, metav1.ConditionFalse, v1alpha1.ReasonSyncing, "not running and synced here: %s", a.ready.Message)
	}

	a.verified = verified(adm, src, srcErr)
	failMsg := srcErr
	if failMsg == "" && p != nil {
		failMsg = p.LastError
	}
	a.entry.LastFailure = failure(in, failMsg)
	return a
}

// verified is the Verified condition: of the running version, under the
// spec's policy.
func verified(adm pluginresource.Admission, src *pluginsource.Status, srcErr string) metav1.Condition {
	const typ = v1alpha1.ConditionVerified
	switch {
	case !adm.VerifyPolicy:
		return cond(typ, metav1.ConditionUnknown, v1alpha1.ReasonNoPolicy, "spec.verify is not set: the module's signature is not checked")
	case src != nil && src.Running != nil && src.Running.Verified:
		return cond(typ, metav1.ConditionTrue, v1alpha1.ReasonVerified, "%s is signed by %s", src.Running.Digest, src.Running.Signer)
	case strings.Contains(srcErr, "not verified"):
		return cond(typ, metav1.ConditionFalse, v1alpha1.ReasonNotVerified, "%s", srcErr)
	case src != nil && src.Running != nil:
		return cond(typ, metav1.ConditionFalse, v1alpha1.ReasonNotVerified,
			"%s runs unverified: no signature verified under spec.verify, which does not require one", src.Running.Digest)
	default:
		return cond(typ, metav1.ConditionUnknown, v1alpha1.ReasonLoading, "no version runs yet")
	}
}

// failure is this replica's last failure: msg, at the time the object
// first showed it.
func failure(in Input, msg string) *v1alpha1.Failure {
	if msg == "" {
		return nil
	}
	for _, e := range in.Prev.Replicas {
		if e.Name == in.Replica && e.LastFailure != nil && e.LastFailure.Message == msg {
			f := *e.LastFailure
			return &f
		}
	}
	return &v1alpha1.Failure{Time: metav1.NewTime(in.Now), Message: msg}
}

// digestOf is the version running here: as the source names it, or the
// host's hash of it.
func digestOf(p *host.PluginStatus, src *pluginsource.Status, runs bool) string {
	if src != nil && src.RunningDigest != "" && (p == nil || runs) {
		return src.RunningDigest
	}
	if p != nil && runs {
		return shaOf(p)
	}
	return ""
}

func shaOf(p *host.PluginStatus) string {
	if p.SHA256 == "" {
		return ""
	}
	return "sha256:" + p.SHA256
}

func objectName(f host.ObjectFailure) string {
	if f.Namespace == "" {
		return f.Resource + " " + f.Name
	}
	return f.Resource + " " + f.Namespace + "/" + f.Name
}
