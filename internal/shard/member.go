package shard

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	coordinationclient "k8s.io/client-go/kubernetes/typed/coordination/v1"
)

// LabelGroup is the label every member's Lease carries, with the group's
// name (the lease prefix) as its value: members find one another by it.
const LabelGroup = "informer-host.io/shard-group"

// The annotations of a member's Lease that carry the join handshake.
// AnnotationEpoch names the member's current streak: a new random value
// each time it (re)joins, so that what the others acknowledged of an
// earlier streak is not taken for an acknowledgement of this one.
// AnnotationView is the view the member published last: the other members
// it counts, each with the epoch it saw ("id=epoch,id=epoch"). A member
// listed there with its current epoch knows the writer has stopped owning
// its share, and so may start owning it.
const (
	AnnotationEpoch = "informer-host.io/shard-epoch"
	AnnotationView  = "informer-host.io/shard-view"
)

// Options configure a Member.
type Options struct {
	// Client reaches the apiserver. Required.
	Client coordinationclient.LeasesGetter
	// Namespace holds the group's Leases. Required.
	Namespace string
	// Group names the group: the label value of its Leases and the prefix
	// of their names ("<group>-<identity>"). Required.
	Group string
	// Identity is this member's name in the group, unique among its
	// members (a pod name with a random suffix). Required.
	Identity string
	// Key is what is hashed. Default KeyNamespaceName.
	Key Key
	// LeaseDuration is how long others wait, after they last saw this
	// member's Lease change, before they count it gone. RenewDeadline is
	// how old this member's last successful renewal and list may be
	// before it owns nothing; it must be less than LeaseDuration.
	// RetryPeriod is how often it renews and lists.
	LeaseDuration, RenewDeadline, RetryPeriod time.Duration
	// OnChange is called with every new Assignment, one at a time, in
	// order. It must not block.
	OnChange func(*Assignment)
	// Ready reports whether this replica can process its share now: its
	// caches synced, its plugins started and past their initial lists.
	// Until it can, the member lists its group but does not write its
	// Lease, so the others keep its share and go on processing it. Called
	// once per round until it first says true; nil: ready at once.
	Ready func() bool
	// Abandon keeps the Lease when Run ends, as a crash does (tests).
	Abandon bool
	Logger  *slog.Logger
}

// Member is one replica's membership of a sharding group.
type Member struct {
	o     Options
	name  string // the Lease's name
	lease coordinationclient.LeaseInterface

	// changed receives a token when cur is replaced (for the fence timer).
	changed chan struct{}
	// ready: Options.Ready has said yes once; it is not asked again.
	// held: it has said no (logged once). Round's goroutine only.
	ready, held bool

	// mu guards everything below. OnChange runs under it, so
	// Assignments reach it in order.
	mu  sync.Mutex
	cur *Assignment
	// own is the last version of this member's Lease it wrote or read;
	// nil: read it again before writing.
	own *coordinationv1.Lease
	// lastRenew and lastList are when the last successful renewal and
	// list were sent (their start, so that the real write or read is
	// later).
	lastRenew, lastList time.Time
	// epoch names the current streak ("" while fenced: the next renewal
	// starts a new one). joinedAt is when the first renewal that wrote
	// epoch returned (zero until then). activated: the streak has been
	// active; it stays so while its validity is extended.
	epoch     string
	joinedAt  time.Time
	activated bool
	// listErr and renewErr are the last round's failures (nil: it
	// succeeded), kept to log each change of them once, loudly.
	listErr, renewErr error
	// seen holds, by Lease name, the version of each member's Lease this
	// member last saw and when it first saw that version.
	seen map[string]observation
}

type observation struct {
	rv         string
	identity   string
	seenAt     time.Time
	expiresAge time.Duration // the Lease's leaseDurationSeconds
	// epoch is the member's streak (AnnotationEpoch); acks the view it
	// published (AnnotationView), identity -> epoch; handshake is whether
	// its Lease carries a view at all (members of a version without the
	// handshake are waited for with the join delay instead).
	epoch     string
	acks      map[string]string
	handshake bool
}

