package pluginmetrics

import (
	"fmt"
	"math"
	"strings"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/prometheus/common/expfmt"

	"github.com/informer-host/informer-host/abi"
)

func labels(vs ...string) []byte { return []byte(strings.Join(vs, "\x00")) }

// scrape gathers r through a real Prometheus registry and returns the text
// exposition of the metrics whose names start with prefix.
func scrape(t *testing.T, r *Registry, names ...string) string {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(r)
	var b strings.Builder
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatalf("gather: %v", err)
	}
	for _, mf := range mfs {
		for _, n := range names {
			if mf.GetName() == n {
				for _, m := range mf.GetMetric() {
					var ls []string
					for _, l := range m.GetLabel() {
						ls = append(ls, l.GetName()+"="+l.GetValue())
					}
					v := m.GetCounter().GetValue() + m.GetGauge().GetValue() + float64(m.GetHistogram().GetSampleCount())
					fmt.Fprintf(&b, "%s{%s} %g\n", n, strings.Join(ls, ","), v)
				}
			}
		}
	}
	return b.String()
}

func TestDeclareValidation(t *testing.T) {
	for _, tc := range []struct {
		name string
		kind int32
		decl string
		want int32
	}{
		{"counter", abi.MetricCounter, `{"name":"pods_total","help":"h","labels":["namespace"]}`, 0},
		{"gauge no labels", abi.MetricGauge, `{"name":"depth"}`, 0},
		{"histogram default buckets", abi.MetricHistogram, `{"name":"lat","labels":["op"]}`, 0},
		{"histogram buckets", abi.MetricHistogram, `{"name":"lat","buckets":[0.1,1,10]}`, 0},
		{"unknown kind", 3, `{"name":"x"}`, abi.ErrInvalid},
		{"negative kind", -1, `{"name":"x"}`, abi.ErrInvalid},
		{"not json", abi.MetricCounter, `name=x`, abi.ErrInvalid},
		{"trailing data", abi.MetricCounter, `{"name":"x"} {}`, abi.ErrInvalid},
		{"unknown field", abi.MetricCounter, `{"name":"x","unit":"s"}`, abi.ErrInvalid},
		{"empty name", abi.MetricCounter, `{"name":""}`, abi.ErrInvalid},
		{"name with dash", abi.MetricCounter, `{"name":"a-b"}`, abi.ErrInvalid},
		{"name with colon", abi.MetricCounter, `{"name":"a:b"}`, abi.ErrInvalid},
		{"name starts with digit", abi.MetricCounter, `{"name":"1a"}`, abi.ErrInvalid},
		{"name too long", abi.MetricCounter, `{"name":"` + strings.Repeat("a", MaxNameLen+1) + `"}`, abi.ErrInvalid},
		{"histogram suffix", abi.MetricCounter, `{"name":"x_count"}`, abi.ErrInvalid},
		{"help too long", abi.MetricCounter, `{"name":"x","help":"` + strings.Repeat("h", MaxHelpLen+1) + `"}`, abi.ErrInvalid},
		{"reserved plugin label", abi.MetricCounter, `{"name":"x","labels":["plugin"]}`, abi.ErrInvalid},
		{"reserved __ label", abi.MetricCounter, `{"name":"x","labels":["__name"]}`, abi.ErrInvalid},
		{"le on histogram", abi.MetricHistogram, `{"name":"x","labels":["le"]}`, abi.ErrInvalid},
		{"le on counter", abi.MetricCounter, `{"name":"x","labels":["le"]}`, 0},
		{"duplicate label", abi.MetricCounter, `{"name":"x","labels":["a","a"]}`, abi.ErrInvalid},
		{"bad label", abi.MetricCounter, `{"name":"x","labels":["a.b"]}`, abi.ErrInvalid},
		{"too many labels", abi.MetricCounter, `{"name":"x","labels":["a","b","c","d","e","f","g","h","i","j","k","l","m","n","o","p","q"]}`, abi.ErrInvalid},
		{"buckets on counter", abi.MetricCounter, `{"name":"x","buckets":[1]}`, abi.ErrInvalid},
		{"unsorted buckets", abi.MetricHistogram, `{"name":"x","buckets":[2,1]}`, abi.ErrInvalid},
		{"equal buckets", abi.MetricHistogram, `{"name":"x","buckets":[1,1]}`, abi.ErrInvalid},
		{"invalid utf8", abi.MetricCounter, "{\"name\":\"x\",\"help\":\"\xff\"}", abi.ErrInvalid},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := New(Options{}).Plugin("a.wasm", 0).Instance()
			if got := v.Declare(tc.kind, []byte(tc.decl)); got != tc.want {
				t.Fatalf("Declare = %d, want %d", got, tc.want)
			}
		})
	}
}

