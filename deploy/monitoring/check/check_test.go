package check

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/rulefmt"
	"github.com/prometheus/prometheus/promql/parser"
	"gopkg.in/yaml.v3"
)

const dir = ".."

// synthetic are series a query may name that Prometheus makes, not the
// daemon: up is the scrape's own.
var synthetic = map[string][]string{"up": nil}

// targetLabels are the labels the scrape adds to every series: instance
// and job always, the rest as the Prometheus Operator's ServiceMonitor
// and Kubernetes service discovery's usual relabeling set them.
var targetLabels = map[string]bool{"instance": true, "job": true, "namespace": true, "pod": true,
	"service": true, "endpoint": true, "container": true}

// series are the names a query may use, each with its label names.
type series map[string]map[string]bool

// exposed reads metrics.txt: the series the daemon serves, each line a
// name and its label names.
func exposed(t *testing.T) series {
	t.Helper()
	f, err := os.Open(filepath.Join(dir, "metrics.txt"))
	if err != nil {
		t.Fatalf("%v: write it with UPDATE_METRIC_NAMES=1 go test ./internal/server -run TestMetricNames (in the repository's root)", err)
	}
	defer f.Close()
	known := series{}
	add := func(name string, labels []string) {
		known[name] = map[string]bool{}
		for _, l := range labels {
			known[name][l] = true
		}
	}
	for name, ls := range synthetic {
		add(name, ls)
	}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if l := strings.TrimSpace(sc.Text()); l != "" && !strings.HasPrefix(l, "#") {
			fs := strings.Fields(l)
			add(fs[0], fs[1:])
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if len(known) < 20 {
		t.Fatalf("metrics.txt lists %d names: not the daemon's list", len(known))
	}
	return known
}

var promql = parser.NewParser(parser.Options{})

// problems parses expr and says what in it is wrong: it does not parse,
// a selector names no metric or one the daemon does not expose, a
// selector matches on a label its series do not have, an aggregation
// groups by or a binary operation matches on a label none of the series
// under it has.
func problems(expr string, known series) []string {
	e, err := promql.ParseExpr(expr)
	if err != nil {
		return []string{err.Error()}
	}
	var out []string
	selectors := 0
	parser.Inspect(e, func(n parser.Node, _ []parser.Node) error {
		switch n := n.(type) {
		case *parser.VectorSelector:
			selectors++
			name := selectorName(n)
			ls, ok := known[name]
			switch {
			case name == "":
				out = append(out, fmt.Sprintf("selector %s names no metric", n))
				return nil
			case !ok:
				out = append(out, name+" is not a series the daemon exposes (metrics.txt; a histogram's are name_bucket, _sum, _count)")
				return nil
			}
			for _, m := range n.LabelMatchers {
				if m.Name != labels.MetricName && !ls[m.Name] && !targetLabels[m.Name] {
					out = append(out, fmt.Sprintf("%s has no label %s (it has %s)", name, m.Name, labelList(ls)))
				}
			}
		case *parser.AggregateExpr:
			if !n.Without {
				out = append(out, missing("by", n.Grouping, under(n.Expr, known))...)
			}
		case *parser.BinaryExpr:
			if n.VectorMatching != nil && n.VectorMatching.On {
				out = append(out, missing("on", n.VectorMatching.MatchingLabels, under(n, known))...)
			}
		}
		return nil
	})
	if selectors == 0 && len(out) == 0 {
		out = append(out, "the query names no series")
	}
	return out
}

func selectorName(vs *parser.VectorSelector) string {
	name := vs.Name
	for _, m := range vs.LabelMatchers {
		if m.Name == labels.MetricName && m.Type == labels.MatchEqual {
			name = m.Value
		}
	}
	return name
}

// under is the label names of the exposed series the selectors under n
// name, with the scrape's.
func under(n parser.Node, known series) map[string]bool {
	out := maps.Clone(targetLabels)
	parser.Inspect(n, func(n parser.Node, _ []parser.Node) error {
		if vs, ok := n.(*parser.VectorSelector); ok {
			maps.Copy(out, known[selectorName(vs)])
		}
		return nil
	})
	return out
}

func missing(clause string, want []string, have map[string]bool) []string {
	var out []string
	for _, l := range want {
		if !have[l] {
			out = append(out, fmt.Sprintf("%s (%s): no series under it has the label %s", clause, strings.Join(want, ", "), l))
		}
	}
	return out
}

func labelList(ls map[string]bool) string {
	if len(ls) == 0 {
		return "none but the scrape's"
	}
	return strings.Join(slices.Sorted(maps.Keys(ls)), ", ")
}

// checkExpr reports what problems finds in expr.
func checkExpr(t *testing.T, where, expr string, known series) {
	t.Helper()
	for _, p := range problems(expr, known) {
		t.Errorf("%s: %s\n\t%s", where, p, expr)
	}
}

func loadRules(t *testing.T, b []byte, what string) *rulefmt.RuleGroups {
	t.Helper()
	rgs, errs := rulefmt.Parse(b, false, model.UTF8Validation, promql, slog.New(slog.NewTextHandler(io.Discard, nil)))
	for _, err := range errs {
		t.Errorf("%s: %v", what, err)
	}
	if rgs == nil || len(rgs.Groups) == 0 {
		t.Fatalf("%s: no rule groups", what)
	}
	return rgs
}

// The plain rules file is valid rule groups (rulefmt: the expressions
// parse, the annotation templates parse, every field is known), each
// alert has the annotations a person acts on and a runbook section in
// README.md, and every query names exposed series only.
func TestRules(t *testing.T) {
	known := exposed(t)
	b, err := os.ReadFile(filepath.Join(dir, "rules.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	readme, err := os.ReadFile(filepath.Join(dir, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	rgs := loadRules(t, b, "rules.yaml")
	var alerts []string
	for _, g := range rgs.Groups {
		for _, r := range g.Rules {
			where := fmt.Sprintf("rules.yaml: group %s, %s%s", g.Name, r.Alert, r.Record)
			checkExpr(t, where, r.Expr, known)
			if r.Alert == "" {
				continue
			}
			alerts = append(alerts, r.Alert)
			for _, a := range []string{"summary", "description", "runbook_url"} {
				if strings.TrimSpace(r.Annotations[a]) == "" {
					t.Errorf("%s: no %s annotation", where, a)
				}
			}
			if r.Labels["severity"] == "" {
				t.Errorf("%s: no severity label", where)
			}
			anchor := strings.ToLower(r.Alert)
			if !strings.HasSuffix(r.Annotations["runbook_url"], "deploy/monitoring/README.md#"+anchor) {
				t.Errorf("%s: runbook_url %q, want deploy/monitoring/README.md#%s", where, r.Annotations["runbook_url"], anchor)
			}
			if !regexp.MustCompile(`(?m)^#+ ` + r.Alert + `\s*$`).Match(readme) {
				t.Errorf("%s: README.md has no runbook section headed %q", where, r.Alert)
			}
		}
	}
	// The alerts the monitoring is for (README.md, "Dashboards and
	// alerts"): each must be there, under its name.
	for _, want := range []string{"InformerHostNotReady", "InformerHostPluginNotReady", "InformerHostPluginQuarantined",
		"InformerHostObjectsParked", "InformerHostDeliveryLag", "InformerHostBufferNearFull",
		"InformerHostWriteBudgetExhausted", "InformerHostPluginSourceDegraded"} {
		if !slices.Contains(alerts, want) {
			t.Errorf("rules.yaml has no alert %s", want)
		}
	}
}

// The PrometheusRule holds exactly rules.yaml's groups, so the two ways
// to install the alerts cannot drift apart.
func TestPrometheusRuleMatchesRules(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(dir, "prometheusrule.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var pr struct {
		APIVersion string `yaml:"apiVersion"`
		Kind       string `yaml:"kind"`
		Metadata   struct {
			Name string `yaml:"name"`
		} `yaml:"metadata"`
		Spec yaml.Node `yaml:"spec"`
	}
	if err := yaml.Unmarshal(b, &pr); err != nil {
		t.Fatal(err)
	}
	if pr.APIVersion != "monitoring.coreos.com/v1" || pr.Kind != "PrometheusRule" || pr.Metadata.Name == "" {
		t.Fatalf("prometheusrule.yaml: %s %s %q, want a named monitoring.coreos.com/v1 PrometheusRule", pr.APIVersion, pr.Kind, pr.Metadata.Name)
	}
	spec, err := yaml.Marshal(&pr.Spec)
	if err != nil {
		t.Fatal(err)
	}
	got := loadRules(t, spec, "prometheusrule.yaml spec")
	plain, err := os.ReadFile(filepath.Join(dir, "rules.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	want := loadRules(t, plain, "rules.yaml")
	if !reflect.DeepEqual(got.Groups, want.Groups) {
		t.Errorf("prometheusrule.yaml's spec.groups differ from rules.yaml's groups: edit both the same way")
	}
	k, err := os.ReadFile(filepath.Join(dir, "kustomization.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(k), "prometheusrule.yaml") {
		t.Errorf("kustomization.yaml does not list prometheusrule.yaml")
	}
}

// dashboard is what the test reads of the Grafana dashboard.
type dashboard struct {
	Title      string `json:"title"`
	UID        string `json:"uid"`
	Templating struct {
		List []struct {
			Name       string          `json:"name"`
			Type       string          `json:"type"`
			Query      json.RawMessage `json:"query"`
			Definition string          `json:"definition"`
			Datasource *datasource     `json:"datasource"`
		} `json:"list"`
	} `json:"templating"`
	Panels []panel `json:"panels"`
}

type datasource struct {
	Type string `json:"type"`
	UID  string `json:"uid"`
}

type panel struct {
	ID         int         `json:"id"`
	Type       string      `json:"type"`
	Title      string      `json:"title"`
	Datasource *datasource `json:"datasource"`
	Targets    []struct {
		Expr  string `json:"expr"`
		RefID string `json:"refId"`
	} `json:"targets"`
	Panels []panel `json:"panels"` // a collapsed row's
}

// grafanaVars are the dashboard's variables a query may use, with what
// Grafana puts in their place, so the parser sees what Prometheus gets.
var grafanaVars = strings.NewReplacer("$__rate_interval", "5m", "$__interval", "1m", "$__range", "1h")

var labelValues = regexp.MustCompile(`^label_values\(\s*([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})?\s*,\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*\)$`)

// The dashboard is importable JSON with a Prometheus data source variable
// and a plugin variable, every panel (rows apart) queries through the
// data source variable, and every query parses and names exposed series.
func TestDashboard(t *testing.T) {
	known := exposed(t)
	files, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no dashboard in %s (%v)", dir, err)
	}
	for _, file := range files {
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		var d dashboard
		dec := json.NewDecoder(strings.NewReader(string(b)))
		if err := dec.Decode(&d); err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		name := filepath.Base(file)
		if d.Title == "" || d.UID == "" {
			t.Errorf("%s: no title or uid", name)
		}
		vars := map[string]bool{}
		for _, v := range d.Templating.List {
			vars[v.Name] = true
			switch v.Type {
			case "datasource":
				var q string
				if json.Unmarshal(v.Query, &q) != nil || q != "prometheus" {
					t.Errorf("%s: variable %s: query %s, want \"prometheus\"", name, v.Name, v.Query)
				}
			case "query":
				m := labelValues.FindStringSubmatch(v.Definition)
				if m == nil {
					t.Errorf("%s: variable %s: %q is not label_values(metric, label)", name, v.Name, v.Definition)
					continue
				}
				checkExpr(t, name+": variable "+v.Name, m[1]+m[2], known)
				if v.Datasource == nil || v.Datasource.UID != "${datasource}" {
					t.Errorf("%s: variable %s does not query the datasource variable", name, v.Name)
				}
			}
		}
		for _, want := range []string{"datasource", "plugin"} {
			if !vars[want] {
				t.Errorf("%s: no variable %q", name, want)
			}
		}
		panels := 0
		var walk func(ps []panel)
		walk = func(ps []panel) {
			for _, p := range ps {
				if p.Type == "row" {
					walk(p.Panels)
					continue
				}
				panels++
				where := fmt.Sprintf("%s: panel %d %q", name, p.ID, p.Title)
				if p.Datasource == nil || p.Datasource.UID != "${datasource}" {
					t.Errorf("%s: does not query the datasource variable", where)
				}
				if len(p.Targets) == 0 {
					t.Errorf("%s: no query", where)
				}
				for _, q := range p.Targets {
					if strings.TrimSpace(q.Expr) == "" {
						t.Errorf("%s: query %s is empty", where, q.RefID)
						continue
					}
					checkExpr(t, where+" query "+q.RefID, grafanaVars.Replace(q.Expr), known)
				}
			}
		}
		walk(d.Panels)
		if panels == 0 {
			t.Errorf("%s: no panels", name)
		}
	}
}

// The check itself: each kind of mistake is caught, and right queries
// pass.
func TestCheckCatches(t *testing.T) {
	known := series{"a_total": {"plugin": true, "result": true}, "h_bucket": {"plugin": true, "le": true}, "g": {}}
	for _, tc := range []struct {
		expr string
		ok   bool
	}{
		{`sum by (plugin) (rate(a_total{plugin=~"x", result="ok"}[5m]))`, true},
		{`histogram_quantile(0.99, sum by (plugin, le) (rate(h_bucket[5m])))`, true},
		{`g == 0 unless on (instance) a_total`, true},
		{`sum by (pod) (g)`, true},
		{`rate(b_total[5m])`, false},                     // not exposed
		{`histogram_quantile(0.99, rate(h[5m]))`, false}, // the histogram's name, not its _bucket
		{`sum(rate(a_total[5m])`, false},                 // does not parse
		{`{plugin="x"}`, false},                          // no metric name
		{`a_total{outcome="refused"}`, false},            // no such label
		{`sum by (outcome) (a_total)`, false},            // grouped by a label none has
		{`g unless on (plugin) g`, false},                // matched on a label none has
		{`vector(1)`, false},                             // names no series
	} {
		if got := problems(tc.expr, known); (len(got) == 0) != tc.ok {
			t.Errorf("%s: problems %q, want ok %v", tc.expr, got, tc.ok)
		}
	}
}
