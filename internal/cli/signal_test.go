package cli

import (
	"context"
	"errors"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// The handlers are in place when SignalContext returns: a signal at once cancels the
// context with the SignalError that gives the exit code (before, they were armed in the
// background and a signal in the first milliseconds killed opx with its default action).
func TestSignalContextIsArmedAtOnce(t *testing.T) {
	var said syncBuffer
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
	// a second signal is answered, not ignored: opx says it is stopping
	syscall.Kill(os.Getpid(), syscall.SIGHUP)
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(said.String(), "opx: already stopping: the running shards are releasing their allocations") {
		if time.Now().After(deadline) {
			t.Fatalf("a second signal said %q", said.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
