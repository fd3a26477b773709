package compare

// Joining the two sides on the key and classing each case, in the summary's order.

import (
	"cmp"
	"fmt"
	"runtime"
	"strings"
	"sync"

	"github.com/semianalysis/opx/internal/fingerprint"
	"github.com/semianalysis/opx/internal/par"
)

// Empty is whether a side has nothing measured to compare: compare fails then, gate or
// not (a comparison of nothing is no evidence of anything).
func (r *Result) Empty() bool { return r.empty }

// joined is one case of the comparison: its key, its rows, and what its class and order
// need; the rest of the Case is worked out again when it is shown (build).
type joined struct {
	key        string
	b, n       *entry
	class      string
	rank       int // of the class, in classOrder
	speedup    float64
	hasPrimary bool
}

// Join classes two sides' cases. opt.Key and the filters are what the sides were read
// with; Join reports them.
func Join(base, nw *Run, opt Options) *Result {
	opt.Key = base.key
	opt.below = "change below " + pct(opt.Same)
	res := &Result{Options: opt, Counts: map[string]int{}, Base: base.Side, New: nw.Side, Throttled: map[string]int{}, Contended: map[string]int{},
		Problems: []string{}, Warnings: []string{}}
	res.judgeSides(base, nw)
	res.cases = pair(base, nw)
	res.classAll(opt)
	for i := range res.cases {
		res.Counts[res.cases[i].class]++
		res.cases[i].rank = rank(res.cases[i].class)
	}
	par.SortFunc(res.cases, func(a, b joined) int { // keys are unique: one order
		if a.rank != b.rank {
			return cmp.Compare(a.rank, b.rank)
		}
		if a.hasPrimary && b.hasPrimary && a.speedup != b.speedup {
			if a.class == Faster {
				return cmp.Compare(b.speedup, a.speedup) // best improvement first
			}
			return cmp.Compare(a.speedup, b.speedup) // worst regression first
		}
		return strings.Compare(a.key, b.key)
	})
	return res
}

// judgeSides says what makes the comparison untrustworthy (a side with nothing measured, a
// join key that is not unique), what was set aside (spreads that cannot be one), where the
// two runs' nodes differ, and each side's rows on a throttled GPU.
func (r *Result) judgeSides(base, nw *Run) {
	sides := []struct {
		name string
		run  *Run
	}{{"base", base}, {"new", nw}}
	for _, sd := range sides {
		if p := sd.run.nothingMeasured(sd.name); p != "" {
			r.Problems = append(r.Problems, p)
			r.empty = true
		}
	}
	for _, sd := range sides {
		run := sd.run
		if run.Duplicate > 0 {
			r.Problems = append(r.Problems, fmt.Sprintf("%s: the join key (%s) is not unique: %d row(s) share a key with another, e.g. %q (join on more fields with --key)",
				sd.name, strings.Join(run.key, ","), run.Duplicate, run.dupKey))
		}
		if run.IgnoredSpreads > 0 {
			r.Warnings = append(r.Warnings, fmt.Sprintf("%s: %d recorded spread(s) ignored, judged without one (e.g. %s)", sd.name, run.IgnoredSpreads, run.spreadExample))
		}
	}
	r.Nodes = []string{}
	if base.hasNode && nw.hasNode {
		r.Nodes = append(r.Nodes, fingerprint.Differences(base.node, nw.node)...)
	}
	for side, n := range map[string]int{"base": base.throttled, "new": nw.throttled} {
		if n > 0 {
			r.Throttled[side] = n
		}
	}
	for side, n := range map[string]int{"base": base.contended, "new": nw.contended} {
		if n > 0 {
			r.Contended[side] = n
		}
	}
}

// pair joins the sides on the key: each base row with the new row of its key number (in
// the base's numbers: sides read apart are numbered apart), then the new rows the base
// lacks.
func pair(base, nw *Run) []joined {
	nwIDs := nw.ids
	if nw.keys != base.keys {
		nwIDs = make([]int32, len(nw.ids))
		for j, id := range nw.ids {
			nwIDs[j] = base.keys.id(nw.keys.list[id])
		}
	}
	nwAt := make([]int32, len(base.keys.list))
	for j, id := range nwIDs {
		nwAt[id] = int32(j + 1)
	}
	cases := make([]joined, 0, max(len(base.rows), len(nw.rows)))
	paired := make([]bool, len(nw.rows))
	for i, id := range base.ids {
		var n *entry
		if j := nwAt[id]; j > 0 {
			n, paired[j-1] = &nw.rows[j-1], true
		}
		cases = append(cases, joined{key: base.keys.list[id], b: &base.rows[i], n: n})
	}
	for j, id := range nwIDs {
		if !paired[j] {
			cases = append(cases, joined{key: base.keys.list[id], n: &nw.rows[j]})
		}
	}
	return cases
}

