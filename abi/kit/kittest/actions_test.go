package kittest_test

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/informer-host/informer-host/abi"
	"github.com/informer-host/informer-host/abi/kit"
	"github.com/informer-host/informer-host/abi/kit/kittest"
)

const cm = `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"x","namespace":"demo","uid":"u1","resourceVersion":"5"},"data":{"a":"1"}}`

// handle runs f as the plugin's handler for one add of cm and returns
// what it returned.
func handle(t *testing.T, h *kittest.Host, f func(ev *kit.Event) error) error {
	t.Helper()
	var got error
	kit.Handle(func(ev *kit.Event) error { got = f(ev); return nil })
	if r := h.Add("configmaps", cm); r.Code != kittest.OK {
		t.Fatal(r)
	}
	return got
}

// The default answer applies each write to the fake cache: what a write
// returns and what a later cache_get reads, for every op and flag.
func TestWritesApplyToTheCache(t *testing.T) {
	demo := func(name string) kit.Target { return kit.Target{Resource: "configmaps", Namespace: "demo", Name: name} }
	for _, tc := range []struct {
		name  string
		write func(c kit.Cluster) (kit.Cached, error)
		// want is the object's data afterwards ("" = gone), or the
		// error's text.
		want, wantErr string
		req           kittest.WriteRequest
	}{{
		name: "apply",
		write: func(c kit.Cluster) (kit.Cached, error) {
			return c.Apply(demo("x"), []byte(`{"apiVersion":"v1","kind":"ConfigMap","data":{"b":"2"}}`), false, kit.Preconditions{})
		},
		want: `{"a":"1","b":"2"}`,
		req:  kittest.WriteRequest{Op: "apply", Resource: "configmaps", Namespace: "demo", Name: "x", Body: `{"apiVersion":"v1","kind":"ConfigMap","data":{"b":"2"}}`},
	}, {
		name: "forced must-exist apply of a missing object",
		write: func(c kit.Cluster) (kit.Cached, error) {
			return c.ApplyWith(demo("gone"), []byte(`{"apiVersion":"v1","kind":"ConfigMap"}`), kit.ApplyOptions{Force: true, MustExist: true}, kit.Preconditions{})
		},
		wantErr: `k8s_write apply --force --must-exist configmaps demo/gone: ERR_ABSENT: configmaps "gone" not found`,
		req:     kittest.WriteRequest{Op: "apply", Resource: "configmaps", Namespace: "demo", Name: "gone", Body: `{"apiVersion":"v1","kind":"ConfigMap"}`, Force: true, MustExist: true},
	}, {
		name: "merge patch of the status",
		write: func(c kit.Cluster) (kit.Cached, error) {
			t := demo("x")
			t.Subresource = "status"
			return c.MergePatch(t, []byte(`{"data":{"a":null,"c":"3"}}`), kit.Preconditions{UID: "u1", ResourceVersion: "5"})
		},
		want: `{"c":"3"}`,
		req:  kittest.WriteRequest{Op: "merge-patch", Resource: "configmaps", Namespace: "demo", Name: "x", Subresource: "status", Body: `{"data":{"a":null,"c":"3"}}`, UID: "u1", ResourceVersion: "5"},
	}, {
		name: "stale merge patch",
		write: func(c kit.Cluster) (kit.Cached, error) {
			return c.MergePatch(demo("x"), []byte(`{}`), kit.Preconditions{ResourceVersion: "4"})
		},
		wantErr: "k8s_write merge-patch configmaps demo/x: ERR_CONFLICT: the object has been modified (resourceVersion 5, precondition 4)",
		req:     kittest.WriteRequest{Op: "merge-patch", Resource: "configmaps", Namespace: "demo", Name: "x", Body: `{}`, ResourceVersion: "4"},
	}, {
		name: "JSON patch",
		write: func(c kit.Cluster) (kit.Cached, error) {
			return c.JSONPatch(demo("x"), []byte(`[{"op":"test","path":"/data/a","value":"1"},{"op":"add","path":"/data/b~1c","value":"2"},{"op":"move","from":"/data/a","path":"/data/d"}]`), kit.Preconditions{})
		},
		want: `{"b/c":"2","d":"1"}`,
		req:  kittest.WriteRequest{Op: "json-patch", Resource: "configmaps", Namespace: "demo", Name: "x", Body: `[{"op":"test","path":"/data/a","value":"1"},{"op":"add","path":"/data/b~1c","value":"2"},{"op":"move","from":"/data/a","path":"/data/d"}]`},
	}, {
		name: "JSON patch that fails its test",
		write: func(c kit.Cluster) (kit.Cached, error) {
			return c.JSONPatch(demo("x"), []byte(`[{"op":"test","path":"/data/a","value":"2"}]`), kit.Preconditions{})
		},
		wantErr: `k8s_write json-patch configmaps demo/x: ERR_UNPROCESSABLE: the JSON patch does not apply: operation 0 (test /data/a): /data/a is "1", not "2"`,
		req:     kittest.WriteRequest{Op: "json-patch", Resource: "configmaps", Namespace: "demo", Name: "x", Body: `[{"op":"test","path":"/data/a","value":"2"}]`},
	}, {
		name: "create named by its body, with the API's resource path",
		write: func(c kit.Cluster) (kit.Cached, error) {
			return c.Create(kit.Target{Resource: "v1/configmaps", Namespace: "demo"}, []byte(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"y"},"data":{"n":"1"}}`))
		},
		want: `{"n":"1"}`,
		req:  kittest.WriteRequest{Op: "create", Resource: "v1/configmaps", Namespace: "demo", Body: `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"y"},"data":{"n":"1"}}`},
	}, {
		name:    "create of an existing object",
		write:   func(c kit.Cluster) (kit.Cached, error) { return c.Create(demo("x"), []byte(`{}`)) },
		wantErr: `k8s_write create configmaps demo/x: ERR_EXISTS: configmaps "x" already exists`,
		req:     kittest.WriteRequest{Op: "create", Resource: "configmaps", Namespace: "demo", Name: "x", Body: `{}`},
	}, {
		name: "delete",
		write: func(c kit.Cluster) (kit.Cached, error) {
			return kit.Cached{}, c.Delete(demo("x"), kit.Preconditions{UID: "u1"})
		},
		req: kittest.WriteRequest{Op: "delete", Resource: "configmaps", Namespace: "demo", Name: "x", UID: "u1"},
	}, {
		name: "apply without a kind",
		write: func(c kit.Cluster) (kit.Cached, error) {
			return c.Apply(demo("x"), []byte(`{"apiVersion":"v1"}`), false, kit.Preconditions{})
		},
		wantErr: "k8s_write apply configmaps demo/x: ERR_INVALID: the applied configuration has no kind",
		req:     kittest.WriteRequest{Op: "apply", Resource: "configmaps", Namespace: "demo", Name: "x", Body: `{"apiVersion":"v1"}`},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			h := kittest.New(t)
			h.Cache("configmaps", cm)
			var answered, cached string
			err := handle(t, h, func(ev *kit.Event) error {
				o, err := tc.write(kit.K8s())
				if err != nil {
					return err
				}
				if tc.req.Op != "delete" {
					answered, _ = o.Get("data")
				}
				name := tc.req.Name
				if name == "" {
					name = "y"
				}
				if c, err := kit.Cache().Get("configmaps", "demo", name); err == nil {
					cached, _ = c.Get("data")
				} else if !errors.Is(err, kit.ErrNoObject) {
					return err
				}
				return nil
			})
			if tc.wantErr != "" {
				var ce *kit.CallError
				if err == nil || err.Error() != tc.wantErr || !errors.As(err, &ce) {
					t.Errorf("error %v, want %s", err, tc.wantErr)
				}
			} else if err != nil {
				t.Fatal(err)
			}
			if tc.wantErr == "" && (cached != tc.want || (tc.req.Op != "delete" && answered != tc.want)) {
				t.Errorf("answered %s, cached %s, want %s", answered, cached, tc.want)
			}
			if got := h.Writes(); !reflect.DeepEqual(got, []kittest.WriteRequest{tc.req}) {
				t.Errorf("writes %+v, want %+v", got, tc.req)
			}
		})
	}
}

// A write bumps the resourceVersion, so a conditional write on the
// version it returned passes and one on the event's is stale.
func TestWritesVersions(t *testing.T) {
	h := kittest.New(t)
	h.Cache("configmaps", cm)
	err := handle(t, h, func(ev *kit.Event) error {
		t := kit.Target{Resource: "configmaps", Namespace: "demo", Name: "x"}
		o, err := kit.K8s().MergePatch(t, []byte(`{"data":{"a":"2"}}`), kit.Preconditions{ResourceVersion: ev.ResourceVersion()})
		if err != nil {
			return err
		}
		rv, _ := o.Get("metadata.resourceVersion")
		if _, err := kit.K8s().MergePatch(t, []byte(`{}`), kit.Preconditions{ResourceVersion: rv}); err != nil {
			return err
		}
		_, err = kit.K8s().MergePatch(t, []byte(`{}`), kit.Preconditions{ResourceVersion: ev.ResourceVersion()})
		if !errors.Is(err, kit.ErrConflict) {
			return errors.New("a write on the event's version after two writes: " + err.Error())
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// OnWrite programs the apiserver: its code and message reach the plugin
// as a CallError naming the write; it may hand other writes to
// ApplyWrite.
func TestOnWrite(t *testing.T) {
	h := kittest.New(t)
	h.OnWrite(func(r kittest.WriteRequest) (int32, string) {
		if r.Name == "x" {
			return abi.ErrRateLimited, "would wait 12s for the plugin's API budget"
		}
		return h.ApplyWrite(r)
	})
	apply := []byte(`{"apiVersion":"v1","kind":"ConfigMap"}`)
	err := handle(t, h, func(ev *kit.Event) error {
		_, err := kit.K8s().Apply(kit.Target{Resource: "configmaps", Namespace: "demo", Name: "x"}, apply, false, kit.Preconditions{})
		return err
	})
	const want = "k8s_write apply configmaps demo/x: ERR_RATE_LIMITED: would wait 12s for the plugin's API budget"
	if err == nil || err.Error() != want || !errors.Is(err, kit.ErrRateLimited) {
		t.Errorf("error %v, want %s", err, want)
	}
	if err := handle(t, h, func(ev *kit.Event) error {
		_, err := kit.K8s().Apply(kit.Target{Resource: "configmaps", Namespace: "demo", Name: "z"}, apply, false, kit.Preconditions{})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if _, ok := h.CacheObject("configmaps", "demo", "z"); !ok {
		t.Error("the write handed to ApplyWrite is not in the cache")
	}
}

func TestEvents(t *testing.T) {
	for _, tc := range []struct {
		name    string
		record  func(ev *kit.Event) error
		onEvent func(kittest.RecordedEvent) (int32, string)
		wantErr string
		want    []kittest.RecordedEvent
	}{{
		name: "about the event's object",
		record: func(ev *kit.Event) error {
			return ev.RecordEvent(kit.Warning, "ConfigMapTooLarge", "data is 2048 bytes")
		},
		want: []kittest.RecordedEvent{{Type: "Warning", Reason: "ConfigMapTooLarge", Message: "data is 2048 bytes", Object: "demo/x", Kind: "ConfigMap"}},
	}, {
		name: "about a cached object",
		record: func(ev *kit.Event) error {
			n, err := kit.Cache().Get("nodes", "", "n1")
			if err != nil {
				return err
			}
			return n.RecordEvent(kit.Normal, "Seen", "")
		},
		want: []kittest.RecordedEvent{{Type: "Normal", Reason: "Seen", Object: "n1", Kind: "Node"}},
	}, {
		name:    "a reason the Events API refuses",
		record:  func(ev *kit.Event) error { return ev.RecordEvent(kit.Normal, "two words", "") },
		wantErr: `event_record Normal two words about demo/x: ERR_INVALID: reason "two words" is not 1 to 128 letters, digits and _-.:`,
	}, {
		name:    "a message over 1 KiB",
		record:  func(ev *kit.Event) error { return ev.RecordEvent(kit.Normal, "Big", strings.Repeat("m", 1025)) },
		wantErr: "event_record Normal Big about demo/x: ERR_TOO_LARGE: the message is 1025 bytes, over 1024",
	}, {
		name:    "denied",
		record:  func(ev *kit.Event) error { return ev.RecordEvent(kit.Normal, "Seen", "") },
		onEvent: func(kittest.RecordedEvent) (int32, string) { return abi.ErrDenied, "events not granted" },
		wantErr: "event_record Normal Seen about demo/x: ERR_DENIED: events not granted",
	}} {
		t.Run(tc.name, func(t *testing.T) {
			h := kittest.New(t)
			h.Cache("nodes", `{"kind":"Node","metadata":{"name":"n1"}}`)
			if tc.onEvent != nil {
				h.OnEvent(tc.onEvent)
			}
			err := handle(t, h, tc.record)
			if (err == nil) != (tc.wantErr == "") || (err != nil && err.Error() != tc.wantErr) {
				t.Errorf("error %v, want %q", err, tc.wantErr)
			}
			if got := h.Events(); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("events %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestHTTP(t *testing.T) {
	for _, tc := range []struct {
		name     string
		call     func() (*kit.Response, error)
		answer   kittest.HTTPResponse
		want     *kit.Response
		wantErr  string
		requests []kittest.HTTPRequest
	}{{
		name: "answered",
		call: func() (*kit.Response, error) {
			return kit.HTTP("chat").Post("/crashloop?x=1", "application/json", []byte(`{"a":1}`))
		},
		answer: kittest.HTTPResponse{Status: 201, Header: map[string][]string{"x-reply": {"a", "b"}, "Content-Type": {"text/plain"}}, Body: "créé"},
		want:   &kit.Response{Status: 201, Header: map[string][]string{"X-Reply": {"a", "b"}, "Content-Type": {"text/plain"}}, Body: []byte("créé")},
		requests: []kittest.HTTPRequest{{Upstream: "chat", Method: "POST", Path: "/crashloop?x=1",
			Header: map[string][]string{"Content-Type": {"application/json"}}, Body: `{"a":1}`}},
	}, {
		name:     "a 503 is an answer",
		call:     func() (*kit.Response, error) { return kit.HTTP("chat").Get("/") },
		answer:   kittest.HTTPResponse{Status: 503},
		want:     &kit.Response{Status: 503, Header: map[string][]string{}, Body: []byte{}},
		requests: []kittest.HTTPRequest{{Upstream: "chat", Method: "GET", Path: "/", Header: map[string][]string{}}},
	}, {
		name:     "timeout",
		call:     func() (*kit.Response, error) { return kit.HTTP("chat").Get("/slow") },
		answer:   kittest.HTTPResponse{Code: abi.ErrTimeout, Message: `upstream "chat" did not answer within its timeout (10s)`},
		wantErr:  `http_request chat GET /slow: ERR_TIMEOUT: upstream "chat" did not answer within its timeout (10s)`,
		requests: []kittest.HTTPRequest{{Upstream: "chat", Method: "GET", Path: "/slow", Header: map[string][]string{}}},
	}, {
		name:    "an upstream not granted",
		call:    func() (*kit.Response, error) { return kit.HTTP("other").Get("/") },
		wantErr: `http_request other GET /: ERR_DENIED: upstream "other" is not granted (kittest: program it with OnHTTP)`,
	}, {
		name:    "a path that leaves the base",
		call:    func() (*kit.Response, error) { return kit.HTTP("chat").Get("/a/%2e%2e/secret") },
		wantErr: `http_request chat GET /a/%2e%2e/secret: ERR_INVALID: path "/a/%2e%2e/secret" has a . or .. segment`,
	}, {
		name:    "a header the host sets",
		call:    func() (*kit.Response, error) { return kit.HTTP("chat").Do("GET", "/", nil, "content-length", "3") },
		wantErr: `http_request chat GET /: ERR_INVALID: header Content-Length is the host's`,
	}} {
		t.Run(tc.name, func(t *testing.T) {
			h := kittest.New(t)
			h.OnHTTP("chat", func(kittest.HTTPRequest) kittest.HTTPResponse { return tc.answer })
			var got *kit.Response
			err := handle(t, h, func(*kit.Event) error {
				var err error
				got, err = tc.call()
				return err
			})
			if (err == nil) != (tc.wantErr == "") || (err != nil && err.Error() != tc.wantErr) {
				t.Errorf("error %v, want %q", err, tc.wantErr)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("response %+v, want %+v", got, tc.want)
			}
			if r := h.HTTPRequests(); !reflect.DeepEqual(r, tc.requests) {
				t.Errorf("requests %+v, want %+v", r, tc.requests)
			}
		})
	}
}

