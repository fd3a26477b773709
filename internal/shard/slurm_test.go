package shard_test

// These tests run opx execute, finalize and recover against the real local Slurm that
// scripts/test.sh starts (scripts/local-slurm.sh: one node on loopback, 8 fake GPUs), with
// a custom runner whose container mode is "none" and opx's own cpu backend.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/semianalysis/opx/internal/manifest"
	"github.com/semianalysis/opx/internal/shard"
	"github.com/semianalysis/opx/internal/testenv"
)

var opxBin string

func TestMain(m *testing.M) { testenv.MainWithOpx(m, &opxBin) }

type cluster struct {
	t                         testing.TB
	conf, dir, stageRoot, cfg string
	tl                        string
	rankDirsBefore            map[string]bool // the node's rank directories before the test (another run's)
}

func slurmCluster(t testing.TB) *cluster {
	conf := testenv.SlurmConf(t)
	c := &cluster{t: t, conf: conf, dir: t.TempDir(), rankDirsBefore: map[string]bool{}}
	for _, d := range rankDirs() {
		c.rankDirsBefore[d] = true
	}
	c.stageRoot = filepath.Join(c.dir, "shared")
	os.MkdirAll(c.stageRoot, 0o755)
	c.cfg = filepath.Join(c.dir, "platforms.json")
	os.WriteFile(c.cfg, []byte(`{"platforms": {"cluster:opxtest-loopback": {"cluster": "opxtest_8x", "gpus_per_node": 8,
	  "image_platform": "linux/amd64", "operator": {"container": "none", "partition": "debug", "stage_dir": "`+c.stageRoot+`"}}}}`), 0o644)
	c.tl = filepath.Join(c.dir, "testlists")
	os.MkdirAll(c.tl, 0o755)
	os.WriteFile(filepath.Join(c.tl, "quick.json"), []byte(`[
	  {"type": "gemm", "args": {"m": 64, "n": 64, "k": 64, "a": {"dtype": "fp32"}, "b": {"dtype": "fp32"}, "out": "fp32"}, "sources": []},
	  {"type": "gemm", "args": {"m": 32, "n": 64, "k": 32, "a": {"dtype": "bf16"}, "b": {"dtype": "bf16"}, "out": "bf16"}, "sources": []}]`), 0o644)
	os.WriteFile(filepath.Join(c.tl, "quick2.json"), []byte(`[
	  {"type": "gemm", "args": {"m": 64, "n": 64, "k": 64, "a": {"dtype": "fp32"}, "b": {"dtype": "fp32"}, "out": "fp32", "parallel": {"tp": 2}}, "sources": []},
	  {"type": "gemm", "args": {"m": 32, "n": 64, "k": 32, "a": {"dtype": "bf16"}, "b": {"dtype": "bf16"}, "out": "bf16", "parallel": {"tp": 2}}, "sources": []}]`), 0o644)
	os.WriteFile(filepath.Join(c.tl, "failing.json"), []byte(`[
	  {"type": "gemm", "args": {"m": 64, "n": 64, "k": 64, "a": {"dtype": "fp64"}, "b": {"dtype": "fp64"}, "out": "fp64"}, "sources": []},
	  {"type": "gemm", "args": {"m": 0, "n": 64, "k": 64, "a": {"dtype": "fp64"}, "b": {"dtype": "fp64"}, "out": "fp64"}, "sources": []}]`), 0o644)
	os.WriteFile(filepath.Join(c.tl, "slow.json"), []byte(`[
	  {"type": "gemm", "args": {"m": 64, "n": 64, "k": 64, "a": {"dtype": "fp64"}, "b": {"dtype": "fp64"}, "out": "fp64"}, "sources": []},
	  {"type": "gemm", "args": {"m": 2048, "n": 2048, "k": 2048, "a": {"dtype": "fp64"}, "b": {"dtype": "fp64"}, "out": "fp64"}, "sources": []},
	  {"type": "gemm", "args": {"m": 2048, "n": 2048, "k": 2048, "a": {"dtype": "fp32"}, "b": {"dtype": "fp32"}, "out": "fp32"}, "sources": []}]`), 0o644)
	t.Cleanup(func() { c.scancelAll() })
	return c
}