func TestUpdates(t *testing.T) {
	v := New(Options{}).Plugin("a.wasm", 0).Instance()
	c := v.Declare(abi.MetricCounter, []byte(`{"name":"c","labels":["ns","phase"]}`))
	g := v.Declare(abi.MetricGauge, []byte(`{"name":"g"}`))
	h := v.Declare(abi.MetricHistogram, []byte(`{"name":"h","buckets":[1,2]}`))
	if c < 0 || g < 0 || h < 0 {
		t.Fatalf("declare: %d %d %d", c, g, h)
	}
	for _, tc := range []struct {
		name string
		fn   func(int32, float64, []byte) int32
		id   int32
		x    float64
		ls   []byte
		want int32
	}{
		{"counter add", v.Add, c, 2, labels("a", "Running"), 0},
		{"counter add empty value", v.Add, c, 1, labels("", ""), 0},
		{"counter negative", v.Add, c, -1, labels("a", "Running"), abi.ErrInvalid},
		{"counter NaN", v.Add, c, math.NaN(), labels("a", "Running"), abi.ErrInvalid},
		{"counter +Inf", v.Add, c, math.Inf(1), labels("a", "Running"), abi.ErrInvalid},
		{"counter set", v.Set, c, 1, labels("a", "Running"), abi.ErrInvalid},
		{"counter observe", v.Observe, c, 1, labels("a", "Running"), abi.ErrInvalid},
		{"too few labels", v.Add, c, 1, labels("a"), abi.ErrInvalid},
		{"too many labels", v.Add, c, 1, labels("a", "b", "c"), abi.ErrInvalid},
		{"no labels", v.Add, c, 1, nil, abi.ErrInvalid},
		{"invalid utf8 label", v.Add, c, 1, []byte("\xff\x00a"), abi.ErrInvalid},
		{"label bytes too long", v.Add, c, 1, labels(strings.Repeat("a", MaxLabelBytes), "b"), abi.ErrInvalid},
		{"gauge add negative", v.Add, g, -3, nil, 0},
		{"gauge set", v.Set, g, 7, nil, 0},
		{"gauge NaN", v.Set, g, math.NaN(), nil, abi.ErrInvalid},
		{"gauge with labels", v.Set, g, 1, labels("x"), abi.ErrInvalid},
		{"gauge observe", v.Observe, g, 1, nil, abi.ErrInvalid},
		{"histogram observe", v.Observe, h, 1.5, nil, 0},
		{"histogram add", v.Add, h, 1, nil, abi.ErrInvalid},
		{"unknown id", v.Add, 99, 1, nil, abi.ErrInvalid},
		{"negative id", v.Add, -1, 1, nil, abi.ErrInvalid},
	} {
		if got := tc.fn(tc.id, tc.x, tc.ls); got != tc.want {
			t.Errorf("%s: got %d, want %d", tc.name, got, tc.want)
		}
	}
}