// A write's own event comes back flagged; the others do not.
func TestSelfWrite(t *testing.T) {
	h := kittest.New(t)
	var got []bool
	kit.Handle(func(ev *kit.Event) error { got = append(got, ev.SelfWrite()); return nil })
	h.SelfWrite("configmaps", cm, cm)
	h.SelfWrite("configmaps", "", cm)
	h.Update("configmaps", cm, cm)
	if want := []bool{true, true, false}; !reflect.DeepEqual(got, want) {
		t.Errorf("SelfWrite() %v, want %v", got, want)
	}
}

func TestDecodeConfig(t *testing.T) {
	for _, tc := range []struct{ config, wantKey, wantErr string }{
		{`{"key":"team"}`, "team", ""},
		{"", "default", ""},
		{`{key: team}`, "", "the configuration is not the JSON the plugin expects: invalid character 'k' looking for beginning of object key string"},
	} {
		h := kittest.New(t)
		h.Config = []byte(tc.config)
		cfg := struct{ Key string }{Key: "default"}
		kit.Handle(func(*kit.Event) error { return nil })
		kit.OnInit(func([]byte) error { return kit.DecodeConfig(&cfg) })
		err := h.Init()
		kit.OnInit(nil)
		if tc.wantErr != "" {
			if err == nil || !strings.HasSuffix(err.Error(), tc.wantErr) {
				t.Errorf("config %q: %v, want a refusal ending %q", tc.config, err, tc.wantErr)
			}
			continue
		}
		if err != nil || cfg.Key != tc.wantKey {
			t.Errorf("config %q: key %q, %v; want %q", tc.config, cfg.Key, err, tc.wantKey)
		}
	}
}
