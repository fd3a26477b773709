package shard_test

// opx doctor against the real local Slurm: all good for the loopback runner, then one
// piece missing at a time (exit 1, exactly one FAIL, naming that piece). enroot and a
// pyxis-enabled srun cannot run here; they are recording fakes (shell scripts) put first
// on PATH, and say so in their names.

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// binDir is a PATH directory holding links to the named real commands and the given
// fake scripts.
func binDir(t *testing.T, real []string, fakes map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for _, name := range real {
		p, err := exec.LookPath(name)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if err := os.Symlink(p, filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	for name, body := range fakes {
		if err := os.WriteFile(filepath.Join(dir, name), []byte("#!/bin/sh\n"+body+"\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

var slurmCmds = []string{"salloc", "srun", "scancel", "squeue", "sinfo"}

// failures returns the CHECK column of every FAIL row.
func failures(out string) []string {
	var fs []string
	for _, l := range strings.Split(out, "\n") {
		if m := regexp.MustCompile(`^(.+?)\s{2,}FAIL\s{2,}`).FindStringSubmatch(l); m != nil {
			fs = append(fs, m[1])
		}
	}
	return fs
}

func (c *cluster) platforms(t *testing.T, operator string) string {
	p := filepath.Join(t.TempDir(), "platforms.json")
	os.WriteFile(p, []byte(`{"platforms": {"cluster:opxtest-loopback": {"cluster": "opxtest_8x", "gpus_per_node": 8,
	  "image_platform": "linux/amd64", "operator": `+operator+`}}}`), 0o644)
	return p
}

func TestDoctorOnLocalSlurm(t *testing.T) {
	c := slurmCluster(t)
	path := os.Getenv("PATH")
	doctor := func(cfg string, env []string, extra ...string) outcome {
		cmd := exec.Command(opxBin, append([]string{"doctor", "--runner", "cluster:opxtest-loopback", "--platform-config", cfg, "--min-free-gib", "0.01"}, extra...)...)
		cmd.Env = append(c.env(), env...)
		return run(cmd)
	}
	none := func(extra string) string {
		return c.platforms(t, `{"container": "none", "partition": "debug", "stage_dir": "`+c.stageRoot+`"`+extra+`}`)
	}
	pyxis := c.platforms(t, `{"container": "pyxis", "partition": "debug", "stage_dir": "`+c.stageRoot+`"}`)
	realSrun, _ := exec.LookPath("srun")
	pyxisSrun := `if [ "$1" = --help ]; then "` + realSrun + `" --help; echo "      --container-image=[USER@][REGISTRY#]IMAGE[:TAG]|PATH"; exit 0; fi; exec "` + realSrun + `" "$@"`
	slurmOnly := []string{"squeue", "sinfo", "salloc", "scancel", "unsquashfs"}

	r := doctor(none(""), nil)
	if r.code != 0 || len(failures(r.stdout)) != 0 {
		t.Fatalf("all good: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	for _, want := range []string{"slurm controller  ok", "slurm partition   ok      debug* up", "storage root      ok      " + c.stageRoot,
		"containers        skip", "ready: nothing required is missing"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("all-good report lacks %q:\n%s", want, r.stdout)
		}
	}

	deadConf := filepath.Join(t.TempDir(), "slurm.conf")
	b, _ := os.ReadFile(c.conf)
	os.WriteFile(deadConf, []byte(regexp.MustCompile(`(?m)^SlurmctldPort=\d+`).ReplaceAllString(string(b), "SlurmctldPort=1")), 0o644)

	for _, tc := range []struct {
		name, cfg string
		env       []string
		extra     []string
		fail      string
		detail    string
	}{
		{"no salloc on PATH", none(""), []string{"PATH=" + binDir(t, []string{"srun", "scancel", "squeue", "sinfo"}, nil)}, nil, "slurm: salloc", "salloc not found on PATH"},
		{"controller unreachable", none(""), []string{"SLURM_CONF=" + deadConf}, nil, "slurm controller", "Unable to contact slurm controller"},
		{"unknown partition", c.platforms(t, `{"container": "none", "partition": "nosuch", "stage_dir": "`+c.stageRoot+`"}`), nil, nil, "slurm partition", "partition nosuch not found"},
		{"storage root missing", c.platforms(t, `{"container": "none", "partition": "debug", "stage_dir": "`+filepath.Join(c.dir, "absent")+`"}`), nil, nil, "storage root", "no writable shared storage root for this runner: " + filepath.Join(c.dir, "absent") + " does not exist"},
		{"storage root full", none(""), nil, []string{"--min-free-gib", "1000000"}, "storage root", "under the 1000000 GiB"},
		{"entry without partition", c.platforms(t, `{"container": "none", "stage_dir": "`+c.stageRoot+`"}`), nil, nil, "platform entry", "lacks operator.partition"},
		{"pyxis not loaded (fake enroot 4.1)", pyxis, []string{"PATH=" + binDir(t, append(slurmOnly, "srun"), map[string]string{"enroot": `echo 4.1.0`}) + ":" + path}, nil, "pyxis", "lists no --container-image"},
		{"enroot missing (fake pyxis srun)", pyxis, []string{"PATH=" + binDir(t, slurmOnly, map[string]string{"srun": pyxisSrun})}, nil, "enroot", "enroot not found on PATH"},
		{"unsquashfs missing (fakes)", pyxis, []string{"PATH=" + binDir(t, []string{"squeue", "sinfo", "salloc", "scancel"}, map[string]string{"srun": pyxisSrun, "enroot": "echo 4.1.0"})}, nil, "unsquashfs", "unsquashfs not found"},
	} {
		r := doctor(tc.cfg, tc.env, tc.extra...)
		fs := failures(r.stdout)
		if r.code != 1 || len(fs) != 1 || fs[0] != tc.fail || !strings.Contains(r.stdout, tc.detail) || !strings.Contains(r.stdout, "What to do:") {
			t.Errorf("%s: exit %d, failures %q (want exactly %q with %q)\n%s%s", tc.name, r.code, fs, tc.fail, tc.detail, r.stdout, r.stderr)
		}
	}

	// enroot older than 3.5 is a warning, not a failure (3.4 cannot be built here: a fake
	// prints its version; 3.5 and 4.1 run for real in TestRealStackDoctor)
	old := binDir(t, slurmOnly, map[string]string{"srun": pyxisSrun, "enroot": `[ "$1" = version ] && echo 3.4.0`})
	r = doctor(pyxis, []string{"PATH=" + old})
	if r.code != 0 || !strings.Contains(r.stdout, "enroot            warn    enroot 3.4.0: older than 3.5") || !strings.Contains(r.stdout, "upgrade enroot to 3.5") {
		t.Errorf("enroot 3.4: exit %d\n%s", r.code, r.stdout)
	}
	// an unknown runner is one line
	cmd := exec.Command(opxBin, "doctor", "--runner", "cluster:nosuch")
	if r := run(cmd); r.code != 1 || !strings.Contains(r.stderr, "unknown runner cluster:nosuch") {
		t.Errorf("unknown runner: %d %q", r.code, r.stderr)
	}
}

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
	fakes := binDir(t, nil, map[string]string{
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