func TestExport(t *testing.T) {
	r := New(Options{})
	v := r.Plugin("a.wasm", 0).Instance()
	c := v.Declare(abi.MetricCounter, []byte(`{"name":"pods_total","help":"Pods seen.","labels":["namespace"]}`))
	v.Add(c, 2, labels("default"))
	v.Add(c, 3, labels("default"))
	v.Add(c, 1, labels("kube-system"))
	want := "informer_host_plugin_metric_pods_total{namespace=default,plugin=a.wasm} 5\n" +
		"informer_host_plugin_metric_pods_total{namespace=kube-system,plugin=a.wasm} 1\n"
	if got := scrape(t, r, "informer_host_plugin_metric_pods_total"); got != want {
		t.Fatalf("got\n%s\nwant\n%s", got, want)
	}
	if problems, err := testutil.CollectAndLint(r); err != nil || len(problems) != 0 {
		t.Errorf("lint: %v %v", problems, err)
	}
}

// A new instance declaring the same shape gets the metric with its values;
// a changed shape replaces it, and the old instance's id reaches nothing
// exported.
func TestRedeclare(t *testing.T) {
	r := New(Options{})
	decl := `{"name":"c","help":"h","labels":["ns"]}`
	old := r.Plugin("a.wasm", 0).Instance()
	id := old.Declare(abi.MetricCounter, []byte(decl))
	old.Add(id, 4, labels("x"))

	fresh := r.Plugin("a.wasm", 0).Instance()
	id2 := fresh.Declare(abi.MetricCounter, []byte(decl))
	fresh.Add(id2, 1, labels("x"))
	if got, want := scrape(t, r, "informer_host_plugin_metric_c"), "informer_host_plugin_metric_c{ns=x,plugin=a.wasm} 5\n"; got != want {
		t.Fatalf("unchanged declaration: got %q, want %q", got, want)
	}

	changed := r.Plugin("a.wasm", 0).Instance()
	id3 := changed.Declare(abi.MetricCounter, []byte(`{"name":"c","help":"h","labels":["ns","phase"]}`))
	if id3 < 0 {
		t.Fatalf("changed declaration: %d", id3)
	}
	if got := old.Add(id, 1, labels("y")); got != abi.MetricDropped {
		t.Errorf("old instance's update of a replaced metric: %d, want MetricDropped", got)
	}
	changed.Add(id3, 2, labels("x", "Running"))
	if got, want := scrape(t, r, "informer_host_plugin_metric_c"), "informer_host_plugin_metric_c{ns=x,phase=Running,plugin=a.wasm} 2\n"; got != want {
		t.Fatalf("changed declaration: got %q, want %q", got, want)
	}
	if got := r.Plugin("a.wasm", 0).Series(); got != 1 {
		t.Errorf("series after replace = %d, want 1", got)
	}
}

func TestNamesAcrossPlugins(t *testing.T) {
	r := New(Options{})
	a := r.Plugin("a.wasm", 0).Instance()
	b := r.Plugin("b.wasm", 0).Instance()
	if id := a.Declare(abi.MetricCounter, []byte(`{"name":"c","help":"h"}`)); id < 0 {
		t.Fatal(id)
	}
	if got := b.Declare(abi.MetricGauge, []byte(`{"name":"c","help":"h"}`)); got != abi.ErrExists {
		t.Errorf("other kind: %d, want ErrExists", got)
	}
	if got := b.Declare(abi.MetricCounter, []byte(`{"name":"c","help":"other"}`)); got != abi.ErrExists {
		t.Errorf("other help: %d, want ErrExists", got)
	}
	if got := b.Declare(abi.MetricCounter, []byte(`{"name":"c","help":"h","labels":["x"]}`)); got < 0 {
		t.Errorf("same kind and help: %d", got)
	}
	// a itself may change its declaration only if b does not share it.
	if got := a.Declare(abi.MetricGauge, []byte(`{"name":"c","help":"h"}`)); got != abi.ErrExists {
		t.Errorf("a changing a shared name: %d, want ErrExists", got)
	}
	scrape(t, r, "informer_host_plugin_metric_c") // gathers without error
	r.Forget("b.wasm")
	if got := a.Declare(abi.MetricGauge, []byte(`{"name":"c","help":"h"}`)); got < 0 {
		t.Errorf("a changing its name once b is gone: %d", got)
	}
}

