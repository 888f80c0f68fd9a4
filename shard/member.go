package shard

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sort"
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

	// mu guards everything below. OnChange runs under it, so
	// Assignments reach it in order.
	mu  sync.Mutex
	cur *Assignment
	// own is the last version of this member's Lease it wrote or read;
	// nil: read it again before writing.
	own *coordinationv1.Lease
	// lastRenew and lastList are when the last successful renewal and
	// list were sent (their start, so that the real write or read is
	// later). joinedAt is when the first successful renewal of the
	// current streak returned (zero while fenced): the member owns
	// nothing until it is renewDeadline old.
	lastRenew, lastList, joinedAt time.Time
	// seen holds, by Lease name, the version of each member's Lease this
	// member last saw and when it first saw that version.
	seen map[string]observation
}

type observation struct {
	rv         string
	identity   string
	seenAt     time.Time
	expiresAge time.Duration // the Lease's leaseDurationSeconds
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

// Run renews the member's Lease and lists the group's every RetryPeriod,
// publishing a new Assignment whenever the view changes, until ctx ends.
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
		wait := m.o.RetryPeriod + time.Duration(rand.Int64N(int64(m.o.RetryPeriod)/5+1))
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

// leave publishes an inactive Assignment and gives the Lease up.
func (m *Member) leave() {
	m.mu.Lock()
	m.joinedAt = time.Time{}
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
// get the handed-over deletes.
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
	m.joinedAt = time.Time{}
	m.o.Logger.Warn("sharding: lease not renewed or group not listed within renewDeadline; this member owns nothing until it rejoins",
		"identity", m.o.Identity, "lastRenew", m.lastRenew, "lastList", m.lastList, "renewDeadline", m.o.RenewDeadline)
	m.publishLocked(m.cur.Members, false, now, time.Time{})
}

// round renews the Lease, lists the group's Leases and publishes the view.
func (m *Member) round(ctx context.Context) {
	rctx, cancel := context.WithTimeout(ctx, m.o.RenewDeadline)
	defer cancel()
	renewSent := time.Now()
	renewErr := m.renew(rctx, renewSent)
	renewDone := time.Now()
	listSent := renewDone
	list, listErr := m.lease.List(rctx, metav1.ListOptions{LabelSelector: LabelGroup + "=" + m.o.Group})
	done := time.Now()
	if ctx.Err() != nil {
		return
	}

	m.mu.Lock()
	defer m.mu.Unlock()
	// Lapsed: the validity ran out before this round could extend it.
	// Whatever this round achieved, the member has been out (others may
	// have counted it gone), so it joins again, with the join delay.
	lapsed := m.cur.Active && !done.Before(m.cur.ValidUntil())
	if lapsed {
		m.fenceLocked(done)
	}
	if renewErr == nil {
		m.lastRenew = renewSent
		if m.joinedAt.IsZero() {
			m.joinedAt = renewDone
		}
	} else {
		m.o.Logger.Debug("sharding: renew failed", "lease", m.name, "err", renewErr)
	}
	if listErr == nil {
		m.lastList = listSent
		m.observeLocked(list.Items, done)
	} else {
		m.o.Logger.Debug("sharding: list failed", "err", listErr)
	}
	validUntil := m.lastRenew
	if m.lastList.Before(validUntil) {
		validUntil = m.lastList
	}
	validUntil = validUntil.Add(m.o.RenewDeadline)
	fresh := done.Before(validUntil)
	if !fresh {
		m.joinedAt = time.Time{}
		if renewErr == nil {
			m.joinedAt = renewDone
		}
	}
	active := fresh && !m.joinedAt.IsZero() && done.Sub(m.joinedAt) >= m.o.RenewDeadline
	m.publishLocked(m.liveLocked(done), active, done, validUntil)
	if listErr == nil {
		m.collectLocked(ctx, list.Items, done)
	}
}

// renew writes this member's Lease: holder, renewTime, duration.
func (m *Member) renew(ctx context.Context, now time.Time) error {
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
				Labels: map[string]string{LabelGroup: m.o.Group}},
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
		o := observation{rv: l.ResourceVersion, seenAt: now}
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

// liveLocked returns the identities of the other members whose Leases
// this member saw change less than their leaseDuration ago.
func (m *Member) liveLocked(now time.Time) []string {
	var out []string
	for name, o := range m.seen {
		if name == m.name || o.identity == "" || o.identity == m.o.Identity {
			continue
		}
		if now.Before(o.seenAt.Add(o.expiresAge)) {
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

// publishLocked makes a new Assignment current when the view changed, or
// extends the current one's validity when it did not.
func (m *Member) publishLocked(members []string, active bool, now, validUntil time.Time) {
	next := NewAssignment(m.o.Identity, members, m.o.Key, active, now, validUntil)
	if next.SameView(m.cur) && active {
		m.cur.extend(validUntil)
		return
	}
	if next.SameView(m.cur) {
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
