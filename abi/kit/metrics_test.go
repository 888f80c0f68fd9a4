package kit

import (
	"errors"
	"testing"

	"github.com/informer-host/informer-host/abi"
)

// metricsHost records what the kit hands the metric_* imports.
type metricsHost struct {
	fakeHost
	decls   []string
	updates []string
	rc      int32
}

func (h *metricsHost) metricDeclare(kind int32, decl []byte) int32 {
	h.decls = append(h.decls, string(rune('0'+kind))+" "+string(decl))
	return int32(len(h.decls) - 1)
}
func (h *metricsHost) upd(op string, id int32, v float64, labels []byte) int32 {
	h.updates = append(h.updates, op+" "+string(rune('0'+id))+" "+string(labels))
	return h.rc
}
func (h *metricsHost) metricAdd(id int32, v float64, l []byte) int32 { return h.upd("add", id, v, l) }
func (h *metricsHost) metricSet(id int32, v float64, l []byte) int32 { return h.upd("set", id, v, l) }
func (h *metricsHost) metricObserve(id int32, v float64, l []byte) int32 {
	return h.upd("observe", id, v, l)
}

func TestMetrics(t *testing.T) {
	h := &metricsHost{}
	old := the.host
	the.host = h
	defer func() { the.host = old }()

	c := Counter("pods_total", `Pods "seen"`+"\n", "namespace", "phase")
	g := Gauge("depth", "")
	hist := Histogram("lat", "h", []float64{0.5, 1e-05}, "op")
	if len(h.decls) != 0 {
		t.Fatal("declared before first use")
	}
	for _, step := range []struct {
		err  error
		want error
	}{
		{c.Add(1, "default", "Running"), nil},
		{c.Add(2, "default", "Running"), nil},
		{c.Add(1, "only-one"), HostError(abi.ErrInvalid)},
		{c.Add(1, "a\x00b", "x"), HostError(abi.ErrInvalid)},
		{g.Set(3), nil},
		{hist.Observe(0.1, "get"), nil},
	} {
		if !errors.Is(step.err, step.want) {
			t.Errorf("got %v, want %v", step.err, step.want)
		}
	}
	wantDecls := []string{
		`0 {"name":"pods_total","help":"Pods \"seen\"\u000a","labels":["namespace","phase"]}`,
		`1 {"name":"depth","help":"","labels":[]}`,
		`2 {"name":"lat","help":"h","labels":["op"],"buckets":[0.5,1e-05]}`,
	}
	if len(h.decls) != len(wantDecls) {
		t.Fatalf("declarations %q", h.decls)
	}
	for i := range wantDecls {
		if h.decls[i] != wantDecls[i] {
			t.Errorf("declaration %d:\n got %s\nwant %s", i, h.decls[i], wantDecls[i])
		}
	}
	wantUpd := []string{"add 0 default\x00Running", "add 0 default\x00Running", "set 1 ", "observe 2 get"}
	if len(h.updates) != len(wantUpd) {
		t.Fatalf("updates %q", h.updates)
	}
	for i := range wantUpd {
		if h.updates[i] != wantUpd[i] {
			t.Errorf("update %d: %q, want %q", i, h.updates[i], wantUpd[i])
		}
	}
	h.rc = abi.MetricDropped
	if err := c.Add(1, "x", "y"); err != ErrDropped {
		t.Errorf("dropped: %v", err)
	}
	h.rc = abi.ErrInvalid
	if err := c.Add(-1, "x", "y"); !errors.Is(err, HostError(abi.ErrInvalid)) {
		t.Errorf("invalid: %v", err)
	}
}

// A declaration the host refuses is refused for every update, without
// asking again.
func TestMetricDenied(t *testing.T) {
	h := &deniedHost{}
	old := the.host
	the.host = h
	defer func() { the.host = old }()
	c := Counter("c", "")
	for range 3 {
		if err := c.Add(1); !errors.Is(err, HostError(abi.ErrDenied)) {
			t.Errorf("got %v, want ERR_DENIED", err)
		}
	}
	if h.declares != 1 {
		t.Errorf("%d declarations, want 1", h.declares)
	}
	// A host without the imports at all.
	the.host = &fakeHost{}
	if err := Counter("d", "").Add(1); !errors.Is(err, HostError(abi.ErrDenied)) {
		t.Errorf("no metrics imports: %v", err)
	}
}

type deniedHost struct {
	metricsHost
	declares int
}

func (h *deniedHost) metricDeclare(int32, []byte) int32 { h.declares++; return abi.ErrDenied }