func TestSeriesCap(t *testing.T) {
	r := New(Options{})
	s := r.Plugin("a.wasm", 3)
	v := s.Instance()
	g := v.Declare(abi.MetricGauge, []byte(`{"name":"g"}`)) // 1 series
	c := v.Declare(abi.MetricCounter, []byte(`{"name":"c","labels":["k"]}`))
	for i := 0; i < 10; i++ {
		want := int32(0)
		if i >= 2 {
			want = abi.MetricDropped
		}
		if got := v.Add(c, 1, labels(fmt.Sprint(i))); got != want {
			t.Errorf("add %d: %d, want %d", i, got, want)
		}
	}
	if got := v.Add(c, -1, labels("new")); got != abi.ErrInvalid {
		t.Errorf("negative add past the cap: %d, want ErrInvalid", got)
	}
	if got := v.Add(c, 1, labels("0")); got != 0 {
		t.Errorf("existing series past the cap: %d, want 0", got)
	}
	if got := v.Set(g, 1, nil); got != 0 {
		t.Errorf("gauge: %d", got)
	}
	if s.Series() != 3 || s.Dropped() != 8 {
		t.Errorf("series %d dropped %d, want 3 and 8", s.Series(), s.Dropped())
	}
	want := "informer_host_plugin_metrics_dropped_total{plugin=a.wasm} 8\n"
	if got := scrape(t, r, "informer_host_plugin_metrics_dropped_total"); got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	// A metric without labels declared past the cap has no series.
	v.Declare(abi.MetricCounter, []byte(`{"name":"full"}`))
	if got := v.Add(2, 1, nil); got != abi.MetricDropped {
		t.Errorf("no-label metric past the cap: %d", got)
	}
}

func TestMaxMetrics(t *testing.T) {
	v := New(Options{}).Plugin("a.wasm", 0).Instance()
	for i := 0; i < MaxMetrics; i++ {
		if id := v.Declare(abi.MetricCounter, []byte(fmt.Sprintf(`{"name":"m%d"}`, i))); id != int32(i) {
			t.Fatalf("declare %d: %d", i, id)
		}
	}
	if got := v.Declare(abi.MetricCounter, []byte(`{"name":"one_more"}`)); got != abi.ErrInvalid {
		t.Errorf("past MaxMetrics: %d", got)
	}
	if got := v.Declare(abi.MetricCounter, []byte(`{"name":"m0"}`)); got != 0 {
		t.Errorf("redeclaring m0: %d, want its id 0", got)
	}
}

func TestForget(t *testing.T) {
	r := New(Options{})
	v := r.Plugin("a.wasm", 0).Instance()
	c := v.Declare(abi.MetricCounter, []byte(`{"name":"c","labels":["k"]}`))
	v.Add(c, 1, labels("x"))
	r.Forget("a.wasm")
	if got := scrape(t, r, "informer_host_plugin_metric_c", "informer_host_plugin_metrics_series"); got != "" {
		t.Errorf("after Forget: %q", got)
	}
	if got := v.Add(c, 1, labels("y")); got != abi.MetricDropped {
		t.Errorf("update after Forget: %d", got)
	}
	if got := v.Declare(abi.MetricCounter, []byte(`{"name":"d"}`)); got != abi.ErrInvalid {
		t.Errorf("declare after Forget: %d", got)
	}
	// The file coming back starts empty.
	v2 := r.Plugin("a.wasm", 0).Instance()
	c2 := v2.Declare(abi.MetricCounter, []byte(`{"name":"c","labels":["k"]}`))
	v2.Add(c2, 1, labels("x"))
	if got, want := scrape(t, r, "informer_host_plugin_metric_c"), "informer_host_plugin_metric_c{k=x,plugin=a.wasm} 1\n"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}

