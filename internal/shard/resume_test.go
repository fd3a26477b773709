package shard_test

// The resume test of the case ledger (docs/reference.md, "cases.json"), on the real local
// Slurm: an opx run killed (SIGKILL) after k of its n cases, then opx run --resume. The
// second attempt must run exactly the n-k cases the first did not write, the ledger must
// be complete, and its GPU-seconds must add up.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/semianalysis/opx/internal/manifest"
	"github.com/semianalysis/opx/internal/shard"
	"github.com/semianalysis/opx/internal/summary"
)

// ledgerFile is the part of cases.json the test checks.
type ledgerFile struct {
	Complete bool
	Totals   struct {
		Cases, Measured, Missing int
		GPUSeconds               float64 `json:"gpu_seconds"`
		Failed                   float64 `json:"failed_attempts_gpu_seconds"`
		Retries                  float64 `json:"retries_gpu_seconds"`
		Superseded               float64 `json:"superseded_gpu_seconds"`
	}
	Attempts []struct {
		Shard, Dir, Outcome string
		Attempt, Rows, GPUs int
		Cases               int
		GPUSeconds          float64 `json:"gpu_seconds"`
		Held                float64 `json:"held_seconds"`
		Estimated           bool
	}
	Cases []struct {
		Key, Status string
		Attempt     int
		GPUSeconds  float64 `json:"gpu_seconds"`
	}
}

func readLedger(t *testing.T, path string) ledgerFile {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var l ledgerFile
	if err := json.Unmarshal(b, &l); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return l
}

