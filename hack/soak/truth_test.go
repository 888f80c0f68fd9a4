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
		b, _ := json.Marshal(map[string]any{"m": r.Member, "p": r.Process, "i": r.Incarnation, "s": strconv.FormatInt(r.Start, 10), "t": r.Type, "k": r.Key, "rv": r.RV})
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
			rep("a", "i1", 1, "add", "ns/x", "5"), rep("b", "j1", 1, "add", "ns/y", "7"),
		}, nil},
		{"a lost update", []report{
			rep("a", "i1", 1, "add", "ns/x", "4"), rep("b", "j1", 1, "add", "ns/y", "7"),
		}, []string{"ns/x: a has it at 4, the cluster at 5"}},
		{"a lost delete and an object in no view", []report{
			rep("a", "i1", 1, "add", "ns/x", "5"), rep("a", "i1", 1, "add", "ns/z", "1"),
		}, []string{"ns/y at 7: in no member's view", "ns/z: a has it at 1, the cluster does not"}},
		{"in two views", []report{
			rep("a", "i1", 1, "add", "ns/x", "5"), rep("b", "j1", 1, "add", "ns/x", "5"), rep("b", "j1", 1, "add", "ns/y", "7"),
		}, []string{"ns/x: in the views of [a b]"}},
		{"handed over", []report{
			rep("a", "i1", 1, "add", "ns/x", "5"), rep("a", "i1", 1, "add", "ns/y", "7"),
			rep("a", "i1", 1, "delete", "ns/y", "7"), rep("b", "j1", 1, "add", "ns/y", "7"),
		}, nil},
		{"a new incarnation starts a new view; the old one's late reports are ignored", []report{
			rep("a", "i1", 1, "add", "ns/x", "5"), rep("a", "i1", 1, "add", "ns/y", "7"),
			rep("a", "i2", 2, "add", "ns/x", "5"), rep("a", "i1", 1, "add", "ns/z", "1"), rep("a", "i2", 2, "add", "ns/y", "7"),
		}, nil},
		{"a new incarnation that has not had its whole list", []report{
			rep("a", "i1", 1, "add", "ns/x", "5"), rep("a", "i1", 1, "add", "ns/y", "7"), rep("a", "i2", 2, "add", "ns/x", "5"),
		}, []string{"ns/y at 7: in no member's view"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr := &truth{members: map[string]*memberView{}}
			for _, r := range tc.reports {
				post(tr, r)
			}
			if got := tr.diff(cluster, "a", "b"); !slices.Equal(got, tc.want) {
				t.Errorf("diff = %q, want %q", got, tc.want)
			}
		})
	}
}

// rep is a report from member m's own process.
func rep(m, incarnation string, start int64, typ, key, rv string) report {
	return report{Member: m, Process: m, Incarnation: incarnation, Start: start, Type: typ, Key: key, RV: rv}
}
