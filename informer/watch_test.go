package informer

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"syscall"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Which failed calls the pipeline retries itself (no answer from the
// apiserver) and which it leaves to the reflector's backoff (an answer).
func TestUnanswered(t *testing.T) {
	gr := schema.GroupResource{Resource: "configmaps"}
	tests := []struct {
		name string
		err  error
		want bool
	}{
		{"connection refused", &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}, true},
		{"connection reset", fmt.Errorf("Get ...: %w", &net.OpError{Op: "read", Err: syscall.ECONNRESET}), true},
		{"EOF", io.ErrUnexpectedEOF, true},
		{"503", apierrors.NewServiceUnavailable("starting"), true},
		{"429", apierrors.NewTooManyRequests("slow down", 1), false},
		{"403", apierrors.NewForbidden(gr, "", errors.New("rbac")), false},
		{"500", apierrors.NewInternalError(errors.New("boom")), false},
		{"410", apierrors.NewResourceExpired("too old"), false},
		{"a transport deadline (the caller's context is checked first)", fmt.Errorf("list: %w", context.DeadlineExceeded), true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := unanswered(tc.err); got != tc.want {
				t.Errorf("unanswered(%v) = %v, want %v", tc.err, got, tc.want)
			}
		})
	}
}

// The apiserver counts as unreachable from the first failed request while
// failures continue; a success ends it, and so does a lone failure that
// nothing continued for apiStaleAfter.
func TestAPIHealthRuns(t *testing.T) {
	t0 := time.Now()
	at := func(d time.Duration) time.Time { return t0.Add(d) }
	boom := errors.New("connection refused")
	tests := []struct {
		name      string
		failures  []time.Duration // when requests fail
		answered  bool            // a request succeeds after them
		query     time.Duration   // when state is asked
		wantSince time.Duration   // -1: not failing
	}{
		{"healthy", nil, false, time.Second, -1},
		{"one failure, asked soon after", []time.Duration{0}, false, time.Second, 0},
		{"one failure, nothing since for longer than apiStaleAfter", []time.Duration{0}, false, apiStaleAfter + time.Second, -1},
		{"failures continuing past apiStaleAfter", []time.Duration{0, 11 * time.Second, 22 * time.Second, 33 * time.Second}, false, 40 * time.Second, 0},
		{"a stale run, then a new failure starts a new run", []time.Duration{0, apiStaleAfter + 5*time.Second}, false, apiStaleAfter + 6*time.Second, apiStaleAfter + 5*time.Second},
		{"a success ends the run", []time.Duration{0, time.Second}, true, 2 * time.Second, -1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := &apiHealth{log: slog.New(slog.NewTextHandler(io.Discard, nil)), logEvery: 10 * time.Second}
			for _, f := range tc.failures {
				h.unanswered(at(f), "/api/v1/configmaps", boom)
			}
			if tc.answered {
				h.answered()
			}
			err, since := h.state(at(tc.query))
			if tc.wantSince < 0 {
				if !since.IsZero() || err != nil {
					t.Errorf("failing since %v (%v), want not failing", since.Sub(t0), err)
				}
				return
			}
			if !since.Equal(at(tc.wantSince)) || err == nil {
				t.Errorf("failing since %v (%v), want since %v", since.Sub(t0), err, tc.wantSince)
			}
		})
	}
}
