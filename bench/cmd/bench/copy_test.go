package main

import (
	"errors"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/yaml"
)

func TestDiffCopies(t *testing.T) {
	d := func(seq string) map[string]string { return map[string]string{"seq": seq} }
	want := map[string]map[string]string{"a": d("1"), "b": d("1"), "c": d("1")}
	have := map[string]map[string]string{"a": d("1"), "b": d("0"), "x": d("1"), "y": nil}
	if got := diffCopies(want, have); got != (copyDiff{Missing: 1, Wrong: 1, Extra: 2}) {
		t.Errorf("diffCopies = %+v; want 1 missing, 1 wrong, 2 extra", got)
	}
	if !diffCopies(want, want).none() {
		t.Error("the same maps differ")
	}
}

// copyState counts what is missing, wrong and extra as events come, and
// says when it first matched; wait holds that time only once the List
// agrees.
func TestCopyState(t *testing.T) {
	d := func(seq string) map[string]string { return map[string]string{"seq": seq} }
	s := newCopyState(map[string]map[string]string{"a": d("0"), "b": d("0")})
	t0 := time.Unix(100, 0)
	s.see("a", d("0"), true, t0)
	s.see("x", d("0"), true, t0.Add(time.Second)) // extra
	s.see("b", d("9"), true, t0.Add(2*time.Second))
	if s.bad != 2 || !s.matched.IsZero() {
		t.Fatalf("bad %d, matched %v; want 2 (x extra, b wrong), not matched", s.bad, s.matched)
	}
	s.see("b", d("0"), true, t0.Add(3*time.Second))
	s.see("x", nil, false, t0.Add(4*time.Second))
	if s.bad != 0 || !s.matched.Equal(t0.Add(4*time.Second)) {
		t.Fatalf("bad %d, matched %v; want 0 at the extra's delete", s.bad, s.matched)
	}
	// A change away and back again: matched anew, at the later time.
	s.see("a", d("1"), true, t0.Add(5*time.Second))
	s.see("a", d("0"), true, t0.Add(6*time.Second))
	if !s.matched.Equal(t0.Add(6 * time.Second)) {
		t.Errorf("matched %v; want the time it matched again", s.matched)
	}

	lists := 0
	agreeOnSecond := func() (map[string]map[string]string, error) {
		lists++
		if lists == 1 {
			return map[string]map[string]string{"a": d("0")}, nil // b not yet in the List
		}
		return map[string]map[string]string{"a": d("0"), "b": d("0")}, nil
	}
	got, err := s.wait(time.Now().Add(time.Minute), nil, agreeOnSecond)
	if err != nil || !got.Equal(t0.Add(6*time.Second)) || lists != 2 {
		t.Errorf("wait = %v, %v after %d Lists; want the informer's time once the second List agrees", got, err, lists)
	}

	// A new expectation: nothing matches until the copies change.
	s.expect(map[string]map[string]string{"a": d("1"), "b": d("0")})
	if s.bad != 1 || !s.matched.IsZero() {
		t.Errorf("after expect: bad %d, matched %v; want 1, not matched", s.bad, s.matched)
	}
	exited := make(chan struct{})
	close(exited)
	if _, err := s.wait(time.Now().Add(time.Minute), exited, agreeOnSecond); err == nil {
		t.Error("wait with the side's process gone: no error")
	}
	if _, err := s.wait(time.Now(), nil, func() (map[string]map[string]string, error) { return nil, errors.New("x") }); err == nil {
		t.Error("wait past its deadline: no error")
	}
}

