package server

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/informer-host/informer-host/host"
)

// /debug/plugins spells every key one way, lowerCamelCase, those of the
// counters and the queue included, and carries when the running version
// was loaded and when it last handled an event.
func TestDebugPluginsJSON(t *testing.T) {
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	// Every field set, so that every key is written.
	full := host.PluginStatus{File: "counter.wasm", SHA256: "abc", ABIVersion: 1, State: host.StateRunning,
		Bindings: []string{"cms"}, Synced: true, Degraded: true, Repairs: 1,
		Queue:    host.QueueStats{Replay: 1, Retrying: 1, Dropped: 1, Coalesced: 1, Superseded: 1, Degraded: true},
		Counters: host.Counters{Delivered: 1, OK: 1, RetryExhausted: 1, MemoryFailures: 1, ReloadFailures: 1},
		Filtered: map[string]host.FilterCounts{"my-pods": {Filtered: 1}}, Requested: []string{"kv"}, Granted: []string{"kv"},
		LastError: "boom", Failures: 1,
		Parked:   []host.ObjectFailure{{Resource: "cms", Namespace: "ns", Name: "a", Failures: 2, LastError: "x", Until: at}},
		GaveUp:   []host.ObjectFailure{{Resource: "cms", Name: "b", Failures: 3, LastError: "RETRY: y", At: at}},
		LoadedAt: at, LastEventAt: at.Add(time.Second),
		Controller: &host.ControllerStatus{For: "cronjobs", Depth: 2, Parked: 1, Finalizer: "example.com/f", FinalizerStuck: 3,
			NextRequeue: []host.RequeueDue{{Namespace: "ns", Name: "c", At: at}}}}
	shard := &host.ShardStatus{Member: "m1", Active: true, Members: []string{"m1"}, Key: "namespace",
		Owned: map[string]int{"my-pods": 1}, ValidUntil: at, Problem: "p"}
	tests := []struct {
		name  string
		st    []host.PluginStatus
		shard *host.ShardStatus
		want  []string // substrings of the compact JSON
		lacks []string
	}{
		{"every field", []host.PluginStatus{full}, shard,
			[]string{`"queue":{"depth":0,`, `"counters":{"delivered":1,"ok":1,`, `"abiFailures":0`, `"loadedAt":"`, `"lastEventAt":"`,
				`"retryExhausted":1`, `"filtered":{"my-pods":{"filtered":1,"unchanged":0,"resync":0,"error":0,"evalErrors":0}}`,
				`"parked":[{"resource":"cms","namespace":"ns","name":"a","failures":2,"lastError":"x","until":"`,
				`"shard":{"member":"m1","active":true,"members":["m1"],"key":"namespace","owned":{"my-pods":1},"validUntil":"`,
				`"controller":{"for":"cronjobs","depth":2,"nextRequeue":[{"namespace":"ns","name":"c","at":"2026-01-02T03:04:05Z"}],"parked":1,"finalizer":"example.com/f","finalizerStuck":3}`},
			nil},
		{"nothing loaded, not sharded", nil, nil, []string{`{"plugins":[]}`}, []string{`"shard"`}},
		{"zero values left out", []host.PluginStatus{{File: "b.wasm", State: host.StateFailed}}, nil,
			[]string{`"synced":false,"degraded":false,"repairs":0,`, `"failures":0}`},
			[]string{`"sha256"`, `"abiVersion"`, `"bindings"`, `"filtered"`, `"controller"`, `"lastError"`, `"parked"`, `"gaveUp"`, `"loadedAt"`, `"lastEventAt"`}},
	}
	camel := regexp.MustCompile(`^[a-z][a-zA-Z0-9]*$`)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b, err := json.Marshal(pluginsDocument(tc.st, tc.shard, nil))
			if err != nil {
				t.Fatal(err)
			}
			var doc any
			if err := json.Unmarshal(b, &doc); err != nil {
				t.Fatal(err)
			}
			var walk func(at string, v any)
			walk = func(at string, v any) {
				switch v := v.(type) {
				case map[string]any:
					for k, x := range v {
						// filtered and owned are keyed by resource name.
						if !camel.MatchString(k) && !strings.HasSuffix(at, ".filtered") && !strings.HasSuffix(at, ".owned") {
							t.Errorf("key %s.%s is not lowerCamelCase", at, k)
						}
						walk(at+"."+k, x)
					}
				case []any:
					for _, x := range v {
						walk(at+"[]", x)
					}
				}
			}
			walk("", doc)
			for _, k := range tc.want {
				if !strings.Contains(string(b), k) {
					t.Errorf("the document lacks %s:\n%s", k, b)
				}
			}
			for _, k := range tc.lacks {
				if strings.Contains(string(b), k) {
					t.Errorf("the document has %s:\n%s", k, b)
				}
			}
		})
	}
}

// /debug/plugins?object= names one object: resource/namespace/name, or
// resource/name for a cluster-scoped one, nothing empty; its document
// spells its keys as the rest does.
func TestDebugPluginsObject(t *testing.T) {
	for q, want := range map[string][3]string{
		"cms/ns/x": {"cms", "ns", "x"}, "nodes/n1": {"nodes", "", "n1"},
		"cms": {}, "cms//x": {}, "/ns/x": {}, "cms/ns/x/y": {}, "cms/ns/": {},
	} {
		r, ns, name, ok := parseObject(q)
		if got := [3]string{r, ns, name}; ok != (want != [3]string{}) || got != want {
			t.Errorf("parseObject(%q) = %q, %t; want %q", q, got, ok, want)
		}
	}
	v := &host.ObjectView{Resource: "cms", Namespace: "ns", Name: "x", Sharded: true, Owner: "b", CacheRV: "7",
		Plugins: []host.PluginObjectView{{File: "checker.wasm", Answered: true, Has: true, Unsettled: true, RV: "7", AppliedOwner: "b"}}}
	doc := pluginsDocument(nil, nil, nil)
	doc.Object = objectDocument(v)
	b, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	want := `"object":{"resource":"cms","namespace":"ns","name":"x","sharded":true,"owner":"b","owned":false,"cacheResourceVersion":"7",` +
		`"plugins":[{"file":"checker.wasm","answered":true,"has":true,"unsettled":true,"resourceVersion":"7","appliedOwner":"b","appliedOwned":false}]}`
	if !strings.Contains(string(b), want) {
		t.Errorf("the document %s lacks %s", b, want)
	}
	if objectDocument(nil) != nil {
		t.Error("no object asked for, yet an object in the document")
	}
}
