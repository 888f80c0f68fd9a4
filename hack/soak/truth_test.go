package soak

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"testing"
)

// The checker server is half of the soak's ground truth: it must see a
// lost change, an object in two views, one in none and a ghost, and
// must forget a member's retired incarnation.
func TestTruth(t *testing.T) {
	post := func(tr *truth, r report) {
		b, _ := json.Marshal(map[string]any{"m": r.Member, "i": r.Incarnation, "s": strconv.FormatInt(r.Start, 10), "t": r.Type, "k": r.Key, "rv": r.RV})
		w := httptest.NewRecorder()
		tr.ServeHTTP(w, httptest.NewRequest(http.MethodPost, "/report", bytes.NewReader(b)))
		if w.Code != http.StatusNoContent {
			t.Fatalf("report %+v: %d", r, w.Code)
		}
	}
	cluster := map[string]string{"ns/x": "5", "ns/y": "7"}
	for _, tc := range []struct {
		name    string
		reports []report
		want    []string
	}{
		{"converged", []report{
			{"a", "i1", 1, "add", "ns/x", "5"}, {"b", "j1", 1, "add", "ns/y", "7"},
		}, nil},
		{"a lost update", []report{
			{"a", "i1", 1, "add", "ns/x", "4"}, {"b", "j1", 1, "add", "ns/y", "7"},
		}, []string{"ns/x: a has it at 4, the cluster at 5"}},
		{"a lost delete and an object in no view", []report{
			{"a", "i1", 1, "add", "ns/x", "5"}, {"a", "i1", 1, "add", "ns/z", "1"},
		}, []string{"ns/y at 7: in no member's view", "ns/z: a has it at 1, the cluster does not"}},
		{"in two views", []report{
			{"a", "i1", 1, "add", "ns/x", "5"}, {"b", "j1", 1, "add", "ns/x", "5"}, {"b", "j1", 1, "add", "ns/y", "7"},
		}, []string{"ns/x: in the views of [a b]"}},
		{"handed over", []report{
			{"a", "i1", 1, "add", "ns/x", "5"}, {"a", "i1", 1, "add", "ns/y", "7"},
			{"a", "i1", 1, "delete", "ns/y", "7"}, {"b", "j1", 1, "add", "ns/y", "7"},
		}, nil},
		{"a new incarnation starts a new view; the old one's late reports are ignored", []report{
			{"a", "i1", 1, "add", "ns/x", "5"}, {"a", "i1", 1, "add", "ns/y", "7"},
			{"a", "i2", 2, "add", "ns/x", "5"}, {"a", "i1", 1, "add", "ns/z", "1"}, {"a", "i2", 2, "add", "ns/y", "7"},
		}, nil},
		{"a new incarnation that has not had its whole list", []report{
			{"a", "i1", 1, "add", "ns/x", "5"}, {"a", "i1", 1, "add", "ns/y", "7"}, {"a", "i2", 2, "add", "ns/x", "5"},
		}, []string{"ns/y at 7: in no member's view"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr := &truth{members: map[string]*memberView{}}
			for _, r := range tc.reports {
				post(tr, r)
			}
			if got := tr.diff(cluster); !slices.Equal(got, tc.want) {
				t.Errorf("diff = %q, want %q", got, tc.want)
			}
		})
	}
}
