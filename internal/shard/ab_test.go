package shard_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/semianalysis/opx/internal/ab"
	"github.com/semianalysis/opx/internal/shard"
	"github.com/semianalysis/opx/internal/testenv"
)

// abTestlist is an A/B's cases: two the cpu backend measures, one it answers unsupported.
const abTestlist = `[
  {"type": "gemm", "args": {"m": 192, "n": 192, "k": 192, "a": {"dtype": "fp64"}, "b": {"dtype": "fp64"}, "out": "fp64"}, "sources": []},
  {"type": "gemm", "args": {"m": 128, "n": 256, "k": 128, "a": {"dtype": "fp32"}, "b": {"dtype": "fp32"}, "out": "fp32"}, "sources": []},
  {"type": "gemm", "args": {"m": 32, "n": 64, "k": 32, "a": {"dtype": "bf16"}, "b": {"dtype": "bf16"}, "out": "bf16"}, "sources": []}]`

// abRun is opx run --ab-base BASE --ab-head HEAD of the A/B testlist on the real Slurm, at
// most maxPairs rounds, and the run's A/B report.
func abRun(t *testing.T, c *cluster, base, head, maxPairs string) (outcome, string, ab.Report) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(c.tl, "ab.json"), []byte(abTestlist), 0o644); err != nil {
		t.Fatal(err)
	}
	r, dir := runSweep(t, c.env("OPERATORX_MEASURE_S=0.05", "OPERATORX_WARMUP_MIN_S=0.01"), "--runner", "cluster:opxtest-loopback", "--testlists", "ab",
		"--platform-config", c.cfg, "--testlist-dir", c.tl, "--time-minutes", "10", "--cleanup-seconds", "30", "--run-id", "77", "--attempt", "1",
		"--ab-base", base, "--ab-head", head, "--ab-max-pairs", maxPairs)
	rep, err := ab.ReadReport(t.Context(), filepath.Join(dir, shard.ABFile))
	if err != nil {
		t.Fatalf("the run's A/B report: %v (exit %d)\n%s", err, r.code, r.stderr)
	}
	c.assertClean(dir)
	return r, dir, rep
}

// A head made slower on purpose (three GEMMs timed as one) is found slower, on one node in
// one allocation, and fails the run; the unsupported case is named, not failed; the shard's
// rows are the head's last round, every round kept.
func TestABFindsASlowerHeadOnSlurm(t *testing.T) {
	c := slurmCluster(t)
	r, dir, rep := abRun(t, c, "env=OPX_AB_TEST=base", "env=OPERATORX_CPU_REPEAT=3", "12")
	if r.code != 1 || !strings.Contains(r.stderr, "A/B: failure: 2 case(s) slower beyond 2%") {
		t.Fatalf("exit %d, want 1 and the A/B's failure\n%s", r.code, r.stderr)
	}
	if conc, _ := rep.Conclusion(); conc != "failure" || len(rep.Cases) != 3 {
		t.Fatalf("conclusion %s, %d cases", conc, len(rep.Cases))
	}
	for _, cs := range rep.Cases {
		switch {
		case strings.Contains(cs.Key, "bf16"):
			if cs.Outcome == "measured" || cs.Lost || !strings.HasPrefix(cs.Outcome, "unsupported") {
				t.Errorf("%s: %+v, want unsupported on both sides, not failed", cs.Key, cs)
			}
		case cs.Outcome != "measured" || cs.Verdict != ab.Slower || !cs.Fails || cs.Pairs < 9 || cs.Ratio < 2:
			t.Errorf("%s: %+v, want slower about 3x, failing at the family level of two cases (9 pairs or more)", cs.Key, cs)
		}
	}
	if !strings.Contains(r.stdout, ab.Marker) || !strings.Contains(r.stdout, "### Slower (2)") {
		t.Errorf("stdout lacks the A/B's Markdown:\n%s", r.stdout)
	}
	st, ok, success := summaryOf(t, dir)
	if !success || ok != 2 {
		t.Fatalf("summary %v ok=%d success=%v: the head measured both cases", st, ok, success)
	}
	for id := range st {
		out := filepath.Join(dir, "shards", id)
		if jobs := shard.AllocationIDs(t.Context(), out); len(jobs) != 1 {
			t.Errorf("allocation.log names %v: both sides share one allocation", jobs)
		}
		pairs := 0
		for _, cs := range rep.Cases {
			pairs = max(pairs, cs.Pairs)
		}
		rounds, _ := filepath.Glob(filepath.Join(out, "ab", "*-*"))
		if len(rounds) != 2*pairs {
			t.Errorf("%d rounds kept, want %d of each side: %v", len(rounds), pairs, rounds)
		}
		last := strconv.Itoa(pairs)
		head, _ := os.ReadFile(firstJSON(t, filepath.Join(out, "ab", "head-"+last, "results")))
		base, _ := os.ReadFile(firstJSON(t, filepath.Join(out, "ab", "base-"+last, "results")))
		shardRows, _ := os.ReadFile(firstJSON(t, filepath.Join(out, "results")))
		if !strings.Contains(string(head), "OPERATORX_CPU_REPEAT") || strings.Contains(string(base), "OPERATORX_CPU_REPEAT") || string(shardRows) != string(head) {
			t.Errorf("the head's rows carry its variables, the base's not, and the shard's rows are the head's last round")
		}
	}
}

