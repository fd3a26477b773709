package cli

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The first hour's rough edges (issue 32), each a usage error (exit 2) with one line that
// says what to do.
func TestFirstHourUsageErrors(t *testing.T) {
	out := filepath.Join(t.TempDir(), "m.json")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"run", "--chunk-sise", "3"}, "unknown flag: --chunk-sise; did you mean --chunk-size?"},
		{[]string{"compare", "a", "b", "--fail-on-regresion", "5"}, "did you mean --fail-on-regression?"},
		{[]string{"plan", "--runner", "local", "--backends", "cpu", "--testlists", "cpu_smoke", "--world-sizes", "1", "--source-sha", "", "--out", out},
			"--source-sha is empty: give the commit the sweep measures"},
		{[]string{"run", "--source-sha", " "}, "--source-sha is empty"},
		{[]string{"report"}, "report takes one run directory (an 'opx run --out' or downloaded artifacts), got 0 arguments"},
	} {
		r := runOpx(t, c.args...)
		if r.code != 2 || !strings.Contains(r.stderr, c.want) || strings.Count(strings.TrimSpace(r.stderr), "\n") > 0 {
			t.Errorf("%v: exit %d %q, want 2 and %q", c.args, r.code, r.stderr, c.want)
		}
	}
	// a flag too far from any is not guessed at
	if r := runOpx(t, "run", "--zzzzzz"); r.code != 2 || strings.Contains(r.stderr, "did you mean") {
		t.Errorf("--zzzzzz: exit %d %q", r.code, r.stderr)
	}
}

// The local runner refuses, before anything runs, a backend this machine cannot run.
func TestLocalRunnerRefusesBackendsItCannotRun(t *testing.T) {
	r := runOpx(t, "plan", "--runner", "local", "--backends", "vllm", "--testlists", "cpu_smoke", "--world-sizes", "1", "--out", filepath.Join(t.TempDir(), "m.json"))
	if r.code == 0 {
		t.Skip("python3 imports operatorx here: vllm can run on the local runner")
	}
	if r.code != 1 || !strings.Contains(r.stderr, "the local runner cannot run vllm on this machine:") || !strings.Contains(r.stderr, "it can run cpu (--backends cpu)") {
		t.Errorf("exit %d %q", r.code, r.stderr)
	}
}

// The shell completes runner, backend and testlist names (and the last of a list).
func TestCompletionOfNames(t *testing.T) {
	for _, c := range []struct {
		args []string
		want []string
	}{
		{[]string{"__complete", "run", "--runner", "cluster:h"}, []string{"cluster:h100-dsxe", "cluster:h200-dgxc"}},
		{[]string{"__complete", "plan", "--testlists", "cpu_smoke,gemm_p"}, []string{"cpu_smoke,gemm_perf", "cpu_smoke,gemm_perf_legacy"}},
		{[]string{"__complete", "run", "--backends", "c"}, []string{"cpu"}},
	} {
		r := runOpx(t, c.args...)
		got := strings.Split(strings.TrimSpace(r.stdout), "\n")
		if len(got) == 0 || strings.Join(got[:len(got)-1], " ") != strings.Join(c.want, " ") {
			t.Errorf("%v: %q, want %q", c.args, got, c.want)
		}
	}
}

