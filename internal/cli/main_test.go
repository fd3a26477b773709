package cli

import (
	"fmt"
	"os"
	"testing"
)

// TestMain stops the test binary from acting as opx: an in-process execute on the local
// runner stages os.Executable() — this binary — and runs it as `opx rank`, which would run
// the whole suite again, recursively. No test here may get that far; if one does, the
// staged copy fails at once instead.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && (os.Args[1] == "rank" || os.Args[1] == "bench") {
		fmt.Fprintln(os.Stderr, "cli.test was staged as opx: a test reached a real execute in-process")
		os.Exit(3)
	}
	os.Exit(m.Run())
}