// The same harness on both sides (an A/A) fails no case.
func TestABAASucceedsOnSlurm(t *testing.T) {
	c := slurmCluster(t)
	r, _, rep := abRun(t, c, "env=OPX_AB_TEST=a", "env=OPX_AB_TEST=b", "12")
	if r.code != 0 {
		t.Fatalf("exit %d\n%s", r.code, r.stderr)
	}
	if conc, why := rep.Conclusion(); conc != "success" {
		t.Fatalf("conclusion %s: %s", conc, why)
	}
	for _, cs := range rep.Cases {
		if cs.Fails || cs.Lost {
			t.Errorf("%s fails an A/A: %+v", cs.Key, cs)
		}
	}
}

func firstJSON(t *testing.T, dir string) string {
	t.Helper()
	var found string
	filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && found == "" && !d.IsDir() && strings.HasSuffix(p, ".json") {
			found = p
		}
		return nil
	})
	if found == "" {
		t.Fatalf("no results file in %s", dir)
	}
	return found
}

// An A/B stopped in its third round (SIGTERM) cancels its one allocation and keeps every
// round it measured, and the shard's rows are none of them: a side's rows never pass for
// the shard's, so its cases are missing (run again), not measured.
func TestABStoppedKeepsItsRoundsOnSlurm(t *testing.T) {
	c := slurmCluster(t)
	if err := os.WriteFile(filepath.Join(c.tl, "ab.json"), []byte(abTestlist), 0o644); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "sweep")
	cmd := exec.Command(opxBin, "run", "--out", dir, "--runner", "cluster:opxtest-loopback", "--testlists", "ab",
		"--platform-config", c.cfg, "--testlist-dir", c.tl, "--time-minutes", "10", "--cleanup-seconds", "30", "--run-id", "77", "--attempt", "1",
		"--ab-base", "env=OPX_AB_TEST=a", "--ab-head", "env=OPX_AB_TEST=b")
	cmd.Env = c.env("OPERATORX_MEASURE_S=0.5")
	var se testenv.Buffer
	cmd.Stderr = &se
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var out string
	waitFor(t, "the A/B's third round", 2*time.Minute, func() bool {
		m, _ := filepath.Glob(filepath.Join(dir, "shards", "*", "ab.json"))
		if len(m) == 1 {
			out = filepath.Dir(m[0])
		}
		return strings.Contains(se.String(), "A/B round 3")
	})
	cmd.Process.Signal(syscall.SIGTERM)
	if code := testenv.ExitCode(t, cmd.Wait()); code != 143 {
		t.Fatalf("exit %d, want 143\n%s", code, se.String())
	}
	if _, err := os.Stat(filepath.Join(out, "results")); err == nil {
		t.Errorf("the shard's results/ holds one side's rows of a round cut short")
	}
	for _, r := range []string{"base-1", "head-1", "head-2", "base-2"} {
		if _, err := os.Stat(filepath.Join(out, "ab", r, "results")); err != nil {
			t.Errorf("round %s not kept: %v", r, err)
		}
	}
	rep, err := ab.ReadReport(t.Context(), filepath.Join(out, shard.ABFile))
	paired := 0
	for _, cs := range rep.Cases {
		if cs.Pairs >= 2 {
			paired++
		}
	}
	if err != nil || len(rep.Cases) != 3 || paired != 2 {
		t.Errorf("the shard's ab.json after two rounds: %v %+v", err, rep.Cases)
	}
	// the run's report of an A/B cut short is never green: its cases have too few pairs
	run, err := ab.ReadReport(t.Context(), filepath.Join(dir, shard.ABFile))
	if conc, why := run.Conclusion(); err != nil || conc != "failure" || !strings.Contains(why, "whose shard failed") {
		t.Errorf("the run's A/B report after a stop: %v, %s: %s", err, conc, why)
	}
	c.assertClean(dir)
}