func (c *cluster) env(extra ...string) []string {
	return append(append(os.Environ(), "SLURM_CONF="+c.conf), extra...)
}

func (c *cluster) opx(args ...string) *exec.Cmd {
	cmd := exec.Command(opxBin, args...)
	cmd.Env = c.env()
	return cmd
}

func (c *cluster) squeue() string {
	out, _ := exec.Command("squeue", "-h", "-u", fmt.Sprint(os.Getuid()), "-o", "%A %k").Output()
	return strings.TrimSpace(string(out))
}

func (c *cluster) scancelAll() {
	exec.Command("scancel", "-u", fmt.Sprint(os.Getuid())).Run()
}

// plan writes a manifest for testlist at world size ws and returns it and its shard id.
func (c *cluster) plan(testlist string, ws int) (string, string) {
	c.t.Helper()
	m := filepath.Join(c.dir, "manifest-"+testlist+fmt.Sprint(ws)+".json")
	cmd := c.opx("plan", "--runner", "cluster:opxtest-loopback", "--backends", "cpu", "--testlists", testlist,
		"--world-sizes", fmt.Sprint(ws), "--run-id", "77", "--attempt", "1", "--source-sha", "abc",
		"--platform-config", c.cfg, "--testlist-dir", c.tl, "--out", m)
	var se bytes.Buffer
	cmd.Stderr = &se
	out, err := cmd.Output()
	if err != nil {
		c.t.Fatalf("plan: %v: %s", err, se.String())
	}
	var matrix struct{ Include []struct{ ID string } }
	json.Unmarshal(out, &matrix)
	return m, matrix.Include[0].ID
}

func (c *cluster) execute(manifest, id, output string) *exec.Cmd {
	cmd := c.opx("execute", "--shard", id, "--run-id", "77", "--attempt", "1", "--source-sha", "abc",
		"--runner-name", "opx-test", "--time-minutes", "10", "--cleanup-seconds", "30", "--manifest", manifest,
		"--platform-config", c.cfg, "--output", output)
	return cmd
}

type outcome struct {
	code   int
	stdout string
	stderr string
}

func run(cmd *exec.Cmd) outcome {
	o := testenv.Run(cmd)
	return outcome{o.Code, o.Stdout, o.Stderr}
}

// rows counts result rows by status under output/results.
func rows(t *testing.T, output string) map[string]int {
	counts := map[string]int{}
	filepath.Walk(filepath.Join(output, "results"), func(p string, info os.FileInfo, err error) error {
		if err != nil || info.IsDir() || !strings.HasSuffix(p, ".json") {
			return nil
		}
		b, _ := os.ReadFile(p)
		var doc struct{ Rows []struct{ Status string } }
		if err := json.Unmarshal(b, &doc); err != nil {
			t.Errorf("%s is not valid JSON: %v", p, err)
		}
		for _, r := range doc.Rows {
			counts[r.Status]++
		}
		return nil
	})
	return counts
}

func status(t *testing.T, output string) (int, bool) {
	b, err := os.ReadFile(filepath.Join(output, "status.json"))
	if err != nil {
		return 0, false
	}
	var s struct {
		ExitCode  int      `json:"exit_code"`
		SlurmJobs []string `json:"slurm_jobs"`
	}
	json.Unmarshal(b, &s)
	return s.ExitCode, true
}

func (c *cluster) assertClean(output string) {
	c.t.Helper()
	if q := c.squeue(); q != "" {
		c.t.Errorf("jobs left in squeue: %q", q)
	}
	stages, _ := filepath.Glob(filepath.Join(c.stageRoot, ".operatorx-*", "77-1-*"))
	if len(stages) > 0 {
		c.t.Errorf("stage left behind: %v", stages)
	}
	// a rank's private directory (HOME, caches) lives in the stage: nothing of it is left
	// on the node, wherever the node's temporary directories are
	for _, d := range rankDirs() {
		if !c.rankDirsBefore[d] {
			c.t.Errorf("a rank's private directory left on the node: %s", d)
		}
	}
}