func TestResumeRunsOnlyTheMissingCasesOnSlurm(t *testing.T) {
	c := slurmCluster(t)
	const n = 8
	var shapes []string
	for i := range n {
		shapes = append(shapes, fmt.Sprintf(`{"type": "gemm", "args": {"m": %d, "n": 512, "k": 512, "a": {"dtype": "fp64"}, "b": {"dtype": "fp64"}, "out": "fp64"}, "sources": []}`, 512+32*i))
	}
	os.WriteFile(filepath.Join(c.tl, "resume8.json"), []byte("["+strings.Join(shapes, ",\n")+"]"), 0o644)
	dir := filepath.Join(t.TempDir(), "sweep")
	env := c.env("OPERATORX_MEASURE_S=0.6") // each case takes about a second
	cmd := exec.Command(opxBin, "run", "--out", dir, "--runner", "cluster:opxtest-loopback", "--testlists", "resume8",
		"--platform-config", c.cfg, "--testlist-dir", c.tl, "--time-minutes", "10", "--cleanup-seconds", "30", "--run-id", "77")
	cmd.Env = env
	var se bytes.Buffer
	cmd.Stderr = &se
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// kill it, SIGKILL, once the first attempt checkpointed two rows
	waitFor(t, "two checkpointed rows", 90*time.Second, func() bool {
		stages, _ := filepath.Glob(filepath.Join(c.stageRoot, ".operatorx-*", "77-1-*", "results"))
		return len(stages) == 1 && summary.RowsIn(t.Context(), stages[0]) >= 2
	})
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()
	if q := c.squeue(); q == "" {
		t.Fatalf("the killed run's allocation vanished on its own; stderr:\n%s", se.String())
	}

	r := run(func() *exec.Cmd {
		cmd := exec.Command(opxBin, "run", "--resume", dir, "--cleanup-seconds", "30", "--time-minutes", "10")
		cmd.Env = env
		return cmd
	}())
	if r.code != 0 {
		t.Fatalf("opx run --resume: exit %d\n%s", r.code, r.stderr)
	}
	l := readLedger(t, filepath.Join(dir, "cases.json"))
	if !l.Complete || l.Totals.Cases != n || l.Totals.Measured != n || l.Totals.Missing != 0 {
		t.Fatalf("ledger not complete: %+v\n%s", l.Totals, r.stderr)
	}
	if len(l.Attempts) != 2 || l.Attempts[0].Attempt != 1 || l.Attempts[1].Attempt != 2 {
		t.Fatalf("attempts %+v", l.Attempts)
	}
	first, second := l.Attempts[0], l.Attempts[1]
	k := first.Rows
	if k < 2 || k >= n || first.Outcome != "unfinished" {
		t.Fatalf("attempt 1 wrote %d of %d rows (%s); want the kill to have cut it short after 2", k, n, first.Outcome)
	}
	t.Logf("attempt 1 wrote %d of %d rows before it was finalized; attempt 2 ran %d", k, n, second.Rows)
	// the second attempt ran exactly the n-k cases the first did not write
	if second.Rows != n-k || second.Cases != n-k || second.Outcome != "success" {
		t.Errorf("attempt 2: %d rows of %d cases (%s), want %d", second.Rows, second.Cases, second.Outcome, n-k)
	}
	if got := rows(t, filepath.Join(dir, "shards", second.Dir)); got["ok"] != n-k || len(got) != 1 {
		t.Errorf("attempt 2's results hold %v, want %d ok rows", got, n-k)
	}
	m, err := manifest.Load(t.Context(), filepath.Join(dir, "operatorx-manifest.attempt-2.json"))
	if err != nil || len(m.Cells) != 1 || len(m.Cells[0].Cases) != n-k {
		t.Fatalf("resume manifest: %v", err)
	}
	if got := strings.Count(r.stderr, "  rerun resume8 | gemm | "); got != n-k ||
		!strings.Contains(r.stderr, "missing: attempt 1 ended before it (killed: no status.json)") {
		t.Errorf("resume named %d reruns, want %d with their reason:\n%s", got, n-k, r.stderr)
	}
	byAttempt := map[int]int{}
	for _, cs := range l.Cases {
		byAttempt[cs.Attempt]++
	}
	if byAttempt[1] != k || byAttempt[2] != n-k {
		t.Errorf("rows kept per attempt %v, want %d from 1 and %d from 2", byAttempt, k, n-k)
	}

	// GPU-seconds add up: each attempt's allocation time (8 GPUs, granted to released, as
	// accounting.json records it) is its cases' shares, and the sweep's is the sum
	sumCases, sumAttempts := 0.0, 0.0
	for _, cs := range l.Cases {
		sumCases += cs.GPUSeconds
	}
	for _, a := range l.Attempts {
		acct, err := manifest.ReadAccounting(t.Context(), filepath.Join(dir, "shards", a.Dir, manifest.AccountingFile))
		if err != nil || acct == nil {
			t.Fatalf("%s: accounting %v", a.Dir, err)
		}
		if acct.GrantedAt == nil || acct.ReleasedAt == nil || acct.SubmittedAt == nil || a.Estimated {
			t.Errorf("%s: granted %v released %v submitted %v (a finalized allocation records all three)", a.Dir, acct.GrantedAt, acct.ReleasedAt, acct.SubmittedAt)
			continue
		}
		want := acct.ReleasedAt.Sub(*acct.GrantedAt).Seconds() * 8
		if a.GPUs != 8 || !near(a.GPUSeconds, want) || a.GPUSeconds <= 0 {
			t.Errorf("%s: %d GPUs, %.3f GPU-s; accounting.json says %.3f", a.Dir, a.GPUs, a.GPUSeconds, want)
		}
		sumAttempts += a.GPUSeconds
	}
	if !near(sumCases, sumAttempts) || !near(sumAttempts, l.Totals.GPUSeconds) {
		t.Errorf("GPU-seconds do not add up: cases %.6f, attempts %.6f, total %.6f", sumCases, sumAttempts, l.Totals.GPUSeconds)
	}
	if !near(l.Totals.Failed, first.GPUSeconds) || !near(l.Totals.Retries, second.GPUSeconds) || l.Totals.Superseded > 1e-9 {
		t.Errorf("totals %+v: failed should be attempt 1's %.3f, retries attempt 2's %.3f, nothing paid twice", l.Totals, first.GPUSeconds, second.GPUSeconds)
	}
	if q := c.squeue(); q != "" {
		t.Errorf("jobs left: %q", q)
	}
	if stages, _ := filepath.Glob(filepath.Join(c.stageRoot, ".operatorx-*", "77-*")); len(stages) > 0 {
		t.Errorf("stages left behind: %v", stages)
	}
}

func near(a, b float64) bool {
	d := a - b
	if d < 0 {
		d = -d
	}
	return d <= 1e-6*max(1, a, b)
}

