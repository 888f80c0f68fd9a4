package pluginmetrics

import (
	"bytes"
	"encoding/json"
	"math"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/informer-host/informer-host/abi"
)

// Bounds on what one plugin can declare. They are part of the ABI
// (ABI.md §16.3): a declaration past them is ERR_INVALID.
const (
	MaxMetrics       = 128      // metrics one plugin may have declared at once
	MaxNameLen       = 100      // bytes of a metric name, before the prefix
	MaxHelpLen       = 1024     // bytes of help text
	MaxLabels        = 16       // label keys of one metric
	MaxBuckets       = 64       // histogram buckets
	MaxLabelBytes    = 4096     // bytes of all label values of one update
	MaxLabelValueLen = 1024     // bytes of one label value
	MaxDeclBytes     = 16 << 10 // bytes of one declaration
	DefaultMaxSeries = 1000     // series of one plugin when the grant names no cap
	DefaultMaxBytes  = 1 << 20  // bytes one plugin's metrics may add to a /metrics response when the grant names no budget
	maxViewIDs       = 4 * MaxMetrics
)

// Options configure a Registry.
type Options struct {
	// Prefix is put before every plugin metric's name. Default
	// "informer_host_plugin_metric_": a sub-prefix of its own, so a
	// plugin's name can never collide with one of the host's metrics.
	Prefix string
	// PluginLabel is the label holding the plugin's file name, reserved:
	// a plugin may not declare it. Default "plugin".
	PluginLabel string
	// DroppedName, SeriesName and BytesName name the registry's own
	// metrics. Defaults informer_host_plugin_metrics_dropped_total,
	// informer_host_plugin_metrics_series and
	// informer_host_plugin_metrics_bytes.
	DroppedName, SeriesName, BytesName string
}

// Limits bound what one plugin's metrics may hold. Zero fields take the
// defaults.
type Limits struct {
	// MaxSeries caps the series; an update that would create one more is
	// dropped (abi.MetricDropped). Default DefaultMaxSeries.
	MaxSeries int
	// MaxBytes caps what the plugin's metrics add to a /metrics response,
	// as the declarations and series cost it (see the cost functions
	// below); a declaration or a new series past it is abi.ErrQuota.
	// Default DefaultMaxBytes.
	MaxBytes int64
}

func (o Options) withDefaults() Options {
	if o.Prefix == "" {
		o.Prefix = "informer_host_plugin_metric_"
	}
	if o.PluginLabel == "" {
		o.PluginLabel = "plugin"
	}
	if o.DroppedName == "" {
		o.DroppedName = "informer_host_plugin_metrics_dropped_total"
	}
	if o.SeriesName == "" {
		o.SeriesName = "informer_host_plugin_metrics_series"
	}
	if o.BytesName == "" {
		o.BytesName = "informer_host_plugin_metrics_bytes"
	}
	return o
}

// Registry holds every plugin's metrics. It is a prometheus.Collector; it
// is unchecked (Describe sends nothing) because what it exports changes as
// plugins declare metrics.
type Registry struct {
	opts                               Options
	descDropped, descSeries, descBytes *prometheus.Desc

	// mu guards sets, names, and every Set's families and dead flag:
	// declarations are rare (once per instance start), so one lock for
	// them keeps cross-plugin name checks simple. The update path never
	// takes it.
	mu   sync.Mutex
	sets map[string]*Set
	// names counts, per exported name, the plugins' families using it, so
	// two plugins can share a name only with the same kind and help (a
	// Prometheus family has one type and one help).
	names map[string]*nameUse
}

type nameUse struct {
	kind int32
	help string
	n    int
}