func BenchmarkAdd(b *testing.B) {
	v := New(Options{}).Plugin("a.wasm", 0).Instance()
	nl := v.Declare(abi.MetricCounter, []byte(`{"name":"nl"}`))
	lab := v.Declare(abi.MetricCounter, []byte(`{"name":"lab","labels":["namespace","phase"]}`))
	ls := labels("default", "Running")
	pc := prometheus.NewCounter(prometheus.CounterOpts{Name: "x"})
	b.Run("prometheus", func(b *testing.B) {
		for b.Loop() {
			pc.Add(1)
		}
	})
	b.Run("nolabels", func(b *testing.B) {
		for b.Loop() {
			v.Add(nl, 1, nil)
		}
	})
	b.Run("labels", func(b *testing.B) {
		for b.Loop() {
			v.Add(lab, 1, ls)
		}
	})
}

// Updates, scrapes, redeclarations and Forget at once (run with -race):
// the counts stay within the cap and the budget, and nothing panics.
func TestConcurrent(t *testing.T) {
	const budget = 2 << 10 // fewer bytes than 20 series take
	r := New(Options{})
	s := r.PluginLimits("a.wasm", Limits{MaxSeries: 20, MaxBytes: budget})
	reg := prometheus.NewRegistry()
	reg.MustRegister(r)
	done := make(chan struct{})
	var wg sync.WaitGroup
	for w := range 2 {
		wg.Go(func() {
			v := s.Instance()
			for i := 0; ; i++ {
				select {
				case <-done:
					return
				default:
				}
				help := "h"
				if i%50 == 0 && w == 1 {
					help = fmt.Sprint("h", i) // a changed declaration now and then
				}
				id := v.Declare(abi.MetricCounter, []byte(`{"name":"c","help":"`+help+`","labels":["k"]}`))
				if id >= 0 {
					v.Add(id, 1, labels(fmt.Sprint(i%30)))
				}
			}
		})
	}
	wg.Go(func() {
		for {
			select {
			case <-done:
				return
			default:
			}
			if _, err := reg.Gather(); err != nil {
				t.Error(err)
				return
			}
		}
	})
	for range 200 {
		if n := s.Series(); n > 20 || n < 0 {
			t.Fatalf("series %d", n)
		}
		if b := s.Bytes(); b > budget || b < 0 {
			t.Fatalf("bytes %d, budget %d", b, budget)
		}
	}
	close(done)
	wg.Wait()
}

func TestLabelValueLength(t *testing.T) {
	v := New(Options{}).Plugin("a.wasm", 0).Instance()
	c := v.Declare(abi.MetricCounter, []byte(`{"name":"c","labels":["a","b"]}`))
	for _, tc := range []struct {
		name string
		a, b string
		want int32
	}{
		{"longest value", strings.Repeat("x", MaxLabelValueLen), "y", 0},
		{"one byte too long", strings.Repeat("x", MaxLabelValueLen+1), "y", abi.ErrInvalid},
		{"second value too long", "x", strings.Repeat("y", MaxLabelValueLen+1), abi.ErrInvalid},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := v.Add(c, 1, labels(tc.a, tc.b)); got != tc.want {
				t.Errorf("got %d, want %d", got, tc.want)
			}
		})
	}
}

// exported returns the text exposition of the plugin metrics r exports,
// without the registry's own.
func exported(t *testing.T, r *Registry) string {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(r)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatalf("gather: %v", err)
	}
	var b strings.Builder
	for _, mf := range mfs {
		if strings.HasPrefix(mf.GetName(), "informer_host_plugin_metric_") {
			if _, err := expfmt.MetricFamilyToText(&b, mf); err != nil {
				t.Fatal(err)
			}
		}
	}
	return b.String()
}

