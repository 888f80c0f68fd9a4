package dynjson

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
)

// NewForConfig is dynamic.NewForConfig with the short-way decoders.
func NewForConfig(in *rest.Config) (dynamic.Interface, error) {
	cfg := dynamic.ConfigFor(in)
	cfg.NegotiatedSerializer = negotiated{cfg.NegotiatedSerializer, newMetaScheme()}
	h, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, err
	}
	// As dynamic.NewForConfigAndClient: the dynamic client builds every
	// path itself.
	cfg.GroupVersion = nil
	cfg.APIPath = "/if-you-see-this-search-for-the-break"
	rc, err := rest.UnversionedRESTClientForConfigAndClient(cfg, h)
	if err != nil {
		return nil, err
	}
	return dynamic.New(rc), nil
}

// newMetaScheme has the kinds client-go's dynamic client decodes into
// typed objects (its basicScheme): meta/v1 under version v1.
func newMetaScheme() *runtime.Scheme {
	s := runtime.NewScheme()
	metav1.AddToGroupVersion(s, schema.GroupVersion{Version: "v1"})
	return s
}

// negotiated wraps the dynamic client's negotiated serializer, replacing
// the JSON decoders.
type negotiated struct {
	runtime.NegotiatedSerializer
	meta *runtime.Scheme
}

func (n negotiated) SupportedMediaTypes() []runtime.SerializerInfo {
	infos := append([]runtime.SerializerInfo(nil), n.NegotiatedSerializer.SupportedMediaTypes()...)
	for i := range infos {
		in := &infos[i]
		if in.MediaType != runtime.ContentTypeJSON {
			continue
		}
		in.Serializer = objectDecoder{in.Serializer, n.meta}
		if in.StreamSerializer != nil {
			ss := *in.StreamSerializer
			ss.Serializer = eventDecoder{ss.Serializer}
			in.StreamSerializer = &ss
		}
	}
	return infos
}

// objectDecoder decodes an object into an Unstructured in one decode.
type objectDecoder struct {
	runtime.Serializer // client-go's, for the rest and for encoding
	meta               *runtime.Scheme
}

func (d objectDecoder) Decode(data []byte, defaults *schema.GroupVersionKind, into runtime.Object) (runtime.Object, *schema.GroupVersionKind, error) {
	u, ok := into.(*unstructured.Unstructured)
	if defaults != nil || (into != nil && !ok) {
		return d.Serializer.Decode(data, defaults, into)
	}
	m := map[string]any{}
	if err := utiljson.Unmarshal(data, &m); err != nil {
		return d.Serializer.Decode(data, defaults, into) // its error, worded as client-go words it
	}
	if _, list := m["items"]; list {
		return d.Serializer.Decode(data, defaults, into)
	}
	apiVersion, _ := m["apiVersion"].(string)
	kind, _ := m["kind"].(string)
	gvk := schema.FromAPIVersionAndKind(apiVersion, kind)
	if into == nil && d.meta.Recognizes(gvk) {
		// A Status, say: client-go decodes those typed.
		return d.Serializer.Decode(data, defaults, into)
	}
	if into == nil {
		if kind == "" {
			return nil, &gvk, runtime.NewMissingKindErr(string(data))
		}
		if gvk.Version == "" {
			return nil, &gvk, runtime.NewMissingVersionErr(string(data))
		}
		u = &unstructured.Unstructured{}
	} else if kind == "" {
		return nil, &gvk, runtime.NewMissingKindErr(string(data))
	}
	u.Object = m
	return u, &gvk, nil
}

// eventDecoder decodes a watch event's envelope in one decode: the
// object stays raw bytes (runtime.RawExtension) for objectDecoder.
type eventDecoder struct {
	runtime.Serializer
}

var watchEventKind = metav1.SchemeGroupVersion.WithKind("WatchEvent")

func (d eventDecoder) Decode(data []byte, defaults *schema.GroupVersionKind, into runtime.Object) (runtime.Object, *schema.GroupVersionKind, error) {
	ev, ok := into.(*metav1.WatchEvent)
	if defaults != nil || !ok {
		return d.Serializer.Decode(data, defaults, into)
	}
	if err := utiljson.Unmarshal(data, ev); err != nil {
		return d.Serializer.Decode(data, defaults, into)
	}
	gvk := schema.GroupVersionKind{Version: "v1", Kind: watchEventKind.Kind}
	return ev, &gvk, nil
}
