package cli

import (
	"context"
	"errors"
	"os"
	"syscall"
	"testing"
	"time"
)

// The handlers are in place when SignalContext returns: a signal at once cancels the
// context with the SignalError that gives the exit code (before, they were armed in the
// background and a signal in the first milliseconds killed opx with its default action).
func TestSignalContextIsArmedAtOnce(t *testing.T) {
	ctx, stop := SignalContext(context.Background(), syscall.SIGHUP)
	defer stop()
	if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	select {
	case <-ctx.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("SIGHUP did not cancel the context")
	}
	var se *SignalError
	if !errors.As(context.Cause(ctx), &se) || se.Signal != syscall.SIGHUP {
		t.Fatalf("cause = %v, want SignalError{SIGHUP}", context.Cause(ctx))
	}
}