// New validates o and returns a Member owning nothing until Run has
// joined it to the group.
func New(o Options) (*Member, error) {
	if o.Client == nil || o.Namespace == "" || o.Group == "" || o.Identity == "" {
		return nil, errors.New("shard: Options needs Client, Namespace, Group and Identity")
	}
	if o.Key == "" {
		o.Key = KeyNamespaceName
	}
	if o.Key != KeyNamespace && o.Key != KeyNamespaceName {
		return nil, fmt.Errorf("shard: key %q is neither %q nor %q", o.Key, KeyNamespace, KeyNamespaceName)
	}
	if o.RenewDeadline <= 0 || o.LeaseDuration <= o.RenewDeadline || o.RetryPeriod <= 0 || o.RetryPeriod >= o.RenewDeadline {
		return nil, fmt.Errorf("shard: need 0 < retryPeriod (%s) < renewDeadline (%s) < leaseDuration (%s)",
			o.RetryPeriod, o.RenewDeadline, o.LeaseDuration)
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	name := o.Group + "-" + o.Identity
	if errs := validation.IsDNS1123Subdomain(name); len(errs) > 0 {
		return nil, fmt.Errorf("shard: lease name %q: %v", name, errs)
	}
	m := &Member{o: o, name: name, lease: o.Client.Leases(o.Namespace), changed: make(chan struct{}, 1),
		seen: map[string]observation{}}
	m.cur = NewAssignment(o.Identity, nil, o.Key, false, time.Now(), time.Time{})
	return m, nil
}

// Identity is the member's identity; LeaseName its Lease's name.
func (m *Member) Identity() string  { return m.o.Identity }
func (m *Member) LeaseName() string { return m.name }

// Assignment returns the current Assignment.
func (m *Member) Assignment() *Assignment {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.cur
}

// Run lists the group's Leases and then renews the member's own every
// RetryPeriod, publishing a new Assignment whenever the view changes,
// until ctx ends.
// Then it publishes an inactive Assignment and, unless Options.Abandon,
// deletes its Lease, so the others take its objects over at their next
// list instead of after LeaseDuration. Cancel ctx only once the plugins
// have stopped: until the Lease is gone the others leave this member's
// objects to it.
func (m *Member) Run(ctx context.Context) {
	var wg sync.WaitGroup
	wg.Go(func() { m.fenceLoop(ctx) })
	for {
		m.round(ctx)
		// Jittered, as client-go's elector, so members do not list in
		// lockstep.
		wait := m.nextWait()
		wait += time.Duration(rand.Int64N(int64(wait)/5 + 1))
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			wg.Wait()
			m.leave()
			return
		case <-t.C:
		}
	}
}

// nextWait is the time to the next round: RetryPeriod, or an eighth of it
// (at least 50ms, as a standby looks at the leader's lease) while this
// member has written its Lease and waits for the others' acknowledgements.
// Its share is owned by nobody from the moment the first of them lets it
// go until this member's next list shows them all, so that list should
// not wait a whole RetryPeriod; a join costs a few more requests.
func (m *Member) nextWait() time.Duration {
	m.mu.Lock()
	joining := !m.joinedAt.IsZero() && !m.activated
	m.mu.Unlock()
	if joining {
		return min(m.o.RetryPeriod, max(m.o.RetryPeriod/8, 50*time.Millisecond))
	}
	return m.o.RetryPeriod
}

// leave publishes an inactive Assignment and gives the Lease up.
func (m *Member) leave() {
	m.mu.Lock()
	m.endStreakLocked()
	m.publishLocked(m.cur.Members, false, time.Now(), time.Time{})
	own := m.own
	m.mu.Unlock()
	if m.o.Abandon {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), m.o.RenewDeadline)
	defer cancel()
	opts := metav1.DeleteOptions{}
	if own != nil {
		opts.Preconditions = &metav1.Preconditions{UID: &own.UID}
	}
	if err := m.lease.Delete(ctx, m.name, opts); err != nil && !apierrors.IsNotFound(err) {
		m.o.Logger.Warn("sharding: could not delete this member's lease; the others take its objects over once it expires",
			"lease", m.o.Namespace+"/"+m.name, "err", err)
	}
}

// fenceLoop publishes an inactive Assignment when the current one's
// validity runs out before a round extends it: the member's own loop may
// be stuck in a request to an apiserver that does not answer. Owns says
// false from ValidUntil on anyway; this tells the host, so its plugins
// get the handed-over deletes and their calls' I/O is canceled.
func (m *Member) fenceLoop(ctx context.Context) {
	for {
		m.mu.Lock()
		a := m.cur
		m.mu.Unlock()
		var fire <-chan time.Time
		var t *time.Timer
		if a.Active {
			t = time.NewTimer(time.Until(a.ValidUntil()))
			fire = t.C
		}
		select {
		case <-ctx.Done():
		case <-m.changed:
		case <-fire:
			m.mu.Lock()
			if m.cur == a && !time.Now().Before(a.ValidUntil()) {
				m.fenceLocked(time.Now())
			}
			m.mu.Unlock()
		}
		if t != nil {
			t.Stop()
		}
		if ctx.Err() != nil {
			return
		}
	}
}

