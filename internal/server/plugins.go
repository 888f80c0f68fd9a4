package server

import (
	"bytes"
	"encoding/json"
	"reflect"
	"sort"
	"strings"
	"time"
	"unicode"

	"github.com/informer-host/informer-host/host"
	"github.com/informer-host/informer-host/internal/pluginsource"
)

// The JSON of /debug/plugins: the host's reports (host.PluginStatus,
// host.ShardStatus), which carry no JSON shape of their own, spelled with
// lowerCamelCase keys throughout. The shape is this package's so that
// what an operator reads, and its compatibility, is decided in one place,
// next to the endpoint.

// pluginsJSON is the document /debug/plugins serves.
type pluginsJSON struct {
	Plugins []pluginJSON `json:"plugins"`
	// Shard is this member's view of its sharding group (absent without
	// sharding).
	Shard *shardJSON `json:"shard,omitempty"`
	// Object is what the member makes of the object named by the
	// request's object parameter (absent without one).
	Object *objectJSON `json:"object,omitempty"`
}

// objectJSON is host.ObjectView as served.
type objectJSON struct {
	Resource  string             `json:"resource"`
	Namespace string             `json:"namespace,omitempty"`
	Name      string             `json:"name"`
	Sharded   bool               `json:"sharded"`
	Owner     string             `json:"owner,omitempty"`
	Owned     bool               `json:"owned"`
	CacheRV   string             `json:"cacheResourceVersion,omitempty"`
	Plugins   []pluginObjectJSON `json:"plugins"`
}

// pluginObjectJSON is host.PluginObjectView as served.
type pluginObjectJSON struct {
	File         string `json:"file"`
	Answered     bool   `json:"answered"`
	Has          bool   `json:"has"`
	Unsettled    bool   `json:"unsettled,omitempty"`
	RV           string `json:"resourceVersion,omitempty"`
	AppliedOwner string `json:"appliedOwner,omitempty"`
	AppliedOwned bool   `json:"appliedOwned"`
}

// objectDocument renders v, nil for none.
func objectDocument(v *host.ObjectView) *objectJSON {
	if v == nil {
		return nil
	}
	o := &objectJSON{Resource: v.Resource, Namespace: v.Namespace, Name: v.Name, Sharded: v.Sharded, Owner: v.Owner,
		Owned: v.Owned, CacheRV: v.CacheRV, Plugins: make([]pluginObjectJSON, 0, len(v.Plugins))}
	for _, p := range v.Plugins {
		o.Plugins = append(o.Plugins, pluginObjectJSON{File: p.File, Answered: p.Answered, Has: p.Has, Unsettled: p.Unsettled,
			RV: p.RV, AppliedOwner: p.AppliedOwner, AppliedOwned: p.AppliedOwned})
	}
	return o
}

// pluginJSON is host.PluginStatus as served; see there for what each
// field means.
type pluginJSON struct {
	File        string                 `json:"file"`
	SHA256      string                 `json:"sha256,omitempty"`
	ABIVersion  int                    `json:"abiVersion,omitempty"`
	State       host.PluginState       `json:"state"`
	Bindings    []string               `json:"bindings,omitempty"`
	Synced      bool                   `json:"synced"`
	Degraded    bool                   `json:"degraded"`
	Repairs     uint64                 `json:"repairs"`
	Queue       camelObject            `json:"queue"`
	Counters    camelObject            `json:"counters"`
	Filtered    map[string]camelObject `json:"filtered,omitempty"`
	Requested   []string               `json:"requested,omitempty"`
	Granted     []string               `json:"granted,omitempty"`
	LastError   string                 `json:"lastError,omitempty"`
	Failures    int                    `json:"failures"`
	Parked      []objectFailureJSON    `json:"parked,omitempty"`
	GaveUp      []objectFailureJSON    `json:"gaveUp,omitempty"`
	LoadedAt    time.Time              `json:"loadedAt,omitzero"`
	LastEventAt time.Time              `json:"lastEventAt,omitzero"`
	// Controller is a controller-mode plugin's loop.
	Controller *controllerJSON `json:"controller,omitempty"`
	// Source is where a sourced plugin comes from (plugins.modules[].source)
	// and how that goes; absent for the directory's plugins.
	Source *pluginsource.Status `json:"source,omitempty"`
}

// controllerJSON is host.ControllerStatus as served.
type controllerJSON struct {
	For         string        `json:"for"`
	Depth       int           `json:"depth"`
	NextRequeue []requeueJSON `json:"nextRequeue,omitempty"`
	Parked      int           `json:"parked"`
	Finalizer   string        `json:"finalizer,omitempty"`
	// FinalizerStuck counts the objects being deleted that wait on the
	// finalizer while the plugin is not running.
	FinalizerStuck int `json:"finalizerStuck,omitempty"`
}

type requeueJSON struct {
	Namespace string    `json:"namespace,omitempty"`
	Name      string    `json:"name"`
	At        time.Time `json:"at"`
}

func controllerDocument(c *host.ControllerStatus) *controllerJSON {
	if c == nil {
		return nil
	}
	out := &controllerJSON{For: c.For, Depth: c.Depth, Parked: c.Parked, Finalizer: c.Finalizer, FinalizerStuck: c.FinalizerStuck}
	for _, d := range c.NextRequeue {
		out.NextRequeue = append(out.NextRequeue, requeueJSON{Namespace: d.Namespace, Name: d.Name, At: d.At})
	}
	return out
}