// New returns an empty Registry.
func New(o Options) *Registry {
	o = o.withDefaults()
	return &Registry{
		opts: o,
		descDropped: prometheus.NewDesc(o.DroppedName,
			"Plugin metric updates dropped because they would have created a series past the plugin's maxSeries or maxBytes.",
			[]string{o.PluginLabel}, nil),
		descSeries: prometheus.NewDesc(o.SeriesName,
			"Series of the plugin's own metrics the host holds.", []string{o.PluginLabel}, nil),
		descBytes: prometheus.NewDesc(o.BytesName,
			"Bytes the plugin's own metrics are charged against its maxBytes: about what they add to a /metrics response.",
			[]string{o.PluginLabel}, nil),
		sets:  map[string]*Set{},
		names: map[string]*nameUse{},
	}
}

// Plugin is PluginLimits with only a series cap (maxSeries <= 0 selects
// DefaultMaxSeries) and the default byte budget.
func (r *Registry) Plugin(file string, maxSeries int) *Set {
	return r.PluginLimits(file, Limits{MaxSeries: maxSeries})
}

// PluginLimits returns the Set of the plugin file, creating it on first
// use, and sets its limits. A lower limit than before keeps existing
// series and refuses new ones.
func (r *Registry) PluginLimits(file string, l Limits) *Set {
	if l.MaxSeries <= 0 {
		l.MaxSeries = DefaultMaxSeries
	}
	if l.MaxBytes <= 0 {
		l.MaxBytes = DefaultMaxBytes
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	s := r.sets[file]
	if s == nil {
		s = &Set{r: r, file: file, families: map[string]*family{}}
		r.sets[file] = s
	}
	s.maxSeries.Store(int64(l.MaxSeries))
	s.maxBytes.Store(l.MaxBytes)
	return s
}

// Budget is the sum of the byte budgets of the plugins that have metrics:
// a bound on what their series add to a /metrics response.
func (r *Registry) Budget() int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	var n int64
	for _, s := range r.sets {
		n += s.maxBytes.Load()
	}
	return n
}

// Forget drops the plugin's metrics and their series (its file was
// removed). Views of its instances keep working but update nothing that
// is exported, and create no series.
func (r *Registry) Forget(file string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := r.sets[file]
	if s == nil {
		return
	}
	delete(r.sets, file)
	for name, f := range s.families {
		r.retire(f)
		delete(s.families, name)
	}
	s.dead = true
}

// retire stops exporting f. r.mu must be held.
func (r *Registry) retire(f *family) {
	f.live.Store(false)
	if u := r.names[f.fullName]; u != nil {
		if u.n--; u.n <= 0 {
			delete(r.names, f.fullName)
		}
	}
	f.mu.Lock()
	f.set.series.Add(-int64(len(f.series)))
	f.set.bytes.Add(-f.bytes)
	f.series, f.bytes = nil, 0
	f.mu.Unlock()
}

// Describe implements prometheus.Collector. It sends nothing: the
// registry is an unchecked collector.
func (r *Registry) Describe(chan<- *prometheus.Desc) {}

// Collect implements prometheus.Collector.
func (r *Registry) Collect(ch chan<- prometheus.Metric) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for file, s := range r.sets {
		ch <- prometheus.MustNewConstMetric(r.descDropped, prometheus.CounterValue, float64(s.dropped.Load()), file)
		ch <- prometheus.MustNewConstMetric(r.descSeries, prometheus.GaugeValue, float64(s.series.Load()), file)
		ch <- prometheus.MustNewConstMetric(r.descBytes, prometheus.GaugeValue, float64(s.bytes.Load()), file)
		for _, f := range s.families {
			f.collect(ch)
		}
	}
}

// Set is one plugin's metrics. It outlives the plugin's instances.
type Set struct {
	r    *Registry
	file string

	maxSeries atomic.Int64
	series    atomic.Int64 // series held by the live families
	maxBytes  atomic.Int64
	bytes     atomic.Int64 // the cost of the live families and their series
	dropped   atomic.Uint64

	// families and dead are guarded by r.mu.
	families map[string]*family // by the plugin's name for the metric
	dead     bool
}

// Dropped returns how many updates were dropped by the series cap or the
// byte budget.
func (s *Set) Dropped() uint64 { return s.dropped.Load() }