// rankDirs are the rank private directories (operatorx-<job>-<rank>-<random>) in the
// node's temporary directories.
func rankDirs() []string {
	var out []string
	for _, tmp := range []string{os.TempDir(), "/tmp"} {
		left, _ := filepath.Glob(filepath.Join(tmp, "operatorx-[0-9]*-[0-9]*-*"))
		out = append(out, left...)
	}
	return out
}

func waitFor(t testing.TB, what string, timeout time.Duration, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if ok() {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("timed out waiting for %s", what)
}

func TestExecuteSuccessOnSlurm(t *testing.T) {
	c := slurmCluster(t)
	for ws, list := range map[int]string{1: "quick", 2: "quick2"} {
		m, id := c.plan(list, ws)
		out := filepath.Join(c.dir, fmt.Sprintf("out-ok-%d", ws))
		r := run(c.execute(m, id, out))
		if r.code != 0 {
			b, _ := os.ReadFile(filepath.Join(out, "benchmark.log"))
			t.Fatalf("ws %d: execute exit %d\n%s\n%s", ws, r.code, r.stderr, b)
		}
		for _, phase := range []string{"[operatorx] phase=allocation", "[operatorx] phase=benchmark"} {
			if !strings.Contains(r.stdout, phase) {
				t.Errorf("stdout lacks %s: %q", phase, r.stdout)
			}
		}
		if code, ok := status(t, out); !ok || code != 0 {
			t.Errorf("status.json exit %d (present %v)", code, ok)
		}
		if got := rows(t, out); got["ok"] != 1 || got["unsupported"] != 1 {
			t.Errorf("ws %d rows %v", ws, got)
		}
		for _, f := range []string{"execution.json", "allocation.log", "benchmark.log", "cleanup.log", "status.json"} {
			if _, err := os.Stat(filepath.Join(out, f)); err != nil {
				t.Errorf("missing %s", f)
			}
		}
		c.assertClean(out)
		// finalize again: idempotent
		if r := run(c.opx("finalize", "--output", out, "--cleanup-seconds", "5")); r.code != 0 {
			t.Errorf("second finalize: %d %s", r.code, r.stderr)
		}
	}
}

func TestExecuteBenchmarkFailsOnSlurm(t *testing.T) {
	c := slurmCluster(t)
	m, id := c.plan("failing", 1)
	out := filepath.Join(c.dir, "out-fail")
	r := run(c.execute(m, id, out))
	if r.code != 1 {
		t.Fatalf("exit %d, want 1: %s", r.code, r.stderr)
	}
	if code, ok := status(t, out); !ok || code != 1 {
		t.Errorf("status.json exit %d (present %v)", code, ok)
	}
	if got := rows(t, out); got["ok"] != 1 || got["error"] != 1 {
		t.Errorf("partial rows not kept: %v", got)
	}
	c.assertClean(out)
}

func TestExecuteSIGTERMWhilePending(t *testing.T) {
	c := slurmCluster(t)
	hold := exec.Command("salloc", "--no-shell", "--exclusive", "--gres=gpu:8", "--nodes=1", "--time=5", "--job-name=holder")
	hold.Env = c.env()
	if out, err := hold.CombinedOutput(); err != nil {
		t.Fatalf("holder: %v %s", err, out)
	}
	m, id := c.plan("quick", 1)
	out := filepath.Join(c.dir, "out-pending")
	cmd := c.execute(m, id, out)
	var so, se bytes.Buffer
	cmd.Stdout, cmd.Stderr = &so, &se
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "Pending job allocation", 30*time.Second, func() bool {
		b, _ := os.ReadFile(filepath.Join(out, "allocation.log"))
		return bytes.Contains(b, []byte("Pending job allocation"))
	})
	cmd.Process.Signal(syscall.SIGTERM)
	err := cmd.Wait()
	code := testenv.ExitCode(t, err)
	if code != 143 {
		t.Fatalf("exit %d, want 143\n%s", code, se.String())
	}
	if c, _ := status(t, out); c != 1 {
		t.Errorf("status exit %d", c)
	}
	// only the holder is left
	q := c.squeue()
	if strings.Count(q, "\n") != 0 || strings.Contains(q, "opx-") {
		t.Errorf("squeue after SIGTERM: %q", q)
	}
	c.scancelAll()
	waitFor(t, "holder gone", 30*time.Second, func() bool { return c.squeue() == "" })
	c.assertClean(out)
}

