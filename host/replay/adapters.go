package replay

import (
	"encoding/base64"
	"strings"

	"github.com/informer-host/informer-host/host/internal/engine"
)

// The adapters below put the capabilities I calls into the step's calls,
// after serving them: the cache from the recording, state and metrics
// from the replay's own store and registry.

type recordedCache struct {
	c     *memCache
	calls *Calls
}

func (r recordedCache) Get(res, ns, name []byte) (map[string]any, int32) {
	obj, code := r.c.Get(res, ns, name)
	r.calls.Record("cache_get", map[string]string{"resource": string(res), "namespace": string(ns), "name": string(name)}, nil, r.calls.handle(obj, code))
	return obj, code
}

func (r recordedCache) List(keys []string, res, ns, sel []byte) ([]string, int32) {
	n := len(keys)
	keys, code := r.c.List(keys, res, ns, sel)
	r.calls.Record("cache_list", map[string]string{"resource": string(res), "namespace": string(ns), "selector": string(sel)},
		map[string]int{"keys": len(keys) - n}, code)
	return keys, code
}

func (r recordedCache) Index(keys []string, res, index, value []byte) ([]string, int32) {
	n := len(keys)
	keys, code := r.c.Index(keys, res, index, value)
	r.calls.Record("cache_index", map[string]string{"resource": string(res), "index": string(index), "value": string(value)},
		map[string]int{"keys": len(keys) - n}, code)
	return keys, code
}

// recordedState records the writes (reads change nothing and would
// drown the output).
type recordedState struct {
	engine.StateBucket
	calls *Calls
}

func (r recordedState) Set(key, value []byte, ifVersion int64) (int64, int32) {
	v, code := r.StateBucket.Set(key, value, ifVersion)
	r.calls.Record("state_set", map[string]any{"key": string(key), "value": printable(value), "ifVersion": ifVersion},
		map[string]any{"version": v}, failed(code))
	return v, code
}

func (r recordedState) Delete(key []byte, ifVersion int64) int32 {
	code := r.StateBucket.Delete(key, ifVersion)
	r.calls.Record("state_delete", map[string]any{"key": string(key), "ifVersion": ifVersion}, nil, failed(code))
	return code
}

// failed is 0 for success and -1 for any failure: the recording format
// has always written state failures so, whatever the code.
func failed(code int32) int32 {
	if code != 0 {
		return -1
	}
	return 0
}

type recordedMetrics struct {
	engine.MetricSet
	calls *Calls
}

func (r recordedMetrics) Declare(kind int32, decl []byte) int32 {
	id := r.MetricSet.Declare(kind, decl)
	r.calls.Record("metric_declare", map[string]any{"kind": kind, "decl": string(decl)}, nil, id)
	return id
}

func (r recordedMetrics) Add(id int32, v float64, labels []byte) int32 {
	code := r.MetricSet.Add(id, v, labels)
	r.calls.Record("metric_add", map[string]any{"id": id, "value": v, "labels": labelValues(labels)}, nil, code)
	return code
}

func (r recordedMetrics) Set(id int32, v float64, labels []byte) int32 {
	code := r.MetricSet.Set(id, v, labels)
	r.calls.Record("metric_set", map[string]any{"id": id, "value": v, "labels": labelValues(labels)}, nil, code)
	return code
}

func (r recordedMetrics) Observe(id int32, v float64, labels []byte) int32 {
	code := r.MetricSet.Observe(id, v, labels)
	r.calls.Record("metric_observe", map[string]any{"id": id, "value": v, "labels": labelValues(labels)}, nil, code)
	return code
}

// labelValues splits the host's zero-separated label values for the
// output.
func labelValues(b []byte) []string {
	if len(b) == 0 {
		return nil
	}
	return strings.Split(string(b), "\x00")
}

func b64(b []byte) string { return base64.StdEncoding.EncodeToString(b) }
