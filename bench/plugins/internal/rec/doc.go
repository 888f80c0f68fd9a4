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
//
// Rule of direction: rec imports only abi/kit; only the benchmark plugins
// under bench/plugins import it (it is internal to them).
package rec
