// Package testenv holds what several packages' tests need of this machine: a second local
// user, for the tests that check opx never trusts another user's files.
package testenv

import (
	"os"
	"os/exec"
	"os/user"
	"strconv"
	"testing"
)

// OtherUserName is the unprivileged account scripts/test.sh creates with useradd.
const OtherUserName = "opx-other"

// OtherUser is a second local user: its name and uid. The test skips when the account is
// missing, and fails when OPX_REQUIRE_SLURM says the whole suite must run (scripts/test.sh).
func OtherUser(t testing.TB) (string, int) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("acting as a second user needs root (runuser)")
	}
	u, err := user.Lookup(OtherUserName)
	if err != nil {
		if os.Getenv("OPX_REQUIRE_SLURM") != "" {
			t.Fatalf("user %s is missing (scripts/test.sh creates it with useradd)", OtherUserName)
		}
		t.Skipf("user %s is missing (scripts/test.sh creates it with useradd)", OtherUserName)
	}
	uid, _ := strconv.Atoi(u.Uid)
	return u.Username, uid
}

// AsOther runs a shell command as the second user and fails the test if it fails.
func AsOther(t testing.TB, script string) {
	t.Helper()
	name, _ := OtherUser(t)
	out, err := exec.Command("runuser", "-u", name, "--", "sh", "-c", script).CombinedOutput()
	if err != nil {
		t.Fatalf("as %s: %s: %v\n%s", name, script, err, out)
	}
}

// SharedDir is a fresh directory every user may enter (mode 0755 on the way down), for
// files another user must be able to reach; it is removed when the test ends.
func SharedDir(t testing.TB) string {
	t.Helper()
	dir, err := os.MkdirTemp("/tmp", "opx-shared-")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// SlurmConf is the slurm.conf of the local Slurm scripts/test.sh starts (OPX_TEST_SLURM_CONF).
// The test skips without one, and fails when OPX_REQUIRE_SLURM says the whole suite must run.
func SlurmConf(t testing.TB) string {
	t.Helper()
	return service(t, "OPX_TEST_SLURM_CONF", "OPX_REQUIRE_SLURM", "no local Slurm (scripts/test.sh starts one)")
}

// service is the value of the variable naming a service scripts/test.sh started; without
// one the test skips, saying why, or fails when require says the whole suite must run.
func service(t testing.TB, name, require, why string) string {
	t.Helper()
	v := os.Getenv(name)
	if v == "" {
		if os.Getenv(require) != "" {
			t.Fatalf("%s is set but %s is not", require, name)
		}
		t.Skip(why)
	}
	return v
}

// BenchTree is the directory of the largest sweep's artifacts and manifest that
// scripts/bench-report.sh builds (OPX_SUMMARY_TREE: its OPX_BENCH_DIR), for the
// benchmarks that read it; the benchmark skips when it is not set.
func BenchTree(b *testing.B) string {
	b.Helper()
	dir := os.Getenv("OPX_SUMMARY_TREE")
	if dir == "" {
		b.Skip("OPX_SUMMARY_TREE is not set")
	}
	return dir
}