// Case 10's rows: medians per side; the plugin's cells say "not
// measured" while only the baseline ran, and ratios appear once both did.
func TestCopyRows(t *testing.T) {
	run := func(side string, s float64, writes int) copyRun {
		return copyRun{Side: side, Sources: 10, Initial: s, Update: s, Delete: s, CPU: s, RSS: 40, Requests: requestClasses{Reads: 2, Watches: 2, Writes: writes}}
	}
	cr := codeLines{Go: 98, Files: []string{"main.go"}}
	for _, tc := range []struct {
		name      string
		copy      *copyResults
		wantRows  int
		wantCells []string // in the time row: plugin, ratio
	}{
		{"baseline only", &copyResults{Runs: []copyRun{run(sideCR, 1, 30), run(sideCR, 3, 30), run(sideCR, 2, 40)},
			Lines: map[string]codeLines{sideCR: cr}}, 8, []string{"not measured", "—"}},
		{"both", &copyResults{Runs: []copyRun{run(sideCR, 2, 30), run(sidePlugin, 3, 20)},
			Lines: map[string]codeLines{sideCR: cr, sidePlugin: {Go: 40, YAML: 9}}}, 8, []string{"9.00 s", "1.50x"}},
		{"nothing", nil, 0, nil},
	} {
		r := &results{Params: map[string]any{"copyN": 10, "copyQPS": 50, "copyBurst": 100}, Copy: tc.copy}
		r.copyRows()
		if len(r.rows) != tc.wantRows {
			t.Errorf("%s: %d rows; want %d", tc.name, len(r.rows), tc.wantRows)
			continue
		}
		if tc.wantRows == 0 {
			continue
		}
		if got := []string{r.rows[0].Host, r.rows[0].Ratio}; got[0] != tc.wantCells[0] || got[1] != tc.wantCells[1] {
			t.Errorf("%s: time row host %q ratio %q; want %q", tc.name, got[0], got[1], tc.wantCells)
		}
		if tc.name == "baseline only" && !strings.HasSuffix(r.rows[0].Base, ": 6.00 s") {
			t.Errorf("%s: time row baseline %q; want the median of 3, 6, 9 s", tc.name, r.rows[0].Base)
		}
		last := r.rows[len(r.rows)-1]
		if tc.name == "both" && (last.Host != "49 (40 Go + 9 YAML config)" || last.Ratio != "0.50x") {
			t.Errorf("%s: lines row %+v", tc.name, last)
		}
	}
}

// The plugin side runs with the example's own config snippet, completed
// with what a deployment adds and the writes' limit of the baseline; a
// snippet without the module, its controller block or its write grant is
// refused by name.
func TestCopyDaemonConfig(t *testing.T) {
	snippet := `# the example's
resources:
  - {name: configmaps-src, version: v1, resource: configmaps, namespaces: [src], labelSelector: sync=true}
  - {name: configmaps-dst, version: v1, resource: configmaps, namespaces: [dst]}
plugins:
  modules:
    - file: configmap-copy.wasm
      controller: {for: configmaps-src, owns: [configmaps-dst]}
      grants:
        writes:
          resources: [{resource: configmaps-dst, verbs: [apply, delete]}]
`
	got, err := copyDaemonConfig([]byte(snippet), "/k/kubeconfig", "/p", "/c", "127.0.0.1:9", 50, 100)
	if err != nil {
		t.Fatal(err)
	}
	var m struct {
		APIVersion string `json:"apiVersion"`
		Kubeconfig string `json:"kubeconfig"`
		Resources  []struct {
			Name string `json:"name"`
		} `json:"resources"`
		Plugins struct {
			Directory, CompilationCache string
			Modules                     []struct {
				File       string `json:"file"`
				Controller struct {
					For  string   `json:"for"`
					Owns []string `json:"owns"`
				} `json:"controller"`
				Grants struct {
					Writes struct {
						QPS   float64 `json:"qps"`
						Burst int     `json:"burst"`
					} `json:"writes"`
				} `json:"grants"`
			} `json:"modules"`
		} `json:"plugins"`
		Server struct {
			Address string `json:"address"`
		} `json:"server"`
	}
	if err := yaml.Unmarshal([]byte(got), &m); err != nil {
		t.Fatalf("%v\n%s", err, got)
	}
	mod := m.Plugins.Modules[0]
	if m.APIVersion != "informer-host/v1" || m.Kubeconfig != "/k/kubeconfig" || len(m.Resources) != 2 ||
		m.Plugins.Directory != "/p" || m.Plugins.CompilationCache != "/c" || m.Server.Address != "127.0.0.1:9" ||
		mod.Controller.For != "configmaps-src" || mod.Grants.Writes.QPS != 50 || mod.Grants.Writes.Burst != 100 {
		t.Errorf("config:\n%s", got)
	}
	for _, tc := range []struct{ name, snippet, want string }{
		{"no module", "plugins: {modules: [{file: other.wasm}]}", "no plugins.modules entry with file: configmap-copy.wasm"},
		{"no controller", "plugins: {modules: [{file: configmap-copy.wasm, grants: {writes: {}}}]}", "no controller: block"},
		{"no writes", "plugins: {modules: [{file: configmap-copy.wasm, controller: {for: x}}]}", "no grants.writes"},
		{"not YAML", "plugins: [", "config.yaml"},
	} {
		if _, err := copyDaemonConfig([]byte(tc.snippet), "", "", "", "", 1, 1); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v; want one saying %q", tc.name, err, tc.want)
		}
	}
}
