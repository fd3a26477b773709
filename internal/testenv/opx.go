package testenv

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
)

// MainWithOpx is a TestMain for tests that run opx as a user does: it builds the binary
// static, as the README and releases do (it runs inside containers and as a second user, so
// its directory is world-readable), sets *bin to it, runs the tests and removes it.
func MainWithOpx(m *testing.M, bin *string) {
	// The suite keeps this machine busy itself (packages test in parallel on 2 cores): a
	// run of a test that is not about contention would be marked measured under
	// contention by the suite's own load. Its runs call a machine busy only above a load
	// of 1000 (OPX_BUSY_LOAD, the operator's knob); the tests of contention set their own.
	os.Setenv("OPX_BUSY_LOAD", "1000")
	// and each package's test binary is a machine of its own: its opx runs claim a
	// measuring registry ($TMPDIR/opx-measuring) of their own, so another package's runs,
	// measuring at the same time, are not their contention (the tests of two runs on one
	// machine share one on purpose)
	machine, _ := os.MkdirTemp("", "opx-test-machine-")
	os.Chmod(machine, 0o777|os.ModeSticky)
	os.Setenv("TMPDIR", machine)
	dir, _ := os.MkdirTemp("", "opx-bin-")
	os.Chmod(dir, 0o755)
	*bin = filepath.Join(dir, "opx")
	build := exec.Command("go", "build", "-trimpath", "-o", *bin, "github.com/semianalysis/opx/cmd/opx")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	build.Stderr = os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "building opx:", err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.RemoveAll(machine)
	os.Exit(code)
}

// Outcome is how a command ended: its exit status (128+n for a signal) and what it said.
type Outcome struct {
	Code           int
	Stdout, Stderr string
}

// Run runs cmd to its end.
func Run(cmd *exec.Cmd) Outcome {
	var so, se bytes.Buffer
	cmd.Stdout, cmd.Stderr = &so, &se
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			code = 128 + int(ws.Signal())
		}
	}
	return Outcome{code, so.String(), se.String()}
}

// ExitCode is a finished command's exit status: 0 when err is nil, the status of an
// *exec.ExitError (-1 when a signal ended it), else the test fails on err.
func ExitCode(t testing.TB, err error) int {
	t.Helper()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &ee):
		return ee.ExitCode()
	}
	t.Fatal(err)
	return 0
}