func (m *Member) fenceLocked(now time.Time) {
	m.endStreakLocked()
	m.o.Logger.Warn("sharding: lease not renewed or group not listed within renewDeadline; this member owns nothing until it rejoins",
		"identity", m.o.Identity, "lastRenew", m.lastRenew, "lastList", m.lastList, "renewDeadline", m.o.RenewDeadline)
	m.publishLocked(m.cur.Members, false, now, time.Time{})
}

// endStreakLocked ends the current streak: the member joins again, under
// a new epoch, so no acknowledgement of this streak counts for the next.
func (m *Member) endStreakLocked() {
	m.epoch, m.joinedAt, m.activated = "", time.Time{}, false
}

// round lists the group's Leases, publishes the view, then renews the
// Lease with that view in it (the others' acknowledgement of a joining
// member: they write it only once they have stopped owning its share),
// once the replica is ready (Options.Ready).
// A member whose list failed does not renew: a member that cannot see
// the group must not be counted by those that can, or its share would
// be owned by nobody.
func (m *Member) round(ctx context.Context) {
	// A member that cannot process its share yet must not write its
	// Lease: the others drop the share of every Lease they count, and it
	// would be processed by nobody until this one can (seconds, while
	// plugins compile or caches sync). Asked outside mu: Ready looks at
	// the host, which must never wait on the member.
	if !m.ready {
		m.ready = m.o.Ready == nil || m.o.Ready()
		switch {
		case !m.ready && !m.held:
			m.held = true
			m.o.Logger.Info("sharding: waiting until this replica can process a share (its plugins loaded and past their initial lists, or given up on) before joining; the others keep its share meanwhile",
				"identity", m.o.Identity)
		case m.ready && m.held:
			m.o.Logger.Info("sharding: this replica can process a share; joining", "identity", m.o.Identity)
		}
	}
	ready := m.ready
	rctx, cancel := context.WithTimeout(ctx, m.o.RenewDeadline)
	defer cancel()
	listSent := time.Now()
	list, listErr := m.lease.List(rctx, metav1.ListOptions{LabelSelector: LabelGroup + "=" + m.o.Group})
	done := time.Now()
	if ctx.Err() != nil {
		return
	}

	m.mu.Lock()
	// Lapsed: the validity ran out before this round could extend it.
	// Whatever this round achieved, the member has been out (others may
	// have counted it gone), so it joins again.
	if m.cur.Active && !done.Before(m.cur.ValidUntil()) {
		m.fenceLocked(done)
	}
	m.noteLocked("list the group's Leases", &m.listErr, listErr)
	if listErr == nil {
		m.lastList = listSent
		m.observeLocked(list.Items, done)
	}
	validUntil := m.validUntilLocked()
	fresh := done.Before(validUntil)
	if !fresh && !m.joinedAt.IsZero() {
		m.endStreakLocked() // renewals stopped long enough to be counted gone
	}
	if fresh && !m.activated && listErr == nil && !m.joinedAt.IsZero() && !listSent.Before(m.joinedAt) {
		m.activated = m.admittedLocked(listSent, done)
	}
	m.publishLocked(m.liveLocked(done), fresh && m.activated, done, validUntil)
	if listErr != nil || !ready {
		m.mu.Unlock()
		return
	}
	if m.epoch == "" {
		m.epoch = newEpoch()
	}
	epoch, view := m.epoch, m.viewLocked()
	m.mu.Unlock()

	renewSent := time.Now()
	renewErr := m.renew(rctx, renewSent, epoch, view)
	renewDone := time.Now()
	if ctx.Err() != nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.noteLocked("renew this member's Lease", &m.renewErr, renewErr)
	if renewErr == nil {
		m.lastRenew = renewSent
		if m.epoch == epoch && m.joinedAt.IsZero() {
			m.joinedAt = renewDone
		}
		if m.cur.Active {
			m.cur.extend(m.validUntilLocked())
		}
	}
	m.collectLocked(ctx, list.Items, done)
}

// validUntilLocked is when the older of the last successful renewal and
// list turns renewDeadline old.
func (m *Member) validUntilLocked() time.Time {
	t := m.lastRenew
	if m.lastList.Before(t) {
		t = m.lastList
	}
	return t.Add(m.o.RenewDeadline)
}