// Bytes returns what the plugin's metrics are charged against its byte
// budget.
func (s *Set) Bytes() int64 { return s.bytes.Load() }

// Series returns how many series the plugin's metrics hold.
func (s *Set) Series() int64 { return s.series.Load() }

// Instance returns a View for one new instance of the plugin.
func (s *Set) Instance() *View { return &View{s: s} }

// Decl is a metric declaration, as a plugin passes it to metric_declare
// (JSON, ABI.md §16.3) with the kind as a separate argument.
type Decl struct {
	Name    string    `json:"name"`
	Help    string    `json:"help"`
	Labels  []string  `json:"labels"`
	Buckets []float64 `json:"buckets"`
}

// family is one declared metric of one plugin, exported as one Prometheus
// vector with the plugin label constant.
type family struct {
	set      *Set
	kind     int32
	decl     Decl
	fullName string
	// live is false once the family is replaced or its plugin forgotten;
	// it then creates no series, and is not collected.
	live atomic.Bool

	counters   *prometheus.CounterVec
	gauges     *prometheus.GaugeVec
	histograms *prometheus.HistogramVec
	collector  prometheus.Collector

	// noLabel is the only series of a metric without label keys, made at
	// declaration, so the common case skips the map.
	noLabel *series

	// lineBytes is what each exported line of a series costs before its
	// label values; lines is how many lines a series exports.
	lineBytes, lines int64

	// mu guards series and bytes. Readers are every update of an existing
	// series (RLock); a writer only adds a series or drops them all.
	mu     sync.RWMutex
	series map[string]*series // by the raw label bytes the plugin passed
	// bytes is what this family is charged in set.bytes: its declaration
	// and its series, given back when it is retired.
	bytes int64
}

// series is one labelled child; exactly one field is set.
type series struct {
	c prometheus.Counter
	g prometheus.Gauge
	o prometheus.Observer
}

func (f *family) collect(ch chan<- prometheus.Metric) { f.collector.Collect(ch) }

// sameShape reports whether a redeclaration keeps the metric.
func (f *family) sameShape(kind int32, d *Decl) bool {
	return f.kind == kind && f.decl.Help == d.Help && slices.Equal(f.decl.Labels, d.Labels) &&
		slices.Equal(f.decl.Buckets, d.Buckets)
}

// child makes the series for label values vs.
func (f *family) child(vs []string) (*series, error) {
	switch f.kind {
	case abi.MetricCounter:
		c, err := f.counters.GetMetricWithLabelValues(vs...)
		return &series{c: c}, err
	case abi.MetricGauge:
		g, err := f.gauges.GetMetricWithLabelValues(vs...)
		return &series{g: g}, err
	default:
		o, err := f.histograms.GetMetricWithLabelValues(vs...)
		return &series{o: o}, err
	}
}

// View is one instance's handle on its plugin's Set. Its id table is used
// by one goroutine at a time: the engine serialises an instance's calls.
type View struct {
	s   *Set
	ids []*family
}

