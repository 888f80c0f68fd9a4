package abi

import (
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// informer_host.h is the same contract in C: its event types, header
// flags and error codes have abi.go's values, and it declares every
// import of abi.Imports.
func TestCHeaderAgrees(t *testing.T) {
	b, err := os.ReadFile("include/informer_host.h")
	if err != nil {
		t.Fatal(err)
	}
	src := string(b)
	defs := map[string]int64{}
	for _, m := range regexp.MustCompile(`(?m)^#define (IH_\w+) \(?(-?(?:0x)?[0-9a-fA-F]+)(?:LL)?\)?`).FindAllStringSubmatch(src, -1) {
		v, err := strconv.ParseInt(m[2], 0, 64)
		if err != nil {
			t.Fatalf("%s: %v", m[1], err)
		}
		defs[m[1]] = v
	}
	want := map[string]int64{
		"IH_EVENT_NONE": int64(EventNone), "IH_EVENT_ADD": int64(EventAdd), "IH_EVENT_UPDATE": int64(EventUpdate),
		"IH_EVENT_DELETE": int64(EventDelete), "IH_EVENT_RECONCILE": int64(EventReconcile),
		"IH_FLAG_INITIAL_LIST": int64(FlagInitialList), "IH_FLAG_FINAL_STATE_UNKNOWN": int64(FlagFinalStateUnknown),
		"IH_FLAG_HAS_OLD_OBJECT": int64(FlagHasOldObject), "IH_FLAG_SELF_WRITE": int64(FlagSelfWrite),
		"IH_FLAG_HANDED_OVER": int64(FlagHandedOver), "IH_FLAG_MISSED_DELETE": int64(FlagMissedDelete),
		"IH_FLAG_ABSENT": int64(FlagAbsent), "IH_FLAG_DELETING": int64(FlagDeleting),
		"IH_OK": int64(ResultOK), "IH_RETRY": int64(ResultRetry), "IH_DROP": int64(ResultDrop), "IH_ERROR": int64(ResultError),
		"IH_REQUEUE_AFTER_MAX_MILLIS": MaxRequeueAfterMillis,
	}
	for c := ErrFieldConflict; c <= ErrAbsent; c++ {
		want["IH_"+ErrorName(c)] = int64(c)
	}
	for name, v := range want {
		got, ok := defs[name]
		switch {
		case !ok:
			t.Errorf("informer_host.h does not define %s (%d)", name, v)
		case got != v:
			t.Errorf("informer_host.h: %s is %d, abi.go says %d", name, got, v)
		}
	}
	for _, f := range Imports() {
		if !strings.Contains(src, fmt.Sprintf("IH_IMPORT(%q)", f.Name)) {
			t.Errorf("informer_host.h does not declare the import %s", f.Name)
		}
	}
}