// TestPlanResumeAndEstimate: the building blocks a workflow re-dispatch uses, on the local
// runner — plan --resume plans only the case that errored, says why, and keeps the shard
// id; plan --estimate-from prices a new plan from the run's ledger; run --resume reruns
// the error and the ledger keeps the newer row.
func TestPlanResumeAndEstimate(t *testing.T) {
	tl := t.TempDir()
	os.WriteFile(filepath.Join(tl, "mixed.json"), []byte(`[
	  {"type": "gemm", "args": {"m": 64, "n": 64, "k": 64, "a": {"dtype": "fp64"}, "b": {"dtype": "fp64"}, "out": "fp64"}, "sources": []},
	  {"type": "gemm", "args": {"m": 0, "n": 64, "k": 64, "a": {"dtype": "fp64"}, "b": {"dtype": "fp64"}, "out": "fp64"}, "sources": []},
	  {"type": "gemm", "args": {"m": 32, "n": 64, "k": 32, "a": {"dtype": "bf16"}, "b": {"dtype": "bf16"}, "out": "bf16"}, "sources": []}]`), 0o644)
	r, dir := runSweep(t, os.Environ(), "--testlists", "mixed", "--testlist-dir", tl)
	if r.code != 1 {
		t.Fatalf("a sweep with an error row: exit %d, want 1\n%s", r.code, r.stderr)
	}
	if !strings.Contains(r.stderr, "failed: 1 of 3 cases measured, 1 unsupported, 1 error, 0 missing") {
		t.Errorf("run's ledger line:\n%s", r.stderr)
	}
	out := filepath.Join(t.TempDir(), "resume.json")
	pr := run(exec.Command(opxBin, "plan", "--resume", filepath.Join(dir, "shards"), "--manifest", filepath.Join(dir, "operatorx-manifest.json"), "--out", out))
	if pr.code != 0 {
		t.Fatalf("plan --resume: exit %d %s", pr.code, pr.stderr)
	}
	orig, err := manifest.Load(t.Context(), filepath.Join(dir, "operatorx-manifest.json"))
	if err != nil {
		t.Fatal(err)
	}
	res, err := manifest.Load(t.Context(), out)
	if err != nil {
		t.Fatal(err)
	}
	id := orig.Cells[0].ID
	if len(res.Cells) != 1 || res.Cells[0].ID != id || len(res.Cells[0].Cases) != 1 || res.RunID != orig.RunID {
		t.Fatalf("resume manifest: %d cells", len(res.Cells))
	}
	if !strings.Contains(pr.stdout, `"id":"`+id+`"`) {
		t.Errorf("matrix %q does not name shard %s", pr.stdout, id)
	}
	if !strings.Contains(pr.stderr, "attempt 2 reruns 1 case(s)") || !strings.Contains(pr.stderr, `"m": 0`) || !strings.Contains(pr.stderr, ": error in attempt 1: ") {
		t.Errorf("plan --resume said:\n%s", pr.stderr)
	}
	est := run(exec.Command(opxBin, "plan", "--runner", "local", "--backends", "cpu", "--testlists", "mixed", "--world-sizes", "1",
		"--testlist-dir", tl, "--out", filepath.Join(t.TempDir(), "m.json"), "--estimate-from", filepath.Join(dir, "cases.json")))
	if est.code != 0 || !strings.Contains(est.stderr, "CPU-hours for 3 case(s), priced from 2 case(s) it finished, measured or unsupported (2 at what they cost there, 1 at their op's mean, 0 at the mean of all)") {
		t.Errorf("estimate: exit %d %q", est.code, est.stderr)
	}

	cmd := exec.Command(opxBin, "run", "--resume", dir)
	rr := run(cmd)
	if rr.code != 1 || !strings.Contains(rr.stderr, "resume: attempt 2 reruns 1 case(s)") {
		t.Fatalf("run --resume: exit %d\n%s", rr.code, rr.stderr)
	}
	l := readLedger(t, filepath.Join(dir, "cases.json"))
	if len(l.Attempts) != 2 || l.Attempts[1].Rows != 1 || l.Attempts[1].Cases != 1 || l.Totals.Superseded <= 0 {
		t.Errorf("ledger after resume: %+v %+v", l.Totals, l.Attempts)
	}
	for _, c := range l.Cases {
		if strings.Contains(c.Key, `"m": 0`) && (c.Status != "error" || c.Attempt != 2) {
			t.Errorf("the rerun error case: %s from attempt %d", c.Status, c.Attempt)
		}
	}
}

