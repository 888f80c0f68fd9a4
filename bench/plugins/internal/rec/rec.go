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
