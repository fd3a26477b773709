package cli

import (
	"context"
	"errors"
	"os"
	"syscall"
	"testing"
	"time"
)

// The handlers are installed in the background; once WaitSignals returns, a signal
// cancels the context with the SignalError that gives the exit code.
func TestSignalContextArmsInBackground(t *testing.T) {
	ctx, stop := SignalContext(context.Background(), syscall.SIGHUP)
	defer stop()
	WaitSignals(ctx)
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
	WaitSignals(context.Background()) // no SignalContext: returns at once
}

// Commands that take allocations, start processes or fill caches wait for the handlers
// before they run; only the quick, read-and-replace ones start without them.
func TestCommandsThatWaitForSignals(t *testing.T) {
	quickOnes := map[string]bool{"version": true, "list": true, "plan": true, "summarize": true, "report": true, "compare": true, "doctor": true}
	root := newRoot(context.Background(), Env{})
	seen := 0
	for _, c := range root.Commands() {
		if c.Name() == "help" || c.Name() == "completion" {
			continue
		}
		seen++
		if got := c.Annotations[signalsLater] != ""; got != quickOnes[c.Name()] {
			t.Errorf("%s: starts before the signal handlers = %v, want %v", c.Name(), got, quickOnes[c.Name()])
		}
	}
	if seen < 13 {
		t.Errorf("only %d commands checked", seen)
	}
}
