// Package dynjson builds client-go dynamic clients that decode JSON in
// fewer passes over the bytes.
//
// client-go's dynamic client decodes a watch event's object, or a write's
// answer, with its generic JSON serializer: encoding/json reads the whole
// object once to find its apiVersion and kind (SimpleMetaFactory, a
// validation pass and a decoding pass), then sigs.k8s.io/json validates it
// again, skips over it to hand it to Unstructured.UnmarshalJSON, which
// validates and decodes it once more; the watch event's envelope, which
// carries the object, is read the same way before. About ten passes over
// every object, where one decode into a map (a validation pass and a
// decoding pass, the least encoding/json does) gives the same
// Unstructured: in the CPU profile of the daemon labelling 1,000 Pods
// (bench case 9) the decoding was a fifth of its CPU.
//
// The decoders here take the short way for what the informers and the
// writes decode most, an object into nil or an *unstructured.Unstructured
// and a watch event's envelope, and give everything else (lists, the
// meta/v1 kinds such as Status, a decode with default kinds) to
// client-go's own serializer, so the results are client-go's.
//
// Rule of direction: it imports client-go and apimachinery only; the informers
// (informer/) and the writes (internal/kubewrite) import it.
package dynjson