// Declare parses and validates a declaration and returns the id of the
// metric, or a negative ABI code: ERR_INVALID for a malformed or
// out-of-bounds declaration, ERR_EXISTS when another plugin exports the
// name with another kind or help, ERR_QUOTA when it does not fit the
// plugin's byte budget.
func (v *View) Declare(kind int32, decl []byte) int32 {
	r := v.s.r
	d, ok := parseDecl(kind, decl, r.opts.PluginLabel)
	if !ok {
		return abi.ErrInvalid
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	s := v.s
	if s.dead {
		return abi.ErrInvalid
	}
	f := s.families[d.Name]
	if f == nil || !f.sameShape(kind, &d) {
		full := r.opts.Prefix + d.Name
		if u := r.names[full]; u != nil {
			mine := 0
			if f != nil {
				mine = 1 // our own old declaration goes away
			}
			if u.n > mine && (u.kind != kind || u.help != d.Help) {
				return abi.ErrExists
			}
		}
		if f == nil && len(s.families) >= MaxMetrics {
			return abi.ErrInvalid
		}
		// The declaration and, without labels, its one series are charged
		// here, before the metric exists.
		cost := r.declCost(&d)
		if len(d.Labels) == 0 {
			cost += r.lines(kind, &d) * r.lineCost(s.file, &d)
		}
		if !s.chargeReplacing(f, cost) {
			return abi.ErrQuota
		}
		if f != nil {
			r.retire(f)
		}
		f = r.newFamily(s, kind, d, full, cost)
		s.families[d.Name] = f
		if u := r.names[full]; u != nil {
			u.n++
		} else {
			r.names[full] = &nameUse{kind: kind, help: d.Help, n: 1}
		}
	}
	for i, g := range v.ids {
		if g == f {
			return int32(i)
		}
	}
	if len(v.ids) >= maxViewIDs {
		return abi.ErrInvalid
	}
	v.ids = append(v.ids, f)
	return int32(len(v.ids) - 1)
}

// newFamily makes the metric of d, whose declaration and no-label series
// the caller has charged to s as cost.
func (r *Registry) newFamily(s *Set, kind int32, d Decl, full string, cost int64) *family {
	f := &family{set: s, kind: kind, decl: d, fullName: full,
		lineBytes: r.lineCost(s.file, &d), lines: r.lines(kind, &d), bytes: cost}
	cl := prometheus.Labels{r.opts.PluginLabel: s.file}
	switch kind {
	case abi.MetricCounter:
		f.counters = prometheus.NewCounterVec(prometheus.CounterOpts{Name: full, Help: d.Help, ConstLabels: cl}, d.Labels)
		f.collector = f.counters
	case abi.MetricGauge:
		f.gauges = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: full, Help: d.Help, ConstLabels: cl}, d.Labels)
		f.collector = f.gauges
	default:
		f.histograms = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: full, Help: d.Help, ConstLabels: cl, Buckets: d.Buckets}, d.Labels)
		f.collector = f.histograms
	}
	if len(d.Labels) == 0 {
		// A metric without labels has its one series from the start, so a
		// plugin that declares it shows it at zero before the first update.
		// Past the series cap it has none, and its bytes go back.
		if s.series.Add(1) > s.maxSeries.Load() {
			s.series.Add(-1)
		} else if sr, err := f.child(nil); err != nil {
			s.series.Add(-1)
		} else {
			f.noLabel = sr
			f.series = map[string]*series{"": sr}
		}
		if f.noLabel == nil {
			s.bytes.Add(-f.lines * f.lineBytes)
			f.bytes -= f.lines * f.lineBytes
		}
	}
	f.live.Store(true)
	return f
}

// What declarations and series cost against a plugin's byte budget: at
// least the bytes they add to a /metrics response in the Prometheus text
// format (escapes included; the protobuf format and gzip are smaller), so
// the sum of the budgets bounds what plugins add to a response. The
// constants cover the punctuation, a histogram's suffixes and le label,
// and a value written at full float64 length.
const (
	familyOverhead = 32 // "# HELP ", "# TYPE ", " histogram", newlines, on top of the prefix twice
	lineOverhead   = 96 // braces, plugin="", le="…", the value, the newline, on top of the prefix and the plugin label
	labelOverhead  = 4  // ="", around one value
)

// declCost is what a declaration's # HELP and # TYPE lines cost.
func (r *Registry) declCost(d *Decl) int64 {
	return int64(familyOverhead + 2*(len(r.opts.Prefix)+len(d.Name)) + escapedLen(d.Help))
}

// lineCost is what each exported line of a series of d costs before its
// label values.
func (r *Registry) lineCost(file string, d *Decl) int64 {
	n := lineOverhead + len(r.opts.Prefix) + len(d.Name) + len(r.opts.PluginLabel) + escapedLen(file)
	for _, k := range d.Labels {
		n += len(k) + labelOverhead
	}
	return int64(n)
}

