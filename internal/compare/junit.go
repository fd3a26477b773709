package compare

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/semianalysis/opx/internal/junit"
)

// JUnit is the comparison as a JUnit suite (compare --junit): a testcase per case, its
// classname the case's testlist, op, backend, cluster and world size, its name the case's
// args. A case the gate fails on (gate: --fail-on-regression pct, Regressions) is a
// failure; without the gate, a slower or broken case is. A case in one run only, or
// measured in neither, is skipped; any other passes, its change said in system-out. Why
// the comparison cannot be trusted (Problems) is a failed testcase of its own when it
// fails the command (nothing measured; with the gate, any).
func (r *Result) JUnit(gate bool, pct float64, allowMissing bool) junit.Suite {
	side := func(x Side) string { return "run " + x.RunID + " (source " + short(x.SourceSHA) + ")" }
	s := junit.Suite{Name: "opx compare " + side(r.Base) + " → " + side(r.New), Cases: make([]junit.Case, 0, len(r.cases)+1)}
	for i := range r.cases {
		c := r.Case(i)
		tc := junit.Case{Classname: strings.Join([]string{c.Testlist, c.OpType, c.Backend, c.Cluster, "ws" + strconv.Itoa(c.WorldSize)}, "."), Name: c.Args}
		change := c.Class
		if c.Primary != nil {
			change = fmt.Sprintf("%s: %s %s (%s %g → %g)", c.Class, c.Primary.Name, c.Primary.Change, c.Primary.Name, c.Primary.Base, c.Primary.New)
		}
		fail := r.cases[i].class == Slower || r.cases[i].class == Broken
		if gate {
			fail = r.fails(i, pct, allowMissing)
		}
		switch {
		case fail:
			msg := change
			switch c.Class {
			case Broken:
				msg = fmt.Sprintf("broken: %s in base, %s now", c.BaseStatus, c.NewStatus)
			case OnlyBase:
				msg = "missing from new: measured in base, no row now"
			}
			typ := c.Class
			if why := UnderContention(&c); why != "" && c.Class != Broken && c.Class != OnlyBase {
				msg, typ = why+": "+msg, "contended"
			}
			tc.Failure = &junit.Problem{Message: msg, Type: typ, Text: strings.TrimSpace(c.NewMessage)}
		case c.Class == OnlyBase || c.Class == OnlyNew || c.Class == Unmeasured:
			tc.Skipped = &junit.Problem{Message: map[string]string{OnlyBase: "in base only", OnlyNew: "in new only", Unmeasured: "measured in neither run"}[c.Class]}
		default:
			tc.Out = change
		}
		s.Cases = append(s.Cases, tc)
	}
	if len(r.Problems) > 0 && (r.Empty() || gate) {
		s.Cases = append(s.Cases, junit.Case{Classname: "opx.compare", Name: "the comparison can be trusted",
			Failure: &junit.Problem{Message: r.Problems[0], Type: "untrusted", Text: strings.Join(r.Problems, "\n")}})
	}
	return s
}

// At is when the new run was measured, for the report's timestamp (zero when unknown).
func (r *Result) At() time.Time {
	t, _ := time.Parse(time.RFC3339, r.New.At)
	return t
}
