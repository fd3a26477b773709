// Package proc is the one place opx starts external commands: process groups, cancellation
// with a grace period, and bounded captured output.
//
// It is the one place opx starts external commands. Every child runs in its own
// process group; on cancellation the group gets SIGTERM, a grace period, then SIGKILL, and
// WaitDelay bounds how long a stuck pipe can hold Wait (style.md, "Processes"). A child
// gets SIGTERM when opx itself dies, even by SIGKILL.
package proc

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"runtime"
	"strings"
	"syscall"
	"time"
)

// Cmd is one command to run.
type Cmd struct {
	Argv   []string
	Env    []string // nil: inherit
	Dir    string
	Stdin  io.Reader
	Stdout io.Writer
	Stderr io.Writer
	Grace  time.Duration // SIGTERM to SIGKILL; 0 means 10 s (the seed's)
}

// ExitError is a command that ran and failed.
type ExitError struct {
	Argv   []string
	Code   int            // exit status, or -1 when killed by a signal
	Signal syscall.Signal // the signal that ended it, if any
	Stderr string         // the last bytes (at most tailSize) the command wrote to stderr
}

func (e *ExitError) Error() string {
	msg := fmt.Sprintf("%s exited %d", shortArgv(e.Argv), e.Code)
	if e.Code < 0 {
		msg = fmt.Sprintf("%s: killed by %s", shortArgv(e.Argv), e.Signal)
	}
	if last := lastLine(e.Stderr); last != "" {
		msg += ": " + last
	}
	return msg
}

// tailSize is how much of a failed command's stderr its ExitError keeps.
const tailSize = 4 << 10

// tail keeps the last tailSize bytes written to it.
type tail struct{ b []byte }

func (t *tail) Write(p []byte) (int, error) {
	t.b = append(t.b, p...)
	if len(t.b) > tailSize {
		t.b = append(t.b[:0], t.b[len(t.b)-tailSize:]...)
	}
	return len(p), nil
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return strings.TrimSpace(lines[len(lines)-1])
}

func shortArgv(argv []string) string {
	s := strings.Join(argv, " ")
	if len(s) > 200 {
		s = s[:200] + "..."
	}
	return s
}

// Run starts c and waits for it. When ctx ends first, the child's process group is
// terminated (SIGTERM, grace, SIGKILL) and ctx's cause is returned alongside.
func Run(ctx context.Context, c Cmd) error {
	if len(c.Argv) == 0 {
		return errors.New("proc: empty command")
	}
	grace := c.Grace
	if grace <= 0 {
		grace = 10 * time.Second
	}
	cmd := exec.Command(c.Argv[0], c.Argv[1:]...)
	stderrTail := &tail{}
	var stderr io.Writer = stderrTail
	if c.Stderr != nil {
		stderr = io.MultiWriter(c.Stderr, stderrTail)
	}
	cmd.Env, cmd.Dir, cmd.Stdin, cmd.Stdout, cmd.Stderr = c.Env, c.Dir, c.Stdin, c.Stdout, stderr
	// Pdeathsig: a child outlives no opx that was SIGKILLed. The kernel sends it when the
	// thread that forked the child ends, so this goroutine keeps that thread (locked) until
	// the child has been waited for: the thread ends only with opx itself. (A rank then ends
	// its harness and removes its cache; srun ends its step; salloc withdraws its request.)
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
	cmd.WaitDelay = grace + 5*time.Second
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting %s: %w", c.Argv[0], err)
	}
	pgid := cmd.Process.Pid
	done := make(chan struct{})
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		select {
		case <-done:
			return
		case <-ctx.Done():
		}
		_ = syscall.Kill(-pgid, syscall.SIGTERM)
		t := time.NewTimer(grace)
		defer t.Stop()
		select {
		case <-done:
		case <-t.C:
			_ = syscall.Kill(-pgid, syscall.SIGKILL)
		}
	}()
	err := cmd.Wait()
	close(done)
	<-stopped
	// whatever the leader did, leave no member of its group behind
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
	if err == nil {
		return nil
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		out := &ExitError{Argv: c.Argv, Code: ee.ExitCode(), Stderr: string(stderrTail.b)}
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			out.Code, out.Signal = -1, ws.Signal()
		}
		if ctx.Err() != nil {
			return errors.Join(out, context.Cause(ctx))
		}
		return out
	}
	return err
}

// Output runs c and returns its stdout.
func Output(ctx context.Context, c Cmd) (string, error) {
	var b strings.Builder
	c.Stdout = &b
	err := Run(ctx, c)
	return b.String(), err
}

// SetEnv returns env with k set to v (replaced in place when present, else appended).
func SetEnv(env []string, k, v string) []string {
	for i, kv := range env {
		if strings.HasPrefix(kv, k+"=") {
			env[i] = k + "=" + v
			return env
		}
	}
	return append(env, k+"="+v)
}
