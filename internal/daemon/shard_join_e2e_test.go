package daemon

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/informer-host/informer-host/host"
	"github.com/informer-host/informer-host/internal/config"
	"github.com/informer-host/informer-host/internal/ociartifact/registrytest"
	"github.com/informer-host/informer-host/internal/pluginsource"
	"github.com/informer-host/informer-host/internal/testenv"
)

// processing reports whether h's member is processing what its
// Assignment gives it: active, and every plugin running past its initial
// list.
func processing(h *host.Host, now time.Time) bool {
	a := h.Assignment()
	if a == nil || !a.Active || !a.Valid(now) {
		return false
	}
	st := h.Status()
	for _, p := range st {
		if p.State != host.StateRunning || !p.Synced {
			return false
		}
	}
	return len(st) > 0
}

// joinSample is what the sampler saw at one moment of a join.
type joinSample struct {
	at time.Time
	// unowned and double count the objects no processing member owned,
	// and those two owned.
	unowned, double int
	// handshake: the old member's view had the newcomer and the
	// newcomer was not active yet (the handshake's window).
	handshake bool
	held      bool
}

// A replica joining a sharding group while it cannot process its share
// yet leaves that share with the member that has it: sampled throughout
// the join, every object is owned by a member that is processing, and
// never by two. Held here: its plugins loading (a slow compile, held by
// the test before the load), and its one plugin's first pull from a
// registry (held by the registry). Once it can, it joins by the handshake
// (the old member lets go, its Lease says so, the newcomer starts), the
// only moment an object can be without an owner.
func TestShardedDaemonJoinLeavesNoObjectUnowned(t *testing.T) {
	t.Run("plugins loading", func(t *testing.T) {
		ns := env.Namespace(t)
		cfg := writeDaemonConfig(t, ns, "counter.wasm", "../../host/testdata/plugins/counter.wat", joinSharding(ns))
		release := make(chan struct{})
		var held atomic.Bool
		checkJoin(t, ns, cfg, cfg, func(h *host.Host) {
			held.Store(true)
			<-release
		}, held.Load, func() { close(release) })
	})
	t.Run("a sourced plugin's first pull", func(t *testing.T) {
		ns := env.Namespace(t)
		reg := registrytest.GGCR(t)
		ref := reg.Ref("plugins/counter:v1")
		write := func() *config.Config {
			return writeDaemonConfigText(t, env.DaemonDir(t, nil), strings.Replace(testenv.DaemonConfig(ns, "", "{resource: cms}"), "server:",
				"  sourceCache: cache\n  registries:\n    "+reg.Host+": {insecure: true}\n  modules:\n    - file: counter.wasm\n      source: oci://"+ref+"\n"+
					joinSharding(ns)+"server:", 1))
		}
		cfgA, cfgB := write(), write()
		oci, err := pluginsource.NewOCI(cfgA)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := oci.Client.Push(context.Background(), testenv.WAT(t, "../../host/testdata/plugins/counter.wat"), ref,
			map[string]string{"org.opencontainers.image.title": "counter.wasm"}); err != nil {
			t.Fatal(err)
		}
		release := make(chan struct{})
		var held atomic.Bool
		var once sync.Once
		free := func() { once.Do(func() { close(release) }) }
		t.Cleanup(free)
		checkJoin(t, ns, cfgA, cfgB, func(*host.Host) {
			// Every request from here on waits: member a's refreshes
			// too, which changes nothing while it runs its version.
			reg.Tamper(func(http.ResponseWriter, *http.Request) bool {
				held.Store(true)
				<-release
				return false
			})
		}, held.Load, free)
	})
}

// joinSharding is the sharding section of the join tests: member a's
// Assignment stays valid for renewDeadline past its last list, and the
// sampler counts every object of a lapsed a as unowned; one slow list on
// a loaded machine (-race, two daemons and an apiserver on two cores)
// must not pass for a join's gap. A renewDeadline of 4s keeps a valid
// through it; the join itself goes at retryPeriod's pace, and its join
// deadline (4 leaseDurations) stays far beyond how long b is held.
func joinSharding(ns string) string { return shardingTailTimed(ns, "6s", "4s") }

