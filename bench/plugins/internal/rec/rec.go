// Package rec is the benchmark plugins' latency probe. A plugin calls
// Entered first thing in its handler; rec notes the event (type, object
// name) and the time the handler was entered, read from the guest's clock
// (WASI clock_time_get: the host's real wall clock, the same clock the
// harness stamps its writes with). Records leave the plugin in batched log
// lines,
//
//	benchrec a:cm-00042:c:1764423312123456789,u:cm-00042:u1:1764423312923456789,...
//
// about 120 to a line, so that 15,000 events make about 125 lines, well
// inside the host's per-plugin log rate limit (bursts of 200 lines, then 20
// a second). Flush sends what is left; plugins call it from OnShutdown,
// which the host calls when it stops or replaces the plugin.
//
// Each record is type:name:value:time, where value is whatever the plugin
// passes (the value of a field it read: the harness writes a distinct one
// into every change, to tell apart changes of one object) and time is Unix
// nanoseconds. Types: a add, A add from the initial list (or a replay),
// u update, d delete.
package rec

import (
	"strconv"
	"time"

	"github.com/informer-host/informer-host/abi/kit"
)

// On enables recording (plugins turn it on from their configuration).
var On bool

var buf = make([]byte, 0, 4096)

const flushAt = 3900 // the host cuts lines at 4096 bytes

// Entered records ev, with value, as entered at t.
func Entered(ev *kit.Event, value string, t time.Time) {
	if !On {
		return
	}
	var c byte
	switch ev.Type() {
	case kit.Add:
		c = 'a'
		if ev.IsInInitialList() {
			c = 'A'
		}
	case kit.Update:
		c = 'u'
	case kit.Delete:
		c = 'd'
	default:
		c = '?'
	}
	if len(buf) > 0 {
		buf = append(buf, ',')
	}
	buf = append(buf, c, ':')
	buf = append(buf, ev.Name()...)
	buf = append(buf, ':')
	buf = append(buf, value...)
	buf = append(buf, ':')
	buf = strconv.AppendInt(buf, t.UnixNano(), 10)
	if len(buf) >= flushAt {
		Flush()
	}
}

// Flush logs the records not logged yet.
func Flush() {
	if len(buf) == 0 {
		return
	}
	kit.Infof("benchrec %s", buf)
	buf = buf[:0]
}
