package informer

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"syscall"
	"testing"

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
