package main

import (
	"slices"
	"testing"

	"github.com/informer-host/informer-host/abi/kit/kittest"
)

const (
	pod        = `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"web-7d9-x1","namespace":"shop","ownerReferences":[{"apiVersion":"apps/v1","kind":"ReplicaSet","name":"web-7d9","uid":"u-rs","controller":true}]}}`
	labelled   = `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"web-7d9-x1","namespace":"shop","labels":{"deployment":"web"},"ownerReferences":[{"apiVersion":"apps/v1","kind":"ReplicaSet","name":"web-7d9","uid":"u-rs","controller":true}]}}`
	replicaSet = `{"apiVersion":"apps/v1","kind":"ReplicaSet","metadata":{"name":"web-7d9","namespace":"shop","ownerReferences":[{"apiVersion":"apps/v1","kind":"Deployment","name":"web","uid":"u-dep","controller":true}]}}`
	deployment = `{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"web","namespace":"shop"}}`
)

// The handler runs natively on the kit's fake host, its caches seeded
// with what the cluster's would hold; the fake records each write and
// Event the handler made.
func TestHandleLabelsThePodWithItsDeployment(t *testing.T) {
	for _, tc := range []struct {
		name   string
		cached []string // resource, object, ...
		pod    string
		code   int32
		writes []kittest.WriteRequest
		events []kittest.RecordedEvent
	}{
		{
			name:   "pod of a deployment",
			cached: []string{"pods", pod, "replicasets", replicaSet, "deployments", deployment},
			pod:    pod,
			code:   kittest.OK,
			writes: []kittest.WriteRequest{{Op: "apply", Resource: "pods", Namespace: "shop", Name: "web-7d9-x1", MustExist: true,
				Body: `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"web-7d9-x1","namespace":"shop","labels":{"deployment":"web"}}}`}},
			events: []kittest.RecordedEvent{{Type: "Normal", Reason: "Labelled", Message: "deployment=web (through ReplicaSet web-7d9)",
				Object: "shop/web-7d9-x1", Kind: "Pod"}},
		},
		{
			name:   "already labelled: its own write coming back",
			cached: []string{"pods", labelled, "replicasets", replicaSet, "deployments", deployment},
			pod:    labelled,
			code:   kittest.OK,
		},
		{
			name:   "replicaset not cached yet",
			cached: []string{"pods", pod, "deployments", deployment, "replicasets", `{"metadata":{"name":"other","namespace":"shop"}}`},
			pod:    pod,
			code:   kittest.Retry,
		},
		{
			name:   "not owned",
			cached: []string{"pods", `{"metadata":{"name":"bare","namespace":"shop"}}`},
			pod:    `{"metadata":{"name":"bare","namespace":"shop"}}`,
			code:   kittest.OK,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := kittest.New(t)
			for i := 0; i < len(tc.cached); i += 2 {
				h.Cache(tc.cached[i], tc.cached[i+1])
			}
			if r := h.Add("pods", tc.pod); r.Code != tc.code {
				t.Fatalf("%v, want code %d", r, tc.code)
			}
			if got := h.Writes(); !slices.Equal(got, tc.writes) {
				t.Errorf("writes %+v, want %+v", got, tc.writes)
			}
			if got := h.Events(); !slices.Equal(got, tc.events) {
				t.Errorf("events %+v, want %+v", got, tc.events)
			}
		})
	}
}
