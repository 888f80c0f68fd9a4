package informer_test

import (
	"fmt"
	"sync"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/informer-host/informer-host/event"
	"github.com/informer-host/informer-host/informer"
	"github.com/informer-host/informer-host/internal/testenv"
)

// recorded is what a test listener saw of one notification.
type recorded struct {
	Type              event.EventType
	Resource          string
	Key               string
	Initial           bool
	FinalStateUnknown bool
	Data              string // data.v of the object (ConfigMaps), or ""
	OldData           string
}

func (r recorded) String() string {
	s := fmt.Sprintf("%s %s %s", r.Type, r.Resource, r.Key)
	if r.Initial {
		s += " initial"
	}
	if r.FinalStateUnknown {
		s += " finalStateUnknown"
	}
	if r.OldData != "" || r.Data != "" {
		s += fmt.Sprintf(" %q->%q", r.OldData, r.Data)
	}
	return s
}

// recorder is a Listener that remembers every notification.
type recorder struct {
	mu     sync.Mutex
	events []recorded
}

func (r *recorder) listener() informer.ListenerFunc {
	return func(ev *event.Event) {
		rec := recorded{Type: ev.Type, Resource: ev.Resource.Name, Key: ev.Key(),
			Initial: ev.IsInInitialList, FinalStateUnknown: ev.FinalStateUnknown}
		rec.Data, _, _ = unstructured.NestedString(ev.Object.Object, "data", "v")
		if ev.OldObject != nil {
			rec.OldData, _, _ = unstructured.NestedString(ev.OldObject.Object, "data", "v")
		}
		r.mu.Lock()
		r.events = append(r.events, rec)
		r.mu.Unlock()
	}
}

func (r *recorder) snapshot() []recorded {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]recorded(nil), r.events...)
}

// forKey returns the events of one object, in delivery order.
func (r *recorder) forKey(key string) []recorded {
	var out []recorded
	for _, e := range r.snapshot() {
		if e.Key == key {
			out = append(out, e)
		}
	}
	return out
}

// eventually polls cond (testenv.Eventually).
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	testenv.Eventually(t, what, cond)
}
