package kit

import (
	"bytes"
	"encoding/json"
	"strings"

	"github.com/informer-host/informer-host/abi"
)

// ErrDenied is the code of a capability's functions (Cache, State,
// metrics, writes) when the operator did not grant the capability, or not
// for this resource or index (ABI.md §16): they return a *CallError
// naming the call, and errors.Is(err, ErrDenied) matches it.
var ErrDenied error = HostError(abi.ErrDenied)

// cacheAPI is the cache capability's imports; the host implements it on
// wasip1 (cache_wasip1.go), tests with a fake.
type cacheAPI interface {
	cacheGet(res, ns, name string) int32
	cacheList(res, ns, selector string, start int32, buf []byte) int64
	cacheIndex(res, index, value string, start int32, buf []byte) int64
}

// CacheReader reads the host's informer caches, the way a controller uses
// client-go Listers: no API request is made. Only resources granted to
// the plugin in config.yaml (grants.cache) can be read; others return
// ErrDenied.
type CacheReader struct{ p *plugin }

// Cache returns the plugin's cache reader.
func Cache() CacheReader { return CacheReader{p: &the} }

func (c CacheReader) api() cacheAPI {
	if a, ok := c.p.host.(cacheAPI); ok {
		return a
	}
	return noCache{}
}

// Cached is an object read from the cache. It is valid only until the
// current handler (Handle, OnSynced, OnInit) returns: the host ends its
// handle then. Read it field by field, like an Event, without decoding.
type Cached struct {
	p *plugin
	h int32
}

// Get returns the cached object namespace/name of the configured
// resource (namespace "" for a cluster-scoped one), ErrNoObject if the
// cache has none, or ErrDenied.
func (c CacheReader) Get(resource, namespace, name string) (Cached, error) {
	h := c.api().cacheGet(resource, namespace, name)
	if h < 0 {
		if cacheMiss(h) {
			return Cached{}, hostErr(h)
		}
		return Cached{}, &CallError{Func: abi.ImportCacheGet, Call: resource + " " + objectName(namespace, name), Code: h}
	}
	return Cached{p: c.p, h: h}, nil
}

// List returns the keys ("namespace/name", or "name" when cluster-scoped)
// of the cached objects of resource in namespace ("" = every namespace)
// whose labels match selector (Kubernetes label selector syntax, "" =
// all), sorted. See SplitKey and Get.
func (c CacheReader) List(resource, namespace, selector string) ([]string, error) {
	keys, code := c.pages(func(start int32, buf []byte) int64 {
		return c.api().cacheList(resource, namespace, selector, start, buf)
	})
	if code != 0 {
		return nil, c.listError(code, resource, namespace, selector)
	}
	return keys, nil
}

// Owned returns the keys of the cached objects of resource that have an
// ownerReference to uid. The grant must list the owner index
// (indexes: [owner]); otherwise ErrDenied.
func (c CacheReader) Owned(resource, uid string) ([]string, error) {
	keys, code := c.pages(func(start int32, buf []byte) int64 { return c.api().cacheIndex(resource, "owner", uid, start, buf) })
	if code != 0 {
		return nil, cacheError(abi.ImportCacheIndex, resource+" owner="+uid, code)
	}
	return keys, nil
}

// cacheMiss reports the codes of a lookup that found nothing: a plugin
// checks for them on every event, so they stay the bare sentinels
// (ErrNoObject, ErrNotFound) and cost no allocation.
func cacheMiss(code int32) bool { return code == abi.ErrAbsent || code == abi.ErrNotFound }

// cacheError is the error of a cache read of fn on call that returned
// code: a miss as its sentinel, anything else (a denial, an invalid
// selector) a *CallError naming the read. The host sets no result
// message for the cache functions (ABI.md §17 only), so none is read: it
// would be a write's from earlier in the same call.
func cacheError(fn, call string, code int32) error {
	if cacheMiss(code) {
		return hostErr(code)
	}
	return &CallError{Func: fn, Call: call, Code: code}
}

// listError is a failed List's error, its call the resource, namespace
// and selector: "pods in shop -l app=web".
func (c CacheReader) listError(code int32, resource, namespace, selector string) error {
	call := resource
	if namespace != "" {
		call += " in " + namespace
	}
	if selector != "" {
		call += " -l " + selector
	}
	return cacheError(abi.ImportCacheList, call, code)
}

// objectName is namespace/name, or name when cluster-scoped.
func objectName(namespace, name string) string {
	if namespace == "" {
		return name
	}
	return namespace + "/" + name
}

// pages reads every page of a key list; a failure is the host's code.
func (c CacheReader) pages(call func(start int32, buf []byte) int64) ([]string, int32) {
	var keys []string
	for {
		if cap(c.p.valBuf) < 4096 {
			c.p.valBuf = make([]byte, 4096)
		}
		buf := c.p.valBuf[:cap(c.p.valBuf)]
		total, size, code := abi.UnpackList(call(int32(len(keys)), buf))
		if code != 0 {
			return nil, code
		}
		if int(size) > len(buf) {
			c.p.valBuf = make([]byte, size)
			continue
		}
		n := len(keys)
		for _, k := range bytes.Split(buf[:size], []byte{'\n'}) {
			if len(k) > 0 {
				keys = append(keys, string(k))
			}
		}
		if len(keys) >= int(total) || len(keys) == n {
			return keys, 0
		}
	}
}

// SplitKey splits a store key into namespace and name.
func SplitKey(key string) (namespace, name string) {
	if ns, n, ok := strings.Cut(key, "/"); ok {
		return ns, n
	}
	return "", key
}

// Field returns the value at path in the object (syntax as Event.Field).
func (o Cached) Field(path string) (Value, error) { return o.p.field(o.h, path) }

// Get returns the value at path as text, and whether it exists.
func (o Cached) Get(path string) (string, bool) {
	v, err := o.Field(path)
	return v.Text, err == nil
}

// JSON returns the whole object as JSON (a copy the caller owns).
func (o Cached) JSON() ([]byte, error) {
	b, err := o.p.object(o.h)
	return bytes.Clone(b), err
}

// Decode decodes the object into v with encoding/json.
func (o Cached) Decode(v any) error {
	b, err := o.p.object(o.h)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, v)
}

// noCache is the cache off wasip1 (and under a host without it): denied.
type noCache struct{}

func (noCache) cacheGet(string, string, string) int32 { return abi.ErrDenied }
func (noCache) cacheList(string, string, string, int32, []byte) int64 {
	return int64(abi.ErrDenied)
}
func (noCache) cacheIndex(string, string, string, int32, []byte) int64 {
	return int64(abi.ErrDenied)
}