// A custom runner missing what execute reads is refused at plan time, in doctor's words,
// not after its shards start (issue 30: "artifacts directory … not found" at the end).
func TestPlanRefusesAnIncompleteCustomRunner(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "site.json")
	os.WriteFile(cfg, []byte(`{"base": "opx:embedded", "platforms": {"cluster:lab-x": {"cluster": "lab", "gpus_per_node": 8,
	  "image_platform": "linux/amd64", "operator": {"stage_dir": "/tmp"}}}}`), 0o644)
	out := filepath.Join(dir, "m.json")
	r := runOpx(t, "plan", "--runner", "cluster:lab-x", "--platform-config", cfg, "--backends", "vllm", "--testlists", "gemm_perf", "--world-sizes", "1", "--out", out)
	if r.code != 1 || !strings.Contains(r.stderr, "the platform entry for cluster:lab-x lacks operator.partition") {
		t.Errorf("exit %d %q", r.code, r.stderr)
	}
	if _, err := os.Stat(out); err == nil {
		t.Error("a manifest was written for a runner that cannot run")
	}
	d := runOpx(t, "doctor", "--runner", "cluster:lab-x", "--platform-config", cfg)
	if !strings.Contains(d.stdout, "cluster:lab-x lacks operator.partition") {
		t.Errorf("doctor does not agree: %s", d.stdout)
	}
}

// Site peaks execute would refuse are refused by plan and failed by doctor, in one wording,
// before any node is allocated.
func TestPlanAndDoctorRefuseSitePeaksExecuteWould(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "site.json")
	os.WriteFile(cfg, []byte(`{"base": "opx:embedded", "platforms": {"cluster:lab-x": {"cluster": "lab", "gpus_per_node": 8,
	  "image_platform": "linux/amd64", "operator": {"partition": "gpu", "stage_dir": "/tmp", "peaks": {"bf16_tflops": "fast"}}}}}`), 0o644)
	want := "cluster:lab-x lacks valid operator.peaks (operator.peaks.bf16_tflops is string, not a number)"
	out := filepath.Join(dir, "m.json")
	r := runOpx(t, "plan", "--runner", "cluster:lab-x", "--platform-config", cfg, "--backends", "vllm", "--testlists", "gemm_perf", "--world-sizes", "1", "--out", out)
	if r.code != 1 || !strings.Contains(r.stderr, want) {
		t.Errorf("plan: exit %d %q", r.code, r.stderr)
	}
	if _, err := os.Stat(out); err == nil {
		t.Error("a manifest was written for a runner whose peaks execute refuses")
	}
	if d := runOpx(t, "doctor", "--runner", "cluster:lab-x", "--platform-config", cfg); d.code != 1 || !strings.Contains(d.stdout, want) {
		t.Errorf("doctor: exit %d %s", d.code, d.stdout)
	}
}

