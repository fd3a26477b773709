package testenv

import (
	"os/exec"
	"strings"
	"testing"
)

// Git returns a runner of git in the repository at dir, as a test user (user.name and
// user.email set on the command line: no global configuration needed), that fails the test
// with git's output when git fails and returns its output trimmed.
func Git(t testing.TB, dir string) func(args ...string) string {
	return func(args ...string) string {
		t.Helper()
		out, err := exec.Command("git", append([]string{"-C", dir, "-c", "user.name=t", "-c", "user.email=t@t"}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
		return strings.TrimSpace(string(out))
	}
}