// checkJoin starts member a on cfgA, lets it process every object alone,
// then starts member b on cfgB with beforeLoad and, once held says b is
// held and a has listed the group three times since b listed it, calls
// release; it samples both members from b's start until they share the
// objects.
func checkJoin(t *testing.T, ns string, cfgA, cfgB *config.Config, beforeLoad func(*host.Host), held func() bool, release func()) {
	// Few enough that the counter's log lines stay within its log burst.
	const n = 60
	cms := env.Client.CoreV1().ConfigMaps(ns)
	var keys []string
	for i := range n {
		name := fmt.Sprintf("cm%d", i)
		if _, err := cms.Create(context.Background(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		keys = append(keys, name)
	}
	a := startReplica(t, cfgA, Options{})
	ha := a.d.host
	testenv.Eventually(t, "member a alone to process every object", func() bool {
		return processing(ha, time.Now()) && len(ha.Assignment().Members) == 1 && a.last() == n
	})

	// The sampler reads the newcomer first: an old member that still
	// owns an object read after a newcomer that does would be a real
	// overlap, not one made by the order of the reads.
	var (
		mu      sync.Mutex
		samples []joinSample
		holding = true
	)
	hosts := make(chan *host.Host, 1)
	stop, stopped := make(chan struct{}), make(chan struct{})
	stopSampling := sync.OnceFunc(func() { close(stop); <-stopped })
	defer stopSampling()
	var hb *host.Host
	go func() {
		defer close(stopped)
		for {
			select {
			case <-stop:
				return
			case h := <-hosts:
				mu.Lock()
				hb = h
				mu.Unlock()
			case <-time.After(2 * time.Millisecond):
			}
			mu.Lock()
			hb := hb
			mu.Unlock()
			if hb == nil {
				continue
			}
			now := time.Now()
			ab, aa := hb.Assignment(), ha.Assignment()
			pb, pa := processing(hb, now), processing(ha, now)
			s := joinSample{at: now, handshake: slices.Contains(aa.Members, ab.Self) && !ab.Active}
			for _, k := range keys {
				ob := pb && ab.Owns(ns, k, now)
				oa := pa && aa.Owns(ns, k, now)
				switch {
				case ob && oa:
					s.double++
				case !ob && !oa:
					s.unowned++
				}
			}
			mu.Lock()
			s.held = holding
			samples = append(samples, s)
			mu.Unlock()
		}
	}()
	started := make(chan *replica, 1)
	go func() {
		started <- startReplica(t, cfgB, Options{beforeLoad: func(h *host.Host) {
			hosts <- h
			beforeLoad(h)
		}})
	}()
	// Held until a has renewed its Lease three times after b first
	// listed the group: each of a's renewals follows a list of a's own,
	// which shows b's Lease if b wrote one, and a would have dropped b's
	// share there.
	testenv.Eventually(t, "member b to be held and to have listed its group", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return hb != nil && held() && slices.Contains(hb.Assignment().Members, ha.Assignment().Self)
	})
	leases := env.Client.CoordinationV1().Leases(ns)
	var rvs []string
	testenv.Eventually(t, "member a to renew its Lease three times since", func() bool {
		l, err := leases.Get(context.Background(), "hooks-"+ha.Assignment().Self, metav1.GetOptions{})
		if err == nil && (len(rvs) == 0 || rvs[len(rvs)-1] != l.ResourceVersion) {
			rvs = append(rvs, l.ResourceVersion)
		}
		return len(rvs) > 3
	})
	mu.Lock()
	holding = false
	mu.Unlock()
	release()
	b := <-started
	testenv.Eventually(t, "both members to process their shares", func() bool {
		now := time.Now()
		return processing(ha, now) && processing(hb, now) && len(ha.Assignment().Members) == 2 &&
			len(hb.Assignment().Members) == 2 && a.last()+b.last() == n && b.last() > 0
	})

	stopSampling()
	var heldMax, doubleMax, outside, windowMax int
	var window time.Duration
	var windowFrom time.Time
	for _, s := range samples {
		if s.held {
			heldMax = max(heldMax, s.unowned)
		}
		doubleMax = max(doubleMax, s.double)
		switch {
		case s.unowned > 0 && !s.handshake:
			outside = max(outside, s.unowned)
		case s.unowned > 0:
			windowMax = max(windowMax, s.unowned)
			if windowFrom.IsZero() {
				windowFrom = s.at
			}
			window = s.at.Sub(windowFrom)
		}
	}
	t.Logf("%d samples; the handshake's window: up to %d objects unowned for about %s", len(samples), windowMax, window)
	if heldMax > 0 {
		t.Errorf("while member b was held, up to %d of %d objects were owned by no processing member", heldMax, n)
	}
	if outside > 0 {
		t.Errorf("outside the handshake, up to %d of %d objects were owned by no processing member", outside, n)
	}
	if doubleMax > 0 {
		t.Errorf("up to %d objects were owned by both processing members at once", doubleMax)
	}
}

// A plugin bound to a resource its cluster does not serve (a CRD not
// installed yet) never has its initial list: a member that waited for it
// would never join, and with every replica alike nothing would be
// delivered. The member joins at once (its join deadline, 4
// leaseDurations, is 40 minutes here) and processes the objects of the
// plugin's other binding, saying in its log which plugin it did not wait
// for.
func TestShardedDaemonJoinsWithAResourceNotServed(t *testing.T) {
	ns := env.Namespace(t)
	const n = 5
	cms := env.Client.CoreV1().ConfigMaps(ns)
	for i := range n {
		if _, err := cms.Create(context.Background(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("cm%d", i)}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	cfg := writeDaemonConfigText(t, env.DaemonDir(t, map[string][]byte{
		"counter.wasm": testenv.WAT(t, "../../host/testdata/plugins/counter.wat")}), testenv.DaemonConfig(ns,
		"  - {name: widgets, group: widgets.example.com, version: v1, resource: widgets}",
		"{resource: cms}, {resource: widgets}")+shardingTailTimed(ns, "10m", "1s"))
	r := startReplica(t, cfg, Options{})
	h := r.d.host
	testenv.Eventually(t, "the member to join and its plugin to count every object", func() bool {
		a := h.Assignment()
		return a != nil && a.Active && len(a.Members) == 1 && r.last() == n
	})
	if lines := r.logs.Lines("joining without waiting", "counter.wasm", "widgets"); len(lines) == 0 {
		t.Errorf("the member's log does not say it joined without waiting for counter.wasm, bound to widgets")
	}
}