// TestFingerprintOnSlurm: execute records the node before and after the benchmark, one
// srun step each on the real local Slurm. No GPU here: a recording fake nvidia-smi on the
// PATH the steps inherit prints a real H100 node's `nvidia-smi -q -x` (driver 535), and
// records its arguments.
func TestFingerprintOnSlurm(t *testing.T) {
	c := slurmCluster(t)
	fakes := t.TempDir()
	xml, _ := filepath.Abs("../fingerprint/testdata/nvidia-smi-h100-535.xml")
	log := filepath.Join(fakes, "calls")
	os.WriteFile(filepath.Join(fakes, "nvidia-smi"), []byte("#!/bin/sh\necho \"$* job=$SLURM_JOB_ID\" >> "+log+"\n[ \"$*\" = \"-q -x\" ] || exit 2\ncat "+xml+"\n"), 0o755)
	m, id := c.plan("quick", 1)
	out := filepath.Join(c.dir, "out-fp")
	cmd := c.execute(m, id, out)
	cmd.Env = c.env("PATH=" + fakes + ":" + os.Getenv("PATH"))
	if r := run(cmd); r.code != 0 {
		t.Fatalf("execute: exit %d %s", r.code, r.stderr)
	}
	jobs := shard.AllocationIDs(t.Context(), out)
	calls, _ := os.ReadFile(log)
	if len(jobs) != 1 || string(calls) != "-q -x job="+jobs[0]+"\n-q -x job="+jobs[0]+"\n" {
		t.Errorf("nvidia-smi calls %q (job %v): want two, on the allocation", calls, jobs)
	}
	for _, phase := range []string{"before", "after"} {
		b, err := os.ReadFile(filepath.Join(out, "fingerprint-"+phase+".json"))
		if err != nil {
			t.Fatalf("no fingerprint-%s.json: %v", phase, err)
		}
		var f struct {
			Phase, Node, Vendor, Driver string
			GPUs                        []struct{ Model string }
		}
		host, _ := os.Hostname()
		if err := json.Unmarshal(b, &f); err != nil || f.Phase != phase || f.Node != host || f.Vendor != "nvidia" || f.Driver != "535.161.08" ||
			len(f.GPUs) != 2 || f.GPUs[0].Model != "NVIDIA H100 80GB HBM3" {
			t.Errorf("fingerprint-%s: %v %s", phase, err, b)
		}
	}
	c.assertClean(out)
}

