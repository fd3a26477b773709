package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/semianalysis/opx/internal/testenv"
)

// gitRepo is a repository in dir/repo whose harness/ holds op.py, committed twice.
func gitRepo(t *testing.T, dir string) string {
	t.Helper()
	repo := filepath.Join(dir, "repo")
	git := testenv.Git(t, repo)
	os.MkdirAll(filepath.Join(repo, "harness"), 0o755)
	git("init", "-q")
	writeFile(t, filepath.Join(repo, "harness", "op.py"), "v1\n")
	git("add", ".")
	git("commit", "-q", "-m", "one")
	writeFile(t, filepath.Join(repo, "harness", "op.py"), "v2\n")
	writeFile(t, filepath.Join(repo, "harness", "new.py"), "new\n")
	git("add", ".")
	git("commit", "-q", "-m", "two")
	writeFile(t, filepath.Join(repo, "harness", "op.py"), "uncommitted\n")
	return repo
}

// A side named by a commit is its tree's part of the repository at that commit, whatever
// the checkout holds; the label names the tree and the commit.
func TestABSideAtACommit(t *testing.T) {
	repo := gitRepo(t, t.TempDir())
	tree := filepath.Join(repo, "harness")
	side, temp, err := readSide(t.Context(), "tree="+tree+",commit=HEAD~1,env=A=1")
	if temp != "" {
		defer os.RemoveAll(temp)
	}
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(side.Tree, "op.py"))
	if err != nil || string(b) != "v1\n" {
		t.Errorf("op.py at HEAD~1: %q %v", b, err)
	}
	if _, err := os.Stat(filepath.Join(side.Tree, "new.py")); err == nil {
		t.Errorf("a file of a later commit is in the side's tree")
	}
	if side.Tree != temp || !strings.HasPrefix(side.Label, "tree "+tree+" at ") || !strings.HasSuffix(side.Label, ", A=1") || len(side.Env) != 1 {
		t.Errorf("side %+v", side)
	}
	// the tree as it is: the checkout, uncommitted change and all
	side, temp, err = readSide(t.Context(), "tree="+tree)
	if err != nil || temp != "" || side.Tree != tree || side.Label != "tree "+tree {
		t.Errorf("side %+v %q %v", side, temp, err)
	}
}

// Too few pairs for any case ever to fail the check at the family level of the run's
// planned cases is refused before anything runs.
func TestABTooFewPairsToFail(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "run")
	r := runOpx(t, "run", "--out", dir, "--ab-base", "env=X=1", "--ab-head", "env=X=2", "--ab-max-pairs", "8")
	if r.code != 1 || !strings.Contains(r.stderr, "--ab-max-pairs 8: with 6 planned cases judged together, a case can fail the check only with 11 pairs or more") {
		t.Fatalf("exit %d\n%s", r.code, r.stderr)
	}
	if _, err := os.Stat(filepath.Join(dir, "shards")); err == nil {
		t.Errorf("a shard ran")
	}
}
