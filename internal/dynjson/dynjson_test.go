package dynjson

import (
	"bytes"
	"reflect"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
)

// jsonInfo returns the JSON serializer info of client-go's dynamic
// client and of the one here.
func jsonInfo(t testing.TB) (theirs, ours runtime.SerializerInfo) {
	base := dynamic.ConfigFor(&rest.Config{}).NegotiatedSerializer
	pick := func(ns runtime.NegotiatedSerializer) runtime.SerializerInfo {
		for _, in := range ns.SupportedMediaTypes() {
			if in.MediaType == runtime.ContentTypeJSON {
				return in
			}
		}
		t.Fatal("no JSON serializer")
		return runtime.SerializerInfo{}
	}
	return pick(base), pick(negotiated{base, newMetaScheme()})
}

const pod = `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","namespace":"ns","uid":"u1","resourceVersion":"12",` +
	`"labels":{"app":"a"},"ownerReferences":[{"apiVersion":"apps/v1","kind":"ReplicaSet","name":"rs","uid":"u2","controller":true}]},` +
	`"spec":{"containers":[{"name":"c","image":"x","ports":[{"containerPort":80}]}],"priority":0,"overhead":{"cpu":"1.5"}},` +
	`"status":{"phase":"Pending","ratio":0.5}}`

// TestObjectDecoderAsClientGo: every input decodes to what client-go's
// dynamic serializer gives, object, kind and error alike.
func TestObjectDecoderAsClientGo(t *testing.T) {
	theirs, ours := jsonInfo(t)
	inputs := map[string]string{
		"pod":             pod,
		"list":            `{"apiVersion":"v1","kind":"PodList","metadata":{"resourceVersion":"3"},"items":[` + pod + `]}`,
		"status":          `{"apiVersion":"v1","kind":"Status","status":"Failure","message":"gone","reason":"NotFound","code":404}`,
		"no kind":         `{"apiVersion":"v1","metadata":{"name":"p"}}`,
		"no version":      `{"kind":"Pod","metadata":{"name":"p"}}`,
		"not JSON":        `{"apiVersion":"v1",`,
		"null":            `null`,
		"a custom object": `{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"w"},"spec":{"n":9007199254740993}}`,
	}
	for name, in := range inputs {
		for _, into := range []func() runtime.Object{func() runtime.Object { return nil }, func() runtime.Object { return &unstructured.Unstructured{} }} {
			want, wantGVK, wantErr := theirs.Serializer.Decode([]byte(in), nil, into())
			got, gotGVK, gotErr := ours.Serializer.Decode([]byte(in), nil, into())
			if (wantErr == nil) != (gotErr == nil) || (wantErr != nil && wantErr.Error() != gotErr.Error()) {
				t.Errorf("%s into %T: error %v, client-go's %v", name, into(), gotErr, wantErr)
				continue
			}
			if wantErr != nil {
				continue
			}
			if !reflect.DeepEqual(got, want) || *gotGVK != *wantGVK {
				t.Errorf("%s into %T: %#v (%v), client-go's %#v (%v)", name, into(), got, gotGVK, want, wantGVK)
			}
		}
	}
}

// TestEventDecoderAsClientGo: a watch event's envelope decodes as
// client-go's, its object left raw.
func TestEventDecoderAsClientGo(t *testing.T) {
	theirs, ours := jsonInfo(t)
	frame := []byte(`{"type":"MODIFIED","object":` + pod + `}`)
	var want, got metav1.WatchEvent
	_, wantGVK, wantErr := theirs.StreamSerializer.Serializer.Decode(frame, nil, &want)
	_, gotGVK, gotErr := ours.StreamSerializer.Serializer.Decode(frame, nil, &got)
	if wantErr != nil || gotErr != nil {
		t.Fatalf("errors: %v, client-go's %v", gotErr, wantErr)
	}
	if got.Type != want.Type || !bytes.Equal(got.Object.Raw, want.Object.Raw) || *gotGVK != *wantGVK {
		t.Fatalf("%s %s (%v), client-go's %s %s (%v)", got.Type, got.Object.Raw, gotGVK, want.Type, want.Object.Raw, wantGVK)
	}
}

// BenchmarkWatchEvent decodes one watch event of a Pod, envelope and
// object, as the informers do: client-go's dynamic serializer against
// the decoders here.
func BenchmarkWatchEvent(b *testing.B) {
	theirs, ours := jsonInfo(b)
	frame := []byte(`{"type":"MODIFIED","object":` + pod + `}`)
	for _, c := range []struct {
		name string
		in   runtime.SerializerInfo
	}{{"client-go", theirs}, {"dynjson", ours}} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				var ev metav1.WatchEvent
				if _, _, err := c.in.StreamSerializer.Serializer.Decode(frame, nil, &ev); err != nil {
					b.Fatal(err)
				}
				if _, err := runtime.Decode(c.in.Serializer, ev.Object.Raw); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
