package compare_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/semianalysis/opx/internal/testenv"
)

// One run is never its own baseline: the same directory (directly or through a link such
// as .opx-run/latest) with the same rows picked, and a copy of one run (its run id and
// first allocation), are refused (exit 2) before a gate could pass on them; --allow-same
// and a self-comparison of other rows (filters) are still allowed.
func TestOneRunIsNeverItsOwnBaseline(t *testing.T) {
	dir := t.TempDir()
	run := filepath.Join(dir, "run")
	if r := opxIn("run", "--out", run); r.Code != 0 {
		t.Fatalf("opx run: %d %s", r.Code, r.Stderr)
	}
	link := filepath.Join(dir, "latest")
	os.Symlink("run", link)
	cp := filepath.Join(dir, "copy")
	if err := os.CopyFS(cp, os.DirFS(run)); err != nil {
		t.Fatal(err)
	}
	for _, sides := range [][2]string{{run, run}, {run, link}, {link, run}, {run, cp}} {
		r := opxIn("compare", sides[0], sides[1], "--fail-on-regression", "5")
		if r.Code != 2 || !strings.Contains(r.Stderr, "a run compared with itself always passes") || r.Stdout != "" {
			t.Errorf("compare %s %s: exit %d %q, want the refusal", sides[0], sides[1], r.Code, r.Stderr)
		}
		if r := opxIn("compare", sides[0], sides[1], "--fail-on-regression", "50", "--allow-same"); r.Code != 0 {
			t.Errorf("compare %s %s --allow-same: exit %d %s", sides[0], sides[1], r.Code, r.Stderr)
		}
	}
	// one run, other rows on each side: a comparison of its own
	r := opxIn("compare", run, run, "--key", "testlist,op,world_size", "--base-filter", "args={\"m\": 1}", "--new-filter", "testlist=cpu_smoke")
	if strings.Contains(r.Stderr, "compared with itself") {
		t.Errorf("one run with other rows on each side is refused: %s", r.Stderr)
	}
}

func opxIn(args ...string) testenv.Outcome { return testenv.Run(exec.Command(opxBin, args...)) }