// classAll classes each case on every core, a part of the list each.
func (r *Result) classAll(opt Options) {
	var wg sync.WaitGroup
	parts := runtime.GOMAXPROCS(0)
	for p := range parts {
		wg.Go(func() {
			var room []Metric // each case's metrics, in the room of the last
			for k := len(r.cases) * p / parts; k < len(r.cases)*(p+1)/parts; k++ {
				j := &r.cases[k]
				c := build(j.key, j.b, j.n, opt, false, room)
				j.class, j.hasPrimary = c.Class, c.Primary != nil
				if c.Primary != nil {
					j.speedup = c.Primary.Speedup
				}
				if c.Metrics != nil {
					room = c.Metrics
				}
			}
		})
	}
	wg.Wait()
}

// build is one case's comparison, whole: its class and metrics from its two rows (either
// nil when the case is in one run only); without say, its metrics' changes and noise are
// not put in words (Join classes every case, and only the cases shown are said). Its
// metrics are made in room's space (nil: their own), for a caller done with them before
// it builds the next.
func build(key string, b, n *entry, opt Options, say bool, room []Metric) Case {
	ref := b
	if ref == nil {
		ref = n
	}
	c := Case{Key: key, Testlist: ref.testlist, OpType: ref.op, Args: ref.label, Backend: ref.backend,
		Cluster: ref.cluster, WorldSize: ref.ws, PctOfRoofline: roofline(b, n)}
	if b != nil && b.contended {
		c.Contended = append(c.Contended, "base")
	}
	if n != nil && n.contended {
		c.Contended = append(c.Contended, "new")
	}
	if b != nil {
		c.BaseStatus = b.status.String()
	}
	if n != nil {
		c.NewStatus, c.NewMessage = n.status.String(), n.message
	}
	switch {
	case n == nil:
		c.Class = OnlyBase
	case b == nil:
		c.Class = OnlyNew
	case b.status == okWord && n.status != okWord:
		c.Class = Broken
	case b.status != okWord && n.status == okWord:
		c.Class = Fixed
	case b.status != okWord:
		c.Class = Unmeasured
	default:
		classify(&c, b, n, opt, say, room)
		if (b.impossible || n.impossible) && c.Primary != nil {
			c.Class = Impossible // a broken timer or cached inputs: the change means nothing
		}
	}
	return c
}

// Len is how many cases the comparison has.
func (r *Result) Len() int { return len(r.cases) }

// Case is the i-th case, in the summary's order (classes, then worst regression or best
// improvement first).
func (r *Result) Case(i int) Case {
	j := r.cases[i]
	return build(j.key, j.b, j.n, r.Options, true, nil)
}

// Cases are all the cases, in order.
func (r *Result) Cases() []Case {
	out := make([]Case, len(r.cases))
	for i := range r.cases {
		out[i] = r.Case(i)
	}
	return out
}

func rank(class string) int {
	for i, c := range classOrder {
		if c == class {
			return i
		}
	}
	return len(classOrder)
}

// Regressions are the cases that fail --fail-on-regression PCT: slower on the headline
// metric by a factor of at least 1 + PCT/100 (a time that grew by PCT % or more, a
// throughput that fell to 1/(1 + PCT/100) or less), broken (ok in base, not ok now), and —
// unless allowMissing — in the base but not in the new run at all (a new run whose
// harness crashed measured nothing: every case is missing, and that fails the gate); and
// a case whose base was measured under contention, which is no baseline (baseBusy). A
// failing case with a contended side fails as "measured under contention: re-measure"
// (UnderContention), never as a plain regression.
func (r *Result) Regressions(pctLimit float64, allowMissing bool) []Case {
	var out []Case
	for i := range r.cases {
		if r.fails(i, pctLimit, allowMissing) {
			out = append(out, r.Case(i))
		}
	}
	return out
}

// UnderContention is why a case the gate fails on cannot be judged as a regression: one
// of its rows was measured under contention — the gate still fails (never a silent pass),
// for its own reason. "" for a case measured quietly on both sides.
func UnderContention(c *Case) string {
	if len(c.Contended) == 0 {
		return ""
	}
	return "measured under contention (" + strings.Join(c.Contended, ", ") + "): re-measure"
}

// baseBusy is whether case j's base row, measured under contention, is no baseline: it
// could only have been slowed, so a new row as fast or faster than it may still be a
// regression against the base measured quietly. The gate fails on such a case (its own
// reason: UnderContention); a slower one fails as slower.
func baseBusy(j *joined) bool {
	if j.b == nil || j.n == nil || !j.b.contended {
		return false
	}
	switch j.class {
	case Same, Faster, Ambiguous, Impossible:
		return true
	}
	return false
}

// fails is whether case i fails --fail-on-regression pctLimit (Regressions).
func (r *Result) fails(i int, pctLimit float64, allowMissing bool) bool {
	c := &r.cases[i]
	slower := c.class == Slower && c.hasPrimary && c.speedup > 0 && 1/c.speedup >= 1+pctLimit/100
	return slower || c.class == Broken || (c.class == OnlyBase && !allowMissing) || baseBusy(c)
}