// statePending is the state served for a sourced plugin the host does not
// have yet: its source has produced no version that loaded.
const statePending host.PluginState = "pending"

// objectFailureJSON is host.ObjectFailure as served.
type objectFailureJSON struct {
	Resource  string    `json:"resource"`
	Namespace string    `json:"namespace,omitempty"`
	Name      string    `json:"name"`
	Failures  int       `json:"failures"`
	LastError string    `json:"lastError,omitempty"`
	Until     time.Time `json:"until,omitzero"`
	At        time.Time `json:"at,omitzero"`
}

// shardJSON is host.ShardStatus as served.
type shardJSON struct {
	Member     string         `json:"member"`
	Active     bool           `json:"active"`
	Members    []string       `json:"members"`
	Key        string         `json:"key"`
	Owned      map[string]int `json:"owned"`
	ValidUntil time.Time      `json:"validUntil,omitzero"`
	Problem    string         `json:"problem,omitempty"`
}

// pluginsDocument renders the host's reports for /debug/plugins.
func pluginsDocument(st []host.PluginStatus, sh *host.ShardStatus, sources map[string]pluginsource.Status) pluginsJSON {
	doc := pluginsJSON{Plugins: make([]pluginJSON, 0, len(st))}
	seen := map[string]bool{}
	for _, s := range st {
		seen[s.File] = true
		p := pluginJSON{File: s.File, SHA256: s.SHA256, ABIVersion: s.ABIVersion, State: s.State, Bindings: s.Bindings,
			Synced: s.Synced, Degraded: s.Degraded, Repairs: s.Repairs, Queue: camelObject{s.Queue}, Counters: camelObject{s.Counters},
			Requested: s.Requested, Granted: s.Granted, LastError: s.LastError, Failures: s.Failures,
			Parked: objectFailures(s.Parked), GaveUp: objectFailures(s.GaveUp), LoadedAt: s.LoadedAt, LastEventAt: s.LastEventAt,
			Controller: controllerDocument(s.Controller)}
		if s.Filtered != nil {
			p.Filtered = make(map[string]camelObject, len(s.Filtered))
			for b, c := range s.Filtered {
				p.Filtered[b] = camelObject{c}
			}
		}
		if src, ok := sources[s.File]; ok {
			p.Source = &src
		}
		doc.Plugins = append(doc.Plugins, p)
	}
	var pending []string
	for name := range sources {
		if !seen[name] {
			pending = append(pending, name)
		}
	}
	sort.Strings(pending)
	for _, name := range pending {
		src := sources[name]
		doc.Plugins = append(doc.Plugins, pluginJSON{File: name, State: statePending, LastError: src.LastError,
			Queue: camelObject{host.QueueStats{}}, Counters: camelObject{host.Counters{}}, Source: &src})
	}
	if sh != nil {
		doc.Shard = &shardJSON{Member: sh.Member, Active: sh.Active, Members: sh.Members, Key: sh.Key, Owned: sh.Owned,
			ValidUntil: sh.ValidUntil, Problem: sh.Problem}
	}
	return doc
}

func objectFailures(in []host.ObjectFailure) []objectFailureJSON {
	if in == nil {
		return nil
	}
	out := make([]objectFailureJSON, len(in))
	for i, f := range in {
		out[i] = objectFailureJSON{Resource: f.Resource, Namespace: f.Namespace, Name: f.Name, Failures: f.Failures,
			LastError: f.LastError, Until: f.Until, At: f.At}
	}
	return out
}

// camelObject serves a struct of plain counters (host.Counters,
// host.QueueStats, host.FilterCounts) as an object keyed by each field's
// name in lowerCamelCase, by reflection rather than tags: a counter added
// to the host's struct cannot come out in another style.
type camelObject struct{ v any }

func (c camelObject) MarshalJSON() ([]byte, error) { return camelJSON(c.v) }

// camelJSON encodes a struct of plain fields as an object keyed by each
// field's json tag or, without one, its name in lowerCamelCase: "OK" ->
// "ok", "ABIFailures" -> "abiFailures", "RetryExhausted" ->
// "retryExhausted".
func camelJSON(v any) ([]byte, error) {
	rv := reflect.ValueOf(v)
	var b bytes.Buffer
	b.WriteByte('{')
	for i := range rv.NumField() {
		f := rv.Type().Field(i)
		if !f.IsExported() {
			continue
		}
		key := lowerCamel(f.Name)
		if tag, _, _ := strings.Cut(f.Tag.Get("json"), ","); tag == "-" {
			continue
		} else if tag != "" {
			key = tag
		}
		val, err := json.Marshal(rv.Field(i).Interface())
		if err != nil {
			return nil, err
		}
		if b.Len() > 1 {
			b.WriteByte(',')
		}
		k, _ := json.Marshal(key)
		b.Write(k)
		b.WriteByte(':')
		b.Write(val)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// lowerCamel lowers a Go name's leading capital, or its leading
// initialism: the run of capitals, but for the last one when a lower-case
// letter follows it (ABIFailures -> abiFailures).
func lowerCamel(name string) string {
	r := []rune(name)
	n := 0
	for n < len(r) && unicode.IsUpper(r[n]) {
		n++
	}
	if n > 1 && n < len(r) {
		n-- // the last capital starts the next word
	}
	for i := range n {
		r[i] = unicode.ToLower(r[i])
	}
	return string(r)
}
