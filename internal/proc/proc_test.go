package proc

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// A failed command's error carries the tail of its stderr (the child's own explanation),
// even when stderr also goes to a log.
func TestExitErrorCarriesStderrTail(t *testing.T) {
	var log strings.Builder
	err := Run(context.Background(), Cmd{Argv: []string{"sh", "-c", "echo first >&2; echo 'srun: error: Unable to allocate resources' >&2; exit 3"}, Stderr: &log})
	var ee *ExitError
	if !errors.As(err, &ee) || ee.Code != 3 || !strings.Contains(log.String(), "first") {
		t.Fatalf("err %v, log %q", err, log.String())
	}
	if want := "sh -c echo first >&2; echo 'srun: error: Unable to allocate resources' >&2; exit 3 exited 3: srun: error: Unable to allocate resources"; err.Error() != want {
		t.Errorf("Error() = %q, want %q", err.Error(), want)
	}
	long := strings.Repeat("x", 10000)
	err = Run(context.Background(), Cmd{Argv: []string{"sh", "-c", "printf '%s' " + long + " >&2; exit 1"}})
	if !errors.As(err, &ee) || len(ee.Stderr) != tailSize {
		t.Errorf("tail of %d bytes, want %d", len(ee.Stderr), tailSize)
	}
}

// Cancellation ends the child's whole process group (SIGTERM, then SIGKILL after the
// grace), and a child killed by a signal is reported as such.
func TestCancelKillsTheGroup(t *testing.T) {
	dir := t.TempDir()
	pidFile := filepath.Join(dir, "grandchild")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, Cmd{Argv: []string{"sh", "-c", "trap '' TERM; sleep 60 & echo $! > " + pidFile + "; wait"}, Grace: 200 * time.Millisecond})
	}()
	for i := 0; i < 200; i++ {
		if b, _ := os.ReadFile(pidFile); len(b) > 0 {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	err := <-done
	var ee *ExitError
	if !errors.As(err, &ee) || ee.Code != -1 || ee.Signal != syscall.SIGKILL || !errors.Is(err, context.Canceled) {
		t.Fatalf("err %v", err)
	}
	b, _ := os.ReadFile(pidFile)
	var pid int
	for _, c := range strings.TrimSpace(string(b)) {
		pid = pid*10 + int(c-'0')
	}
	time.Sleep(100 * time.Millisecond)
	if pid == 0 || alive(pid) {
		t.Errorf("the grandchild %d outlived the group kill", pid)
	}
}

// alive: the process exists and is not a zombie (one reparented to an init that does not
// reap is dead all the same).
func alive(pid int) bool {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return false
	}
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	return len(f) > 0 && f[0] != "Z"
}