// admittedLocked reports whether this member may start owning objects,
// from a list sent at listSent, after its streak's first renewal had
// returned (so the list shows it, and every member whose Lease the list
// does not show lists after that renewal and counts this one): every
// other member live at now has published a view with this member in it,
// under this streak's epoch, so none still owns this member's share. A member
// whose Lease carries no view (a version before the handshake) is waited
// for with the join delay instead: by renewDeadline after this member's
// renewal, any member whose view is still valid has listed since.
func (m *Member) admittedLocked(listSent, now time.Time) bool {
	delayed := listSent.Sub(m.joinedAt) >= m.o.RenewDeadline
	for name, o := range m.seen {
		if !m.liveOtherLocked(name, o, now) {
			continue
		}
		if o.handshake && o.acks[m.o.Identity] != m.epoch || !o.handshake && !delayed {
			return false
		}
	}
	return true
}

// noteLocked records the outcome of one of the round's requests and logs
// each change loudly: a member that cannot list its group, or renew its
// Lease, owns nothing, and the operator must hear of it (a Role without
// list on Leases is the usual cause).
func (m *Member) noteLocked(what string, last *error, err error) {
	prev := *last
	*last = err
	switch {
	case err == nil && prev != nil:
		m.o.Logger.Info("sharding: this member can "+what+" again", "identity", m.o.Identity)
	case err == nil:
	case prev != nil && prev.Error() == err.Error():
	case apierrors.IsForbidden(err) || apierrors.IsUnauthorized(err):
		m.o.Logger.Error("sharding: this member may not "+what+"; it takes no share of the objects until it may",
			"identity", m.o.Identity, "lease", m.o.Namespace+"/"+m.name, "err", err)
	default:
		m.o.Logger.Warn("sharding: could not "+what+"; this member owns nothing from renewDeadline on if it keeps failing",
			"identity", m.o.Identity, "lease", m.o.Namespace+"/"+m.name, "err", err)
	}
}

// problemLocked says why the member cannot take part, "" when it can.
func (m *Member) problemLocked() string {
	switch {
	case m.listErr != nil:
		return "cannot list the sharding group's Leases in " + m.o.Namespace + ": " + m.listErr.Error()
	case m.renewErr != nil:
		return "cannot renew the Lease " + m.o.Namespace + "/" + m.name + ": " + m.renewErr.Error()
	}
	return ""
}

// newEpoch names a streak: random, so a member restarted with the same
// identity never repeats one.
func newEpoch() string {
	return strconv.FormatUint(rand.Uint64(), 36)
}

// viewLocked is AnnotationView's value for the current Assignment: the
// other members it counts, with the epochs this member saw.
func (m *Member) viewLocked() string {
	byID := make(map[string]string, len(m.seen))
	for _, o := range m.seen {
		byID[o.identity] = o.epoch
	}
	var b strings.Builder
	for _, id := range m.cur.Members {
		if id == m.o.Identity || byID[id] == "" {
			continue
		}
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		b.WriteString(id + "=" + byID[id])
	}
	return b.String()
}

// parseView reads AnnotationView.
func parseView(s string) map[string]string {
	out := map[string]string{}
	for kv := range strings.SplitSeq(s, ",") {
		if id, epoch, ok := strings.Cut(kv, "="); ok {
			out[id] = epoch
		}
	}
	return out
}

// renew writes this member's Lease: holder, renewTime, duration, and the
// handshake's epoch and view.
func (m *Member) renew(ctx context.Context, now time.Time, epoch, view string) error {
	seconds := int32((m.o.LeaseDuration + time.Second - 1) / time.Second)
	rt := metav1.NewMicroTime(now)
	m.mu.Lock()
	own := m.own
	m.mu.Unlock()
	if own == nil {
		l, err := m.lease.Get(ctx, m.name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			l = &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: m.name, Namespace: m.o.Namespace,
				Labels:      map[string]string{LabelGroup: m.o.Group},
				Annotations: map[string]string{AnnotationEpoch: epoch, AnnotationView: view}},
				Spec: coordinationv1.LeaseSpec{HolderIdentity: &m.o.Identity, LeaseDurationSeconds: &seconds,
					AcquireTime: &rt, RenewTime: &rt}}
			created, err := m.lease.Create(ctx, l, metav1.CreateOptions{})
			if err != nil {
				return err
			}
			m.setOwn(created)
			return nil
		case err != nil:
			return err
		}
		own = l
	}
	l := own.DeepCopy()
	if l.Labels == nil {
		l.Labels = map[string]string{}
	}
	l.Labels[LabelGroup] = m.o.Group
	if l.Annotations == nil {
		l.Annotations = map[string]string{}
	}
	l.Annotations[AnnotationEpoch], l.Annotations[AnnotationView] = epoch, view
	if l.Spec.HolderIdentity == nil || *l.Spec.HolderIdentity != m.o.Identity {
		l.Spec.HolderIdentity, l.Spec.AcquireTime = &m.o.Identity, &rt
	}
	l.Spec.LeaseDurationSeconds, l.Spec.RenewTime = &seconds, &rt
	updated, err := m.lease.Update(ctx, l, metav1.UpdateOptions{})
	if err != nil {
		m.setOwn(nil) // read it again: deleted, or changed behind our back
		return err
	}
	m.setOwn(updated)
	return nil
}

