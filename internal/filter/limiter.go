package filter

import (
	"strings"
	"sync"
	"time"
)

// ErrorLimiter decides which evaluation errors get logged: the first one
// per key (a binding) per interval, counting the rest. A broken expression
// fails on every event, and one log line per event would drown the log.
//
//	if d.Err != nil {
//		if ok, n := limiter.Allow(bindingName); ok {
//			log.Error(d.Err, "filter failed", "binding", bindingName, "suppressed", n)
//		}
//	}
//
// It is safe for concurrent use.
type ErrorLimiter struct {
	interval time.Duration
	now      func() time.Time // time.Now; tests substitute a fake clock

	mu   sync.Mutex
	keys map[string]*limiterState
}

type limiterState struct {
	last       time.Time
	suppressed int
}

// NewErrorLimiter returns a limiter that allows one error per key per
// interval (a minute if interval is not positive).
func NewErrorLimiter(interval time.Duration) *ErrorLimiter {
	if interval <= 0 {
		interval = time.Minute
	}
	return &ErrorLimiter{interval: interval, now: time.Now, keys: make(map[string]*limiterState)}
}

// Allow reports whether an error for key should be logged now, and how
// many errors for key it refused since the last one it allowed.
func (l *ErrorLimiter) Allow(key string) (ok bool, suppressed int) {
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	s := l.keys[key]
	if s == nil {
		l.keys[key] = &limiterState{last: now}
		return true, 0
	}
	if now.Sub(s.last) < l.interval {
		s.suppressed++
		return false, 0
	}
	n := s.suppressed
	s.last, s.suppressed = now, 0
	return true, n
}

// Forget drops key's state, for a binding that was removed.
func (l *ErrorLimiter) Forget(key string) {
	l.mu.Lock()
	delete(l.keys, key)
	l.mu.Unlock()
}

// ForgetPrefix drops the state of every key starting with prefix, for a
// plugin that was removed with all its bindings.
func (l *ErrorLimiter) ForgetPrefix(prefix string) {
	l.mu.Lock()
	for k := range l.keys {
		if strings.HasPrefix(k, prefix) {
			delete(l.keys, k)
		}
	}
	l.mu.Unlock()
}

// Len returns the number of keys held, which Forget and ForgetPrefix bound.
func (l *ErrorLimiter) Len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.keys)
}