// lines is how many lines one series of d exports: a histogram's buckets,
// its +Inf bucket, _sum and _count.
func (r *Registry) lines(kind int32, d *Decl) int64 {
	if kind == abi.MetricHistogram {
		return int64(len(d.Buckets) + 3)
	}
	return 1
}

// escapedLen is len(s) once the text format has escaped it (a backslash,
// a double quote and a newline take two bytes).
func escapedLen(s string) int {
	n := len(s)
	for i := 0; i < len(s); i++ {
		if c := s[i]; c == '\\' || c == '"' || c == '\n' {
			n++
		}
	}
	return n
}

// charge takes n bytes of the budget, or reports that they do not fit.
func (s *Set) charge(n int64) bool {
	if s.bytes.Add(n) > s.maxBytes.Load() {
		s.bytes.Add(-n)
		return false
	}
	return true
}

// chargeReplacing charges cost for a declaration that replaces old (or
// nil): it must fit once old's bytes are given back, and a refusal keeps
// old. On success old's bytes are given back already, so retiring it
// gives back only the series it creates meanwhile.
func (s *Set) chargeReplacing(old *family, cost int64) bool {
	if old == nil {
		return s.charge(cost)
	}
	old.mu.Lock() // no new series of old while its bytes move
	defer old.mu.Unlock()
	if !s.charge(cost - old.bytes) {
		return false
	}
	old.bytes = 0
	return true
}

// parseDecl decodes and validates a declaration.
func parseDecl(kind int32, b []byte, pluginLabel string) (Decl, bool) {
	var d Decl
	if kind != abi.MetricCounter && kind != abi.MetricGauge && kind != abi.MetricHistogram {
		return d, false
	}
	if len(b) > MaxDeclBytes || !utf8.Valid(b) {
		return d, false
	}
	// Unknown fields are refused, so a plugin written for a later
	// declaration format learns that this host does not have it.
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&d); err != nil || dec.More() {
		return d, false
	}
	if !validName(d.Name, MaxNameLen) || len(d.Help) > MaxHelpLen || !utf8.ValidString(d.Help) {
		return d, false
	}
	for _, suffix := range []string{"_count", "_sum", "_bucket"} {
		// A histogram exports these; a metric ending in one could collide
		// with another plugin's histogram and break the whole scrape.
		if strings.HasSuffix(d.Name, suffix) {
			return d, false
		}
	}
	if len(d.Labels) > MaxLabels {
		return d, false
	}
	seen := map[string]bool{}
	for _, l := range d.Labels {
		if !validName(l, MaxNameLen) || strings.HasPrefix(l, "__") || l == pluginLabel || seen[l] ||
			(kind == abi.MetricHistogram && l == "le") {
			return d, false
		}
		seen[l] = true
	}
	if kind != abi.MetricHistogram {
		if len(d.Buckets) != 0 {
			return d, false
		}
		d.Buckets = nil
	} else {
		if len(d.Buckets) == 0 {
			d.Buckets = prometheus.DefBuckets
		}
		if len(d.Buckets) > MaxBuckets || !sort.Float64sAreSorted(d.Buckets) {
			return d, false
		}
		for i, x := range d.Buckets {
			if math.IsNaN(x) || math.IsInf(x, 0) || (i > 0 && x == d.Buckets[i-1]) {
				return d, false
			}
		}
	}
	if d.Labels == nil {
		d.Labels = []string{}
	}
	return d, true
}

// validName applies Prometheus' rule for metric names and label keys,
// without the colon (reserved for recording rules).
func validName(s string, max int) bool {
	if s == "" || len(s) > max {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || i > 0 && c >= '0' && c <= '9' {
			continue
		}
		return false
	}
	return true
}

