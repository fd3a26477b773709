package sweep

// opx run --ab: the run's A/B report (ab.json in the run directory) made of its shards'
// (internal/shard/ab.go), printed after the coverage table.

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/semianalysis/opx/internal/ab"
	"github.com/semianalysis/opx/internal/manifest"
	"github.com/semianalysis/opx/internal/results"
	"github.com/semianalysis/opx/internal/shard"
)

// ABFailed is Run's error when the sweep succeeded but its A/B check did not (a case
// slower beyond the threshold, one the head lost, or nothing judged): exit status 1.
type ABFailed struct{ Why string }

func (e ABFailed) Error() string { return "the A/B check fails: " + e.Why }

// ExitCode is 1, as a run that did not succeed.
func (ABFailed) ExitCode() int { return 1 }

// abReport is the run's A/B: every shard's ab.json cases, and each requested case no shard
// judged (its shard failed before its rounds, or the run was stopped) as not measured by
// the head — the check fails on it: nothing measured is never green.
func (s *sweep) abReport(ctx context.Context) (ab.Report, error) {
	a := s.o.AB
	rep := ab.Report{Base: a.Base.Label, Head: a.Head.Label, Rules: a.Rules}
	m, err := manifest.Load(ctx, s.mpath)
	if err != nil {
		return rep, err
	}
	for _, cell := range m.Cells {
		judged := map[string]bool{}
		from := len(rep.Cases) // this cell's cases are rep.Cases[from:]
		path := filepath.Join(s.shards, cell.ID, shard.ABFile)
		got, err := ab.ReadReport(ctx, path)
		switch {
		case err == nil:
			for _, c := range got.Cases {
				judged[c.Key] = true
				rep.Cases = append(rep.Cases, c)
			}
		case !errors.Is(err, fs.ErrNotExist):
			return rep, err
		}
		cases, err := results.CellCases(cell)
		if err != nil {
			return rep, err
		}
		// a shard that failed (a side crashed in a later round, its node failed): its
		// rounds stand, and every case of it fails the check, saying why
		failed := ""
		st, err := manifest.ReadStatus(ctx, filepath.Join(s.shards, cell.ID, manifest.StatusFile))
		if err != nil {
			return rep, err
		}
		if st == nil || !st.Exited0 {
			failed = "its shard did not finish"
			if st != nil && st.Failure.Message != "" {
				failed = "its shard failed: " + st.Failure.Message
			}
		}
		for i := from; i < len(rep.Cases) && failed != ""; i++ {
			if c := &rep.Cases[i]; c.Outcome == "measured" {
				c.Outcome, c.Lost = "measured, but "+failed, true
			}
		}
		for _, c := range cases {
			if !judged[c.Key] {
				why := "missing: shard " + cell.ID + " judged no pair of it"
				if failed != "" {
					why += " (" + failed + ")"
				}
				rep.Cases = append(rep.Cases, ab.Case{Key: c.Key, Testlist: c.Testlist, Outcome: why, Lost: true, Result: ab.Result{Verdict: ab.Unsure}})
			}
		}
	}
	slices.SortStableFunc(rep.Cases, func(x, y ab.Case) int { return strings.Compare(x.Key, y.Key) })
	return rep, nil
}

// finishAB writes the run's ab.json, prints its Markdown on stdout and its conclusion on
// stderr, and is ABFailed when the check fails.
func (s *sweep) finishAB(ctx context.Context) error {
	rep, err := s.abReport(ctx)
	if err != nil {
		return err
	}
	path := filepath.Join(s.dir, shard.ABFile)
	if err := rep.Write(path); err != nil {
		return err
	}
	fmt.Fprintln(s.o.Stdout)
	fmt.Fprint(s.o.Stdout, rep.Markdown())
	conclusion, why := rep.Conclusion()
	s.pr.logf("A/B report: %s", path)
	s.pr.logf("A/B: %s: %s", conclusion, why)
	if conclusion != "success" {
		return ABFailed{Why: why}
	}
	return nil
}

// checkABRun refuses to resume an A/B run (its sides are not recorded for a second
// attempt to measure them again): it is run again instead. A run killed before its own
// ab.json was written is known by its shards' (written after every round) or their rounds.
func checkABRun(ctx context.Context, dir string) error {
	shards, _ := filepath.Glob(filepath.Join(dir, "shards", "*", shard.ABFile))
	rounds, _ := filepath.Glob(filepath.Join(dir, "shards", "*", "ab"))
	rec, _ := results.ReadRunRecord(ctx, dir) // run.json says so from the start
	if _, err := os.Stat(filepath.Join(dir, shard.ABFile)); err == nil || len(shards)+len(rounds) > 0 || rec != nil && rec.AB != nil {
		return fmt.Errorf("--resume %s: an A/B run (opx run --ab-base/--ab-head) is not resumed: run it again (its pairs must share one allocation)", dir)
	}
	return nil
}

// abFamily sets the A/B's family to the run's planned cases (every shard's: the check
// judges them together), and refuses, before anything is allocated, a --ab-max-pairs too
// few for a case ever to fail at that level.
func (s *sweep) abFamily(ctx context.Context) error {
	m, err := manifest.Load(ctx, s.exec) // whole: a cell's case keys are its shapes times its backends
	if err != nil {
		return err
	}
	cases := 0
	for _, c := range m.Cells {
		keys, err := results.CellCases(c)
		if err != nil {
			return err
		}
		cases += len(keys)
	}
	a := *s.o.AB
	a.Rules.Cases = max(cases, 1)
	if need := ab.PairsToFail(a.Rules); a.Rules.MaxPairs < need {
		return fmt.Errorf("--ab-max-pairs %d: with %d planned cases judged together, a case can fail the check only with %d pairs or more (the exact interval at %.4g%%): give --ab-max-pairs %d or more",
			a.Rules.MaxPairs, cases, need, 100*(1-(1-a.Rules.Level)/float64(a.Rules.Cases)), need)
	}
	s.o.AB = &a
	return nil
}