// --estimate-from prices a plan without writing over anything (issue 32): no --out, no
// manifest written here; --out that is the ledger, refused; another machine's ledger,
// said to be so; a ledger that measured nothing, refused (exit 1).
func TestEstimateFromNeverOverwritesAndSaysTheHardware(t *testing.T) {
	dir := t.TempDir()
	ledger := filepath.Join(dir, "cases.json")
	os.WriteFile(ledger, []byte(`{"schema": "opx-cases/1", "cases": [{"key": "k", "op": "gemm", "cluster": "local", "status": "ok", "gpu_seconds": 2}]}`), 0o644)
	mine := filepath.Join(dir, "operatorx-manifest.json")
	os.WriteFile(mine, []byte("my manifest"), 0o644)
	t.Chdir(dir)
	r := runOpx(t, "plan", "--runner", "cluster:h200-dgxc", "--backends", "vllm", "--testlists", "gemm_perf", "--world-sizes", "1",
		"--estimate-from", ledger, "--digest-timeout", "1s")
	if r.code != 0 || !strings.Contains(r.stderr, "GPU-hours for 11 case(s)") ||
		!strings.Contains(r.stderr, "warning: the ledger measured on local, this plan runs on h200_dgxc_8x: the estimate is another machine's costs") {
		t.Errorf("exit %d %q", r.code, r.stderr)
	}
	if b, _ := os.ReadFile(mine); string(b) != "my manifest" {
		t.Error("an estimate wrote over the manifest in the current directory")
	}
	if r.stdout != "" {
		t.Errorf("an estimate without --out printed a matrix for a manifest it did not keep: %q", r.stdout)
	}
	// the estimate is the time a case held its allocation times the GPUs the plan's shard
	// holds: 16 GPU-s on an 8-GPU node is 2 s held, so 11 gemm cases at the op's mean are
	// 176 GPU-s on an 8-GPU H200 node and 88 on a 4-GPU GB200 one
	os.WriteFile(ledger, []byte(`{"schema": "opx-cases/1", "cases": [{"key": "k", "shard": "s", "op": "gemm", "cluster": "local", "status": "ok", "gpu_seconds": 16}],
	  "attempts": [{"shard": "s", "attempt": 1, "accounted": true, "gpus": 8}]}`), 0o644)
	for runner, want := range map[string]string{"cluster:h200-dgxc": "0.049 GPU-hours for 11 case(s)", "cluster:gb200-nv": "0.024 GPU-hours for 11 case(s)"} {
		r = runOpx(t, "plan", "--runner", runner, "--backends", "vllm", "--testlists", "gemm_perf", "--world-sizes", "1",
			"--estimate-from", ledger, "--digest-timeout", "1s")
		if r.code != 0 || !strings.Contains(r.stderr, want) {
			t.Errorf("%s: exit %d %q, want %q", runner, r.code, r.stderr, want)
		}
	}
	// nothing estimated from nothing: a ledger of a run that could not allocate (every case
	// missing, no cost) or failed every case says it cannot estimate, exit 1
	for _, cases := range []string{`{"key": "k", "op": "gemm", "cluster": "local", "status": "missing", "gpu_seconds": 0}`,
		`{"key": "k", "op": "gemm", "cluster": "local", "status": "error", "gpu_seconds": 30}`} {
		os.WriteFile(ledger, []byte(`{"schema": "opx-cases/1", "cases": [`+cases+`]}`), 0o644)
		r = runOpx(t, "plan", "--runner", "cluster:h200-dgxc", "--backends", "vllm", "--testlists", "gemm_perf", "--world-sizes", "1",
			"--estimate-from", ledger, "--digest-timeout", "1s")
		if r.code != 1 || !strings.Contains(r.stderr, "cannot estimate: nothing to estimate from: none of its 1 case(s) was measured") || strings.Contains(r.stderr, "GPU-hours") {
			t.Errorf("an estimate from a ledger that measured nothing: exit %d %q", r.code, r.stderr)
		}
	}
	r = runOpx(t, "plan", "--runner", "local", "--backends", "cpu", "--testlists", "cpu_smoke", "--world-sizes", "1", "--estimate-from", ledger, "--out", ledger)
	if r.code != 2 || !strings.Contains(r.stderr, "is the ledger --estimate-from reads") {
		t.Errorf("--out the ledger: exit %d %q", r.code, r.stderr)
	}
}

// The README and scripts/test.sh --help state the test command's time and ports once, in
// the same words; the README installs from a checkout as well as from the module path.
func TestReadmeAndTestHelpAgree(t *testing.T) {
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	readme := strings.Join(strings.Fields(string(b)), " ")
	out, err := exec.Command("bash", "../../scripts/test.sh", "--help").Output()
	if err != nil {
		t.Fatal(err)
	}
	help := strings.Join(strings.Fields(string(out)), " ")
	said := func(text string) string {
		i := strings.Index(text, "It takes about ")
		if i < 0 {
			return ""
		}
		j := strings.Index(text[i:], " move them).")
		if j < 0 {
			return ""
		}
		return text[i : i+j]
	}
	if r, h := said(readme), said(help); r == "" || r != h || !strings.Contains(r, "16917") || !strings.Contains(r, "16919") {
		t.Errorf("the README and test.sh --help differ on the test command's time and ports:\nREADME: %s\n--help: %s", r, h)
	}
	if !strings.Contains(readme, "go install ./cmd/opx") || !strings.Contains(readme, "go install github.com/semianalysis/opx/cmd/opx@latest") {
		t.Errorf("the README does not say how to install from a checkout and from the module path")
	}
}
