package cli

import (
	"context"
	"errors"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/semianalysis/opx/internal/proc"
	"github.com/semianalysis/opx/internal/testenv"
)

// The handlers are in place when SignalContext returns: a signal at once cancels the
// context with the SignalError that gives the exit code (before, they were armed in the
// background and a signal in the first milliseconds killed opx with its default action).
func TestSignalContextIsArmedAtOnce(t *testing.T) {
	var said testenv.Buffer
	ctx, stop := SignalContext(context.Background(), &said, syscall.SIGHUP)
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
	// the cleanup outlives the first signal, and ends at the second, which says so
	cleanup, done := proc.Cleanup(ctx)
	defer done()
	if cleanup.Err() != nil {
		t.Fatalf("the first signal ended the cleanup: %v", context.Cause(cleanup))
	}
	syscall.Kill(os.Getpid(), syscall.SIGHUP)
	select {
	case <-cleanup.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("a second SIGHUP did not end the cleanup")
	}
	if !errors.As(context.Cause(cleanup), &se) || se.Signal != syscall.SIGHUP {
		t.Fatalf("cleanup's cause = %v, want SignalError{SIGHUP}", context.Cause(cleanup))
	}
	if !strings.Contains(said.String(), "opx: stopping now: cleanup cut short") {
		t.Fatalf("a second signal said %q", said.String())
	}
}

// Without a second signal the cleanup runs to its end: the command's own stop (its
// return) does not cut it short, and a cleanup never outlives its caller's done.
func TestCleanupOutlivesTheFirstSignalOnly(t *testing.T) {
	ctx, cancel := context.WithCancelCause(context.Background())
	now, stopNow := context.WithCancelCause(context.Background())
	ctx = proc.WithStopNow(ctx, now)
	cancel(errors.New("first signal"))
	cleanup, done := proc.Cleanup(ctx)
	if cleanup.Err() != nil {
		t.Fatal("the first cancellation ended the cleanup")
	}
	stopNow(errors.New("second signal"))
	<-cleanup.Done()
	if got := context.Cause(cleanup); got == nil || got.Error() != "second signal" {
		t.Fatalf("cause %v", got)
	}
	done()
	// no stop-now context: context.WithoutCancel, ended only by done
	plain, cancelPlain := context.WithCancel(context.Background())
	cancelPlain()
	c2, done2 := proc.Cleanup(plain)
	if c2.Err() != nil {
		t.Fatal("a cancelled parent ended the cleanup")
	}
	done2()
	if c2.Err() == nil {
		t.Fatal("done did not end the cleanup")
	}
}
