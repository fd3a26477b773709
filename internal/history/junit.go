// Rendering: check's findings as JUnit XML, a failure for each case the gate fails on.

package history

import (
	"fmt"
	"time"

	"github.com/semianalysis/opx/internal/compare"
	"github.com/semianalysis/opx/internal/junit"
)

// JUnit is a check as a JUnit suite (history check --junit): a testcase per change found,
// a failure for each the gate fails on (gate: --fail-on-regression's Gate, Regressions;
// without one, a slower change new at the run under test that it measured); a testcase per case the run under test did not measure, a failure under the
// gate and skipped without it; and a testcase for the check itself, failed with why when
// the gate fails on the store (nothing to judge: why is the gate's words, "" when it
// passes), its counts in system-out.
func (f *Found) JUnit(g *Gate, why string) junit.Suite {
	gate := g != nil
	name := "opx history check"
	if f.Newest != nil {
		name += " of run " + f.Newest.Name()
	}
	s := junit.Suite{Name: name}
	failing := map[int]bool{}
	if gate {
		bad := f.Regressions(*g)
		for i := range f.Changes {
			for _, b := range bad {
				if b.Key == f.Changes[i].Key && b.Metric == f.Changes[i].Metric && b.run == f.Changes[i].run {
					failing[i] = true
				}
			}
		}
	}
	for i, c := range f.Changes {
		msg := fmt.Sprintf("%s %s from run %s (%s, %s → %s)", c.Metric, compare.Words(c.Speedup), c.RunName(), c.Status, fmtLevel(c.Before), fmtLevel(c.After))
		tc := junit.Case{Classname: "history." + c.Direction, Name: c.Key + " " + c.Metric}
		if failing[i] || (!gate && c.Direction == compare.Slower && c.New && c.Holds) {
			tc.Failure = &junit.Problem{Message: msg, Type: "regression", Text: c.Confirmation}
		} else {
			tc.Out = msg
		}
		s.Cases = append(s.Cases, tc)
	}
	for _, u := range f.notMeasured() {
		tc := junit.Case{Classname: "history.unmeasured", Name: u.Key}
		msg := fmt.Sprintf("not measured by run %s (%s)", u.RunID, u.Outcome)
		if gate {
			tc.Failure = &junit.Problem{Message: msg, Type: "unmeasured"}
		} else {
			tc.Skipped = &junit.Problem{Message: msg}
		}
		s.Cases = append(s.Cases, tc)
	}
	for _, c := range f.Contended {
		tc := junit.Case{Classname: "history.contended", Name: c.Key}
		msg := fmt.Sprintf("measured under contention at run %s (%s)", c.RunID, c.Why)
		if c.Ratio > 0 {
			msg += ": " + compare.Words(c.Speedup) + " than its quiet level"
		}
		if gate && len((&Found{Contended: []Contended{c}}).UnderContention(g.Pct)) > 0 {
			tc.Failure = &junit.Problem{Message: "measured under contention: re-measure: " + msg, Type: "contended"}
		} else {
			tc.Out = msg
		}
		s.Cases = append(s.Cases, tc)
	}
	check := junit.Case{Classname: "history", Name: "the store's series are judged",
		Out: fmt.Sprintf("%d series, %d points; %d change(s), %d unmeasured case(s), %d series too young to judge", f.Series, f.Points, len(f.Changes), len(f.Unmeasured), len(f.Young))}
	if why != "" && f.Series == 0 {
		check.Failure = &junit.Problem{Message: why, Type: "nothing to judge"}
	}
	s.Cases = append([]junit.Case{check}, s.Cases...)
	return s
}

// At is the run under test's time, for the report's timestamp (zero without one).
func (f *Found) At() time.Time {
	if f.Newest == nil {
		return time.Time{}
	}
	return f.Newest.At
}

func fmtLevel(x float64) string { return fmt.Sprintf("%.4g", x) }