// startSlow starts execute on the slow testlist and waits until rank 0 checkpointed a row.
func (c *cluster) startSlow(out string) (*exec.Cmd, *bytes.Buffer) {
	c.t.Helper()
	m, id := c.plan("slow", 1)
	cmd := c.execute(m, id, out)
	var se bytes.Buffer
	cmd.Stderr = &se
	if err := cmd.Start(); err != nil {
		c.t.Fatal(err)
	}
	waitFor(c.t, "a checkpointed row", 60*time.Second, func() bool {
		found, _ := filepath.Glob(filepath.Join(c.stageRoot, ".operatorx-*", "77-1-*", "results", "cpu", "*", "*.json"))
		return len(found) > 0
	})
	return cmd, &se
}

func TestExecuteSIGTERMDuringBenchmark(t *testing.T) {
	c := slurmCluster(t)
	out := filepath.Join(c.dir, "out-term")
	cmd, se := c.startSlow(out)
	cmd.Process.Signal(syscall.SIGTERM)
	err := cmd.Wait()
	code := testenv.ExitCode(t, err)
	if code != 143 {
		t.Fatalf("exit %d, want 143: %s", code, se.String())
	}
	if got := rows(t, out); got["ok"] < 1 {
		t.Errorf("checkpointed rows lost: %v", got)
	}
	if c, _ := status(t, out); c != 1 {
		t.Errorf("status exit %d", c)
	}
	c.assertClean(out)
}

func TestExecuteSIGKILLThenFinalizeOrRecover(t *testing.T) {
	c := slurmCluster(t)
	for _, how := range []string{"finalize", "recover"} {
		out := filepath.Join(c.dir, "artifacts", "out-kill-"+how)
		os.MkdirAll(filepath.Dir(out), 0o755)
		cmd, _ := c.startSlow(out)
		cmd.Process.Signal(syscall.SIGKILL)
		cmd.Wait()
		// the ranks keep running under Slurm; the allocation is still there
		if q := c.squeue(); q == "" {
			t.Fatalf("%s: allocation vanished on its own", how)
		}
		var r outcome
		if how == "finalize" {
			r = run(c.opx("finalize", "--output", out, "--cleanup-seconds", "30"))
		} else {
			r = run(c.opx("recover", "--artifacts", filepath.Dir(out), "--run-id", "77", "--runner", "cluster:opxtest-loopback",
				"--platform-config", c.cfg, "--cleanup-seconds", "30"))
			if !strings.Contains(r.stdout, "Recovered 1 execution(s) from run 77") {
				t.Errorf("recover said %q", r.stdout)
			}
		}
		if r.code != 0 {
			t.Fatalf("%s exit %d: %s", how, r.code, r.stderr)
		}
		if got := rows(t, out); got["ok"] < 1 {
			t.Errorf("%s: checkpointed rows lost: %v", how, got)
		}
		c.assertClean(out)
		os.RemoveAll(out) // recover walks the whole artifacts tree
	}
}

// TestFinalizeFindsAllocationByToken: execute was killed after salloc was granted but
// before allocation.log named the job; finalize still cancels it, by the token.
func TestFinalizeFindsAllocationByToken(t *testing.T) {
	c := slurmCluster(t)
	base := filepath.Join(c.stageRoot, fmt.Sprintf(".operatorx-%d", os.Getuid()))
	os.MkdirAll(base, 0o700)
	stage, _ := os.MkdirTemp(base, "77-1-opxtest-loopback-0123456789abcdef-")
	os.MkdirAll(filepath.Join(stage, "results", "cpu", "x"), 0o755)
	os.WriteFile(filepath.Join(stage, "results", "cpu", "x", "r.json"), []byte(`{"rows": [{"status": "ok"}]}`), 0o644)
	out := filepath.Join(c.dir, "out-token")
	os.Mkdir(out, 0o700)
	os.WriteFile(filepath.Join(out, "execution.json"), []byte(`{"cell": {"id": "opxtest-loopback-0123456789abcdef", "runner": "cluster:opxtest-loopback"},
	  "source_sha": "abc", "run_id": "77", "attempt": "1", "stage": "`+stage+`"}`), 0o644)
	token := shard.Token("77", "1", "opxtest-loopback-0123456789abcdef")
	hold := exec.Command("salloc", "--no-shell", "--time=5", "--comment="+token, "--job-name=orphan")
	hold.Env = c.env()
	if b, err := hold.CombinedOutput(); err != nil {
		t.Fatalf("salloc: %v %s", err, b)
	}
	if !strings.Contains(c.squeue(), token) {
		t.Fatalf("the orphan allocation is not tagged: %q", c.squeue())
	}
	r := run(c.opx("finalize", "--output", out, "--cleanup-seconds", "30"))
	if r.code != 0 {
		t.Fatalf("finalize exit %d: %s", r.code, r.stderr)
	}
	if got := rows(t, out); got["ok"] != 1 {
		t.Errorf("rows %v", got)
	}
	c.assertClean(out)
}

