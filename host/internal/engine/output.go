package engine

import (
	"bytes"
	"context"
	"log/slog"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/informer-host/informer-host/abi"
)

// LogRate bounds how many lines of output (stdout, stderr and the log
// import together) one instance may log, as a token bucket: Burst lines at
// once, refilled at PerSecond. Lines over the limit are counted, not
// logged, and the count is reported with the next line that gets through.
// The zero value selects the defaults below; PerSecond < 0 disables the limit.
type LogRate struct {
	PerSecond float64
	Burst     int
}

// The default LogRate: bursts of 200 lines, then 20 lines per second.
const (
	DefaultLogPerSecond = 20
	DefaultLogBurst     = 200
)

// tailLines is how many recent output lines an instance keeps to attach to
// a Failure (a Go plugin's panic and goroutine dump go to stderr).
const tailLines = 16

// maxTraceLines and maxTraceBytes bound the panic report a Failure
// carries (output.trace): a goroutine's frames are two lines each.
const (
	maxTraceLines = 200
	maxTraceBytes = 32 << 10
)

// output routes an instance's text output to its logger. It is used only
// on the goroutine that is calling into the instance (guest writes happen
// inside those calls), so it needs no locking.
type output struct {
	logger *slog.Logger
	rate   LogRate
	clock  func() time.Time // time.Now; tests replace it
	tokens float64
	last   time.Time
	drops  int

	tail     [tailLines][]byte
	tailNext int
	tailLen  int

	// trace is the current call's Go panic or fatal error report, from
	// its headline (the first line that starts one) on, up to
	// maxTraceLines and maxTraceBytes (traceCut counts the lines past
	// them): kept apart because the goroutine dump scrolls out of the
	// tail the frames that matter, the first ones, where it was raised.
	trace      [][]byte
	traceBytes int
	traceCut   int

	// oom is set when the guest printed an out-of-memory message; it helps
	// tell a memory failure from another trap.
	oom bool
}

func newOutput(l *slog.Logger, r LogRate) *output {
	if r == (LogRate{}) {
		r = LogRate{PerSecond: DefaultLogPerSecond, Burst: DefaultLogBurst}
	}
	if r.Burst < 1 {
		r.Burst = 1
	}
	return &output{logger: l, rate: r, clock: time.Now, tokens: float64(r.Burst)}
}

// allow takes a token, if there is one.
func (o *output) allow() bool {
	if o.rate.PerSecond < 0 {
		return true
	}
	now := o.clock()
	if !o.last.IsZero() {
		o.tokens += now.Sub(o.last).Seconds() * o.rate.PerSecond
		if b := float64(o.rate.Burst); o.tokens > b {
			o.tokens = b
		}
	}
	o.last = now
	if o.tokens < 1 {
		return false
	}
	o.tokens--
	return true
}

// emit logs one line, or counts it as dropped.
func (o *output) emit(level slog.Level, stream string, line []byte) bool {
	line = truncateUTF8(line, abi.MaxLogLineLen)
	o.remember(line)
	if !o.allow() {
		o.drops++
		return false
	}
	ctx := context.Background()
	if o.drops > 0 {
		o.logger.LogAttrs(ctx, slog.LevelWarn, "plugin output rate limited: "+strconv.Itoa(o.drops)+" lines dropped",
			slog.Int("dropped", o.drops))
		o.drops = 0
	}
	if o.logger.Enabled(ctx, level) {
		o.logger.LogAttrs(ctx, level, string(line), slog.String("stream", stream))
	}
	return true
}

func (o *output) remember(line []byte) {
	if !o.oom && bytes.Contains(line, []byte("out of memory")) {
		o.oom = true
	}
	switch {
	case len(o.trace) == 0 && !bytes.HasPrefix(line, []byte("panic: ")) && !bytes.HasPrefix(line, []byte("fatal error: ")):
	case len(o.trace) < maxTraceLines && o.traceBytes+len(line) <= maxTraceBytes:
		o.trace = append(o.trace, append([]byte(nil), line...))
		o.traceBytes += len(line) + 1
	default:
		o.traceCut++
	}
	o.tail[o.tailNext] = append(o.tail[o.tailNext][:0], line...)
	o.tailNext = (o.tailNext + 1) % tailLines
	if o.tailLen < tailLines {
		o.tailLen++
	}
}

