package main

import "testing"

func TestCountRequests(t *testing.T) {
	metrics := `# TYPE apiserver_request_total counter
apiserver_request_total{code="200",component="apiserver",group="",resource="pods",scope="resource",subresource="",verb="APPLY",version="v1"} 900
apiserver_request_total{code="409",component="apiserver",group="",resource="pods",scope="resource",subresource="",verb="APPLY",version="v1"} 3
apiserver_request_total{code="200",component="apiserver",group="",resource="pods",scope="resource",subresource="status",verb="PATCH",version="v1"} 2
apiserver_request_total{code="200",component="apiserver",group="",resource="pods",scope="namespace",subresource="",verb="WATCH",version="v1"} 4
apiserver_request_total{code="200",component="apiserver",group="apps",resource="replicasets",scope="namespace",subresource="",verb="LIST",version="v1"} 1
apiserver_request_total{code="201",component="apiserver",group="",resource="configmaps",scope="resource",subresource="",verb="POST",version="v1"} 5000
apiserver_longrunning_requests{component="apiserver",group="",resource="pods",scope="namespace",subresource="",verb="WATCH",version="v1"} 2
`
	for _, tc := range []struct {
		resources []string
		want      requestCounts
	}{
		{[]string{"pods", "replicasets", "deployments"}, requestCounts{total: 910, writes: 905}},
		{[]string{"replicasets"}, requestCounts{total: 1}},
		{[]string{"configmaps"}, requestCounts{total: 5000}},
		{[]string{"secrets"}, requestCounts{}},
	} {
		got, err := countRequests([]byte(metrics), tc.resources)
		if err != nil || got != tc.want {
			t.Errorf("countRequests(%v) = %+v, %v; want %+v", tc.resources, got, err, tc.want)
		}
	}
	if _, err := countRequests([]byte(`apiserver_request_total{resource="pods",verb="GET"} x`), []string{"pods"}); err == nil {
		t.Error("a value that is no number: no error")
	}
}