// The byte budget: a plugin that fills it with the costliest series it can
// declare exports no more than it is charged, gets ERR_QUOTA past it, and
// gets the bytes back when a declaration is replaced or its file removed.
func TestSeriesBudget(t *testing.T) {
	long := strings.Repeat(`"`, MaxLabelValueLen/4) // every byte escaped
	var buckets []string
	for i := range MaxBuckets {
		buckets = append(buckets, fmt.Sprintf("%g", 1e-300*math.Pow(1.7, float64(i))))
	}
	for _, tc := range []struct {
		name   string
		kind   int32
		decl   string
		values func(i int) []byte
	}{
		{"counter, short labels", abi.MetricCounter, `{"name":"c","labels":["k"]}`,
			func(i int) []byte { return labels(fmt.Sprint(i)) }},
		{"gauge, escaped labels", abi.MetricGauge, `{"name":"g","help":"\\\n\\\n","labels":["a","b","c","d"]}`,
			func(i int) []byte { return labels(fmt.Sprint(i), long, long, long) }},
		{"histogram, every bucket, the longest labels", abi.MetricHistogram,
			`{"name":"` + strings.Repeat("h", MaxNameLen) + `","help":"` + strings.Repeat("x", MaxHelpLen) +
				`","labels":["a","b","c","d"],"buckets":[` + strings.Join(buckets, ",") + `]}`,
			func(i int) []byte {
				v := strings.Repeat("v", MaxLabelValueLen-1)
				return labels(fmt.Sprintf("%04d", i)+v[4:], v, v, v)
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const budget = DefaultMaxBytes
			r := New(Options{})
			s := r.PluginLimits("a-plugin-with-a-long-file-name.wasm", Limits{MaxSeries: 100000, MaxBytes: budget})
			v := s.Instance()
			id := v.Declare(tc.kind, []byte(tc.decl))
			if id < 0 {
				t.Fatalf("declare: %d", id)
			}
			added := 0
			for i := 0; ; i++ {
				got := v.Add(id, 1, tc.values(i))
				if tc.kind == abi.MetricHistogram {
					got = v.Observe(id, 1, tc.values(i))
				}
				if got == abi.ErrQuota {
					break
				}
				if got != 0 {
					t.Fatalf("update %d: %d", i, got)
				}
				added++
			}
			if added == 0 {
				t.Fatal("no series fit the budget")
			}
			text := exported(t, r)
			t.Logf("%d series, exported %d bytes, charged %d", added, len(text), s.Bytes())
			if n := int64(len(text)); n > s.Bytes() || s.Bytes() > budget {
				t.Errorf("exported %d bytes, charged %d, budget %d: want exported <= charged <= budget", n, s.Bytes(), budget)
			}
			if s.Dropped() != 1 {
				t.Errorf("dropped %d, want 1 (the update past the budget)", s.Dropped())
			}
			if got := v.Add(id, 1, tc.values(0)); tc.kind != abi.MetricHistogram && got != 0 {
				t.Errorf("existing series past the budget: %d, want 0", got)
			}
			// A replacing declaration is charged after the old one gave its
			// bytes back.
			if got := v.Declare(abi.MetricCounter, []byte(`{"name":"`+strings.SplitN(tc.decl, `"`, 5)[3]+`","help":"new"}`)); got < 0 {
				t.Errorf("replacing declaration: %d", got)
			}
			if s.Bytes() >= budget/2 {
				t.Errorf("after the replacement %d bytes are charged", s.Bytes())
			}
			r.Forget(s.file)
			if s.Bytes() != 0 {
				t.Errorf("after Forget %d bytes are charged", s.Bytes())
			}
		})
	}
}

func TestDeclarationBudget(t *testing.T) {
	for _, tc := range []struct {
		name   string
		budget int64
		decl   string
		want   int32
	}{
		{"fits", 1 << 10, `{"name":"c","labels":["k"]}`, 0},
		{"help past the budget", 1 << 10, `{"name":"c","help":"` + strings.Repeat("x", 1<<10) + `"}`, abi.ErrQuota},
		{"a no-label metric with its series", 200, `{"name":"c"}`, abi.ErrQuota},
		{"the same with labels: no series yet", 200, `{"name":"c","labels":["k"]}`, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := New(Options{}).PluginLimits("a.wasm", Limits{MaxBytes: tc.budget})
			if got := s.Instance().Declare(abi.MetricCounter, []byte(tc.decl)); (got >= 0) != (tc.want == 0) || got < 0 && got != tc.want {
				t.Errorf("got %d, want %d", got, tc.want)
			}
			if s.Bytes() > tc.budget {
				t.Errorf("charged %d past the budget %d", s.Bytes(), tc.budget)
			}
		})
	}
}
