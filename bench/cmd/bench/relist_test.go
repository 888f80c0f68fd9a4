package main

import (
	"net/http/httptest"
	"strings"
	"testing"
)

func TestEtcdRevision(t *testing.T) {
	for _, c := range []struct {
		name, body string
		want       int64
		err        string
	}{
		{"range answer", `{"header":{"cluster_id":"14841639068965178418","member_id":"10276657743932975437","revision":"52107","raft_term":"2"},"count":"1"}`, 52107, ""},
		{"no header", `{"error":"etcdserver: mvcc: required revision has been compacted","code":11}`, 0, "no header.revision"},
		{"not a number", `{"header":{"revision":"x"}}`, 0, "revision"},
		{"not JSON", `<html>`, 0, "etcd's answer"},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := etcdRevision([]byte(c.body))
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("etcdRevision = %d, %v; want an error naming %q", got, err, c.err)
				}
				return
			}
			if err != nil || got != c.want {
				t.Fatalf("etcdRevision = %d, %v; want %d", got, err, c.want)
			}
		})
	}
}

func TestStartsList(t *testing.T) {
	for _, c := range []struct {
		method, target string
		want           bool
	}{
		{"GET", "/api/v1/namespaces/memory-1/configmaps?limit=500&resourceVersion=0", true},
		{"GET", "/api/v1/namespaces/memory-1/configmaps?allowWatchBookmarks=true&resourceVersion=&sendInitialEvents=true&watch=true", true},
		{"GET", "/api/v1/namespaces/memory-1/configmaps?allowWatchBookmarks=true&resourceVersion=5107&watch=true", false},
		{"GET", "/api/v1/namespaces/memory-1/configmaps/m-00001", false},
		{"GET", "/api/v1", false},
		{"POST", "/api/v1/namespaces/memory-1/configmaps", false},
	} {
		r := httptest.NewRequest(c.method, c.target, nil)
		if got := startsList(r, "configmaps"); got != c.want {
			t.Errorf("startsList(%s %s) = %v, want %v", c.method, c.target, got, c.want)
		}
	}
}