// runSweep runs `opx run` with args and returns the outcome and its output directory.
func runSweep(t *testing.T, env []string, args ...string) (outcome, string) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "sweep")
	cmd := exec.Command(opxBin, append([]string{"run", "--out", dir}, args...)...)
	cmd.Env = env
	return run(cmd), dir
}

// summaryOf reads summary.json: shard statuses and ok counts.
func summaryOf(t *testing.T, dir string) (map[string]string, int, bool) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "summary.json"))
	if err != nil {
		t.Fatalf("no summary: %v", err)
	}
	var s struct {
		Shards []struct {
			Shard, Status string
			OK            int `json:"ok"`
		}
		Success bool
	}
	if err := json.Unmarshal(b, &s); err != nil {
		t.Fatal(err)
	}
	st := map[string]string{}
	ok := 0
	for _, sh := range s.Shards {
		st[sh.Shard] = sh.Status
		ok += sh.OK
	}
	return st, ok, s.Success
}

func TestRunLocalDefault(t *testing.T) {
	r, dir := runSweep(t, os.Environ())
	if r.code != 0 {
		t.Fatalf("opx run: exit %d\n%s", r.code, r.stderr)
	}
	st, ok, success := summaryOf(t, dir)
	if !success || len(st) != 1 || ok < 2 {
		t.Fatalf("summary %v ok=%d success=%v", st, ok, success)
	}
	if !strings.HasPrefix(r.stdout, "| Shard | Status |") || !strings.Contains(r.stdout, "| success |") {
		t.Errorf("stdout is not the coverage table: %q", r.stdout)
	}
	for _, want := range []string{"manifest: " + dir + "/operatorx-manifest.json", "summary: " + dir + "/summary.json",
		"report: " + dir + "/report.html", ": started (6 cases)", ": benchmark\n"} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("stderr lacks %q", want)
		}
	}
	if strings.Contains(r.stderr, "\r") || strings.Contains(r.stderr, "\x1b[") {
		t.Error("stderr is not a terminal: plain lines only, no status line")
	}
	page, err := os.ReadFile(filepath.Join(dir, "report.html"))
	if err != nil || !strings.Contains(string(page), `id="verdict">success: `) || !strings.Contains(string(page), "GFLOP/s") {
		t.Errorf("report.html: %v", err)
	}
	for id := range st {
		if code, ok := status(t, filepath.Join(dir, "shards", id)); !ok || code != 0 {
			t.Errorf("%s status.json exit %d (present %v)", id, code, ok)
		}
		ex, err := manifest.ReadExecution(t.Context(), filepath.Join(dir, "shards", id, "execution.json"))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(ex.Stage); err == nil {
			t.Errorf("stage %s left behind", ex.Stage)
		}
	}
	// the same directory again is refused, not overwritten
	cmd := exec.Command(opxBin, "run", "--out", dir)
	if r2 := run(cmd); r2.code != 1 || !strings.Contains(r2.stderr, "is not empty (it holds cases.json); opx run writes only into a new or empty --out (to run only what that run is missing: opx run --resume "+dir+")") {
		t.Errorf("second run into %s: exit %d %q", dir, r2.code, r2.stderr)
	}
}

