package shard_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/semianalysis/opx/internal/testenv"
)

// An allocation that cannot be seen to end keeps the stage: finalize fails with the
// reason and deletes nothing. squeue and scancel are RECORDING FAKES here (a job stuck in
// the queue cannot be made on the real Slurm at will): squeue keeps listing the job.
func TestFinalizeKeepsStageWhenAllocationDoesNotEnd(t *testing.T) {
	dir := t.TempDir()
	base := filepath.Join(dir, "shared", ".operatorx-"+strconv.Itoa(os.Getuid()))
	os.MkdirAll(base, 0o700)
	stage, _ := os.MkdirTemp(base, "77-1-opxtest-loopback-0123456789abcdef-")
	os.MkdirAll(filepath.Join(stage, "results", "cpu", "x"), 0o755)
	os.WriteFile(filepath.Join(stage, "results", "cpu", "x", "r.json"), []byte(`{"rows": [{"status": "ok"}]}`), 0o644)
	out := filepath.Join(dir, "out")
	os.Mkdir(out, 0o700)
	os.WriteFile(filepath.Join(out, "allocation.log"), []byte("salloc: Granted job allocation 4242\n"), 0o644)
	os.WriteFile(filepath.Join(out, "execution.json"), []byte(`{"cell": {"id": "opxtest-loopback-0123456789abcdef", "runner": "cluster:opxtest-loopback"},
	  "source_sha": "abc", "run_id": "77", "attempt": "1", "stage": "`+stage+`"}`), 0o644)
	calls := filepath.Join(dir, "calls")
	fakes := testenv.BinDir(t, nil, map[string]string{
		"squeue":  `echo "squeue $*" >> ` + calls + `; echo 4242`,
		"scancel": `echo "scancel $*" >> ` + calls,
	})
	cmd := exec.Command(opxBin, "finalize", "--output", out, "--cleanup-seconds", "1")
	cmd.Env = append(os.Environ(), "PATH="+fakes+":"+os.Getenv("PATH"))
	r := run(cmd)
	if r.code != 1 || !strings.Contains(r.stderr, "allocation 4242 did not terminate; retaining staged evidence") {
		t.Fatalf("exit %d %q", r.code, r.stderr)
	}
	if _, err := os.Stat(filepath.Join(stage, "results", "cpu", "x", "r.json")); err != nil {
		t.Errorf("the stage's results were deleted: %v", err)
	}
	b, _ := os.ReadFile(calls)
	if !strings.HasPrefix(string(b), "scancel 4242\nsqueue -h -u "+strconv.Itoa(os.Getuid())+" -o %A\n") {
		t.Errorf("calls: %q", b)
	}
	log, _ := os.ReadFile(filepath.Join(out, "cleanup.log"))
	if !strings.Contains(string(log), "job=4242 rc=0 active='4242\\n'") {
		t.Errorf("cleanup.log: %q", log)
	}
}