// Add adds x to a counter or gauge series. A counter takes only finite
// x >= 0. It returns 0, abi.MetricDropped, ERR_INVALID (unknown id,
// wrong kind, bad value, wrong or too long label values), checked in that
// order, or ERR_QUOTA when a new series does not fit the byte budget.
func (v *View) Add(id int32, x float64, labels []byte) int32 {
	f := v.family(id)
	if f == nil {
		return abi.ErrInvalid
	}
	switch f.kind {
	case abi.MetricCounter:
		if !(x >= 0) || math.IsInf(x, 1) {
			return abi.ErrInvalid
		}
		sr, code := f.resolve(labels)
		if sr == nil {
			return code
		}
		sr.c.Add(x)
		return 0
	case abi.MetricGauge:
		if math.IsNaN(x) {
			return abi.ErrInvalid
		}
		sr, code := f.resolve(labels)
		if sr == nil {
			return code
		}
		sr.g.Add(x)
		return 0
	}
	return abi.ErrInvalid
}

// Set sets a gauge series to x.
func (v *View) Set(id int32, x float64, labels []byte) int32 {
	f := v.family(id)
	if f == nil || f.kind != abi.MetricGauge || math.IsNaN(x) {
		return abi.ErrInvalid
	}
	sr, code := f.resolve(labels)
	if sr == nil {
		return code
	}
	sr.g.Set(x)
	return 0
}

// Observe records x in a histogram series.
func (v *View) Observe(id int32, x float64, labels []byte) int32 {
	f := v.family(id)
	if f == nil || f.kind != abi.MetricHistogram || math.IsNaN(x) {
		return abi.ErrInvalid
	}
	sr, code := f.resolve(labels)
	if sr == nil {
		return code
	}
	sr.o.Observe(x)
	return 0
}

func (v *View) family(id int32) *family {
	if id < 0 || int(id) >= len(v.ids) {
		return nil
	}
	return v.ids[id]
}

// resolve finds the series of the plugin's label bytes (values separated
// by a zero byte). It returns a series and 0, or nil and the code:
// abi.MetricDropped when the update is to be dropped (past the series
// cap, or the family is no longer exported), abi.ErrQuota past the byte
// budget, else an error.
func (f *family) resolve(labels []byte) (*series, int32) {
	if len(f.decl.Labels) == 0 {
		if len(labels) != 0 {
			return nil, abi.ErrInvalid
		}
		if f.noLabel == nil {
			f.set.dropped.Add(1)
			return nil, abi.MetricDropped
		}
		if !f.live.Load() {
			return nil, abi.MetricDropped
		}
		return f.noLabel, 0
	}
	if len(labels) > MaxLabelBytes {
		return nil, abi.ErrInvalid
	}
	f.mu.RLock()
	sr, ok := f.series[string(labels)]
	f.mu.RUnlock()
	if ok {
		return sr, 0
	}
	return f.newSeries(labels)
}

// newSeries validates label values and creates their series, within the
// plugin's cap.
func (f *family) newSeries(labels []byte) (*series, int32) {
	if !utf8.Valid(labels) {
		return nil, abi.ErrInvalid
	}
	vs := strings.Split(string(labels), "\x00")
	if len(vs) != len(f.decl.Labels) {
		return nil, abi.ErrInvalid
	}
	cost := f.lineBytes
	for _, v := range vs {
		if len(v) > MaxLabelValueLen {
			return nil, abi.ErrInvalid
		}
		cost += int64(escapedLen(v))
	}
	cost *= f.lines
	s := f.set
	f.mu.Lock()
	defer f.mu.Unlock()
	if sr, ok := f.series[string(labels)]; ok {
		return sr, 0
	}
	if !f.live.Load() {
		return nil, abi.MetricDropped
	}
	if s.series.Add(1) > s.maxSeries.Load() {
		s.series.Add(-1)
		s.dropped.Add(1)
		return nil, abi.MetricDropped
	}
	if !s.charge(cost) {
		s.series.Add(-1)
		s.dropped.Add(1)
		return nil, abi.ErrQuota
	}
	sr, err := f.child(vs)
	if err != nil {
		s.series.Add(-1)
		s.bytes.Add(-cost)
		return nil, abi.ErrInvalid
	}
	if f.series == nil {
		f.series = map[string]*series{}
	}
	f.series[string(labels)] = sr
	f.bytes += cost
	return sr, 0
}
