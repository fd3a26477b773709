package shard_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/semianalysis/opx/internal/shard"
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
	tag := shard.Token("77", "1", "opxtest-loopback-0123456789abcdef") // the job is this execution's
	fakes := testenv.BinDir(t, nil, map[string]string{
		"squeue":  `echo "squeue $*" >> ` + calls + `; echo 4242 ` + tag,
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
	uid := strconv.Itoa(os.Getuid())
	if !strings.HasPrefix(string(b), "squeue -h -u "+uid+" -o %A %k\nscancel 4242\nsqueue -h -u "+uid+" -o %A\n") {
		t.Errorf("calls: %q", b)
	}
	log, _ := os.ReadFile(filepath.Join(out, "cleanup.log"))
	if !strings.Contains(string(log), "job=4242 rc=0 active='4242 "+tag+"\\n'") {
		t.Errorf("cleanup.log: %q", log)
	}
}

// A scancel the controller refuses (restarting, overloaded) is sent again at every poll
// until one is accepted. squeue and scancel are RECORDING FAKES here: scancel fails twice,
// then the job is gone.
func TestCleanupResendsARefusedScancel(t *testing.T) {
	dir := t.TempDir()
	base := filepath.Join(dir, "shared", ".operatorx-"+strconv.Itoa(os.Getuid()))
	os.MkdirAll(base, 0o700)
	stage, _ := os.MkdirTemp(base, "77-1-opxtest-loopback-0123456789abcdef-")
	os.MkdirAll(filepath.Join(stage, "results"), 0o755)
	out := filepath.Join(dir, "out")
	os.Mkdir(out, 0o700)
	os.WriteFile(filepath.Join(out, "allocation.log"), []byte("salloc: Granted job allocation 4242\n"), 0o644)
	os.WriteFile(filepath.Join(out, "execution.json"), []byte(`{"cell": {"id": "opxtest-loopback-0123456789abcdef", "runner": "cluster:opxtest-loopback"},
	  "source_sha": "abc", "run_id": "77", "attempt": "1", "stage": "`+stage+`"}`), 0o644)
	tag := shard.Token("77", "1", "opxtest-loopback-0123456789abcdef")
	calls, gone := filepath.Join(dir, "calls"), filepath.Join(dir, "gone")
	fakes := testenv.BinDir(t, nil, map[string]string{
		"squeue": `echo "squeue $*" >> ` + calls + `; [ -e ` + gone + ` ] || echo 4242 ` + tag,
		"scancel": `echo "scancel $*" >> ` + calls + `; n=$(grep -c '^scancel' ` + calls + `)
if [ "$n" -le 2 ]; then echo "scancel: error: Unable to contact slurm controller" >&2; exit 1; fi
touch ` + gone,
	})
	cmd := exec.Command(opxBin, "finalize", "--output", out, "--cleanup-seconds", "20")
	cmd.Env = append(os.Environ(), "PATH="+fakes+":"+os.Getenv("PATH"))
	if r := run(cmd); r.code != 0 {
		t.Fatalf("finalize: exit %d %q", r.code, r.stderr)
	}
	b, _ := os.ReadFile(calls)
	if n := strings.Count(string(b), "scancel 4242\n"); n != 3 {
		t.Errorf("scancel sent %d times, want 3 (two refused): %q", n, b)
	}
	log, _ := os.ReadFile(filepath.Join(out, "cleanup.log"))
	if strings.Count(string(log), "scancel job=4242 rc=1") != 2 {
		t.Errorf("cleanup.log: %q", log)
	}
	if _, err := os.Stat(stage); err == nil {
		t.Error("the stage is left although the job is gone")
	}
}
