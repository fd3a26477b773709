package testenv

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// OlderOpx is the opx of an earlier commit of this repository, built offline (the module
// cache this build uses; GOPROXY=off) from the repository's own history and kept in the
// user's cache directory, so that a test can run an older opx against what this one
// wrote: the team's pinned CI opx beside a newer dashboard, a store made before an
// upgrade. The test fails when the commit is not in this clone's history.
func OlderOpx(t testing.TB, commit string) string {
	t.Helper()
	top, err := exec.Command("git", "rev-parse", "--show-toplevel").Output()
	if err != nil {
		t.Fatalf("building opx at %s: not in a git checkout: %v", commit, err)
	}
	root := strings.TrimSpace(string(top))
	full, err := exec.Command("git", "-C", root, "rev-parse", "--verify", commit+"^{commit}").Output()
	if err != nil {
		t.Fatalf("building opx at %s: no such commit in this clone's history (clone it whole, not shallow): %v", commit, err)
	}
	sha := strings.TrimSpace(string(full))
	cache, err := os.UserCacheDir()
	if err != nil {
		cache = os.TempDir()
	}
	bin := filepath.Join(cache, "opx-test", "opx-"+sha)
	if fi, err := os.Stat(bin); err == nil && fi.Mode().IsRegular() {
		return bin
	}
	src := t.TempDir()
	archive := exec.Command("sh", "-c", `git -C "$1" archive "$2" | tar -x -C "$3"`, "sh", root, sha, src)
	if out, err := archive.CombinedOutput(); err != nil {
		t.Fatalf("building opx at %s: git archive: %v %s", commit, err, out)
	}
	os.MkdirAll(filepath.Dir(bin), 0o755)
	tmp := bin + ".building-" + filepath.Base(src)
	build := exec.Command("go", "build", "-trimpath", "-o", tmp, "./cmd/opx")
	build.Dir = src
	build.Env = append(os.Environ(), "CGO_ENABLED=0", "GOPROXY=off", "GOFLAGS=-mod=readonly")
	if out, err := build.CombinedOutput(); err != nil {
		os.Remove(tmp)
		t.Fatalf("building opx at %s offline: %v\n%s", commit, err, out)
	}
	if err := os.Rename(tmp, bin); err != nil {
		t.Fatal(err)
	}
	return bin
}