// BenchmarkResumeAgainstWholeRerun is the cost of a resumed sweep against the seed's retry
// (the failed shard rerun whole), on the real local Slurm: a 16-case shard killed
// (SIGKILL) after about half its cases, then resumed; and the same sweep run whole. The
// goal is a resume that costs its share of the cases missing plus one allocation's fixed
// cost: resume_gpu_s ≤ fixed + 1.05 × benchmark × missing/n. Reported per run:
// resume_gpu_s, whole_gpu_s, fixed_gpu_s (the whole run's allocation time outside its
// benchmark), missing/n, and over_proportional_pct (how far the resume is above
// fixed + benchmark × missing/n). Run it with scripts/bench-resume.sh.
func BenchmarkResumeAgainstWholeRerun(b *testing.B) {
	c := slurmCluster(b)
	const n = 16
	var shapes []string
	for i := range n {
		shapes = append(shapes, fmt.Sprintf(`{"type": "gemm", "args": {"m": %d, "n": 384, "k": 384, "a": {"dtype": "fp64"}, "b": {"dtype": "fp64"}, "out": "fp64"}, "sources": []}`, 384+16*i))
	}
	os.WriteFile(filepath.Join(c.tl, "bench16.json"), []byte("["+strings.Join(shapes, ",\n")+"]"), 0o644)
	env := c.env("OPERATORX_MEASURE_S=0.4")
	args := func(dir string) []string {
		return []string{"run", "--out", dir, "--runner", "cluster:opxtest-loopback", "--testlists", "bench16", "--platform-config", c.cfg,
			"--testlist-dir", c.tl, "--time-minutes", "10", "--cleanup-seconds", "30", "--run-id", "77"}
	}
	for i := 0; i < b.N; i++ {
		root := b.TempDir()
		killed := filepath.Join(root, "resumed")
		cmd := exec.Command(opxBin, args(killed)...)
		cmd.Env = env
		if err := cmd.Start(); err != nil {
			b.Fatal(err)
		}
		deadline := time.Now().Add(120 * time.Second)
		for time.Now().Before(deadline) {
			stages, _ := filepath.Glob(filepath.Join(c.stageRoot, ".operatorx-*", "77-1-*", "results"))
			if len(stages) == 1 && summary.RowsIn(b.Context(), stages[0]) >= n/2 {
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
		cmd.Process.Signal(syscall.SIGKILL)
		cmd.Wait()
		res := exec.Command(opxBin, "run", "--resume", killed, "--cleanup-seconds", "30", "--time-minutes", "10")
		res.Env = env
		if out, err := res.CombinedOutput(); err != nil {
			b.Fatalf("resume: %v\n%s", err, out)
		}
		whole := filepath.Join(root, "whole")
		w := exec.Command(opxBin, args(whole)...)
		w.Env = env
		if out, err := w.CombinedOutput(); err != nil {
			b.Fatalf("whole run: %v\n%s", err, out)
		}
		lr := benchLedger(b, filepath.Join(killed, "cases.json"))
		lw := benchLedger(b, filepath.Join(whole, "cases.json"))
		if len(lr.Attempts) != 2 || len(lw.Attempts) != 1 || !lr.Complete {
			b.Fatalf("attempts: resumed %d, whole %d", len(lr.Attempts), len(lw.Attempts))
		}
		resumed, full := lr.Attempts[1], lw.Attempts[0]
		fixed := full.GPUSeconds - full.Phases["benchmark"]*float64(full.GPUs)
		frac := float64(resumed.Rows) / n
		proportional := fixed + full.Phases["benchmark"]*float64(full.GPUs)*frac
		b.ReportMetric(resumed.GPUSeconds, "resume_gpu_s")
		b.ReportMetric(full.GPUSeconds, "whole_gpu_s")
		b.ReportMetric(fixed, "fixed_gpu_s")
		b.ReportMetric(frac, "missing/n")
		b.ReportMetric(100*(resumed.GPUSeconds/proportional-1), "over_proportional_pct")
	}
	c.scancelAll()
}

type benchLedgerFile struct {
	Complete bool
	Attempts []struct {
		Rows, GPUs int
		GPUSeconds float64            `json:"gpu_seconds"`
		Phases     map[string]float64 `json:"phase_seconds"`
	}
}

func benchLedger(b *testing.B, path string) benchLedgerFile {
	raw, err := os.ReadFile(path)
	if err != nil {
		b.Fatal(err)
	}
	var l benchLedgerFile
	if err := json.Unmarshal(raw, &l); err != nil {
		b.Fatal(err)
	}
	return l
}

// A run with a row for every case resumes to nothing: no new attempt, no new shard.
func TestResumeOfACompleteRunRunsNothing(t *testing.T) {
	r, dir := runSweep(t, os.Environ())
	if r.code != 0 {
		t.Fatalf("opx run: %s", r.stderr)
	}
	rr := run(exec.Command(opxBin, "run", "--resume", dir))
	if rr.code != 0 || !strings.Contains(rr.stderr, "resume: nothing to rerun: every case of "+dir+"/operatorx-manifest.json has an ok or unsupported row") {
		t.Fatalf("resume: exit %d %s", rr.code, rr.stderr)
	}
	if more, _ := filepath.Glob(filepath.Join(dir, "shards", "*.attempt-*")); len(more) != 0 {
		t.Errorf("a complete run grew attempts: %v", more)
	}
	b, _ := os.ReadFile(filepath.Join(dir, "run.json"))
	if !strings.Contains(string(b), `"attempt": "1"`) {
		t.Errorf("run.json: %s", b)
	}
}