func (m *Member) setOwn(l *coordinationv1.Lease) {
	m.mu.Lock()
	m.own = l
	m.mu.Unlock()
}

// observeLocked notes each Lease's version, and when it was first seen:
// expiry is judged by this member's own clock from when it saw a Lease
// change, never by the writer's renewTime (clocks differ; their rates
// are what client-go's leader election assumes alike, and so does this).
func (m *Member) observeLocked(items []coordinationv1.Lease, now time.Time) {
	next := make(map[string]observation, len(items))
	for i := range items {
		l := &items[i]
		o := observation{rv: l.ResourceVersion, seenAt: now, epoch: l.Annotations[AnnotationEpoch]}
		if v, ok := l.Annotations[AnnotationView]; ok {
			o.acks, o.handshake = parseView(v), true
		}
		if l.Spec.HolderIdentity != nil {
			o.identity = *l.Spec.HolderIdentity
		}
		if l.Spec.LeaseDurationSeconds != nil {
			o.expiresAge = time.Duration(*l.Spec.LeaseDurationSeconds) * time.Second
		}
		if prev, ok := m.seen[l.Name]; ok && prev.rv == o.rv {
			o.seenAt = prev.seenAt
		}
		next[l.Name] = o
	}
	m.seen = next
}

// liveOtherLocked reports whether the Lease name, seen as o, is another
// member's that this member saw change less than its leaseDuration ago.
func (m *Member) liveOtherLocked(name string, o observation, now time.Time) bool {
	return name != m.name && o.identity != "" && o.identity != m.o.Identity && now.Before(o.seenAt.Add(o.expiresAge))
}

// liveLocked returns the identities of the other members whose Leases
// this member saw change less than their leaseDuration ago.
func (m *Member) liveLocked(now time.Time) []string {
	var out []string
	for name, o := range m.seen {
		if m.liveOtherLocked(name, o, now) {
			out = append(out, o.identity)
		}
	}
	sort.Strings(out)
	return out
}

// collectLocked deletes the Leases of members gone for two lease
// durations (crashed ones never delete their own), conditional on the
// version seen, so a member that came back meanwhile keeps its Lease.
func (m *Member) collectLocked(ctx context.Context, items []coordinationv1.Lease, now time.Time) {
	for i := range items {
		l := &items[i]
		o := m.seen[l.Name]
		if l.Name == m.name || now.Before(o.seenAt.Add(2*o.expiresAge)) {
			continue
		}
		uid, rv := l.UID, l.ResourceVersion
		go func() {
			dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), m.o.RenewDeadline)
			defer cancel()
			_ = m.lease.Delete(dctx, l.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid, ResourceVersion: &rv}})
		}()
	}
}

// publishLocked makes a new Assignment current when the view or the
// member's problem changed, or extends the current one's validity when
// neither did.
func (m *Member) publishLocked(members []string, active bool, now, validUntil time.Time) {
	next := NewAssignment(m.o.Identity, members, m.o.Key, active, now, validUntil)
	next.Problem = m.problemLocked()
	same := next.SameView(m.cur) && next.Problem == m.cur.Problem
	if same && active {
		m.cur.extend(validUntil)
		return
	}
	if same {
		return
	}
	prev := m.cur
	m.cur = next
	m.o.Logger.Info("sharding: view changed", "identity", m.o.Identity, "active", active, "members", next.Members,
		"was", prev.Members)
	if m.o.OnChange != nil {
		m.o.OnChange(next)
	}
	select {
	case m.changed <- struct{}{}:
	default:
	}
}