// takeTail returns the remembered lines, oldest first, and forgets them.
// After a Go panic or fatal error it returns its report whole (bounded)
// instead: the lines of the tail before its headline, then the report.
func (o *output) takeTail() string {
	var b bytes.Buffer
	start := (o.tailNext - o.tailLen + tailLines) % tailLines
	tail := o.tailLen
	if len(o.trace) > 0 {
		// The report's lines are the tail's last ones; any before them
		// were printed before the headline.
		n := len(o.trace) + o.traceCut
		if n < tail {
			tail -= n
		} else {
			tail = 0
		}
	}
	for i := 0; i < tail; i++ {
		b.Write(o.tail[(start+i)%tailLines])
		b.WriteByte('\n')
	}
	for _, l := range o.trace {
		b.Write(l)
		b.WriteByte('\n')
	}
	if o.traceCut > 0 {
		b.WriteString("... (" + strconv.Itoa(o.traceCut) + " more lines)\n")
	}
	o.tailLen = 0
	o.forgetTrace()
	return b.String()
}

func (o *output) forgetTrace() {
	clear(o.trace)
	o.trace, o.traceBytes, o.traceCut = o.trace[:0], 0, 0
}

// resetCall forgets per-call memory of output (the tail, the panic
// report and the OOM hint), so a Failure reports what the failing call
// printed.
func (o *output) resetCall() {
	o.tailLen = 0
	o.oom = false
	o.forgetTrace()
}

// truncateUTF8 cuts b to at most n bytes, at a rune boundary.
func truncateUTF8(b []byte, n int) []byte {
	if len(b) <= n {
		return b
	}
	b = b[:n]
	for i := 0; i < utf8.UTFMax && len(b) > 0; i++ {
		if r, _ := utf8.DecodeLastRune(b); r != utf8.RuneError {
			break
		}
		b = b[:len(b)-1]
	}
	return b
}

// lineWriter is the io.Writer given to WASI as stdout or stderr: it splits
// what the guest writes into lines and emits each. A partial line waits for
// its newline until the end of the current call (flush).
type lineWriter struct {
	out    *output
	st     *callState // nil in tests
	level  slog.Level
	stream string
	buf    []byte
}

// Write takes p line by line. It ends the call (abortCall) once it is
// being killed, looking on entry (fd_write calls it once per iovec, and a
// guest may pass millions of empty ones) and every hostChunk bytes, so
// one fd_write over a large buffer does not outlive its deadline.
func (w *lineWriter) Write(p []byte) (int, error) {
	if w.st != nil && w.st.aborted() {
		abortCall()
	}
	n := len(p)
	checked := len(p)
	// Once p is known to hold no newline it is not searched again: cutting
	// a long line into MaxLogLineLen pieces stays linear.
	noNewline := false
	for len(p) > 0 {
		if checked-len(p) >= hostChunk {
			if w.st != nil && w.st.aborted() {
				abortCall()
			}
			checked = len(p)
		}
		i := -1
		if !noNewline {
			i = bytes.IndexByte(p, '\n')
			noNewline = i < 0
		}
		if i < 0 {
			if room := abi.MaxLogLineLen - len(w.buf); len(p) > room {
				w.buf = append(w.buf, p[:room]...)
				p = p[room:]
				w.flush()
				continue
			}
			w.buf = append(w.buf, p...)
			break
		}
		line := p[:i]
		if len(w.buf) > 0 {
			w.buf = append(w.buf, line...)
			line = w.buf
		}
		w.out.emit(w.level, w.stream, bytes.TrimSuffix(line, []byte("\r")))
		w.buf = w.buf[:0]
		p = p[i+1:]
	}
	return n, nil
}

func (w *lineWriter) flush() {
	if len(w.buf) > 0 {
		w.out.emit(w.level, w.stream, w.buf)
		w.buf = w.buf[:0]
	}
}
