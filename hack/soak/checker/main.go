//go:build wasip1

// Command checker is the soak's ground truth inside the daemon: a plugin
// that reports every change it is given, key and resourceVersion, to the
// soak's checker server through the upstream "checker" (ABI.md §17.3),
// tagged with its member and its incarnation (a fresh instance, after a
// restart, a reload or a new process, starts a new view, since it was
// handed the cache again). The server folds the reports into each
// member's view of the cluster and compares the union with what the
// apiserver lists.
//
// It also fills its state (ABI.md §16.2): one key per object, its
// resourceVersion, so that the state store works under the same faults.
// A full quota is not a failure here.
//
// Configuration: {"member": "a", "process": "a"}: the view the reports
// belong to (the replicas of a leader-elected pair share one) and the
// process that sends them (default: the member).
package main

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/informer-host/informer-host/abi/kit"
)

var member, process, incarnation, start string

func init() {
	kit.OnInit(func(raw []byte) error {
		var c struct{ Member, Process string }
		if err := json.Unmarshal(raw, &c); err != nil || c.Member == "" {
			return fmt.Errorf(`config: want {"member": "<name>"}: %v`, err)
		}
		member, process = c.Member, c.Process
		if process == "" {
			process = member
		}
		b := make([]byte, 8)
		if _, err := rand.Read(b); err != nil {
			return err
		}
		incarnation = hex.EncodeToString(b)
		// The checker server orders a member's incarnations by start.
		start = strconv.FormatInt(time.Now().UnixNano(), 10)
		return nil
	})
	kit.Handle(func(ev *kit.Event) error {
		body, _ := json.Marshal(map[string]string{"m": member, "p": process, "i": incarnation, "s": start, "t": ev.Type().String(),
			"k": ev.Key(), "rv": ev.ResourceVersion()})
		resp, err := kit.HTTP("checker").Post("/report", "application/json", body)
		if err != nil {
			return kit.Retry(err) // the report must arrive: the server is the truth's other half
		}
		if resp.Status != 204 {
			return kit.Retry(fmt.Errorf("checker answered %d", resp.Status))
		}
		st := kit.State()
		if ev.Type() == kit.Delete {
			if err := st.Delete(ev.Key()); err != nil && !errors.Is(err, kit.ErrNoKey) {
				kit.Warnf("state delete %s: %v", ev.Key(), err)
			}
			return nil
		}
		if _, err := st.Set(ev.Key(), []byte(ev.ResourceVersion())); err != nil && !errors.Is(err, kit.ErrQuota) {
			kit.Warnf("state set %s: %v", ev.Key(), err)
		}
		return nil
	})
}

func main() {}