func TestRunOnSlurmParallel(t *testing.T) {
	c := slurmCluster(t)
	r, dir := runSweep(t, c.env(), "--runner", "cluster:opxtest-loopback", "--testlists", "quick,quick2", "--world-sizes", "1,2",
		"--platform-config", c.cfg, "--testlist-dir", c.tl, "--max-parallel", "2", "--time-minutes", "10", "--cleanup-seconds", "30", "--run-id", "77", "--attempt", "1")
	if r.code != 0 {
		t.Fatalf("opx run: exit %d\n%s", r.code, r.stderr)
	}
	st, ok, success := summaryOf(t, dir)
	if !success || len(st) != 2 || ok != 2 {
		t.Fatalf("summary %v ok=%d success=%v\n%s", st, ok, success, r.stderr)
	}
	if !strings.Contains(r.stderr, "2 shard(s) of 4 case(s), 2 at a time") {
		t.Errorf("stderr: %s", r.stderr)
	}
	for id := range st {
		if jobs := shard.AllocationIDs(t.Context(), filepath.Join(dir, "shards", id)); len(jobs) != 1 {
			t.Errorf("%s: allocation.log names %v, want one Slurm job", id, jobs)
		}
	}
	c.assertClean(dir)
}

// A stale or tampered artifact whose allocation.log names an unrelated job of the same
// user (issue 30): finalize checks the job carries this execution's tag before scancel,
// reports it and leaves it alone; the execution's own allocation, found by its tag, is
// still cancelled.
func TestFinalizeLeavesAForeignJobAlone(t *testing.T) {
	c := slurmCluster(t)
	base := filepath.Join(c.stageRoot, fmt.Sprintf(".operatorx-%d", os.Getuid()))
	os.MkdirAll(base, 0o700)
	stage, _ := os.MkdirTemp(base, "78-1-opxtest-loopback-0123456789abcdef-")
	os.MkdirAll(filepath.Join(stage, "results"), 0o755)
	token := shard.Token("78", "1", "opxtest-loopback-0123456789abcdef") + "-0a1b2c3d"
	salloc := func(comment, name string) string {
		cmd := exec.Command("salloc", "--no-shell", "--time=5", "--comment="+comment, "--job-name="+name)
		cmd.Env = c.env()
		b, err := cmd.CombinedOutput()
		m := regexp.MustCompile(`Granted job allocation (\d+)`).FindSubmatch(b)
		if err != nil || m == nil {
			t.Fatalf("salloc: %v %s", err, b)
		}
		return string(m[1])
	}
	foreign := salloc("not-opx", "someone-elses-work")
	ours := salloc(token, "ours")
	out := filepath.Join(c.dir, "out-foreign")
	os.Mkdir(out, 0o700)
	os.WriteFile(filepath.Join(out, "execution.json"), []byte(`{"cell": {"id": "opxtest-loopback-0123456789abcdef", "runner": "cluster:opxtest-loopback"},
	  "source_sha": "abc", "run_id": "78", "attempt": "1", "stage": "`+stage+`", "token": "`+token+`"}`), 0o644)
	os.WriteFile(filepath.Join(out, "allocation.log"), []byte("salloc: Granted job allocation "+foreign+"\n"), 0o644)
	r := run(c.opx("finalize", "--output", out, "--cleanup-seconds", "30"))
	if r.code != 0 || !strings.Contains(r.stderr, "opx: job "+foreign+", named in allocation.log, is not this execution's (its comment is 'not-opx', not '"+token+"'): left alone") {
		t.Fatalf("finalize: exit %d %q", r.code, r.stderr)
	}
	q := c.squeue()
	if !strings.Contains(q, foreign+" not-opx") {
		t.Errorf("the foreign job was cancelled: squeue %q", q)
	}
	if strings.Contains(q, ours+" ") {
		t.Errorf("the execution's own allocation is still there: squeue %q", q)
	}
	if log, _ := os.ReadFile(filepath.Join(out, "cleanup.log")); !strings.Contains(string(log), "is not this execution's") {
		t.Errorf("cleanup.log: %q", log)
	}
	exec.Command("scancel", foreign).Run()
}
